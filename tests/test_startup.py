"""What a command imports: `--version` and `--help` start without git (pygit2) or the notes code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Repo
from tests.support.repo import clone

PROBE = """
import io, sys
from majordomus.cli import run
code = run(sys.argv[1:], stdout=io.StringIO(), stderr=io.StringIO())
heavy = sorted(m for m in ("pygit2", "majordomus.ops", "majordomus.store") if m in sys.modules)
print(code, " ".join(heavy))
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["checkpoint", "--help"]])
def test_version_and_help_load_neither_git_nor_the_notes_code(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True
    )
    assert done.stdout == "0 \n"


def test_a_command_loads_what_it_needs_on_first_use() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "-C", "/nonexistent-majordomus-dir", "check"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "3 majordomus.ops majordomus.store pygit2\n"


# Modules `show` has no use for: the write path's patch ids and the merge of fetched notes.
NOT_FOR_SHOW = ("majordomus.patches", "majordomus.merge")
SHOW_PROBE = """
import io, json, sys
from majordomus.cli import run
out, err = io.StringIO(), io.StringIO()
code = run(sys.argv[1:], stdout=out, stderr=err)
loaded = [m for m in NOT_FOR_SHOW if m in sys.modules]
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "loaded": loaded}))
"""


def _fresh_clone(repo: Repo, tmp_path: Path) -> Repo:
    """A clone of `repo` with its notes fetched and nothing else: what a CI job has."""
    fresh = clone(str(repo.path), tmp_path / "ci", repo.environ, repo.clock)
    fresh.git("fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    return fresh


def _git_dir_files(repo: Repo) -> set[str]:
    git_dir = repo.path / ".git"
    return {str(p.relative_to(git_dir)) for p in git_dir.rglob("*") if p.is_file()}


def test_show_in_a_fresh_clone_loads_only_the_read_path_and_writes_no_cache(
    repo: Repo, tmp_path: Path
) -> None:
    repo.task()
    assert repo.run("checkpoint", "reproduced under 50 concurrent enqueues").code == 0
    fresh = _fresh_clone(repo, tmp_path)
    before = _git_dir_files(fresh)
    probe = f"NOT_FOR_SHOW = {NOT_FOR_SHOW!r}\n{SHOW_PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", probe, "-C", str(fresh.path), "show", "--json"],
        capture_output=True,
        text=True,
        check=True,
        env=fresh.environ,
    )
    answer = json.loads(done.stdout)
    shown = json.loads(answer["out"])
    expected = fresh.git("notes", "--ref=majordomus", "show", "HEAD")
    assert (answer["code"], answer["err"], answer["loaded"]) == (0, "", [])
    assert [r["id"] for r in shown["records"]] == re.findall(r'^id = "(.*)"$', expected, re.M)
    assert _git_dir_files(fresh) == before
