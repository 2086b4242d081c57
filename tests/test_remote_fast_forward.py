"""fetch's common merge, a fast-forward of the notes ref checked through one git process and
moved by `git update-ref` (majordomus/fastforward.py), against the merge libgit2 makes of the
same fetch: two clones in one state behind one bare remote, one fetching with libgit2 not
loaded (the fast path), the other with it loaded (the merge it stands for). Each answers
alike, loses no record, and reads afterwards as a read from no cache does."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import NamedTuple

import pytest

from majordomus import fastforward, sharing
from majordomus.errors import RepositoryError
from majordomus.notetoml import NOTE_MAX_BYTES
from majordomus.remote import Git
from majordomus.tasks import open_jobs
from majordomus.values import MergeReport
from tests.support.env import Clock
from tests.support.git import NOTES_REF
from tests.support.notes import ref_ids, stored_records
from tests.support.repo import Repo, clone, seeded
from tests.support.trees import TRACKING_REF, blob, literal_tree, ok, publish_tree, record_id
from tests.test_interrupt import finish, kill_group, majordomus, read_line, spawn


class Clones(NamedTuple):
    remote: Path
    alice: Repo  # writes with majordomus and pushes
    fast: Repo  # fetches with libgit2 not loaded
    slow: Repo  # fetches with libgit2 loaded: the merge the fast path stands for
    tip: str  # the commit alice's records are on


def clones(tmp_path: Path, environ: dict[str, str], clock: Clock) -> Clones:
    """Alice's records pushed; two clones that fetched them (their notes ref is the remote's)."""
    remote, alice = seeded(tmp_path, environ, clock)
    alice.task("queue drops acks")
    ok(alice, "checkpoint", "reproduced with 50 enqueues")
    ok(alice, "push")
    pair = []
    for name in ("fast", "slow"):
        repo = clone(str(remote), tmp_path / name, environ, clock)
        ok(repo, "fetch")
        assert repo.notes_ref() == alice.notes_ref()
        pair.append(repo)
    return Clones(remote, alice, pair[0], pair[1], alice.head())


def fetch(repo: Repo, *, libgit2: bool) -> tuple[MergeReport | None, bool]:
    """`majordomus fetch origin` as the command does it, in-process: what it merged, and
    whether libgit2 was loaded by the end of it."""
    jobs = open_jobs(str(repo.path), repo.environ)
    if libgit2:
        assert jobs.repository.repo is not None
    report = sharing.fetch_records(jobs, Git(jobs.repository), "origin")
    return report.merge, "repo" in jobs.repository.__dict__


def answer(merge: MergeReport | None) -> tuple[object, ...]:
    assert merge is not None
    return (merge.outcome, merge.records_added, merge.copies_added, merge.left_out)


def reads(repo: Repo) -> list[str]:
    """What the reads say: every record of every task, each task's history, and doctor's
    count of what it could not read."""
    shown = [ok(repo, "history", "--all", "--json")]
    for task in sorted(i for i in ref_ids(repo.path) if i.startswith("t-")):
        shown.append(ok(repo, "history", "--task", task, "--json"))
    shown.append(ok(repo, "show", "--json"))
    return shown


def as_fresh(repo: Repo) -> None:
    """The reads after the fetch (through whatever caches it left) equal the reads from no
    cache at all."""
    warm = reads(repo)
    assert repo.run("doctor", "--drop-cache").code in (0, 1)
    repo.drop_caches()
    assert reads(repo) == warm


def both(c: Clones, *, fast_path: bool = True, counted: bool = True) -> MergeReport:
    """Both clones fetch; their answers, notes trees and reads are equal, nothing is lost,
    `records_added` counts the ids that are new; the fast clone's report."""
    before = ref_ids(c.fast.path)
    fast, loaded = fetch(c.fast, libgit2=False)
    slow, _ = fetch(c.slow, libgit2=True)
    assert loaded is not fast_path  # the fast path leaves libgit2 unloaded
    assert answer(fast) == answer(slow)
    assert fast is not None
    trees = [r.git("rev-parse", f"{NOTES_REF}^{{tree}}").strip() for r in (c.fast, c.slow)]
    assert trees[0] == trees[1]
    after = ref_ids(c.fast.path)
    assert before <= after
    left_out = {commit for commit, _, _ in fast.left_out}
    remote = stored_records(c.remote, c.fast.environ)
    assert {r.table["id"] for r in remote if r.target not in left_out} <= after
    if counted:
        assert fast.records_added == len(after - before)
    as_fresh(c.fast)
    assert reads(c.fast) == reads(c.slow)
    return fast


