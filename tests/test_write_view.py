"""A write on a task named by its id in full reads that task's view alone (no views of
every task, no note), carries it to the state it makes, and every read after it answers
as a read after `doctor --drop-cache` does; wherever the view cache cannot answer so (it
describes another state, a record has copies, a name is a prefix) the views of every task
are built as before, and the answers are the same."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from majordomus import write
from majordomus.cachefile import VIEWS_FILE_NAME, VIEWS_FOLDER_NAME
from majordomus.tasks import open_jobs
from majordomus.viewparts import ViewCache, state_key
from majordomus.views import Views
from tests.support.env import Clock
from tests.support.repo import Repo, clone, seeded, shared


def views_built(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each `Views` a command builds (whether it was built to write), as commands run; not
    those `Views.cached` builds for one task's view, which read no other view and no note."""
    built: list[bool] = []
    init = Views.__init__

    def counted(views: Views, *args: Any, **options: Any) -> None:
        if not options.get("alone"):
            built.append(bool(options.get("writing")))
        init(views, *args, **options)

    monkeypatch.setattr(Views, "__init__", counted)
    return built


def cache_is_current(repo: Repo) -> bool:
    """Whether the view cache describes the notes refs as they are (the next read is warm)."""
    cache = ViewCache(repo.path / ".git" / VIEWS_FILE_NAME)
    targets = open_jobs(str(repo.path), repo.environ).reader.refs.ref_targets()
    return cache.key == state_key(targets)


def reads(repo: Repo, task: str) -> tuple[Any, ...]:
    """What every read answers of the task and of every task."""
    peek = repo.run("resume", "--peek", "--task", task, "--json")
    return (
        json.loads(repo.run("history", "--task", task, "--all", "--json").out),
        json.loads(repo.run("history", "--all", "--json").out),
        json.loads(repo.run("check", "--task", task, "--json").out),
        json.loads(repo.run("task", "list", "--json").out),
        json.loads(peek.out),
        peek.code,
    )


def fresh_reads(repo: Repo, task: str) -> tuple[Any, ...]:
    """The same reads after `doctor --drop-cache` (every note read afresh)."""
    dropped = repo.run("doctor", "--drop-cache")
    assert dropped.code in (0, 1), dropped.err
    return reads(repo, task)


def worked(repo: Repo) -> tuple[str, str]:
    """Two tasks with records (a handover open on the second), their views cached."""
    task = repo.task("the one")
    repo.commit("work")
    assert repo.run("checkpoint", "first").code == 0
    other = repo.task("another")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    assert repo.run("history", "--json").code == 0  # the views of this state, cached
    assert cache_is_current(repo)
    return task, other


@pytest.mark.parametrize("naming", ["--task", "MAJORDOMUS_TASK", "task use"])
def test_a_write_on_a_task_named_in_full_builds_no_views_and_leaves_them_current(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, naming: str
) -> None:
    task, other = worked(repo)
    assert repo.run("task", "use", task if naming == "task use" else other).code == 0
    argv = ["--task", task.upper()] if naming == "--task" else []
    environ = {"MAJORDOMUS_TASK": task} if naming == "MAJORDOMUS_TASK" else {}
    built = views_built(monkeypatch)
    repo.clock.advance(30)
    repo.commit("more work")
    written = repo.run("checkpoint", "second", "--json", *argv, environ=environ)
    assert written.code == 0, written.err
    answer = json.loads(written.out)
    assert (answer["record"]["task"], answer["previous_age_s"]) == (task, 30)
    for verb in (["handover", "-o", "o2", "-s", "s2", "-n", "n2"], ["resume"], ["checkpoint", "3"]):
        repo.commit(f"before {verb[0]}")  # each record a note of its own: see the next test
        result = repo.run(*verb, *argv, environ=environ)
        assert result.code == 0, (verb, result.err)
        assert cache_is_current(repo), verb  # carried over: the next read is warm
    assert built == []
    cached = reads(repo, task)
    assert cached == fresh_reads(repo, task)
    assert [r["body"] for r in cached[0]["records"] if r["kind"] == "checkpoint"] == [
        "3",
        "second",
        "first",
    ]
    assert cached[5] == 1  # the handover resumed: none open


