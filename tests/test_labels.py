"""Every divergence label of the spec, from real commit graphs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from majordomus import graph, tally
from tests.support.env import Clock
from tests.support.repo import Repo


def peek(repo: Repo) -> tuple[str, int | None, int | None]:
    result = repo.run("resume", "--peek", "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    return out["label"], out["ahead"], out["behind"]


def handover(repo: Repo) -> None:
    result = repo.run("handover", "-o", "objective", "-s", "state", "-n", "next")
    assert result.code == 0, result.err


def test_current(repo: Repo) -> None:
    repo.task()
    handover(repo)
    assert peek(repo) == ("current", 0, 0)


def test_advanced(repo: Repo) -> None:
    repo.task()
    handover(repo)
    for i in range(3):
        repo.commit(f"after {i}")
    assert peek(repo) == ("advanced", 3, 0)


def test_behind(repo: Repo) -> None:
    repo.task()
    older = repo.head()
    repo.commit("one")
    repo.commit("two")
    handover(repo)
    repo.git("checkout", "-q", "--detach", older)
    assert peek(repo) == ("behind", 0, 2)


def test_diverged(repo: Repo) -> None:
    repo.task()
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side 1")
    repo.commit("side 2")
    handover(repo)
    repo.git("checkout", "-q", "main")
    repo.commit("main 1")
    assert peek(repo) == ("diverged", 1, 2)


def test_unrelated(repo: Repo) -> None:
    repo.task()
    handover(repo)
    repo.git("checkout", "-q", "--orphan", "other")
    repo.git("commit", "-q", "--allow-empty", "-m", "a new root")
    repo.commit("on the new root")
    assert peek(repo) == ("unrelated", 2, 1)


def test_missing(repo: Repo) -> None:
    repo.task()
    repo.git("checkout", "-q", "-b", "doomed")
    repo.commit("soon gone")
    handover(repo)
    repo.git("checkout", "-q", "main")
    repo.git("branch", "-q", "-D", "doomed")
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "-q", "--prune=now")
    assert peek(repo) == ("missing", None, None)
    history = json.loads(repo.run("history", "--all", "--json").out)
    handovers = [r for r in history["records"] if r["kind"] == "handover"]
    assert [(h["label"], h["ahead"], h["behind"]) for h in handovers] == [("missing", None, None)]
    recorded = json.loads(repo.run("resume", "--json").out)
    assert recorded["recorded"] is True
    note = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    assert 'label = "missing"\nsupersedes = []\n' in note  # ahead and behind left out


def test_unknown_in_a_shallow_clone(
    tmp_path: Path, repo: Repo, environ: dict[str, str], clock: Clock
) -> None:
    repo.task()
    handover(repo)
    repo.commit("after the handover")
    shallow = Repo(tmp_path / "shallow", environ, clock)
    repo.git("clone", "-q", "--depth", "1", f"file://{repo.path}", str(shallow.path))
    shallow.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    task = repo.run("task", "list", "--json")
    task_id = json.loads(task.out)["tasks"][0]["task"]
    result = shallow.run("resume", "--peek", "--json", "--task", task_id)
    assert json.loads(result.out)["label"] == "unknown"
    assert json.loads(result.out)["ahead"] is None
    # Deepened enough, the same clone answers for real.
    shallow.git("fetch", "-q", "--deepen", "1", "origin")
    result = shallow.run("resume", "--peek", "--json", "--task", task_id)
    assert (json.loads(result.out)["label"], json.loads(result.out)["ahead"]) == ("advanced", 1)


def test_an_amended_handover_is_not_diverged(repo: Repo) -> None:
    repo.git("config", "notes.rewriteRef", "refs/notes/majordomus")
    repo.task()
    (repo.path / "f.txt").write_text("1")
    repo.git("add", "f.txt")
    repo.git("commit", "-q", "-m", "work")
    handover(repo)
    old = repo.head()
    repo.git("commit", "-q", "--amend", "-m", "work, reworded")
    result = repo.run("resume", "--peek", "--json")
    out = json.loads(result.out)
    assert out["label"] == "current"
    assert out["handover"]["head"] == old and out["handover"]["commit"] == repo.head()


def test_labels_read_line_by_line_and_counted_by_git_are_the_same(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk too long to keep (WALK_KEEP lines) reads the labels line by line, and a
    label no walk adds up is counted by git: each way, a fork is `diverged` and an
    unrelated history `unrelated`, with git's counts, from the caches and afresh."""
    repo.task()
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side 1")
    handover(repo)
    handed = repo.head()
    repo.git("checkout", "-q", "main")
    repo.commit("main 1")
    repo.commit("main 2")
    repo.git("checkout", "-q", "--orphan", "other")
    repo.git("commit", "-q", "--allow-empty", "-m", "a new root")
    repo.commit("on the new root")
    repo.git("checkout", "-q", "main")
    expected = {}
    for rev, name in (("main", "diverged"), ("other", "unrelated")):
        ahead, behind = repo.git("rev-list", "--left-right", "--count", f"{rev}...{handed}").split()
        expected[rev] = (name, int(ahead), int(behind))
    assert repo.git("merge-base", "other", handed, check=False) == ""

    def labels(rev: str) -> set[tuple[str, int, int]]:
        result = repo.run("history", rev, "--all", "--json")
        assert result.code == 0, result.err
        records = json.loads(result.out)["records"]
        return {(r["label"], r["ahead"], r["behind"]) for r in records if r["kind"] == "handover"}

    for keep in (tally.WALK_KEEP, 0):  # kept, then read line by line
        with monkeypatch.context() as patch:
            patch.setattr(tally, "WALK_KEEP", keep)
            for rev, label in expected.items():
                repo.drop_caches()
                assert labels(rev) == {label}, (keep, rev, "afresh")
                assert labels(rev) == {label}, (keep, rev, "from the caches")
    with monkeypatch.context() as patch:  # no walk adds up: git counts each label
        patch.setattr(tally, "WALK_KEEP", 0)
        patch.setattr(graph.CommitGraph, "_streamed_labels", lambda self, rev, handovers: None)
        for rev, label in expected.items():
            repo.drop_caches()
            assert labels(rev) == {label}, (rev, "counted by git")
