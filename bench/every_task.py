"""`history` of every task: time and peak memory, warm, fresh, and after one task's first
read, against `git log --notes=majordomus --format='%H %N'` (as the graph rows of
`bench/run.py`) on the same clone in the same run.

    .venv/bin/python bench/every_task.py REPO --task TASK [--runs 3]

REPO is a clone with majordomus records (a scratch clone of a benchmark repository: its
caches are removed and rebuilt). Peak memory is the largest resident size of the command
or of any process it waited for (its helpers, git). Prints a Markdown table of medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from probe import Outcome, run
from suite import git_log

CACHES = (
    "majordomus-cache",
    "majordomus-graph-cache",
    "majordomus-records-cache",
    "majordomus-views",
    "majordomus-patch-ids",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/every_task.py", description=__doc__)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--task", required=True, help="the task of the first read")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    repo: Path = args.repo.resolve()
    git_dir = Path(
        subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--absolute-git-dir"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    majordomus = str(Path(sys.executable).parent / "majordomus")
    env = dict(os.environ)
    every = [majordomus, "history", "--json"]
    one = [majordomus, "history", "--task", args.task, "--json"]

    def drop() -> None:
        for name in CACHES:
            (git_dir / name).unlink(missing_ok=True)
        shutil.rmtree(git_dir / "majordomus-views.d", ignore_errors=True)

    def first_task_read() -> None:
        drop()
        run(one, env, repo)

    def timed(before: Callable[[], None]) -> list[Outcome]:
        outcomes = []
        for _ in range(args.runs):
            before()
            outcome = run(every, env, repo)
            if outcome.exit_code != 0:
                raise SystemExit(f"history failed: {outcome.stderr.strip()}")
            outcomes.append(outcome)
        return outcomes

    logged = [run(git_log(repo), env, repo) for _ in range(args.runs)]
    rows = {
        "fresh (no cache)": timed(drop),
        "after a first `history --task`": timed(first_task_read),
        "warm": timed(lambda: None),
    }
    base = statistics.median(o.seconds for o in logged)
    print(f"`git log --notes=majordomus --format='%H %N'`: {base * 1000:,.0f} ms")
    print()
    print("| `history` (every task) | median | vs git log | peak memory |")
    print("| --- | ---: | ---: | ---: |")
    for name, outcomes in rows.items():
        median = statistics.median(o.seconds for o in outcomes)
        peak = max(o.peak_kib for o in outcomes) / 1024
        print(f"| {name} | {median * 1000:,.0f} ms | {median / base:.2f} | {peak:.0f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
