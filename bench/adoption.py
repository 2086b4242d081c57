"""The adopt comparison: 50 records orphaned by squash and rebase merges on a large repository.

On a scratch clone: five branches of ten commits from HEAD, each commit carrying a
record written by majordomus (a handover on the tip of the squashed ones, a
checkpoint elsewhere); main moves on by MAIN_MOVES commits; three branches land as
squash merges, two as cherry-picks (what "Rebase and merge" does); the branches are
deleted. `adopt --dry-run` is timed against the floor of the same proof: starting a
Python that imports pygit2 (what any such CLI pays), then git's patch ids of the
commits compared (`rev-list | diff-tree | patch-id`); the one real `adopt`, which
writes the copies, is shown for the record.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from probe import Outcome, run_chain
from repo_cache import run_git
from suite import Command, Row, Series, Setup, Target, interleave, mj

BRANCHES = 5
SQUASHED = 3  # the first three land as squash merges, the others as cherry-picks
PER_BRANCH = 10
MAIN_MOVES = 100
ORPHANED = BRANCHES * PER_BRANCH
ADOPT = Target(limit=2.0)


def _git(repo: Path, env: Mapping[str, str], *args: str) -> str:
    return run_git(args, env, repo)


def _majordomus(setup: Setup, repo: Path, *args: str) -> str:
    result = subprocess.run(
        mj(setup, repo, *args), env=dict(setup.env), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"majordomus {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def _commit(repo: Path, env: Mapping[str, str], name: str, line: str) -> None:
    path = repo / "adopt" / name
    path.parent.mkdir(exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    _git(repo, env, "add", str(path))
    _git(repo, env, "commit", "-q", "-m", f"{name}: {line}")


def prepare(setup: Setup, repo: Path) -> int:
    """Build the orphaned records; returns the start of the window adopt compares (POSIX s)."""
    env = setup.env
    started = int(time.time())
    base = _git(repo, env, "rev-parse", "HEAD").strip()
    task = _majordomus(setup, repo, "task", "new", "records of merged branches").strip()
    for k in range(BRANCHES):
        _git(repo, env, "checkout", "-q", "-b", f"bench-adopt-{k}", base)
        for i in range(PER_BRANCH):
            _commit(repo, env, f"branch-{k}.txt", f"step {i}")
            if k < SQUASHED and i == PER_BRANCH - 1:
                _majordomus(
                    setup, repo, "handover", "--task", task,
                    "-o", f"branch {k}", "-s", "done", "-n", "merge it",
                )  # fmt: skip
            else:
                _majordomus(setup, repo, "checkpoint", "--task", task, f"branch {k} step {i}")
    _git(repo, env, "checkout", "-q", "main")
    for i in range(MAIN_MOVES):
        _commit(repo, env, "main.txt", f"meanwhile {i}")
    for k in range(BRANCHES):
        if k < SQUASHED:
            _git(repo, env, "merge", "-q", "--squash", f"bench-adopt-{k}")
            _git(repo, env, "commit", "-q", "-m", f"branch {k} (squashed)")
        else:
            _git(repo, env, "cherry-pick", f"{base}..bench-adopt-{k}")
    for k in range(BRANCHES):
        _git(repo, env, "branch", "-q", "-D", f"bench-adopt-{k}")
    return started - 86400


def adopt_row(setup: Setup, repo: Path) -> Row:
    since = prepare(setup, repo)
    mine = Command("adopt --dry-run", (mj(setup, repo, "adopt", "--dry-run", "--json"),))
    pipeline = (
        f"git rev-list --no-merges --max-age={since} HEAD "
        "| git diff-tree --stdin -p --root --no-renames | git patch-id --stable"
    )
    floor = Command(
        "import pygit2 + rev-list, diff-tree, patch-id",
        ((str(setup.python), "-c", "import pygit2"), ("sh", "-c", pipeline)),
    )
    ours, base = interleave((mine, floor), setup, repo)
    real = Command("adopt, writing", (mj(setup, repo, "adopt", "--json"),))
    written = run_chain(real.argvs, setup.env, repo, real.ok)
    answer = _check(ours.outcomes[-1]) if not ours.failure else ""
    answer = answer or _check(written)
    return Row(
        f"adopt ({ORPHANED} orphaned)",
        "warm",
        ours,
        base,
        ADOPT,
        reference=Series(real, (written,)),
        answer=answer,
    )


def _check(outcome: Outcome) -> str:
    try:
        document = json.loads(outcome.stdout)
    except ValueError:
        return "output is not JSON"
    adopted = sum(len(group["records"]) for group in document.get("adopted", []))
    if adopted != ORPHANED or document.get("ambiguous"):
        return f"{adopted} adopted, {len(document.get('ambiguous', []))} ambiguous"
    return ""
