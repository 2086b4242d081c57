"""Ctrl-C at random instants of a short command, start-up included: how many tracebacks.

Runs `majordomus check` in a throwaway repository N times, sends SIGINT to its process
group (as a terminal's Ctrl-C does) after a random delay, and counts the answers:
Python tracebacks, "Exception ignored" lines, and exit codes. The delays are seeded,
so two builds can be compared on the same instants.

    .venv/bin/python bench/startup_interrupts.py [--runs 40] [--max-ms 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

TIMEOUT_S = 60.0
PACKAGE = str(Path(__file__).resolve().parent.parent / "majordomus") + os.sep
PYTHON_START = "in Python's own start-up"
SCRIPT = "in the console script, before or after it imports majordomus"
OURS = "in majordomus' code"


def where(err: str, command: Sequence[str]) -> str:
    """Which part of the process a traceback's innermost file of interest is in."""
    frames = [line.split('"')[1] for line in err.splitlines() if line.startswith('  File "')]
    if any(frame.startswith(PACKAGE) for frame in frames):
        return OURS
    if any(frame == command[0] for frame in frames):
        return SCRIPT
    return PYTHON_START


def hermetic(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "MAJORDOMUS_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
    )
    return env


def prepared(root: Path, env: Mapping[str, str], command: Sequence[str]) -> Path:
    """A repository with one commit and a current task, so `check` reads notes."""
    repo = root / "repo"
    repo.mkdir()
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "commit", "-q", "--allow-empty", "-m", "x"],
    ):
        subprocess.run(argv, cwd=repo, env=env, check=True)
    subprocess.run(
        [*command, "task", "new", "bench"], cwd=repo, env=env, check=True, capture_output=True
    )
    return repo


def interrupted(
    command: Sequence[str], repo: Path, env: Mapping[str, str], delay_s: float
) -> tuple[int, str]:
    """The exit code and stderr of one run that gets SIGINT after `delay_s` (or ends first)."""
    process = subprocess.Popen(
        [*command, "check"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(delay_s)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=TIMEOUT_S)
    return process.returncode, err.decode("utf-8", "replace")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--max-ms", type=float, default=200.0)
    parser.add_argument("--seed", type=int, default=1)
    default = str(Path(sys.executable).parent / "majordomus")
    parser.add_argument(
        "--command", default=default, help="the majordomus to run (split on spaces)"
    )
    args = parser.parse_args(argv)
    command = args.command.split()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="majordomus-sigint-") as tmp:
        root = Path(tmp)
        env = hermetic(root / "home")
        repo = prepared(root, env, command)
        codes: collections.Counter[int] = collections.Counter()
        tracebacks: dict[str, list[float]] = {PYTHON_START: [], SCRIPT: [], OURS: []}
        ignored = 0
        for _ in range(args.runs):
            delay_ms = rng.uniform(0.0, args.max_ms)
            code, err = interrupted(command, repo, env, delay_ms / 1000)
            codes[code] += 1
            if "Traceback (most recent call last)" in err:
                tracebacks[where(err, command)].append(delay_ms)
            ignored += "Exception ignored" in err
    print(f"runs: {args.runs}, SIGINT after 0..{args.max_ms:g} ms (seed {args.seed})")
    for part, delays in tracebacks.items():
        at = f" (at {', '.join(f'{d:.0f}' for d in sorted(delays))} ms)" if delays else ""
        print(f"tracebacks {part}: {len(delays)}{at}")
    print(f"'Exception ignored': {ignored}")
    print("exit codes: " + ", ".join(f"{c}: {n}" for c, n in sorted(codes.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
