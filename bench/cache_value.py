"""What each cache buys: commands timed with every cache, and with one cache file removed
before each run (the command warms every cache, the file is deleted, the command is timed;
with the views file goes the folder of its parts).

    .venv/bin/python bench/cache_value.py REPO [--task TASK] [--runs 7]

REPO is a clone with majordomus records (a scratch clone of a benchmark repository, say:
it is written to). Prints a Markdown table: the median with every cache, and what
removing each file adds to it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

FILES = (
    "majordomus-cache",
    "majordomus-graph-cache",
    "majordomus-records-cache",
    "majordomus-views",
    "majordomus-patch-ids",
)


def git_dir_of(repo: Path) -> Path:
    """The repository's git directory, as an absolute path."""
    return Path(
        subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--absolute-git-dir"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )


def drop(git_dir: Path, name: str) -> None:
    """One cache file gone, and the folder of its parts (the views') with it."""
    (git_dir / name).unlink(missing_ok=True)
    shutil.rmtree(git_dir / f"{name}.d", ignore_errors=True)


def timed(argv: Sequence[str], repo: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/cache_value.py", description=__doc__)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--task", help="the task to read (default: the current task)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    repo: Path = args.repo.resolve()
    git_dir = git_dir_of(repo)
    majordomus = str(Path(sys.executable).parent / "majordomus")
    env = dict(os.environ)
    if args.task:
        env["MAJORDOMUS_TASK"] = args.task
    commands = {
        "history --task": [majordomus, "history", "--json"]
        + (["--task", args.task] if args.task else []),
        "check": [majordomus, "check", "--json"],
        "resume --peek": [majordomus, "resume", "--peek", "--json"],
        "history, every task": [majordomus, "history", "--all", "--json"],
        "checkpoint": [majordomus, "checkpoint", "measuring what each cache buys"],
    }
    print("| command | all caches | " + " | ".join(f"without `{f}`" for f in FILES) + " |")
    print("| --- | ---: |" + " ---: |" * len(FILES))
    for name, command in commands.items():
        for _ in range(2):
            timed(command, repo, env)
        medians: dict[str | None, float] = {}
        for removed in (None, *FILES):
            times = []
            for _ in range(args.runs):
                if removed is not None:
                    timed(command, repo, env)
                    drop(git_dir, removed)  # its parts too: a rebuild would find them
                times.append(timed(command, repo, env))
            medians[removed] = statistics.median(times) * 1000
        base = medians[None]
        added = " | ".join(f"{medians[f] - base:+.0f} ms" for f in FILES)
        print(f"| {name} | {base:.0f} ms | {added} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
