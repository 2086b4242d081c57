"""The read caches are derived and disposable: answers with them equal answers without."""

from __future__ import annotations

import json
import marshal
import random
from pathlib import Path

from majordomus import __version__
from majordomus.cache import (
    FILE_NAME,
    GRAPH_FILE_NAME,
    RECORDS_FILE_NAME,
    VIEWS_FILE_NAME,
    ViewCache,
)
from majordomus.index import Views
from majordomus.index import _key as index_key
from majordomus.ops import Context, _write
from majordomus.records import append_note, new_record
from majordomus.store import Store
from tests.conftest import AUTHOR, Clock, Repo
from tests.remote_fixtures import clone, seeded

CACHES = (FILE_NAME, GRAPH_FILE_NAME, RECORDS_FILE_NAME, VIEWS_FILE_NAME)


def drop_caches(repo: Repo) -> None:
    for name in CACHES:
        (repo.path / ".git" / name).unlink(missing_ok=True)


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
            drop_caches(repo)
            assert answers(repo) == cached, f"step {step}"
    assert {"hand", "amend", "foreign", "overwrite", "remove"} <= performed


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
    views = Views(Store(str(repo.path), repo.environ))
    assert views.full is None  # carried over from the cached state, no full read
    assert views_key(repo) == current_key(repo)
    cached = answers(repo)
    drop_caches(repo)
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
    repo.task()
    for i in range(30):
        repo.commit(f"c{i}")
        repo.run("checkpoint", f"checkpoint {i}")
    repo.run("handover", "-o", "o", "-s", "s", "-n", "n")
    before = repo.run("history", "--json").out
    git_dir = repo.path / ".git"
    repo.run("history", "--json")  # a second read parses nothing new: it fills the caches
    assert {p.name for p in git_dir.glob("majordomus-*")} == {*CACHES, "majordomus-task"}
    assert repo.git("status", "--porcelain", "--ignored") == ""
    for name in CACHES:
        (git_dir / name).write_bytes(b"\x00garbage")
    assert repo.run("history", "--json").out == before
    for name in CACHES:
        (git_dir / name).write_bytes(b"")
    assert repo.run("history", "--json").out == before
    dropped = repo.run("doctor", "--drop-cache")
    assert (dropped.code, dropped.out) == (
        1,  # unhealthy only because this clone never ran `majordomus init`
        "ok    cache     read caches dropped\n"
        "ok    profile   default (interval 1200s, checkpoint_max 400, handover_max 800)\n"
        "ok    identity  Ada Lovelace <ada@example.com>\n"
        "FAIL  config    notes.rewriteRef does not include refs/notes/majordomus: records will "
        "not follow amended or rebased commits (run majordomus init)\n"
        "ok    locks     no lock files\n"
        "ok    notes     31 notes, 32 records, 0 invalid\n",
    )
    # doctor reads the notes again afterwards, which rebuilds only the notes cache.
    assert sorted(p.name for p in git_dir.glob("majordomus-*")) == [FILE_NAME, "majordomus-task"]


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
    return index_key(Store(str(repo.path), repo.environ).ref_targets())


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


def test_views_are_not_carried_over_a_write_someone_else_slipped_in(repo: Repo) -> None:
    task = repo.task()
    repo.run("checkpoint", "mine")
    store = Store(str(repo.path), repo.environ)
    views = Views(store)  # read before the other writer
    foreign = Store(str(repo.path), repo.environ)
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
    foreign.append(repo.head(), [record], "another writer")
    before = views_key(repo)
    ctx = Context(str(repo.path), repo.environ, now=repo.clock)
    _write(ctx, store, "checkpoint", task, {"body": "ours"}, None, views)
    assert views_key(repo) == before  # built on another state: left for a rebuild
    history = json.loads(repo.run("history", "--task", task, "--json").out)
    assert [r.get("body") for r in history["records"]][:3] == ["ours", "theirs", "mine"]


def test_every_cache_file_is_versioned_by_the_release_and_its_format(repo: Repo) -> None:
    task = repo.task()
    for i in range(30):
        repo.commit(f"c{i}")
        repo.run("checkpoint", f"checkpoint {i}")
    repo.run("handover", "-o", "o", "-s", "s", "-n", "n")
    mine = repo.run("history", "--task", task, "--all", "--json").out
    every = repo.run("history", "--json").out
    git_dir = repo.path / ".git"
    versions = {name: marshal.loads((git_dir / name).read_bytes())[0] for name in CACHES}
    assert all(str(v).startswith(f"majordomus {__version__} ") for v in versions.values())
    assert len(set(versions.values())) == len(CACHES), "each file names its own format"
    # Files another release wrote, whose entries would change every answer if read.
    another = {name: str(v).replace(__version__, "0.0.0-another") for name, v in versions.items()}
    _, trees, blobs = marshal.loads((git_dir / FILE_NAME).read_bytes())
    poisoned = dict.fromkeys(blobs, "poisoned")
    (git_dir / FILE_NAME).write_bytes(marshal.dumps((another[FILE_NAME], trees, poisoned)))
    _, key, meta, _ = marshal.loads((git_dir / VIEWS_FILE_NAME).read_bytes())
    (git_dir / VIEWS_FILE_NAME).write_bytes(
        marshal.dumps((another[VIEWS_FILE_NAME], key, meta, {}))
    )
    for name in (GRAPH_FILE_NAME, RECORDS_FILE_NAME):
        data = marshal.loads((git_dir / name).read_bytes())
        (git_dir / name).write_bytes(marshal.dumps((another[name], *data[1:])))
    assert repo.run("history", "--task", task, "--all", "--json").out == mine
    assert repo.run("history", "--json").out == every
    assert marshal.loads((git_dir / FILE_NAME).read_bytes())[0] == versions[FILE_NAME]


def test_records_of_one_second_on_one_commit_are_ordered_without_the_graph(repo: Repo) -> None:
    task = repo.task()
    repo.commit("work")
    for i in range(3):  # the clock stands still: all three in one second
        assert repo.run("checkpoint", f"same second {i}").code == 0
    index = Views(Store(str(repo.path), repo.environ)).index(task)
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
    remote, alice = seeded(tmp_path, environ, clock)
    task = alice.task("shared")
    assert alice.run("checkpoint", "alice 1").code == 0
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    assert bob.run("checkpoint", "--task", task, "bob 1").code == 0
    assert bob.run("history", "--json").code == 0  # the views of this state are cached
    clock.advance(60)
    assert alice.run("checkpoint", "alice 2").code == 0
    assert alice.run("push").code == 0
    assert bob.run("fetch").code == 0  # moves the remote-tracking ref and the local one
    views = Views(Store(str(bob.path), bob.environ))
    assert views.full is None  # carried over from the notes the fetch changed
    cached = json.loads(bob.run("history", "--task", task, "--json").out)
    drop_caches(bob)
    assert json.loads(bob.run("history", "--task", task, "--json").out) == cached
    assert [r.get("body") for r in cached["records"]][:3] == ["alice 2", "bob 1", "alice 1"]
