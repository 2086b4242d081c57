"""`resume` never hands over a blank page, and a fresh session finds its task from HEAD."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.repo import Repo


def as_json(repo: Repo, *argv: str, code: int = 0) -> Any:
    result = repo.run(*argv, "--json")
    assert result.code == code, result.err
    return json.loads(result.out)


def checkpoint(repo: Repo, body: str) -> str:
    return str(as_json(repo, "checkpoint", body)["record"]["id"])


def handover(repo: Repo, label: str, *extra: str) -> str:
    out = as_json(repo, "handover", "-o", f"objective {label}", "-s", "state", "-n", "next", *extra)
    return str(out["record"]["id"])


def test_nothing_open_shows_the_checkpoints_since_the_last_resume(repo: Repo) -> None:
    repo.task()
    checkpoint(repo, "before the handover")
    repo.clock.advance(5)
    handover(repo, "one")
    repo.clock.advance(5)
    checkpoint(repo, "between handover and resume")
    repo.clock.advance(5)
    assert repo.run("resume").code == 0
    repo.clock.advance(5)
    first = checkpoint(repo, "after the resume, first")
    repo.clock.advance(5)
    second = checkpoint(repo, "after the resume, second")
    result = as_json(repo, "resume", code=1)
    assert result["handover"] is None and result["recorded"] is False
    since = result["checkpoints_since"]
    assert [c["id"] for c in since] == [second, first]
    assert since[0]["body"] == "after the resume, second"
    assert set(since[0]) >= {"kind", "id", "task", "head", "at", "author", "body", "commit"}
    text = repo.run("resume")
    assert text.code == 1
    assert text.err.startswith("majordomus: no open handover for t-")
    assert text.out.startswith("2 checkpoints of t-")
    assert text.out.index("after the resume, second") < text.out.index("after the resume, first")
    assert "between handover and resume" not in text.out


def test_an_interrupted_session_without_any_handover_hands_over_its_checkpoints(
    repo: Repo,
) -> None:
    repo.task()
    only = checkpoint(repo, "reproduced; the session was then killed")
    result = as_json(repo, "resume", code=1)
    assert [c["id"] for c in result["checkpoints_since"]] == [only]


def test_an_open_handover_has_no_checkpoints_since(repo: Repo) -> None:
    repo.task()
    handover(repo, "one")
    repo.commit("next")
    checkpoint(repo, "same second, child commit")
    result = as_json(repo, "resume", "--peek")
    assert result["handover"] is not None  # an open handover: no checkpoints_since key
    assert "checkpoints_since" not in result
    repo.run("resume")
    assert as_json(repo, "resume", code=1)["checkpoints_since"] == []


def clone(repo: Repo, path: Path) -> Repo:
    subprocess.run(["git", "clone", "-q", str(repo.path), str(path)], env=repo.environ, check=True)
    subprocess.run(
        ["git", "fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus"],
        cwd=path,
        env=repo.environ,
        check=True,
    )
    return Repo(path, repo.environ, repo.clock)


def test_a_fresh_clone_takes_the_task_of_the_one_open_handover(repo: Repo, tmp_path: Path) -> None:
    task = repo.task()
    hid = handover(repo, "one")
    fresh = clone(repo, tmp_path / "fresh")
    peek = fresh.run("resume", "--peek", "--json")
    assert peek.code == 0, peek.err
    assert json.loads(peek.out)["handover"]["id"] == hid
    assert peek.err == (
        f"majordomus: no current task: took {task}, the one task with an open handover "
        "reachable from HEAD.\n"
    )
    assert not (fresh.path / ".git" / "majordomus-task").exists()  # peek changes nothing
    resumed = fresh.run("resume")
    assert resumed.code == 0 and "it is now the current task here" in resumed.err
    assert (fresh.path / ".git" / "majordomus-task").read_text() == task + "\n"
    assert fresh.run("checkpoint", "picked up where the last session stopped").code == 0


def test_several_tasks_with_open_handovers_are_listed_and_refused(
    repo: Repo, tmp_path: Path
) -> None:
    one = repo.task("one")
    handover(repo, "one")
    two = repo.task("two")
    handover(repo, "two")
    fresh = clone(repo, tmp_path / "fresh")
    before = fresh.notes_ref()
    result = fresh.run("resume")
    assert result.code == 2
    assert result.out == ""
    assert result.err == (
        f"majordomus: no current task, and 2 tasks have an open handover reachable from HEAD: "
        f"{', '.join(sorted([one, two]))}; pick one with majordomus task use TASK "
        "(or pass --task TASK).\n"
    )
    assert fresh.notes_ref() == before
    assert fresh.run("resume", "--task", one[2:8], "--peek").code == 0


def test_an_open_handover_on_another_branch_is_not_taken(repo: Repo) -> None:
    base = repo.head()
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side work")
    repo.task("side task")
    handover(repo, "side")
    repo.git("checkout", "-q", "main")
    assert repo.head() == base
    (repo.path / ".git" / "majordomus-task").unlink()
    result = repo.run("resume")
    assert result.code == 2
    assert result.err.startswith("majordomus: no current task: start one")


def test_a_merge_brings_the_handover_into_reach(repo: Repo) -> None:
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side work", {"side.txt": "x"})
    task = repo.task("side task")
    hid = handover(repo, "side")
    repo.git("checkout", "-q", "main")
    repo.commit("main work", {"main.txt": "y"})
    repo.git("merge", "-q", "--no-edit", "side")
    (repo.path / ".git" / "majordomus-task").unlink()
    result = repo.run("resume", "--peek", "--json")
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert body["handover"]["id"] == hid and body["handover"]["task"] == task
    assert body["label"] == "advanced" and body["ahead"] == 2
