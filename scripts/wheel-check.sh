#!/usr/bin/env bash
# The package a user installs: the sdist and the wheel built (`python -m build`, the
# wheel from the sdist) with not one warning, the wheel installed into a clean virtual
# environment, and a walkthrough run with that install, away from this checkout:
# init, task, checkpoint, handover, push, then a second clone's fetch, resume, history.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-.venv/bin/python}
version=$("$python" -c 'import ast, sys
tree = ast.parse(open("majordomus/__init__.py").read())
print(next(n.value.value for n in tree.body if isinstance(n, ast.Assign)
           and n.targets[0].id == "__version__"))')

work=$(mktemp -d "${TMPDIR:-/tmp}/majordomus-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Byte-compiling skipped (PYTHONDONTWRITEBYTECODE) is a warning of its own: not ours.
if ! env -u PYTHONDONTWRITEBYTECODE "$python" -m build --outdir "$work/dist" . \
    >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    echo "wheel-check: the build failed (above)" >&2
    exit 1
fi
if grep -i -E 'warn|deprecat' "$work/build.log" >&2; then
    echo "wheel-check: the build warned (above)" >&2
    exit 1
fi
ls "$work/dist/majordomus-$version.tar.gz" "$work/dist/majordomus-$version-py3-none-any.whl" >/dev/null
rm -rf build majordomus.egg-info  # what the build leaves in the checkout

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "$work/dist/majordomus-$version-py3-none-any.whl" 2>"$work/pip.log" \
    || { cat "$work/pip.log" >&2; exit 1; }

m="$work/venv/bin/majordomus"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Ada Lovelace" GIT_AUTHOR_EMAIL="ada@example.com"
export GIT_COMMITTER_NAME="Ada Lovelace" GIT_COMMITTER_EMAIL="ada@example.com"
mkdir -p "$HOME"
cd "$work"
[ "$("$m" --version)" = "majordomus $version" ]
"$work/venv/bin/python" -c 'import majordomus, sys; assert majordomus.__file__.startswith(sys.prefix)'

git init -q --bare -b main remote.git
git clone -q remote.git a 2>/dev/null
(
    cd a
    git commit -q --allow-empty -m "queue: first cut"
    git push -q origin main
    "$m" init >/dev/null
    "$m" task new "queue drops acks under load" >/dev/null
    "$m" checkpoint "reproduced under 50 concurrent enqueues" >/dev/null
    "$m" handover --objective "find the dropped ack" --state "reproduced" \
        --next "bisect the retry loop" >/dev/null
    "$m" push >/dev/null
)
git clone -q remote.git b
(
    cd b
    "$m" fetch >/dev/null
    "$m" resume 2>/dev/null | grep -q "find the dropped ack"
    [ "$("$m" history | grep -c '^20')" = 4 ]  # task, checkpoint, handover, resume
    "$m" doctor >/dev/null || [ $? = 1 ]  # no init here: a finding, not a crash
)
echo "wheel-check: majordomus $version: sdist and wheel built without a warning; the wheel installed in a clean venv ran init, push, fetch, resume and history"
