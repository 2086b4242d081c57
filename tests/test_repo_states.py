"""Repository states: no repository, unborn HEAD, detached HEAD, worktrees, -C, identity."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.env import Clock
from tests.support.repo import Repo


def test_not_a_repository(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = Repo(plain, environ, clock)
    for argv in (["check"], ["history"], ["checkpoint", "x"], ["show", "--json"]):
        result = outside.run(*argv)
        assert (result.code, result.out) == (3, "")
        assert result.err == (
            f"majordomus: not a git repository (or any parent up to /): {plain}; "
            "run majordomus inside a clone, or pass -C PATH.\n"
        )


def test_missing_directory(repo: Repo) -> None:
    result = repo.run("-C", "does-not-exist", "check")
    assert (result.code, result.err) == (
        3,
        f"majordomus: cannot change to '{repo.path}/does-not-exist': no such directory.\n",
    )


def test_unborn_head(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    empty = Repo.init(tmp_path / "empty", environ, clock, commit=False)
    result = empty.run("task", "new", "x")
    assert (result.code, result.err) == (
        3,
        "majordomus: HEAD has no commit yet; make a first commit so records have one to "
        "attach to.\n",
    )
    assert empty.notes_ref() is None
    assert (
        empty.run("task", "list").out == "no tasks yet; start one with majordomus task new TITLE\n"
    )


def test_detached_head(repo: Repo) -> None:
    repo.task()
    first = repo.head()
    repo.commit("second")
    repo.git("checkout", "-q", "--detach", first)
    result = repo.run("checkpoint", "on a detached head", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["record"]["commit"] == first


def test_minus_c_from_a_subdirectory(repo: Repo) -> None:
    repo.commit("with a folder", {"src/app.py": "print()\n"})
    task = repo.task()
    result = repo.run("-C", "src", "checkpoint", "from below", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["record"]["task"] == task


def test_worktrees_share_records_but_not_the_current_task(repo: Repo, tmp_path: Path) -> None:
    main_task = repo.task("main task")
    other_path = tmp_path / "other"
    repo.git("worktree", "add", "-q", "-b", "other", str(other_path))
    other = Repo(other_path, repo.environ, repo.clock)
    assert other.run("checkpoint", "x").code == 2  # no current task in this work tree yet
    other_task = other.task("worktree task")
    assert other.run("checkpoint", "in the worktree").code == 0
    assert json.loads(repo.run("check", "--json").out)["task"] == main_task
    assert json.loads(other.run("check", "--json").out)["task"] == other_task
    tasks = {t["task"] for t in json.loads(repo.run("task", "list", "--json").out)["tasks"]}
    assert tasks == {main_task, other_task}
    assert (repo.path / ".git" / "worktrees" / "other" / "majordomus-task").exists()
    assert not (other_path / "majordomus-task").exists()


def test_no_identity(repo: Repo) -> None:
    environ = {
        k: v for k, v in repo.environ.items() if not k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))
    }
    environ["EMAIL"] = ""
    repo.git("config", "user.useConfigOnly", "true")
    bare = Repo(repo.path, environ, repo.clock)
    result = bare.run("task", "new", "x")
    assert result.code == 3
    assert result.err.startswith("majordomus: git has no identity to sign records with (")
    assert result.err.endswith(
        'run git config --global user.name "Your Name" and '
        "git config --global user.email you@example.com.\n"
    )
    assert repo.notes_ref() is None


def test_a_history_git_cannot_walk_is_one_sentence_and_exit_3(repo: Repo) -> None:
    """A commit object lost from the middle of the history (a damaged clone): git's walk
    fails, and every read that needs it says so in one sentence, exit 3, nothing kept."""
    task = repo.task()
    commits = [repo.commit(f"c{i}", {"f.txt": f"{i}\n"}) for i in range(6)]
    for commit in commits[-3:]:
        repo.git("checkout", "-q", "--detach", commit)
        assert repo.run("checkpoint", f"on {commit[:7]}").code == 0
        assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    repo.git("checkout", "-q", "main")
    lost = commits[1]
    (repo.path / ".git" / "objects" / lost[:2] / lost[2:]).unlink()
    notes_before = repo.notes_ref()
    for argv in (("history", "--json"), ("history", "--task", task, "--json")):
        result = repo.run(*argv)
        assert result.code == 3, (argv, result.out, result.err)
        assert result.out == "" and len(result.err.splitlines()) == 1, result.err
        assert result.err.startswith("majordomus: git rev-list failed: "), result.err
        assert result.err.endswith("; run git fsck to see what this clone lacks.\n")
        assert "Traceback" not in result.err
    assert repo.notes_ref() == notes_before


def test_an_object_store_git_cannot_write_to_refuses_every_write_in_one_sentence(
    repo: Repo,
) -> None:
    """As in a sandbox that makes .git read-only (root included): the objects packed, and a
    file where each loose-object folder would be, so no new object can be stored. Every
    write says so in one sentence, exit 3; the notes ref does not move; reads still work."""
    task = repo.task()
    assert repo.run("checkpoint", "before the sandbox").code == 0
    repo.git("gc", "-q")
    objects = repo.path / ".git" / "objects"
    for n in range(256):
        fan_out = objects / f"{n:02x}"
        if not fan_out.exists():
            fan_out.write_text("")
    before = repo.notes_ref()
    writes = [
        ["checkpoint", "x"],
        ["handover", "-o", "o", "-s", "s", "-n", "n"],
        ["task", "new", "another"],
    ]
    for argv in writes:
        result = repo.run(*argv)
        assert result.code == 3, (argv, result.out, result.err)
        assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
        assert result.err.startswith("majordomus: git could not store the record"), result.err
        assert "nothing was recorded" in result.err
        assert repo.notes_ref() == before
    shown = json.loads(repo.run("history", "--task", task, "--json").out)["records"]
    assert [r.get("body") for r in shown if r["kind"] == "checkpoint"] == ["before the sandbox"]
