"""The read caches are derived and disposable: answers with them equal answers without."""

from __future__ import annotations

import json
import marshal
import os
import random
import shutil
import struct
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pygit2
import pytest

from majordomus import __version__
from majordomus.cachefile import (
    GRAPH_FILE_NAME,
    PATCH_FILE_NAME,
    READ_FILE_NAME,
    RECORDS_FILE_NAME,
    VIEWS_FILE_NAME,
    VIEWS_FOLDER_NAME,
)
from majordomus.documentcache import DocumentCache
from majordomus.history import GraphCache
from majordomus.invocation import Inputs
from majordomus.jsontext import record_text
from majordomus.notes import Note, append_note, dump_note, parse_note
from majordomus.notetoml import NoteError
from majordomus.readcache import ReadCache
from majordomus.records import new_record
from majordomus.tasks import open_jobs
from majordomus.viewparts import Ledger, ViewCache, _shard_of, state_key
from majordomus.views import Views
from majordomus.write import _write
from tests.support.env import AUTHOR, Clock, doctor_signing_lines
from tests.support.repo import Repo, clone, seeded, shared, writer_of

CACHES = (READ_FILE_NAME, GRAPH_FILE_NAME, RECORDS_FILE_NAME, VIEWS_FILE_NAME, PATCH_FILE_NAME)


def views_of(path: str, environ: Mapping[str, str]) -> Views:
    jobs = open_jobs(path, environ)
    return Views(jobs.reader, jobs.history)


def answers(repo: Repo) -> tuple[object, ...]:
    history = json.loads(repo.run("history", "--all", "--json").out)
    check = json.loads(repo.run("check", "--json").out)
    task = check["task"]
    peek = repo.run("resume", "--peek", "--json")
    mine = json.loads(repo.run("history", "--task", task, "--all", "--json").out)
    first = json.loads(repo.run("history", "HEAD~1", "--task", task, "--json").out)
    shown = json.loads(repo.run("show", "--json").out)
    return history, json.loads(peek.out), peek.code, check, mine, first, shown


def test_cached_answers_equal_fresh_answers_as_the_graph_moves(repo: Repo) -> None:
    rng = random.Random(20261130)
    repo.task()
    repo.git("config", "notes.rewriteRef", "refs/notes/majordomus")
    repo.commit("second")
    performed: set[str] = set()
    for step in range(60):
        action = rng.choice(
            [
                "commit",
                "commit",
                "checkpoint",
                "handover",
                "resume",
                "branch",
                "switch",
                "task",
                "amend",
                "hand",
                "merge",
                "foreign",
                "overwrite",
                "remove",
            ]
        )
        performed.add(action)
        if action == "commit":
            repo.commit(f"step {step}")
        elif action == "checkpoint":
            assert repo.run("checkpoint", f"checkpoint {step}").code == 0
        elif action == "handover":
            assert repo.run("handover", "-o", "o", "-s", f"s{step}", "-n", "n").code == 0
        elif action == "amend":  # copies the note: one record now sits on two commits
            repo.git("commit", "-q", "--amend", "--allow-empty", "-m", f"amended {step}")
        elif action == "hand":  # a person's line: the note is no longer one TOML document
            repo.git("notes", "--ref=majordomus", "append", "-m", f"by hand {step}", "HEAD")
        elif action == "foreign":  # another writer's record, as git writes it
            repo.git("notes", "--ref=majordomus", "append", "-m", foreign(repo, step), "HEAD")
        elif action == "overwrite":  # the note replaced: its records gone, another in
            repo.git("notes", "--ref=majordomus", "add", "-f", "-m", foreign(repo, step), "HEAD")
        elif action == "remove":
            repo.git("notes", "--ref=majordomus", "remove", "--ignore-missing", "HEAD")
        elif action == "resume":
            assert repo.run("resume").code in (0, 1)
        elif action == "task":
            tasks = [t["task"] for t in json.loads(repo.run("task", "list", "--json").out)["tasks"]]
            if rng.random() < 0.5:
                repo.task(f"task {step}")
            else:
                assert repo.run("task", "use", rng.choice(tasks)).code == 0
        elif action == "merge":  # a merge commit: git's order is no longer creation order
            branches = repo.git("branch", "--format=%(refname:short)").split()
            repo.git("merge", "-q", "--no-ff", "-m", f"merge {step}", rng.choice(branches))
        elif action == "branch":
            repo.git("checkout", "-q", "-b", f"b{step}")
        else:
            branches = repo.git("branch", "--format=%(refname:short)").split()
            repo.git("checkout", "-q", rng.choice(branches))
        repo.clock.advance(rng.choice([0, 1, 30]))
        if step % 4 == 3:
            cached = answers(repo)
            repo.drop_caches()
            assert answers(repo) == cached, f"step {step}"
    assert {"hand", "amend", "foreign", "overwrite", "remove"} <= performed