def note_on(repo: Repo, commit: str, text: str) -> None:
    """A note appended by plain git on `commit` (the record's bytes as given)."""
    repo.git("notes", "--ref=majordomus", "append", "-m", text, commit)


def published(repo: Repo) -> None:
    repo.git("push", "-q", "origin", "main", f"{NOTES_REF}:{NOTES_REF}")


def attacker(c: Clones, tmp_path: Path) -> Repo:
    """A clone that writes the shared notes ref with plain git only."""
    mallory = clone(str(c.remote), tmp_path / "mallory", c.alice.environ, c.alice.clock)
    mallory.git("fetch", "-q", "origin", f"{NOTES_REF}:{NOTES_REF}")
    return mallory


def checkpoint_text(record: str, task: str, head: str, body: str) -> str:
    return (
        f'[[checkpoint]]\nv = 1\nid = "{record}"\ntask = "{task}"\nhead = "{head}"\n'
        f'at = 2026-11-30T03:30:00Z\nauthor = "Mallory <m@example.com>"\nbody = "{body}"\n'
    )


def task_of(repo: Repo) -> str:
    return sorted(i for i in ref_ids(repo.path) if i.startswith("t-"))[0]


# ---- the common fetch ----------------------------------------------------------------------


def test_a_fast_forward_counts_each_record_once_and_each_copy(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    c = clones(tmp_path, environ, clock)
    task = task_of(c.alice)
    old = ok(c.alice, "history", "--all", "--json")
    first = json.loads(old)["records"][0]["id"]
    # New records on the shared commit and on a new one; one of them copied onto a third
    # commit; and a copy of a record the clones have already, on a fourth.
    ok(c.alice, "checkpoint", "again on the shared commit")
    c.alice.commit("second")
    fresh = record_id(c.alice, "checkpoint", "on a new commit")
    second = c.alice.head()
    c.alice.commit("third")
    shown = c.alice.git("notes", "--ref=majordomus", "show", second)
    copied = shown[shown.index("[[checkpoint]]") :]
    assert fresh in copied
    note_on(c.alice, c.alice.head(), copied)
    c.alice.commit("fourth")
    original = c.alice.git("notes", "--ref=majordomus", "show", c.tip)
    at = original.index(f'id = "{first}"')
    start = original.rindex("[[", 0, at)
    end = original.find("\n[[", at)
    note_on(c.alice, c.alice.head(), original[start : end if end >= 0 else None])
    published(c.alice)
    report = both(c)
    assert (report.outcome, report.records_added, report.copies_added) == ("fast-forward", 2, 4)
    assert report.notes_commit == c.alice.notes_ref()
    assert task in ref_ids(c.fast.path)
    assert ok(c.fast, "fetch") == "origin: every record it has is already here\n"


def test_a_notes_ref_packed_only_is_read_and_moved(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    c = clones(tmp_path, environ, clock)
    ok(c.alice, "checkpoint", "one more")
    published(c.alice)
    for repo in (c.fast, c.slow):
        repo.git("pack-refs", "--all")
        assert not (repo.path / ".git" / NOTES_REF).exists()
    assert both(c).outcome == "fast-forward"
    assert c.fast.notes_ref() == c.alice.notes_ref()
    assert c.fast.git("rev-parse", TRACKING_REF).strip() == c.alice.notes_ref()


def test_a_record_written_here_meanwhile_is_kept(
    tmp_path: Path, environ: dict[str, str], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notes ref moves between the check and the move (another writer, here): git's
    compare refuses the move, and libgit2 merges what the ref now holds."""
    c = clones(tmp_path, environ, clock)
    theirs = record_id(c.alice, "checkpoint", "theirs")
    published(c.alice)
    checked = fastforward.fast_forward
    written: list[str] = []

    def meanwhile(notes: fastforward.GitNotes, ours: str, their: str) -> fastforward.Merged | None:
        merged = checked(notes, ours, their)
        if not written:
            task = task_of(c.fast)
            written.append(record_id(c.fast, "checkpoint", "-t", task, "written meanwhile"))
        return merged

    monkeypatch.setattr(fastforward, "fast_forward", meanwhile)
    mine = ref_ids(c.fast.path)
    report, loaded = fetch(c.fast, libgit2=False)
    assert report is not None and loaded
    assert (report.outcome, report.records_added) == ("merged", 1)
    assert ref_ids(c.fast.path) == mine | {theirs, *written}
    parents = c.fast.git("rev-list", "--parents", "-n1", NOTES_REF).split()
    assert c.alice.notes_ref() in parents[1:]
    as_fresh(c.fast)


def test_a_lock_left_on_the_notes_ref_stops_the_move_and_is_named(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    c = clones(tmp_path, environ, clock)
    ok(c.alice, "checkpoint", "theirs")
    published(c.alice)
    before = c.fast.notes_ref()
    lock = c.fast.path / ".git" / (NOTES_REF + ".lock")
    lock.write_text("")
    result = c.fast.run("fetch", environ={"MAJORDOMUS_WRITE_TIMEOUT": "0.2"})
    assert result.code != 0 and "Traceback" not in result.err
    assert str(lock) in result.err and len(result.err.strip().splitlines()) == 1
    assert c.fast.notes_ref() == before
    assert lock.exists()
    lock.unlink()
    # The tracking ref moved, ours did not: libgit2 is loaded while git fetches (a merge
    # is likely), and fast-forwards.
    assert both(c, fast_path=False).outcome == "fast-forward"


@pytest.mark.parametrize("point", ["before-write", "after-write"])
def test_a_fetch_interrupted_at_the_move_leaves_the_ref_at_one_value_or_the_other(
    tmp_path: Path, environ: dict[str, str], clock: Clock, point: str
) -> None:
    c = clones(tmp_path, environ, clock)
    ok(c.alice, "checkpoint", "theirs")
    published(c.alice)
    before = c.fast.notes_ref()
    env = {**c.fast.environ, "MAJORDOMUS_TEST_PAUSE_AT": point}
    process = spawn(majordomus(c.fast, "fetch"), c.fast.path, env)
    try:
        assert read_line(process.stderr) == f"majordomus: paused at {point}\n"
        os.killpg(process.pid, signal.SIGINT)
        code, _, err = finish(process)
    finally:
        kill_group(process.pid)
    assert code == 130
    assert not list((c.fast.path / ".git" / "refs" / "notes").glob("*.lock"))
    moved = point == "after-write"
    assert c.fast.notes_ref() == (c.alice.notes_ref() if moved else before)
    said = "were stored" if moved else "were not stored"
    assert err == f"majordomus: interrupted; the fetched records {said}.\n"
    if moved:
        assert ok(c.fast, "fetch") == "origin: every record it has is already here\n"
        assert ref_ids(c.fast.path) == ref_ids(c.remote)
    else:
        # The tracking ref moved, ours did not: libgit2 is loaded while git fetches.
        assert both(c, fast_path=False).outcome == "fast-forward"


def test_a_symbolic_notes_ref_is_left_to_libgit2(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """git update-ref would move the ref a symbolic notes ref names: the fast path never
    moves it, libgit2 does what it does with it."""
    c = clones(tmp_path, environ, clock)
    ok(c.alice, "checkpoint", "theirs")
    published(c.alice)
    for repo in (c.fast, c.slow):
        target = repo.notes_ref()
        assert target is not None
        repo.git("update-ref", "refs/notes/elsewhere", target)
        repo.git("symbolic-ref", NOTES_REF, "refs/notes/elsewhere")
    try:
        fast, loaded = fetch(c.fast, libgit2=False)
    except RepositoryError as error:
        fast_answer: object = str(error)
    else:
        assert loaded
        fast_answer = answer(fast)
    try:
        slow, _ = fetch(c.slow, libgit2=True)
    except RepositoryError as error:
        slow_answer: object = str(error)
    else:
        slow_answer = answer(slow)
    assert fast_answer == slow_answer
    refs = [r.git("for-each-ref", "refs/notes/") for r in (c.fast, c.slow)]
    assert refs[0] == refs[1]
    # The ref it names moved, as git moves it; it stays symbolic.
    for repo in (c.fast, c.slow):
        assert repo.git("symbolic-ref", NOTES_REF).strip() == "refs/notes/elsewhere"
        assert repo.notes_ref() == c.alice.notes_ref()
    assert fast_answer == ("fast-forward", 1, 1, ())
    # A write through it too: the ref it names moves, by compare-and-swap.
    mine = record_id(c.fast, "checkpoint", "-t", task_of(c.fast), "written through it")
    assert c.fast.git("symbolic-ref", NOTES_REF).strip() == "refs/notes/elsewhere"
    assert mine in ref_ids(c.fast.path, "refs/notes/elsewhere")


def test_a_notes_ref_that_is_no_commit_is_refused_as_before(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    c = clones(tmp_path, environ, clock)
    ok(c.alice, "checkpoint", "theirs")
    published(c.alice)
    odd = blob(c.fast, "not a commit\n")
    c.fast.git("update-ref", NOTES_REF, odd)
    result = c.fast.run("fetch")
    assert result.code == 3 and "Traceback" not in result.err
    assert c.fast.git("rev-parse", NOTES_REF).strip() == odd


# ---- clone shapes the fast path leaves to libgit2 ----------------------------------------


@pytest.mark.parametrize("shape", ["shallow", "partial"])
def test_shallow_and_partial_clones_merge_through_libgit2_alike(
    tmp_path: Path, environ: dict[str, str], clock: Clock, shape: str
) -> None:
    remote, alice = seeded(tmp_path, environ, clock)
    alice.task("queue drops acks")
    for n in range(3):
        alice.commit(f"work {n}")
        ok(alice, "checkpoint", f"step {n}")
    ok(alice, "push")
    options = ("--depth=1",) if shape == "shallow" else ("--filter=blob:none",)
    pair = []
    for name in ("fast", "slow"):
        repo = clone(f"file://{remote}", tmp_path / name, environ, clock, *options)
        ok(repo, "fetch")
        pair.append(repo)
    c = Clones(remote, alice, pair[0], pair[1], alice.head())
    ok(alice, "checkpoint", "one more")
    alice.commit("more work")
    ok(alice, "checkpoint", "and another")
    published(alice)
    report = both(c, fast_path=False)
    assert (report.outcome, report.records_added) == ("fast-forward", 2)
    assert ref_ids(c.fast.path) == ref_ids(remote)


# ---- hostile notes in a fast-forward --------------------------------------------------------


def test_invisible_characters_and_newlines_in_fields(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    c = clones(tmp_path, environ, clock)
    mallory = attacker(c, tmp_path)
    task = task_of(mallory)
    body = "fine\\n\\u001b[2J\\u202egnp.exe\\u200b\\r\\nline"
    note_on(mallory, c.tip, checkpoint_text("c-00000000000f0e1d", task, c.tip, body))
    mallory.commit("mallory")
    head = mallory.head()
    note_on(mallory, head, checkpoint_text("c-00000000000f0e1e", task, head, "\\u2028x\\ty"))
    published(mallory)
    report = both(c)
    assert (report.outcome, report.records_added, report.copies_added) == ("fast-forward", 2, 2)
    shown = ok(c.fast, "history", "--all")
    assert "\x1b" not in shown and "\u202e" not in shown and "\u2028" not in shown


def test_a_forged_copy_of_a_record_here(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """A note that reuses the id of a record the clones have, under another task, on another
    commit: nothing is lost, the forged copy reads as a full read reads it."""
    c = clones(tmp_path, environ, clock)
    mallory = attacker(c, tmp_path)
    records = json.loads(ok(mallory, "history", "--all", "--json"))["records"]
    victim = next(r["id"] for r in records if r["id"].startswith("c-"))
    mallory.commit("mallory")
    head = mallory.head()
    note_on(mallory, head, checkpoint_text(victim, "t-00000000bad0", c.tip, "forged"))
    published(mallory)
    report = both(c)
    assert (report.outcome, report.records_added, report.copies_added) == ("fast-forward", 0, 1)
    history = json.loads(ok(c.fast, "history", "--all", "--json"))["records"]
    # Another task's record that reuses the id: listed apart, the victim's stays as it was.
    copies = {(r["task"], r["body"]) for r in history if r["id"] == victim}
    assert copies == {
        (task_of(c.alice), "reproduced with 50 enqueues"),
        ("t-00000000bad0", "forged"),
    }


def test_a_gitlink_where_a_note_belongs_is_merged_by_libgit2_and_left_out(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    c = clones(tmp_path, environ, clock)
    mallory = attacker(c, tmp_path)
    task = task_of(mallory)
    mallory.commit("mallory")
    head = mallory.head()
    note_on(mallory, head, checkpoint_text("c-00000000000f0e1f", task, head, "kept"))
    mallory.commit("linked")
    linked = mallory.head()
    publish_tree(mallory, {linked: f"160000 commit {linked}\t{linked}"}, "main")
    report = both(c, fast_path=False)
    assert (report.outcome, report.records_added) == ("merged", 1)
    assert [entry[0] for entry in report.left_out] == [linked]
    assert "160000" not in c.fast.git("ls-tree", "-r", NOTES_REF)


def test_an_oversized_note_is_merged_by_libgit2_and_left_out(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    c = clones(tmp_path, environ, clock)
    mallory = attacker(c, tmp_path)
    task = task_of(mallory)
    mallory.commit("mallory")
    head = mallory.head()
    big = checkpoint_text("c-00000000000f0e20", task, head, "x" * (NOTE_MAX_BYTES + 10))
    path = tmp_path / "big.toml"
    path.write_text(big)
    mallory.git("notes", "--ref=majordomus", "add", "-F", str(path), head)
    mallory.commit("after")
    after = mallory.head()
    note_on(mallory, after, checkpoint_text("c-00000000000f0e21", task, after, "small"))
    published(mallory)
    report = both(c, fast_path=False)
    assert (report.outcome, report.records_added) == ("merged", 1)
    assert [entry[0] for entry in report.left_out] == [head]


def test_a_tree_with_one_name_twice_is_left_to_libgit2(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """A notes tree git would not write (one name as a file and as a fan-out tree): the
    fast path is unsure of it, and libgit2 merges."""
    c = clones(tmp_path, environ, clock)
    mallory = attacker(c, tmp_path)
    task = task_of(mallory)
    mallory.commit("mallory")
    head = mallory.head()
    note = blob(mallory, checkpoint_text("c-00000000000f0e22", task, head, "twice"))
    sub = literal_tree(mallory, [f"100644 blob {note}\t{head[2:]}"])
    twice = {
        head[:2] + "/": f"040000 tree {sub}\t{head[:2]}",
        head[:2]: f"100644 blob {note}\t{head[:2]}",
    }
    tree = mallory.git("rev-parse", publish_tree(mallory, twice, "main") + "^{tree}").strip()
    # libgit2's merge counts no record here (it finds the file where the fan-out tree
    # is), though a read reads the one the tree holds: that count is not exact.
    both(c, fast_path=False, counted=False)
    entries = c.fast.git("cat-file", "-p", tree)
    assert entries.count(f"\t{head[:2]}\n") == 2
    assert "c-00000000000f0e22" in ref_ids(c.fast.path)


def test_fetches_and_writes_at_once_in_one_clone_lose_no_record(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """Real processes racing on one notes ref: fetches that fast-forward it through git and
    checkpoints that append to it through libgit2, each by compare-and-swap."""
    c = clones(tmp_path, environ, clock)
    for n in range(3):
        ok(c.alice, "checkpoint", f"theirs {n}")
    published(c.alice)
    task = task_of(c.fast)
    processes = [c.fast.spawn("fetch") for _ in range(3)]
    processes += [c.fast.spawn("checkpoint", "-t", task, f"mine {n}") for n in range(3)]
    for n, process in enumerate(processes):
        _, err = process.communicate(timeout=60)
        if n < 3 and process.returncode == 4:
            # Two git fetches into one tracking ref: git locks it, the later one fails
            # and says so, nothing merged; the ref as it was.
            assert b"nothing was merged" in err and len(err.splitlines()) == 1, err
            continue
        assert process.returncode == 0, err
    ok(c.fast, "fetch")
    records = json.loads(ok(c.fast, "history", "--all", "--json"))["records"]
    bodies = {r.get("body") for r in records}
    assert {f"theirs {n}" for n in range(3)} | {f"mine {n}" for n in range(3)} <= bodies
    assert ref_ids(c.remote) <= ref_ids(c.fast.path)
    assert c.alice.notes_ref() in c.fast.git("rev-list", NOTES_REF).split()
    as_fresh(c.fast)