def test_a_write_that_moves_the_records_of_its_note_leaves_the_views_to_the_next_read(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note holds a checkpoint, then another task's task record and handover: the next
    checkpoint joins the checkpoints, and the other task's records move one place on. The
    views are not carried over to places they no longer name (in one second, on one commit,
    the place orders the records); the next read carries them over from the note."""
    task, other = worked(repo)
    assert [r["kind"] for r in reads(repo, task)[1]["records"][:3]] == [
        "handover",
        "task",
        "checkpoint",
    ]
    carried = []
    carry = Views._carried_over

    def counted(views: Views) -> object:
        meta = carry(views)
        carried.append(meta is not None)
        return meta

    monkeypatch.setattr(Views, "_carried_over", counted)
    built = views_built(monkeypatch)
    assert repo.run("checkpoint", "joins the checkpoints", "--task", task).code == 0
    assert built == [] and not cache_is_current(repo)
    cached = reads(repo, task)
    assert carried[0] is True
    assert cached == fresh_reads(repo, task)
    kinds = [(r["kind"], r["task"]) for r in cached[1]["records"][:4]]
    assert kinds == [
        ("handover", other),
        ("task", other),
        ("checkpoint", task),
        ("checkpoint", task),
    ]


def test_writes_on_one_commit_carry_the_views_to_the_places_the_records_move_to(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints, a handover and a resume on one commit in one second, on a note that
    holds this task's records alone: each checkpoint joins the checkpoints, the records
    after them move one place on, and the views carried over name those places (in one
    second, on one commit, the place orders the records): every write reads one view,
    the reads after them are a fresh read's."""
    repo.task("another")
    task = repo.task("the one")
    repo.commit("work")
    assert repo.run("checkpoint", "first").code == 0
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    assert repo.run("history", "--json").code == 0
    built = views_built(monkeypatch)
    for verb in (["checkpoint", "second"], ["resume"], ["checkpoint", "third"]):
        result = repo.run(*verb, "--task", task)
        assert result.code == 0, (verb, result.err)
        assert cache_is_current(repo), verb
    assert built == []
    cached = reads(repo, task)
    assert cached == fresh_reads(repo, task)
    assert [r["kind"] for r in cached[0]["records"]] == [
        "resume",
        "handover",
        "checkpoint",
        "checkpoint",
        "checkpoint",
        "task",
    ]


def test_task_new_builds_no_views_when_they_describe_the_refs_as_they_are(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    task, _ = worked(repo)
    repo.commit("more work")  # a note of its own (see the test above)
    built = views_built(monkeypatch)
    made = repo.task("a third")
    assert built == [] and cache_is_current(repo)
    listed = reads(repo, made)
    assert listed == fresh_reads(repo, made)
    assert {t["task"] for t in listed[3]["tasks"]} >= {task, made}


@pytest.mark.parametrize("name", ["prefix", "unknown", "after git"])
def test_where_the_view_of_one_task_cannot_answer_every_view_is_built_as_before(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    task, _ = worked(repo)
    repo.commit("more work")
    if name == "after git":  # another writer moved the ref: the cache describes another state
        repo.git("notes", "--ref=majordomus", "append", "-m", "not a record", "HEAD~1")
    before = repo.notes_ref()
    named = {"prefix": task[:8], "unknown": "t-0123456789ab", "after git": task}[name]
    built = views_built(monkeypatch)
    result = repo.run("checkpoint", "x", "--task", named)
    assert built == [True]
    if name == "unknown":
        assert (result.code, repo.notes_ref()) == (2, before)
        assert (
            result.err
            == "majordomus: no task matches 't-0123456789ab'; see majordomus task list.\n"
        )
        return
    assert result.code == 0, result.err
    assert cache_is_current(repo)
    assert reads(repo, task) == fresh_reads(repo, task)


@pytest.fixture
def counted_ids(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Record and task ids counted, not drawn: two clones that write alike hold alike."""
    numbers = itertools.count(1)

    def counted(prefix: str, digits: int) -> str:
        return f"{prefix}-{next(numbers):0{digits}x}"

    monkeypatch.setattr(write, "_new_id", counted)
    yield


def test_a_write_on_merged_branches_answers_as_one_without_the_view_cache(
    tmp_path: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch, counted_ids: None
) -> None:
    """Checkpoints on two branches in the same second, merged: the write that reads one
    task's view and the write that reads every note (no cache) make the same record, and
    the same reads follow."""
    clock = Clock()
    lean = Repo.init(tmp_path / "lean", environ, clock)
    task = lean.task("merged")
    lean.git("checkout", "-q", "-b", "side")
    lean.commit("side work")
    assert lean.run("checkpoint", "on the side").code == 0
    lean.git("checkout", "-q", "main")
    lean.commit("main work")
    assert lean.run("checkpoint", "on main").code == 0
    lean.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert lean.run("history", "--json").code == 0
    full = Repo(tmp_path / "full", environ, clock)
    shutil.copytree(lean.path, full.path, symlinks=True)
    full.drop_caches()
    clock.advance(5)
    built = views_built(monkeypatch)
    answers = []
    for repo in (lean, full):
        monkeypatch.setattr(write, "_new_id", lambda prefix, digits: f"{prefix}-{'e' * digits}")
        result = repo.run("checkpoint", "after the merge", "--json", "--task", task)
        assert result.code == 0, result.err
        answers.append(json.loads(result.out))
    assert built == [True]  # the clone without a view cache reads every note
    assert answers[0] == answers[1] and answers[0]["previous_age_s"] == 5
    assert reads(lean, task) == reads(full, task) == fresh_reads(lean, task)


def test_a_clone_behind_a_bare_remote_writes_on_its_fetched_task_without_the_views(
    tmp_path: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    _remote, alice, bob, task = shared(tmp_path, environ, clock)
    assert bob.run("history", "--json").code == 0
    built = views_built(monkeypatch)
    clock.advance(60)
    bob.commit("bob starts")  # a note of its own: see the second test
    written = bob.run("checkpoint", "bob 1", "--task", task, "--json")
    assert written.code == 0, written.err
    assert (built, json.loads(written.out)["previous_age_s"]) == ([], 60)
    assert cache_is_current(bob)
    assert bob.run("push").code == 0
    assert alice.run("fetch").code == 0
    for repo in (bob, alice):
        cached = reads(repo, task)
        assert cached == fresh_reads(repo, task)
        assert [r["body"] for r in cached[0]["records"][:2]] == ["bob 1", "alice 1"]


@pytest.mark.parametrize("verb", [["checkpoint", "after the loss"], ["resume"]])
def test_a_write_on_a_task_named_in_full_whose_view_part_is_lost_reads_every_note(
    repo: Repo, verb: list[str]
) -> None:
    """The view cache describes the notes refs as they are, but the parts of its views are
    gone (a disk cleaner, a person): a write on a task named in full reads every note
    instead, lands, and every read after it answers as a fresh read."""
    task, other = worked(repo)
    task = other if verb == ["resume"] else task  # the task with the open handover
    parts = sorted((repo.path / ".git" / VIEWS_FOLDER_NAME).glob("*"))
    assert parts and cache_is_current(repo)
    for part in parts:
        part.unlink()
    repo.clock.advance(30)
    repo.commit("after the loss")
    result = repo.run(*verb, "--task", task)
    assert result.code == 0, result.err
    cached = reads(repo, task)
    assert cached == fresh_reads(repo, task)
    assert cached[0]["records"][0]["kind"] == verb[0]


def test_a_copy_of_a_record_sends_the_write_to_the_views_of_every_task(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note copied onto another commit (by hand, or by someone who means harm) makes
    copies of its records: which copy a read lists depends on HEAD, which one task's view
    cannot tell; the write reads the views, and the reads after it are a fresh read's."""
    task, _ = worked(repo)
    repo.commit("more")
    repo.git("notes", "--ref=majordomus", "copy", "HEAD~1", "HEAD")
    assert repo.run("history", "--json").code == 0
    built = views_built(monkeypatch)
    result = repo.run("checkpoint", "beside a copy", "--task", task)
    assert result.code == 0, result.err
    assert built == [True]
    assert reads(repo, task) == fresh_reads(repo, task)


def test_a_write_after_the_first_read_of_one_task_in_a_fresh_clone_answers_as_a_fresh_read(
    tmp_path: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone whose only views are those of a first read of one task (the notes that
    could hold its records): the write builds the views of every task once, carries them
    to the state it makes, and the writes after it build none."""
    clock = Clock()
    remote, alice = seeded(tmp_path, environ, clock)
    task = alice.task("shared")
    other = alice.task("other")
    assert alice.run("checkpoint", "alice on other").code == 0
    assert alice.run("checkpoint", "alice 1", "--task", task).code == 0
    assert alice.run("handover", "-o", "o", "-s", "s", "-n", "n", "--task", task).code == 0
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    assert bob.run("history", "--task", task, "--json").code == 0  # one task's notes read
    built = views_built(monkeypatch)
    clock.advance(60)
    bob.commit("bob starts")  # a note of its own: see the second test
    written = bob.run("checkpoint", "bob 1", "--task", task, "--json")
    assert written.code == 0, written.err
    assert json.loads(written.out)["previous_age_s"] == 60
    assert built in ([], [True])
    assert cache_is_current(bob)
    del built[:]
    bob.commit("bob's work")
    for verb in (["resume"], ["checkpoint", "bob 2"]):
        result = bob.run(*verb, "--task", task)
        assert result.code == 0, (verb, result.err)
        assert cache_is_current(bob), verb
        assert built == [], verb
    cached = reads(bob, task)
    assert cached == fresh_reads(bob, task)
    assert reads(bob, other) == fresh_reads(bob, other)
    assert cached[5] == 1  # alice's handover resumed by bob: none open


def _forged_beside_an_open_handover(repo: Repo) -> tuple[str, str, str]:
    """This task's open handover, and a note on a commit nearer HEAD that reuses its id
    under another task (another record, no copy); the views of that state cached."""
    task, other = worked(repo)
    assert repo.run("task", "use", task).code == 0
    assert repo.run("handover", "-o", "mine", "-s", "s", "-n", "n").code == 0
    history = json.loads(repo.run("history", "--task", task, "--json").out)
    ident = next(r["id"] for r in history["records"] if r["kind"] == "handover")
    forged = repo.commit("near HEAD")
    text = (
        f'[[handover]]\nv = 1\nid = "{ident}"\ntask = "{other}"\nhead = "{forged}"\n'
        'at = 2026-11-02T03:12:00Z\nauthor = "Eve <eve@example.com>"\nobjective = "forged"\n'
        'state = "s"\nnext = "n"\n'
    )
    repo.git("notes", "--ref=majordomus", "add", "-F", "-", forged, input=text)
    assert repo.run("history", "--json").code == 0
    return task, other, ident


def test_a_forged_note_reusing_a_handover_id_under_another_task_changes_no_lean_write(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume on the task named in full reads its view alone and resolves its own
    handover; it joins the note that holds the other task's record, so the views are left
    to the next read (the other task's view names the note as it was)."""
    task, other, ident = _forged_beside_an_open_handover(repo)
    built = views_built(monkeypatch)
    resumed = repo.run("resume", "--task", task, "--json")
    assert resumed.code == 0, resumed.err
    assert built == []
    taken = json.loads(resumed.out)["handover"]
    assert (taken["id"], taken["task"], taken["objective"]) == (ident, task, "mine")
    assert not cache_is_current(repo)
    for name in (task, other):
        cached, fresh = reads(repo, name), fresh_reads(repo, name)
        assert cached[:1] + cached[2:] == fresh[:1] + fresh[2:]


def test_every_task_read_after_a_write_beside_a_forged_id_is_a_fresh_read(repo: Repo) -> None:
    task, _, _ = _forged_beside_an_open_handover(repo)
    assert repo.run("resume", "--task", task).code == 0
    assert reads(repo, task)[1] == fresh_reads(repo, task)[1]


def test_a_write_on_a_commit_whose_note_a_plain_git_fetch_brought_answers_as_a_fresh_read(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    """The note on HEAD is on the remote-tracking ref only (a plain `git fetch` of the
    notes): the write makes a note of its own there, which a read unites with the fetched
    one; the views it carries name no place in a note the write did not make."""
    clock = Clock()
    remote, alice = seeded(tmp_path, environ, clock)
    task = alice.task("shared")
    alice.commit("alice's work")
    assert alice.run("checkpoint", "alice 1").code == 0
    assert alice.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    alice.git("push", "-q", "origin", "main")
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    bob.git("fetch", "-q", "origin", "+refs/notes/majordomus:refs/notes/remotes/origin/majordomus")
    assert bob.run("history", "--json").code == 0
    clock.advance(60)
    for verb in (["checkpoint", "bob 1"], ["checkpoint", "bob 2"], ["resume"]):
        result = bob.run(*verb, "--task", task)
        assert result.code == 0, (verb, result.err)
    cached = reads(bob, task)
    assert cached == fresh_reads(bob, task)
    assert [r["body"] for r in cached[0]["records"] if r["kind"] == "checkpoint"] == [
        "bob 2",
        "bob 1",
        "alice 1",
    ]