@pytest.mark.parametrize("seed", [7, 2026])
def test_views_carried_over_many_foreign_writes_equal_a_fresh_read(
    repo: Repo, tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The views are never rebuilt from scratch here: each git write (a record appended, a
    note replaced or removed, a line by hand) is carried over from the
    views before it, part by part, as are majordomus' own writes, over merges and branch
    switches; now and then a part is lost. After each step every answer equals that of a
    copy of the repository whose caches were dropped."""
    rng = random.Random(seed)
    repo.task()
    repo.git("config", "notes.rewriteRef", "refs/notes/majordomus")
    repo.commit("second")
    actions = ["foreign", "foreign", "overwrite", "remove", "hand", "checkpoint", "handover"]
    # No amend: a copy of a record makes every read choose between copies (views are then
    # built per HEAD, never carried over); the test above covers copies.
    actions += ["resume", "commit", "branch", "switch", "merge", "task", "lose"]
    fresh = Repo(tmp_path / "fresh", repo.environ, repo.clock)
    carried = count_carry_overs(monkeypatch)
    by_git = lost = 0
    for step in range(24):
        action = rng.choice(actions)
        if action == "foreign":
            repo.git("notes", "--ref=majordomus", "append", "-m", foreign(repo, step), "HEAD")
        elif action == "overwrite":
            repo.git("notes", "--ref=majordomus", "add", "-f", "-m", foreign(repo, step), "HEAD")
        elif action == "remove":
            repo.git("notes", "--ref=majordomus", "remove", "--ignore-missing", "HEAD")
        elif action == "hand":
            repo.git("notes", "--ref=majordomus", "append", "-m", f"by hand {step}", "HEAD")
        elif action == "checkpoint":
            assert repo.run("checkpoint", f"checkpoint {step}").code == 0
        elif action == "handover":
            assert repo.run("handover", "-o", "o", "-s", f"s{step}", "-n", "n").code == 0
        elif action == "resume":
            assert repo.run("resume").code in (0, 1)
        elif action == "commit":
            repo.commit(f"step {step}")
        elif action == "branch":
            repo.git("checkout", "-q", "-b", f"b{step}")
        elif action == "merge":
            branches = repo.git("branch", "--format=%(refname:short)").split()
            repo.git("merge", "-q", "--no-ff", "-m", f"merge {step}", rng.choice(branches))
        elif action == "task":
            repo.task(f"task {step}")
        elif action == "lose":  # a part of the views gone (a disk cleaner, a person)
            parts = sorted((repo.path / ".git" / VIEWS_FOLDER_NAME).glob("*"))
            if parts:
                rng.choice(parts).unlink()
        else:
            branches = repo.git("branch", "--format=%(refname:short)").split()
            repo.git("checkout", "-q", rng.choice(branches))
        repo.clock.advance(rng.choice([0, 1, 30]))
        by_git += action in ("foreign", "overwrite", "remove", "hand")
        lost += action == "lose"
        cached = answers(repo)
        shutil.rmtree(fresh.path, ignore_errors=True)
        shutil.copytree(repo.path, fresh.path)
        fresh.drop_caches()
        assert answers(fresh) == cached, f"step {step}: {action}"
    # Every write by git was carried over, but where a part it needed was lost.
    assert by_git >= 5 and len(carried) >= by_git - lost, (by_git, lost, len(carried))


def count_carry_overs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The states the views were carried over to (not rebuilt), as commands run."""
    carried: list[str] = []
    carry = Views._carried_over

    def counted(views: Views) -> object:
        meta = carry(views)
        if meta is not None:
            carried.append(views._key)
        return meta

    monkeypatch.setattr(Views, "_carried_over", counted)
    return carried


def foreign(repo: Repo, step: int) -> str:
    """A record in the note format, written by something other than majordomus."""
    task = json.loads(repo.run("check", "--json").out)["task"]
    kind = "handover" if step % 3 == 0 else "checkpoint"
    fields = {"objective": "o", "state": f"s{step}", "next": "n"} if kind == "handover" else {}
    record = new_record(
        kind,
        record_id=f"c-{step:016x}",
        task=task,
        head=repo.head(),
        at=repo.clock.now,
        author=AUTHOR,
        session=None,
        fields=fields or {"body": f"foreign {step}"},
    )
    return append_note(None, [record]).decode()


def test_a_foreign_write_rereads_only_the_notes_it_changed(repo: Repo) -> None:
    task = repo.task()
    for i in range(6):
        repo.commit(f"c{i}")
        assert repo.run("checkpoint", f"checkpoint {i}").code == 0
    repo.git("notes", "--ref=majordomus", "append", "-m", foreign(repo, 3), "HEAD~2")
    repo.git("notes", "--ref=majordomus", "add", "-f", "-m", foreign(repo, 4), "HEAD~4")
    repo.git("notes", "--ref=majordomus", "remove", "HEAD~1")
    views = views_of(str(repo.path), repo.environ)
    assert not views.full_read  # carried over from the cached state, no full read
    assert views_key(repo) == current_key(repo)
    cached = answers(repo)
    repo.drop_caches()
    assert answers(repo) == cached
    history = json.loads(repo.run("history", "--task", task, "--json").out)
    got = [r.get("body") or r.get("state") or r["kind"] for r in history["records"]]
    assert got == [  # checkpoint 4 removed, checkpoint 1 overwritten
        "checkpoint 5",
        "s3",
        "checkpoint 3",
        "checkpoint 2",
        "foreign 4",
        "checkpoint 0",
        "task",
    ]


def test_cache_files_live_in_the_git_dir_and_garbage_is_ignored(repo: Repo) -> None:
    task = repo.task()
    for i in range(30):
        repo.commit(f"c{i}")
        repo.run("checkpoint", f"checkpoint {i}")
    repo.run("handover", "-o", "o", "-s", "s", "-n", "n")
    before = repo.run("history", "--json").out
    mine = repo.run("history", "--task", task, "--json").out
    git_dir = repo.path / ".git"
    repo.run("history", "--json")  # a second read parses nothing new: it fills the caches
    repo.run("doctor")  # reads every note (the histories read the views the writes kept)
    names = {*CACHES, VIEWS_FOLDER_NAME, "majordomus-task"}
    assert {p.name for p in git_dir.glob("majordomus-*")} == names
    assert repo.git("status", "--porcelain", "--ignored") == ""
    parts = list((git_dir / VIEWS_FOLDER_NAME).iterdir())
    assert parts
    for argv, answer in ((("--task", task), mine), ((), before)):  # one task, every task
        for part in parts:  # a part that is not what its name says is read from the notes
            part.write_bytes(b"\x00garbage")
        assert repo.run("history", *argv, "--json").out == answer
        for part in (git_dir / VIEWS_FOLDER_NAME).iterdir():  # and so is a part that is gone
            part.unlink()
        assert repo.run("history", *argv, "--json").out == answer
    for name in CACHES:
        (git_dir / name).write_bytes(b"\x00garbage")
    assert repo.run("history", "--json").out == before
    assert repo.run("history", "--task", task, "--json").out == mine
    for name in CACHES:
        (git_dir / name).write_bytes(b"")
    assert repo.run("history", "--json").out == before
    assert repo.run("history", "--task", task, "--json").out == mine
    dropped = repo.run("doctor", "--drop-cache")
    assert (dropped.code, dropped.out) == (
        1,  # unhealthy only because this clone never ran `majordomus init`
        "ok    cache     read caches dropped\n"
        "ok    profile   default (interval 1200s, checkpoint_max 400, handover_max 800)\n"
        "ok    identity  Ada Lovelace <ada@example.com>\n"
        "FAIL  config    notes.rewriteRef does not include refs/notes/majordomus: records will "
        "not follow amended or rebased commits (run majordomus init)\n"
        "ok    locks     no lock files\n"
        + doctor_signing_lines(32)
        + "ok    notes     31 notes, 32 records, 0 invalid\n",
    )
    # doctor reads the notes again afterwards, which rebuilds only the notes cache.
    assert sorted(p.name for p in git_dir.glob("majordomus-*")) == [
        READ_FILE_NAME,
        "majordomus-task",
    ]


def test_missing_is_never_cached(repo: Repo, tmp_path: Path) -> None:
    repo.task()
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("on feature")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    feature = repo.head()
    # A second clone gets the records but not yet the commit: missing.
    other = Repo(tmp_path / "other", repo.environ, repo.clock)
    url = f"file://{repo.path}"
    repo.git("clone", "-q", "--branch", "main", "--single-branch", url, str(other.path))
    other.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    task = json.loads(repo.run("check", "--json").out)["task"]
    first = json.loads(other.run("resume", "--peek", "--json", "--task", task).out)
    assert first["label"] == "missing"
    other.git("fetch", "-q", "origin", "feature")
    assert other.git("cat-file", "-t", feature).strip() == "commit"
    second = json.loads(other.run("resume", "--peek", "--json", "--task", task).out)
    assert (second["label"], second["ahead"], second["behind"]) == ("behind", 0, 1)


def views_key(repo: Repo) -> str:
    return ViewCache(repo.path / ".git" / VIEWS_FILE_NAME).key


def current_key(repo: Repo) -> str:
    return state_key(open_jobs(str(repo.path), repo.environ).reader.refs.ref_targets())


def test_our_writes_carry_the_views_over(repo: Repo) -> None:
    task = repo.task()
    for kind in ("checkpoint", "handover", "resume"):
        argv = {
            "checkpoint": ["checkpoint", "x"],
            "handover": ["handover", "-o", "o", "-s", "s", "-n", "n"],
            "resume": ["resume"],
        }[kind]
        assert repo.run(*argv).code == 0
        assert views_key(repo) == current_key(repo), kind  # no full read needed next time
    assert json.loads(repo.run("check", "--json").out)["task"] == task


def test_views_read_after_a_write_slipped_in_are_kept_under_the_state_read(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refs are read first, every note next: a write landing between the two makes
    views of the newer state, which are kept under that state's key, never under the
    older one (where a later read of that older state would find them)."""
    task = repo.task()
    text = foreign(repo, 1)
    assert open_jobs(str(repo.path), repo.environ).reader.drop_cache()
    before = repo.notes_ref()
    jobs = open_jobs(str(repo.path), repo.environ)
    read_notes = jobs.reader.read_notes

    def after_a_foreign_write(**options: Any) -> object:
        repo.git("notes", "--ref=majordomus", "append", "-m", text, "HEAD")
        return read_notes(**options)

    monkeypatch.setattr(jobs.reader, "read_notes", after_a_foreign_write)
    Views(jobs.reader, jobs.history)
    after = repo.notes_ref()
    assert before != after
    assert views_key(repo) == state_key({"refs/notes/majordomus": after or ""})
    assert views_key(repo) == current_key(repo)
    cached = json.loads(repo.run("history", "--task", task, "--json").out)
    assert open_jobs(str(repo.path), repo.environ).reader.drop_cache()
    assert json.loads(repo.run("history", "--task", task, "--json").out) == cached
    assert cached["records"][0]["id"] == "c-0000000000000001"


def test_views_are_not_carried_over_a_write_someone_else_slipped_in(repo: Repo) -> None:
    task = repo.task()
    repo.run("checkpoint", "mine")
    jobs = open_jobs(str(repo.path), repo.environ)
    views = Views(jobs.reader, jobs.history)  # read before the other writer
    foreign = open_jobs(str(repo.path), repo.environ)
    record = new_record(
        "checkpoint",
        record_id="c-0000000000000f0f",
        task=task,
        head=repo.head(),
        at=repo.clock.now,
        author=AUTHOR,
        session=None,
        fields={"body": "theirs"},
    )
    writer_of(foreign).append(repo.head(), [record], "another writer", author=AUTHOR)
    before = views_key(repo)
    inputs = Inputs(str(repo.path), repo.environ, now=repo.clock)
    _write(inputs, jobs, writer_of(jobs), "checkpoint", task, {"body": "ours"}, None, views)
    assert views_key(repo) == before  # built on another state: left for a rebuild
    history = json.loads(repo.run("history", "--task", task, "--json").out)
    assert [r.get("body") for r in history["records"]][:3] == ["ours", "theirs", "mine"]


def head_of(path: Path) -> tuple[Any, ...]:
    """A cache file's version and payload; of a framed one (the read cache, the document
    cache), its first frame."""
    data = path.read_bytes()
    value = marshal.loads(data[8:] if path.name in (READ_FILE_NAME, RECORDS_FILE_NAME) else data)
    assert isinstance(value, tuple)
    return tuple(value)


def framed(*values: Any) -> bytes:
    """Values as the read cache frames them: each one's length, then its marshalled bytes."""
    chunks = [marshal.dumps(value) for value in values]
    return b"".join(struct.pack("<Q", len(chunk)) + chunk for chunk in chunks)


def test_every_cache_file_is_versioned_by_the_release_and_its_format(repo: Repo) -> None:
    task = repo.task()
    for i in range(30):
        repo.commit(f"c{i}")
        repo.run("checkpoint", f"checkpoint {i}")
    repo.run("handover", "-o", "o", "-s", "s", "-n", "n")
    mine = repo.run("history", "--task", task, "--all", "--json").out
    every = repo.run("history", "--json").out
    repo.run("doctor")  # reads every note (the histories read the views the writes kept)
    git_dir = repo.path / ".git"
    versions = {name: head_of(git_dir / name)[0] for name in CACHES}
    assert all(str(v).startswith(f"majordomus {__version__} ") for v in versions.values())
    assert len(set(versions.values())) == len(CACHES), "each file names its own format"
    # Files another release wrote, whose entries would change every answer if read.
    another = {name: str(v).replace(__version__, "0.0.0-another") for name, v in versions.items()}
    loaded = ReadCache(git_dir / READ_FILE_NAME).load_frames()
    assert loaded is not None
    (trees, odd), frames = loaded
    poisoned = {blob: "poisoned" for frame in frames for blob in frame}
    assert poisoned
    (git_dir / READ_FILE_NAME).write_bytes(framed((another[READ_FILE_NAME], trees, odd), poisoned))
    _, key, meta, _, _ = marshal.loads((git_dir / VIEWS_FILE_NAME).read_bytes())
    (git_dir / VIEWS_FILE_NAME).write_bytes(
        marshal.dumps((another[VIEWS_FILE_NAME], key, meta, {}, {}))
    )
    data = marshal.loads((git_dir / GRAPH_FILE_NAME).read_bytes())
    (git_dir / GRAPH_FILE_NAME).write_bytes(marshal.dumps((another[GRAPH_FILE_NAME], *data[1:])))
    raw = (git_dir / RECORDS_FILE_NAME).read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    _, at = marshal.loads(raw[8 : 8 + length])
    (git_dir / RECORDS_FILE_NAME).write_bytes(
        framed((another[RECORDS_FILE_NAME], at)) + raw[8 + length :]
    )
    head = repo.commit("a change", {"changed.txt": "x\n"})
    wrong = {head: "0" * 40}
    (git_dir / PATCH_FILE_NAME).write_bytes(marshal.dumps((another[PATCH_FILE_NAME], wrong)))
    assert repo.run("history", "HEAD~1", "--task", task, "--all", "--json").out == mine
    assert repo.run("history", "HEAD~1", "--json").out == every
    assert head_of(git_dir / READ_FILE_NAME)[0] == versions[READ_FILE_NAME]
    record = json.loads(repo.run("checkpoint", "after the poison", "--json").out)["record"]
    diff = repo.git("diff-tree", "-p", "--root", head)
    assert record["patch"] == repo.git("patch-id", "--stable", input=diff).split()[0]


def test_records_of_one_second_on_one_commit_are_ordered_without_the_graph(repo: Repo) -> None:
    task = repo.task()
    repo.commit("work")
    for i in range(3):  # the clock stands still: all three in one second
        assert repo.run("checkpoint", f"same second {i}").code == 0
    index = views_of(str(repo.path), repo.environ).index(task)
    last = index.last("checkpoint", task)
    assert last is not None and index.locate(last).record.text("body") == "same second 2"
    mine = index.newest_first(index.of_kind("checkpoint", task))
    listed = json.loads(repo.run("history", "--task", task, "--json").out)["records"]
    assert [index.locate(item).record.id for item in mine] == [
        r["id"] for r in listed if r["kind"] == "checkpoint"
    ]
    assert index._order is None  # no walk of the history was needed


def test_a_fetch_carries_the_views_over_and_answers_as_a_fresh_read(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    clock = Clock()
    _remote, alice, bob, task = shared(tmp_path, environ, clock)
    assert bob.run("checkpoint", "--task", task, "bob 1").code == 0
    assert bob.run("history", "--json").code == 0  # the views of this state are cached
    clock.advance(60)
    assert alice.run("checkpoint", "alice 2").code == 0
    assert alice.run("push").code == 0
    assert bob.run("fetch").code == 0  # moves the remote-tracking ref and the local one
    views = views_of(str(bob.path), bob.environ)
    assert not views.full_read  # carried over from the notes the fetch changed
    cached = json.loads(bob.run("history", "--task", task, "--json").out)
    bob.drop_caches()
    assert json.loads(bob.run("history", "--task", task, "--json").out) == cached
    assert [r.get("body") for r in cached["records"]][:3] == ["alice 2", "bob 1", "alice 1"]


def test_the_document_cache_gives_back_the_note_a_parse_gives(tmp_path: Path) -> None:
    """Every note of the corpus (records, invalid records, foreign tables, plain keys,
    dates inside hand-written keys) comes back from the document cache file, written and
    loaded again, exactly as parsing its bytes reads it; a note that is not TOML as a
    whole is not kept (it is salvaged by every read)."""
    from tests.support.corpus import corpus

    path = tmp_path / RECORDS_FILE_NAME
    writing = DocumentCache(path)
    parsed: dict[str, Note] = {}
    extra = (
        b'[[checkpoint]]\nv = 1\nid = "c-1"\ntask = "t-1"\nhead = "' + b"a" * 40 + b'"\n'
        b'at = 2026-11-30T10:00:00Z\nauthor = "x"\nbody = "b"\n'
        b"when = [2026-01-01, 10:00:00, {deep = 2026-11-30T10:00:00+01:00}]\n"
        b"nan = nan\n"
    )
    blobs = [*(note.data for note in corpus()), extra]
    for i, data in enumerate(blobs):
        try:
            note = parse_note(data)
        except NoteError:
            continue  # not read at all (too large, too deep): nothing to keep
        writing.put(str(i), note)
        parsed[str(i)] = note
    writing.save(parsed)
    reading = DocumentCache(path)
    kept = 0
    for blob, note in parsed.items():
        again = reading.get(blob)
        if note.salvaged or note.unreadable:
            assert again is None
            continue
        kept += 1
        assert again is not None
        assert dump_note(again) == dump_note(note)
        assert again.records == note.records
        assert [dict(r.table) for r in again.records] == [dict(r.table) for r in note.records] or (
            "nan" in dump_note(note)
        )
        assert [(e.kind, e.record is None) for e in again.entries] == [
            (e.kind, e.record is None) for e in note.entries
        ]
        assert again.invalid == note.invalid and dict(again.other) == dict(note.other)
        # Every value with its type and spelling (a date's zone, a list not a tuple, NaN),
        # and the same again from a second look at the loaded file.
        assert _shape(again) == _shape(note) == _shape(reading.get(blob))
    assert kept >= len(blobs) // 2


def _shape(note: Note | None) -> object:
    assert note is not None
    return [
        (entry.kind, [(key, repr(value)) for key, value in entry.table.items()], entry.record)
        for entry in note.entries
    ], [(key, repr(value)) for key, value in note.other.items()]


def test_a_carried_over_change_touches_only_its_tasks_and_equals_a_fresh_read(
    repo: Repo,
) -> None:
    """A foreign record repacks only the views of the tasks it concerns; a resume that
    resolves another task's handover, or a copy of a record on another commit, is not
    carried over but read again; every answer equals a fresh read's."""
    first = repo.task("first")
    repo.commit("one")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    handover = json.loads(repo.run("resume", "--peek", "--json").out)["handover"]
    second = repo.task("second")
    repo.commit("two")
    assert repo.run("checkpoint", "on the second").code == 0
    git_dir = repo.path / ".git"

    def packed() -> dict[str, str]:
        """Each part of the views (a task's view, a shard of the ledger) -> the file holding it."""
        return ViewCache(git_dir / VIEWS_FILE_NAME).files

    def note(kind: str, record_id: str, task: str, **fields: object) -> str:
        record = new_record(
            kind,
            record_id=record_id,
            task=task,
            head=repo.head(),
            at=repo.clock.now,
            author=AUTHOR,
            session=None,
            fields=fields,
        )
        return append_note(None, [record]).decode()

    def same_as_fresh() -> None:
        cached = [answers(repo)] + [
            json.loads(repo.run("history", "--task", t, "--all", "--json").out)
            for t in (first, second)
        ]
        repo.drop_caches()
        fresh = [answers(repo)] + [
            json.loads(repo.run("history", "--task", t, "--all", "--json").out)
            for t in (first, second)
        ]
        assert cached == fresh

    before = packed()
    repo.git(
        "notes",
        "--ref=majordomus",
        "append",
        "-m",
        note("checkpoint", "c-" + "1" * 16, second, body="foreign"),
        "HEAD",  # its note holds the second task's records only
    )
    views = views_of(str(repo.path), repo.environ)
    assert not views.full_read  # carried over
    after = packed()
    mine, theirs = f"task {first}", f"task {second}"
    assert after[mine] == before[mine] and after[theirs] != before[theirs]
    rewritten = {
        name for name in after.keys() | before.keys() if after.get(name) != before.get(name)
    }
    assert len(rewritten) == 2, rewritten  # the second task's view and one shard of the ledger
    same_as_fresh()
    # A resume in the second task that resolves the first task's handover.
    fields = {"handover": handover["id"], "label": "current", "supersedes": []}
    repo.git(
        "notes",
        "--ref=majordomus",
        "append",
        "-m",
        note("resume", "c-" + "2" * 16, second, **fields),
        "HEAD",
    )
    assert views_of(str(repo.path), repo.environ).full_read  # read again
    same_as_fresh()
    # A copy of the first task's handover on another commit.
    copy = repo.git("notes", "--ref=majordomus", "show", handover["commit"])
    repo.git("notes", "--ref=majordomus", "append", "-m", copy, "HEAD~2")
    assert views_of(str(repo.path), repo.environ).full_read
    same_as_fresh()


def git_started(repo: Repo, trace: Path, *argv: str) -> list[str]:
    """The git subcommands a majordomus command started, from a GIT_TRACE2_EVENT log."""
    result = repo.run(*argv, environ={"GIT_TRACE2_EVENT": str(trace)})
    assert result.code == 0, result.err
    names = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "start":
            names.append(next(a for a in event["argv"][1:] if not a.startswith("-")))
    trace.unlink()
    return names


def test_a_commit_s_patch_id_and_the_identity_are_asked_of_git_once(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    """The first record on a commit computes its patch id (diff-tree | patch-id), the next
    ones read it back; each write asks git for the identity once; a push asks for the
    remotes once. On the clone of a remote, after a merge and a branch switch."""
    clock = Clock()
    remote, alice = seeded(tmp_path, environ, clock)
    task = alice.task("shared")
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    assert bob.run("task", "use", task).code == 0
    bob.git("switch", "-q", "-c", "side")
    bob.commit("side", {"side.txt": "s\n"})
    bob.git("switch", "-q", "main")
    bob.commit("main", {"main.txt": "m\n"})
    bob.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    bob.git("switch", "-q", "side")  # a commit with a change of its own
    trace = tmp_path / "trace.json"
    first = git_started(bob, trace, "checkpoint", "first on side")
    assert first.count("patch-id") == 1 and first.count("var") == 1, first
    again = git_started(bob, trace, "checkpoint", "second on side")
    assert "patch-id" not in again and "diff-tree" not in again and again.count("var") == 1
    record = json.loads(bob.run("show", "--json").out)["records"][-1]
    diff = bob.git("diff-tree", "-p", "--root", "HEAD")
    assert record["patch"] == bob.git("patch-id", "--stable", input=diff).split()[0]
    pushed = git_started(bob, trace, "push")
    assert pushed.count("remote") == 1, pushed


def test_notes_a_cold_read_parsed_are_kept_for_the_next_read(repo: Repo) -> None:
    """A read without its read cache parses every note; showing many of them whole then
    keeps them in the document cache, so the next read decodes instead of parsing, and
    answers the same. A note edited by hand with plain git is kept as it reads."""
    repo.task()
    for i in range(30):  # more notes than a preload bothers with below its threshold
        repo.commit(f"c{i}", {"f.txt": f"{i}\n"})
        assert repo.run("checkpoint", f"checkpoint {i}").code == 0
    repo.git("notes", "--ref=majordomus", "append", "-m", "# looked at this one", "HEAD~3")
    repo.drop_caches()
    first = repo.run("history", "--json").out
    blobs = [line.split()[0] for line in repo.git("notes", "--ref=majordomus", "list").splitlines()]
    documents = DocumentCache(repo.path / ".git" / RECORDS_FILE_NAME)
    assert len(blobs) == 31 and all(documents.has(blob) for blob in blobs)
    assert repo.run("history", "--json").out == first


def test_a_write_rewrites_only_its_part_and_old_parts_go_once_nobody_can_read_them(
    tmp_path: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Views are parts named by their content: a checkpoint writes its task's view and one
    shard of the ledger, never the others. A part the views stop naming is retired, and
    deleted by a write RETIRE_S later: a reader that loaded the views before other writes
    still finds its parts, even an old one; a file no views file ever named goes once it
    is RETIRE_S old; a named part never goes. On a clone behind a bare remote, after a
    merge and a branch switch; every answer equals a fresh read's."""
    clock = Clock()
    remote, alice = seeded(tmp_path, environ, clock)
    first = alice.task("first")
    assert alice.run("checkpoint", "one").code == 0
    second = alice.task("second")
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    bob.git("switch", "-q", "-c", "side")
    bob.commit("side", {"side.txt": "s\n"})
    bob.git("switch", "-q", "main")
    bob.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    git_dir = bob.path / ".git"
    views = git_dir / VIEWS_FILE_NAME
    folder = git_dir / VIEWS_FOLDER_NAME
    assert bob.run("check", "--task", first, "--json").code == 0  # its task's views only
    assert bob.run("history", "--json").code == 0  # the views of every task
    stale = ViewCache(views)  # a reader that loaded the views before the writes below
    old = time.time() - ViewCache.RETIRE_S - 60
    for path in folder.iterdir():  # parts written long ago, still named
        os.utime(path, (old, old))
    before = dict(stale.files)
    for i in range(12):
        assert bob.run("checkpoint", f"on the second {i}", "--task", second).code == 0
        after = ViewCache(views).files
        rewritten = {n for n in after.keys() | before.keys() if after.get(n) != before.get(n)}
        assert f"task {second}" in rewritten and len(rewritten) <= 2, rewritten
        assert after[f"task {first}"] == before[f"task {first}"]
        before = dict(after)
    named = set(ViewCache(views).files.values())
    retired = set(ViewCache(views).retired)
    assert retired and not retired & named
    assert {p.name for p in folder.iterdir()} == named | retired
    assert stale.part(f"task {second}") is not None  # old, but retired lately: still there
    never = folder / ("0" * 32)  # what a writer that lost a race, or died, left
    never.write_bytes(b"never named")
    os.utime(never, (old, old))
    monkeypatch.setattr(ViewCache, "RETIRE_S", 0.0)  # as if every retired part were old
    assert bob.run("checkpoint", "after a while", "--task", second).code == 0
    now = ViewCache(views)
    assert {p.name for p in folder.iterdir()} == set(now.files.values()) | set(now.retired)
    assert not (retired | {never.name}) & {p.name for p in folder.iterdir()}
    cached = [bob.run("history", "--task", t, "--all", "--json").out for t in (first, second)]
    bob.drop_caches()
    assert [bob.run("history", "--task", t, "--all", "--json").out for t in (first, second)] == (
        cached
    )


def test_a_resume_git_removes_or_adds_reopens_or_resolves_its_handover(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Carried over, not rebuilt: a resume whose note git removes opens its handover again;
    one git appends resolves it; answers equal a fresh read's at every step."""
    task = repo.task()
    repo.commit("work")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    handover = json.loads(repo.run("resume", "--peek", "--json").out)["handover"]
    repo.commit("next")
    assert repo.run("resume").code == 0
    resume = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    carried = count_carry_overs(monkeypatch)

    def peek() -> tuple[int, object]:
        result = repo.run("resume", "--peek", "--json", "--task", task)
        cached = (result.code, json.loads(result.out).get("handover"))
        history = repo.run("history", "--task", task, "--json").out
        repo.drop_caches()
        again = repo.run("resume", "--peek", "--json", "--task", task)
        assert (again.code, json.loads(again.out).get("handover")) == cached
        assert repo.run("history", "--task", task, "--json").out == history
        # A read of one task in a clone with no views builds only its own: the views of
        # every task, which the next change is carried over into, come from a full read.
        assert repo.run("history", "--json").code == 0
        return cached

    assert peek()[1] is None  # resolved
    repo.git("notes", "--ref=majordomus", "remove", "HEAD")
    assert peek()[1] == handover  # open again
    repo.git("notes", "--ref=majordomus", "add", "-m", resume, "HEAD")
    assert peek()[1] is None  # resolved again
    assert len(carried) == 2  # both changes carried over


def test_a_commit_with_a_flat_and_a_fanned_out_note_lists_the_records_of_both(
    repo: Repo,
) -> None:
    """A notes tree damaged by hand can hold two notes for one commit (`abcd…` and
    `ab/cd…`): every read unites them, with its caches and without, as the first notes
    ref read and as a second one."""
    repo.task()
    assert repo.run("checkpoint", "in the flat note").code == 0
    commit = repo.head()
    first = repo.run("history", "--json").out
    notes = repo.pygit
    notes_commit = notes.references["refs/notes/majordomus"].peel(pygit2.Commit)
    flat_record = json.loads(first)["records"][0]
    flat = notes[notes_commit.tree[commit].id]
    assert isinstance(flat, pygit2.Blob)
    data = flat.data.replace(flat_record["id"].encode(), b"c-0000000000000ff0")
    data = data.replace(b"in the flat note", b"in the fanned-out note")
    inner = notes.TreeBuilder()
    inner.insert(commit[2:], notes.create_blob(data), pygit2.enums.FileMode.BLOB)
    root = notes.TreeBuilder(notes_commit.tree)
    root.insert(commit[:2], inner.write(), pygit2.enums.FileMode.TREE)
    damaged = notes.create_commit(
        None, notes_commit.author, notes_commit.author, "damaged", root.write(), [notes_commit.id]
    )
    notes.references.create("refs/notes/majordomus", damaged, force=True)
    bodies = {"in the flat note", "in the fanned-out note"}
    for name in ("refs/notes/majordomus", "refs/notes/remotes/origin/majordomus"):
        if name != "refs/notes/majordomus":
            notes.references.create(name, damaged)
            notes.references.create("refs/notes/majordomus", notes_commit.id, force=True)
        repo.drop_caches()
        for _ in range(2):  # without the caches, then through them
            listed = json.loads(repo.run("history", "--json").out)["records"]
            assert {r.get("body") for r in listed} - {None} == bodies, name
            shown = json.loads(repo.run("show", "--json").out)["records"]
            assert {r.get("body") for r in shown} - {None} == bodies, name


def test_a_write_after_another_writer_writes_the_views_once(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint right after `git notes append` carries the views over to that state
    and then to its own: the views file and the task's view are written once, not twice;
    a refused checkpoint writes nothing; every answer equals a fresh read's."""
    task = repo.task()
    repo.commit("work")
    assert repo.run("checkpoint", "mine").code == 0
    writes: list[str] = []
    write = ViewCache.write

    def counted(cache: ViewCache, *payload: object) -> None:
        writes.append(str(payload[0]))
        write(cache, *payload)

    monkeypatch.setattr(ViewCache, "write", counted)
    carried = count_carry_overs(monkeypatch)
    repo.git("notes", "--ref=majordomus", "append", "-m", foreign(repo, 1), "HEAD~1")
    writes.clear()
    refused = repo.run("checkpoint", "x" * 5000)
    assert (refused.code, writes) == (2, [])
    repo.git("notes", "--ref=majordomus", "append", "-m", foreign(repo, 2), "HEAD~1")
    writes.clear()
    carried.clear()
    assert repo.run("checkpoint", "after theirs").code == 0
    assert len(carried) == 1 and writes == [current_key(repo)]
    cached = repo.run("history", "--task", task, "--all", "--json").out
    repo.drop_caches()
    assert repo.run("history", "--task", task, "--all", "--json").out == cached


def test_a_record_appended_to_a_full_note_rewrites_one_shard_of_the_ledger(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git notes append` onto a note that holds many records changes one record: the views
    carried over rewrite its task's view and the one shard of the ledger its key falls in,
    not the shard of every record the note holds; answers equal a fresh read's."""
    task = repo.task()
    repo.commit("work")
    for i in range(40):
        assert repo.run("checkpoint", f"on one commit {i}").code == 0
    assert repo.run("check", "--json").code == 0
    carried = count_carry_overs(monkeypatch)
    repo.git("notes", "--ref=majordomus", "append", "-m", foreign(repo, 7), "HEAD")
    put = ViewCache.put
    written: list[set[str]] = []

    def counted(
        cache: ViewCache,
        key: str,
        meta: object,
        parts: Iterable[tuple[str, bytes | None]],
        *,
        base: bool,
    ) -> None:
        parts = list(parts)
        written.append({name for name, _ in parts})
        put(cache, key, meta, parts, base=base)

    monkeypatch.setattr(ViewCache, "put", counted)
    assert json.loads(repo.run("check", "--json").out)["task"] == task
    assert len(carried) == 1
    assert written == [{f"task {task}", _shard_of(f"checkpoint c-{7:016x}")}]
    cached = repo.run("history", "--task", task, "--all", "--json").out
    repo.drop_caches()
    assert repo.run("history", "--task", task, "--all", "--json").out == cached


def test_a_command_that_stops_after_asking_the_graph_keeps_its_answer(repo: Repo) -> None:
    """The graph keeps each answer as it gives it: `resume` that stops because two tasks
    have an open handover has walked from HEAD, and the next command does not walk again."""
    for title in ("first", "second"):
        repo.task(title)
        assert repo.run("handover", "-o", "o", "-s", f"s {title}", "-n", "n").code == 0
    (repo.path / ".git" / "majordomus-task").unlink()  # no current task
    (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
    stopped = repo.run("resume", "--peek")
    assert stopped.code == 2 and "2 tasks have an open handover" in stopped.err
    kept = GraphCache(repo.path / ".git" / GRAPH_FILE_NAME)
    assert kept.revs == [repo.head()]
    reach = kept.reach(repo.head())
    assert reach is not None
    assert set(reach[0]) == {repo.head()}  # both handovers are on HEAD


def test_the_document_cache_reads_each_note_alone_and_prunes_only_when_told(
    tmp_path: Path,
) -> None:
    """Each note is read from the open file on its own; a save that does not know the
    current notes keeps every note, one that does drops the others; after a save the new
    notes are read from the file, not held. A reader keeps reading the file it opened
    when another process replaces it, and a file cut short loses the notes past the cut,
    never the command."""

    def note(task: str, n: int) -> tuple[str, Note]:
        data = (
            f'[[checkpoint]]\nv = 1\nid = "c-{n:016x}"\ntask = "{task}"\n'
            f'head = "{"a" * 40}"\nat = 2026-11-30T10:00:{n:02d}Z\nauthor = "x"\nbody = "b{n}"\n'
        )
        return f"{n:040x}", parse_note(data.encode())

    path = tmp_path / RECORDS_FILE_NAME
    writing = DocumentCache(path)
    notes = dict(note("t-aaaaaaaaaaaa" if n % 2 else "t-bbbbbbbbbbbb", n) for n in range(10))
    for blob, parsed in notes.items():
        writing.put(blob, parsed)
    writing.save(None)
    assert writing._put.at == {}  # saved: read from the file from now on
    assert all(writing.get(blob) == parsed for blob, parsed in notes.items())
    reading = DocumentCache(path)
    first = next(iter(notes))
    assert reading.get(first) == notes[first]
    extra_blob, extra = note("t-cccccccccccc", 11)
    reading.put(extra_blob, extra)
    reading.save(None)  # the notes shown are not all there are: nothing dropped
    assert kept(DocumentCache(path)) == {*notes, extra_blob}
    older = DocumentCache(path)  # opened before the next save replaces the file
    pruning = DocumentCache(path)
    pruning.put(extra_blob, extra)  # held already: nothing to save
    pruning.save([extra_blob, first])
    assert kept(DocumentCache(path)) == {*notes, extra_blob}
    pruning.put(*note("t-cccccccccccc", 12))
    pruning.save([extra_blob, first])  # the current notes: every other note dropped
    again = DocumentCache(path)
    assert kept(again) == {extra_blob, first}
    assert again.get(first) == notes[first] and again.get(extra_blob) == extra
    assert kept(older) == {*notes, extra_blob}  # the file it opened, whole
    assert all(older.get(blob) == parsed for blob, parsed in notes.items())
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size - 10)
    cut = DocumentCache(path)
    assert [cut.get(blob) is None for blob in (first, extra_blob)] == [False, True]


def test_notes_put_wait_in_an_unnamed_file_or_else_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notes a command puts wait in an unnamed file beside the cache; where no file
    can be made (a read-only git folder, no temporary folder), in memory: either way
    every note put reads back as put, through a save that cannot write the cache and
    more notes put after it, and the cache file is written from them."""
    import io
    import tempfile

    from majordomus.noteforms import NoteForms

    forms = [marshal.dumps((n, "x" * n)) for n in range(0, 3000, 700)]
    absent = tmp_path / "absent"
    monkeypatch.setattr(tempfile, "tempdir", str(absent))
    for folder, in_memory in ((tmp_path, False), (absent, True)):
        put = NoteForms.unnamed(folder)
        assert isinstance(put.file, io.BytesIO) is in_memory
        for n, form in enumerate(forms):
            put.append(f"{n:040x}", form)
        assert [put.data(f"{n:040x}") for n in range(len(forms))] == forms
        assert put.data("f" * 40) is None
        put.close()

    def note(n: int) -> tuple[str, Note]:
        data = (
            f'[[checkpoint]]\nv = 1\nid = "c-{n:016x}"\ntask = "t-aaaaaaaaaaaa"\n'
            f'head = "{"a" * 40}"\nat = 2026-11-30T10:00:0{n}Z\nauthor = "x"\nbody = "b"\n'
        )
        return f"{n:040x}", parse_note(data.encode())

    cache = DocumentCache(absent / RECORDS_FILE_NAME)  # nowhere to write, even the cache
    notes = dict(note(n) for n in range(4))
    for blob, parsed in list(notes.items())[:2]:
        cache.put(blob, parsed)
    cache.save(None)  # cannot be written: the notes stay where they wait
    for blob, parsed in list(notes.items())[2:]:
        cache.put(blob, parsed)
    assert {blob: cache.get(blob) for blob in notes} == notes
    assert dict(cache.get_many(notes)) == notes
    writable = DocumentCache(tmp_path / RECORDS_FILE_NAME)
    for blob, parsed in notes.items():
        writable.put(blob, parsed)
    writable.save(None)
    assert dict(DocumentCache(tmp_path / RECORDS_FILE_NAME).get_many(notes)) == notes


def kept(cache: DocumentCache) -> set[str]:
    """The blobs a document cache holds a note for, of those its tests put."""
    return {blob for blob in (f"{n:040x}" for n in range(64)) if cache.has(blob)}


def test_views_parts_are_named_by_the_blake2b_of_their_content() -> None:
    import hashlib

    from majordomus.viewparts import _content_name

    for data in (b"", b"a view", bytes(range(256)) * 64):
        assert _content_name(data) == hashlib.blake2b(data, digest_size=16).hexdigest()


def _checkpoint(n: int, body: str) -> tuple[str, Note]:
    """A note blob's id (its number, in hex) and the note: one checkpoint saying `body`."""
    data = (
        f'[[checkpoint]]\nv = 1\nid = "c-{n:016x}"\ntask = "t-aaaaaaaaaaaa"\n'
        f'head = "{"a" * 40}"\nat = 2026-11-30T10:00:{n % 60:02d}Z\nauthor = "x"\n'
        f'body = "{body}"\n'
    )
    return f"{n:040x}", parse_note(data.encode())


def _counted_preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the length of each `os.pread` or `os.preadv` (each read of a cache
    file)."""
    import os

    reads: list[int] = []
    pread, preadv = os.pread, os.preadv

    def counted(fd: int, n: int, at: int) -> bytes:
        reads.append(n)
        return pread(fd, n, at)

    def counted_into(fd: int, buffers: list[memoryview], at: int) -> int:
        reads.append(sum(len(b) for b in buffers))
        return preadv(fd, buffers, at)

    monkeypatch.setattr(os, "pread", counted)
    monkeypatch.setattr(os, "preadv", counted_into)
    return reads


def test_the_document_cache_reads_many_notes_in_runs_of_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Notes asked for together are read in runs of the file (notes close together in one
    read, notes far apart in another), the notes put and not yet saved from where they
    wait, and each note once and as `get` reads it; a note it lacks, or one past the end
    of a file cut short, is not given (the caller reads its blob)."""

    from majordomus import noteforms

    path = tmp_path / RECORDS_FILE_NAME
    writing = DocumentCache(path)
    # Small notes, then one of 100 KB: the notes after it are a run of their own.
    notes = dict(_checkpoint(n, "x" * (100_000 if n == 5 else 10)) for n in range(10))
    for blob, parsed in notes.items():
        writing.put(blob, parsed)
    writing.save(None)
    reading = DocumentCache(path)
    waiting_blob, waiting = _checkpoint(20, "put, not saved")
    reading.put(waiting_blob, waiting)
    reads = _counted_preads(monkeypatch)
    asked = [*reversed(notes), "f" * 40, waiting_blob, *notes]  # each twice, one unknown
    pairs = list(reading.get_many(asked))
    got = dict(pairs)
    assert len(pairs) == len(got) and got == {**notes, waiting_blob: waiting}
    assert all(reading.get(blob) == parsed for blob, parsed in got.items())
    monkeypatch.setattr(noteforms, "_RUN_GAP", 1 << 16)
    reads.clear()
    dict(reading.get_many([b for b in notes if b != f"{5:040x}"]))
    assert len(reads) == 2  # the notes before the large one, and those after it
    # Each run read into the one buffer: every note's texts as it was, run after run.
    texts = dict(reading.texts_many(asked))
    assert texts == {
        blob: tuple(record_text(r) for r in parsed.records)
        for blob, parsed in {**notes, waiting_blob: waiting}.items()
    }
    assert len(reads) == 4
    with path.open("r+b") as file:
        file.truncate(path.stat().st_size - 5)
    cut = dict(DocumentCache(path).get_many(notes))
    assert cut == {b: n for b, n in notes.items() if b != f"{9:040x}"}  # the last one cut


def test_the_document_cache_is_saved_in_runs_of_the_notes_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save copies the notes kept from the file read and from those put, in runs of notes
    next to each other (a note dropped ends a run), each file mapped once: no read per
    run, let alone per note; the file saved holds exactly the notes kept, as they were. A
    save whose file was cut short under it writes nothing: the file stays as it is, and no
    temporary file is left."""
    from majordomus import noteforms

    path = tmp_path / RECORDS_FILE_NAME
    first = DocumentCache(path)
    notes = dict(_checkpoint(n, f"note {n}") for n in range(40))
    for blob, parsed in list(notes.items())[:30]:
        first.put(blob, parsed)
    first.save(None)
    second = DocumentCache(path)
    for blob, parsed in list(notes.items())[30:]:
        second.put(blob, parsed)
    reads = _counted_preads(monkeypatch)
    copied: list[list[int]] = []
    copy = noteforms.NoteForms.copied

    def counted(forms: noteforms.NoteForms, runs: Sequence[int]) -> Iterator[bytes]:
        copied.append(list(runs))
        return copy(forms, runs)

    monkeypatch.setattr(noteforms.NoteForms, "copied", counted)
    dropped = {f"{n:040x}" for n in (10, 35)}
    second.save([blob for blob in notes if blob not in dropped])
    assert not reads
    # The file read: 0-9, 11-29; the notes put: 30-34, 36-39 (none named first).
    assert [len(runs) // 2 for runs in copied] == [2, 0, 2]
    monkeypatch.undo()
    saved = DocumentCache(path)
    assert kept(saved) == set(notes) - dropped
    held = dict(saved.get_many(notes))
    assert held == {blob: parsed for blob, parsed in notes.items() if blob not in dropped}
    with path.open("r+b") as file:
        file.truncate(path.stat().st_size - 10)  # the last note kept, cut
    cut = path.read_bytes()
    saved.put(*_checkpoint(50, "put after the cut"))
    saved.save(None)
    assert path.read_bytes() == cut
    assert sorted(p.name for p in tmp_path.iterdir()) == [RECORDS_FILE_NAME]


def test_the_document_cache_lies_in_the_order_a_history_reads_it(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notes a command puts are saved newest first (the order `history` reads them), by
    a first read and by a read that finds the document cache gone: with runs of adjacent
    notes only, a part of the history is one or two reads of the file, not one per note;
    on a history with a merge and another branch checked out, the answer the same."""
    from majordomus import noteforms, render

    repo.task()
    for n in range(24):
        repo.commit(f"work {n}")
        repo.clock.advance(60)
        assert repo.run("checkpoint", f"step {n}").code == 0
    repo.git("checkout", "-q", "-b", "side", "HEAD~8")
    for n in range(6):
        repo.commit(f"side {n}")
        repo.clock.advance(60)
        assert repo.run("checkpoint", f"side {n}").code == 0
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    repo.commit("after the merge")
    assert repo.run("checkpoint", "after the merge").code == 0
    repo.git("checkout", "-q", "-b", "fix", "HEAD~1")
    repo.commit("on fix")
    whole = repo.run("history", "--json").out
    records = json.loads(whole)["records"]
    assert len(records) == 31 and json.loads(whole)["hidden"] == 1
    common = repo.path / ".git"
    for drop in ("every cache", "the document cache"):
        if drop == "every cache":
            repo.drop_caches()
        else:
            (common / RECORDS_FILE_NAME).unlink()
        assert repo.run("history", "--json").out == whole  # saved here
        at = DocumentCache(common / RECORDS_FILE_NAME)._file.at
        blobs = repo.git("notes", "--ref=majordomus", "list").split()
        blob_of = dict(zip(blobs[1::2], blobs[::2], strict=True))
        offsets = [at[blob_of[r["commit"]]] >> 32 for r in records]
        assert offsets == sorted(offsets), drop
        monkeypatch.setattr(noteforms, "_RUN_GAP", 1)
        monkeypatch.setattr(render, "HISTORY_PART", 7)
        reads = _counted_preads(monkeypatch)
        assert repo.run("history", "--json").out == whole
        assert 5 <= len(reads) <= 6, drop  # five parts, one read each (one split by its size)
        monkeypatch.undo()


def test_after_a_save_the_document_cache_reads_the_file_it_wrote_even_once_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save keeps the file it wrote open, with the head it wrote, for the rest of the
    command (its head is not read back: at 1,000,000 commits, 15 MiB made again): what it
    then reads is what it saved, even after another process replaced the file with one
    whose notes lie elsewhere."""
    path = tmp_path / RECORDS_FILE_NAME
    notes = dict(_checkpoint(n, f"note {n}" * (n + 1)) for n in range(12))
    mine = DocumentCache(path)
    for blob, parsed in notes.items():
        mine.put(blob, parsed)
    opened: list[Path] = []
    with monkeypatch.context() as watching:
        watching.setattr(DocumentCache, "_open", lambda self: opened.append(self.path))
        mine.save(None, first=list(notes)[::-1])  # newest first: the last put, first
    assert opened == []
    path.unlink()
    theirs = DocumentCache(path)
    for blob, parsed in list(notes.items())[3:]:  # another order, other offsets
        theirs.put(blob, parsed)
    theirs.save(None)
    assert kept(DocumentCache(path)) == set(list(notes)[3:])
    assert dict(mine.get_many(notes)) == notes
    assert dict(mine.texts_many(notes)) == {
        blob: tuple(record_text(r) for r in parsed.records) for blob, parsed in notes.items()
    }
    at = mine._file.at
    assert sorted(notes, key=lambda blob: at[blob]) == list(notes)[::-1]


def test_a_save_keeps_each_note_put_once_however_the_order_names_them(tmp_path: Path) -> None:
    """The order a save is given can name a note twice (one blob on two commits, as a
    rewrite copies it) and leave another out: every note put is kept, once, the named
    ones first."""
    path = tmp_path / RECORDS_FILE_NAME
    notes = dict(_checkpoint(n, f"note {n}") for n in range(4))
    cache = DocumentCache(path)
    for blob, parsed in notes.items():
        cache.put(blob, parsed)
    blobs = list(notes)
    cache.save(None, first=[blobs[2], blobs[0], blobs[2], blobs[1], "f" * 40])  # 3 unnamed
    saved = DocumentCache(path)
    assert dict(saved.get_many(notes)) == notes
    at = saved._file.at
    by_place = sorted(at, key=lambda blob: at[blob])
    assert by_place == [blobs[2], blobs[0], blobs[1], blobs[3]]
    lengths = sum(where & 0xFFFFFFFF for where in at.values())
    assert path.stat().st_size == len(framed((DocumentCache.version(), at))) + lengths


def test_texts_that_cannot_be_read_are_not_given_and_another_encoder_s_are_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note whose texts are not what this code wrote (garbage where they lie) gives no
    texts, its record then encoded from the note, which still reads; a file written by
    code that makes another text of the sample record is another version: none of its
    notes or texts is read."""
    from majordomus import documentcache

    path = tmp_path / RECORDS_FILE_NAME
    notes = dict(_checkpoint(n, f"note {n}") for n in range(3))
    writing = DocumentCache(path)
    for blob, parsed in notes.items():
        writing.put(blob, parsed)
    writing.save(None)
    spoilt = f"{1:040x}"
    where = DocumentCache(path)._file.at[spoilt] >> 32
    head = len(framed((DocumentCache.version(), DocumentCache(path)._file.at)))
    data = bytearray(path.read_bytes())
    data[head + where + 8] = 0xFF  # the first byte of its marshalled texts: no type marshal knows
    path.write_bytes(bytes(data))
    reading = DocumentCache(path)
    texts = dict(reading.texts_many(notes))
    assert set(texts) == set(notes) - {spoilt}
    assert dict(reading.get_many(notes)) == notes  # the note itself still reads
    monkeypatch.setattr(documentcache, "_sample_text", lambda: "00000000")
    other = DocumentCache(path)
    assert dict(other.texts_many(notes)) == {} and dict(other.get_many(notes)) == {}


def test_history_of_every_task_is_read_from_the_views_and_answers_as_a_fresh_read(
    tmp_path: Path, environ: dict[str, str], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history of every task reads the per-task views the writes kept, not every note's
    summaries: in a second clone behind a bare remote (records on its own ref and the
    remote-tracking one), with two tasks, a merge, a note a person appended to with git,
    another branch checked out, and several records in one second on commits the branch
    does not reach (ordered by commit id, whichever way they were found). With a copy of a
    record (an amend), read from a REV other than HEAD, every note is read instead. Every
    answer equals the one after `doctor --drop-cache`."""
    from majordomus import readcache

    remote, alice = seeded(tmp_path, environ, clock)
    first = alice.task("first")
    for n in range(4):
        alice.commit(f"a{n}")
        assert alice.run("checkpoint", f"alice {n}").code == 0  # one second: clock unmoved
    assert alice.run("push").code == 0
    alice.git("push", "-q", "origin", "main")
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    second = bob.task("second")
    bob.git("checkout", "-q", "-b", "side", "HEAD~2")
    for n in range(3):
        bob.commit(f"s{n}")
        assert bob.run("checkpoint", "--task", second, f"side {n}").code == 0
    bob.git("checkout", "-q", "main")
    bob.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert bob.run("handover", "--task", first, "-o", "o", "-s", "s", "-n", "n").code == 0
    bob.git("notes", "--ref=majordomus", "append", "-m", "a line by hand", "HEAD~1")
    clock.advance(5)
    alice.commit("later")
    assert alice.run("checkpoint", "alice later").code == 0
    assert alice.run("push").code == 0
    bob.git("fetch", "-q", "origin", "+refs/notes/majordomus:refs/notes/remotes/origin/majordomus")
    bob.git("checkout", "-q", "-b", "elsewhere", "HEAD~3")
    commands = [
        ("history", "--json"),
        ("history", "--all", "--json"),
        ("history", "main", "--json"),
    ]

    def fresh(argv: tuple[str, ...]) -> str:
        assert bob.run("doctor", "--drop-cache").code in (0, 1)
        return bob.run(*argv).out

    def warm(argv: tuple[str, ...]) -> tuple[str, int]:
        bob.run(
            "history"
        )  # the views of this state are kept (a read of one task's notes keeps its own)
        summarised: list[object] = []

        def counted(value: object) -> Any:
            summarised.append(value)
            return blob_entry(value)

        blob_entry = readcache.blob_entry
        monkeypatch.setattr(readcache, "blob_entry", counted)
        out = bob.run(*argv).out
        monkeypatch.setattr(readcache, "blob_entry", blob_entry)
        return out, len(summarised)

    for argv in commands:
        out, summarised = warm(argv)
        assert json.loads(out)["records"] and summarised == 0, argv
        assert out == fresh(argv), argv
    listed = json.loads(bob.run("history", "--all", "--json").out)["records"]
    tied = [r["commit"] for r in listed if r["at"] == listed[-1]["at"]]
    assert len(tied) > 3 and len(set(tied)) > 1
    bob.git("config", "notes.rewriteRef", "refs/notes/majordomus")
    assert bob.run("checkpoint", "--task", second, "amended next").code == 0
    bob.git("commit", "-q", "--amend", "--allow-empty", "-m", "amended")  # a copy of it
    for argv in commands:
        out, summarised = warm(argv)
        assert bool(summarised) == (argv[1] == "main"), argv  # from main: every note is read
        assert out == fresh(argv), argv


def test_the_ledger_a_first_read_builds_is_the_one_its_records_make_one_by_one() -> None:
    """`Ledger.built` (every shard at once, as a first read writes them) holds what adding
    each record in turn holds: every key in its shard, and each handover a resume resolves
    (its own and those it supersedes) counted as often as resumes name it; ids with
    spaces, quotes, invisible characters and a forged kind included."""
    rng = random.Random(7)
    odd = ["h-1 2", 'h-"x"', "h-\u200bzw", "h-\n", "c-\u202e"]
    summaries: list[tuple[Any, ...]] = []
    for n in range(3000):
        kind = rng.choice(["task", "checkpoint", "handover", "resume", "forged kind"])
        record = rng.choice(odd) if n % 97 == 0 else f"c-{n:016x}"
        handover = rng.choice([*odd, f"h-{rng.randrange(50)}"]) if kind == "resume" else ""
        supersedes = tuple(f"h-{rng.randrange(50)}" for _ in range(rng.randrange(3)))
        summaries.append((kind, record, "t-1", float(n), 0, handover, supersedes))
    one_by_one = Ledger(lambda name: None)
    for summary in summaries:
        one_by_one.record(summary)
    built = Ledger.built(summaries)
    assert built == one_by_one.changed_parts()
    assert len(built) == 16 and all(isinstance(data, bytes) for data in built.values())
