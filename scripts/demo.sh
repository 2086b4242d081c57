#!/usr/bin/env bash
# A throwaway repository walked through the whole loop: task, checkpoint,
# handover, resume, history, check. Nothing outside a temporary folder is touched.
set -euo pipefail

demo=$(mktemp -d "${TMPDIR:-/tmp}/majordomus-demo.XXXXXX")
trap 'rm -rf "$demo"' EXIT
export HOME="$demo/home" XDG_CONFIG_HOME="$demo/home/.config" GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Ada Lovelace" GIT_AUTHOR_EMAIL="ada@example.com"
export GIT_COMMITTER_NAME="Ada Lovelace" GIT_COMMITTER_EMAIL="ada@example.com"
mkdir -p "$HOME"

# Commands in bold on a terminal only: redirected to a file or a pipe, plain text.
bold='' plain=''
if [ -t 1 ] && [ -z "${NO_COLOR+set}" ] && [ "${TERM:-}" != dumb ]; then
    bold=$'\033[1m' plain=$'\033[0m'
fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }
allow() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; "$@" || printf '(exit %s)\n' "$?"; }

cd "$demo" && git init -q -b main repo && cd repo
printf 'def enqueue(item):\n    retry(item)\n' > queue.py
git add queue.py && git commit -q -m "queue: first cut"

echo "== 03:00, a worker starts an investigation"
step majordomus task new "queue drops acks under load"
step majordomus checkpoint "reproduced under 50 concurrent enqueues; the retry loop re-enters before the ack"
allow majordomus checkpoint "$(printf 'x%.0s' $(seq 500))"
printf 'def enqueue(item):\n    ack(item)\n    retry(item)\n' > queue.py
git commit -q -am "queue: ack before retry (attempt)"
step majordomus checkpoint "ack-before-retry: 3 of 200 runs still drop an ack"
step majordomus handover \
    --objective "find why acks drop under concurrent enqueue" \
    --state "ack-before-retry cuts drops from 9% to 1.5%; a second race remains in flush()" \
    --next "run tests/stress.py with FLUSH_DELAY=5ms and read the flush() lock order"

echo
echo "== 09:00, the next session; the code moved on meanwhile"
git commit -q --allow-empty -m "unrelated: bump version"
step majordomus resume
allow majordomus resume
step majordomus history
step majordomus check
step majordomus show --json
step git log --notes=majordomus -1 --format='%h %s%n%N'
