"""Merging two notes histories: union by record id, git's tree layout, compare-and-swap."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pygit2

from majordomus import notestree
from majordomus.merge import Merger
from majordomus.notes import dump_note, parse_note
from majordomus.tasks import open_jobs
from majordomus.values import MergeReport
from majordomus.writer import Writer
from tests.support.repo import Repo, writer_of

THEIRS = "refs/notes/theirs"


def checkpoint(repo: Repo, body: str, rev: str | None = None) -> str:
    if rev is not None:
        repo.git("checkout", "-q", rev)
    result = repo.run("checkpoint", body, "--json")
    assert result.code == 0, result.err
    record_id: str = json.loads(result.out)["record"]["id"]
    return record_id


def diverge(repo: Repo) -> str:
    """Move what the local ref has now to THEIRS and reset the local ref to its parent."""
    tip = repo.notes_ref()
    assert tip is not None
    repo.git("update-ref", THEIRS, tip)
    repo.git("update-ref", "refs/notes/majordomus", f"{tip}^")
    return tip


def merge(repo: Repo, theirs: str) -> MergeReport:
    return writer_of(repo.path, repo.environ).merge(theirs, "majordomus: merge test")


def blob_of(repo: Repo, ref: str, commit: str) -> str:
    return repo.git("notes", f"--ref={ref}", "list", commit).strip()


def note_ids(repo: Repo, commit: str) -> list[str]:
    text = repo.git("notes", "--ref=majordomus", "show", commit)
    return [record.id for record in parse_note(text.encode()).records]


def test_a_note_on_one_side_is_taken_as_it_is(repo: Repo) -> None:
    repo.task("queue drops acks")
    base = repo.head()
    other = repo.commit("other")
    theirs_id = checkpoint(repo, "theirs, on the other commit")
    theirs = diverge(repo)
    mine = checkpoint(repo, "mine, on the first commit", base)
    ours_blob = blob_of(repo, "majordomus", base)
    report = merge(repo, theirs)
    # The task's note is on both sides (theirs older): united, and unchanged byte for byte.
    assert (report.outcome, report.records_added, report.notes_united, report.notes_raw) == (
        "merged",
        1,
        1,
        0,
    )
    assert blob_of(repo, "majordomus", base) == ours_blob
    assert blob_of(repo, "majordomus", other) == blob_of(repo, THEIRS, other)
    assert note_ids(repo, other) == [theirs_id]
    assert mine in note_ids(repo, base)
    parents = repo.git("rev-parse", f"{report.notes_commit}^1", f"{report.notes_commit}^2")
    assert parents.split()[1] == theirs


def test_notes_on_both_sides_unite_ours_first_in_canonical_form(repo: Repo) -> None:
    task = repo.task("queue drops acks")
    theirs_ids = [checkpoint(repo, "theirs one"), checkpoint(repo, "theirs two")]
    theirs = repo.notes_ref()
    assert theirs is not None
    repo.git("update-ref", THEIRS, theirs)
    repo.git("update-ref", "refs/notes/majordomus", f"{theirs}~2")
    mine = checkpoint(repo, "mine")
    report = merge(repo, theirs)
    assert (report.outcome, report.records_added, report.notes_united) == ("merged", 2, 1)
    assert note_ids(repo, repo.head()) == [task, mine, *theirs_ids]
    text = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    # Canonical: grouped by kind, in the form majordomus itself writes.
    assert text == dump_note(parse_note(text.encode()))
    assert text.count("[[checkpoint]]") == 3
    assert merge(repo, theirs).outcome == "up-to-date"


def test_a_note_that_is_not_toml_is_never_dropped(repo: Repo) -> None:
    repo.task("queue drops acks")
    theirs_id = checkpoint(repo, "theirs")
    theirs = diverge(repo)
    repo.git("notes", "--ref=majordomus", "add", "-f", "-m", "hand-written, not [toml", "HEAD")
    mine_blob = repo.git("notes", "--ref=majordomus", "list", "HEAD").strip()
    report = merge(repo, theirs)
    assert (report.outcome, report.notes_united, report.notes_raw) == ("merged", 1, 0)
    text = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    # The hand-written text stays byte for byte; their records are appended after it.
    assert text.startswith(repo.git("cat-file", "blob", mine_blob) + "\n[[task]]\n")
    merged = parse_note(text.encode())
    assert theirs_id in [record.id for record in merged.records]
    repo.git("update-ref", "-d", THEIRS)
    shown = json.loads(repo.run("show", "--json").out)
    assert theirs_id in [record["id"] for record in shown["records"]]
    assert shown["invalid"] == 1


def test_a_note_that_cannot_be_read_at_all_is_kept_in_a_table(repo: Repo) -> None:
    repo.task("queue drops acks")
    theirs_id = checkpoint(repo, "theirs")
    theirs = diverge(repo)
    path = repo.path.parent / "deep.toml"
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    repo.git("notes", "--ref=majordomus", "add", "-f", "-F", str(path), "HEAD")
    mine_blob = repo.git("notes", "--ref=majordomus", "list", "HEAD").strip()
    report = merge(repo, theirs)
    assert (report.outcome, report.notes_united, report.notes_raw) == ("merged", 1, 1)
    merged = parse_note(repo.git("notes", "--ref=majordomus", "show", "HEAD").encode())
    # The unreadable text is kept whole in an unknown-kind table; the records stay readable.
    assert [e.table for e in merged.entries if e.kind == "unreadable"] == [
        {"blob": mine_blob, "text": path.read_text()}
    ]
    assert theirs_id in [record.id for record in merged.records]


def test_fast_forward_and_first_fetch(repo: Repo) -> None:
    repo.task("queue drops acks")
    checkpoint(repo, "one")
    tip = diverge(repo)
    report = merge(repo, tip)
    assert (report.outcome, report.notes_commit, report.records_added) == (
        "fast-forward",
        tip,
        1,
    )
    repo.git("update-ref", "-d", "refs/notes/majordomus")
    report = merge(repo, tip)
    assert (report.outcome, report.notes_commit, report.records_added) == ("created", tip, 2)


def _fast_import_notes(repo: Repo, ref: str, parent: str, commits: list[str], tag: str) -> None:
    """Notes written by git itself (fast-import lays the tree out as `git notes` does)."""
    lines = [f"commit {ref}", "committer A <a@example.com> 1796007600 +0000", "data 0"]
    lines.append(f"from {parent}")
    for commit in commits:
        text = (
            f'[[checkpoint]]\nv = 1\nid = "c-{tag}{commit[:12]}"\ntask = "t-000000000000"\n'
            f'head = "{commit}"\nat = 2026-11-30T03:00:00Z\nauthor = "A <a@example.com>"\n'
            f'body = "{tag}"\n'
        )
        lines += [f"N inline {commit}", f"data {len(text.encode())}", text]
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=repo.path,
        env=repo.environ,
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
    )


def _note_paths(repo: Repo, ref: str) -> dict[str, str]:
    paths = repo.git("ls-tree", "-r", "--name-only", ref).split()
    return {path.replace("/", ""): path for path in paths}


def test_a_large_merge_keeps_git_s_fan_out(repo: Repo) -> None:
    repo.task("queue drops acks")
    pg = repo.pygit
    tree = pg.head.peel(pygit2.Commit).tree.id
    sig = pygit2.Signature("A", "a@example.com", 1796007600, 0)
    commits = [
        str(pg.create_commit(None, sig, sig, f"c{i}", tree, [pg.head.target])) for i in range(400)
    ]
    base = repo.notes_ref()
    assert base is not None
    _fast_import_notes(repo, THEIRS, base, commits[:200], "t")
    _fast_import_notes(repo, "refs/notes/majordomus", base, commits[150:], "o")
    theirs = repo.git("rev-parse", THEIRS).strip()
    report = merge(repo, theirs)
    assert (report.outcome, report.records_added, report.notes_united) == ("merged", 200, 50)
    paths = _note_paths(repo, "refs/notes/majordomus")
    assert sorted(paths) == sorted([*commits, repo.head()])
    assert all("/" in path for path in paths.values())
    # git writes the same ref next and keeps our layout: one note per commit, no move.
    repo.git("notes", "--ref=majordomus", "add", "-f", "-m", "[[x]]\na = 1", commits[0])
    assert _note_paths(repo, "refs/notes/majordomus") == paths
    assert len(repo.git("notes", "--ref=majordomus", "list").splitlines()) == 401
    assert note_ids(repo, commits[160]) == [f"c-o{commits[160][:12]}", f"c-t{commits[160][:12]}"]


class RacingMerger(Merger):
    """A merge whose ref is moved by another writer between reading and swapping, once."""

    def __init__(self, writer: RacingWriter) -> None:
        reader = writer.reader
        super().__init__(
            writer.repository.repo,
            reader.blobs,
            reader.note_copies,
            writer.signature,
            writer.history.descends,
        )
        self.writer = writer

    def merged_tree(
        self, ours: pygit2.Tree, theirs: pygit2.Tree
    ) -> tuple[pygit2.Oid, tuple[int, int], int, int]:
        if not self.writer.raced:
            self.writer.raced = True
            result = self.writer.repo_for_race.run("checkpoint", "written meanwhile", "--json")
            assert result.code == 0, result.err
            self.writer.meanwhile = json.loads(result.out)["record"]["id"]
        return super().merged_tree(ours, theirs)


class RacingWriter(Writer):
    raced = False
    repo_for_race: Repo
    meanwhile: str

    def merger(self) -> Merger:
        return RacingMerger(self)


def test_a_merge_that_lost_the_race_retries_and_keeps_both(repo: Repo) -> None:
    repo.task("queue drops acks")
    theirs_id = checkpoint(repo, "theirs")
    theirs = diverge(repo)
    checkpoint(repo, "mine")
    jobs = open_jobs(str(repo.path), repo.environ)
    writer = RacingWriter(jobs.repository, jobs.reader, jobs.history)
    writer.repo_for_race = repo
    report = writer.merge(theirs, "majordomus: merge test", sleep=lambda _: None)
    assert (report.outcome, report.attempts) == ("merged", 2)
    ids = note_ids(repo, repo.head())
    assert writer.meanwhile in ids
    assert theirs_id in ids


def test_inserting_many_notes_at_once_lays_them_out_as_one_by_one(repo: Repo) -> None:
    jobs = open_jobs(str(repo.path), repo.environ)
    blob = jobs.repository.repo.create_blob(b"[[x]]\na = 1\n")
    names = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(400)]
    for before, after in ((names[:0], names), (names[:60], names[60:]), (names[:300], names[300:])):
        one_by_one = None
        for name in [*before, *after]:
            written = notestree.insert(jobs.repository.repo, one_by_one, name, blob)
            one_by_one = notestree.tree(jobs.repository.repo, written)
        base = None
        for name in before:
            base = notestree.tree(
                jobs.repository.repo, notestree.insert(jobs.repository.repo, base, name, blob)
            )
        at_once = notestree.insert_many(jobs.repository.repo, base, dict.fromkeys(after, blob))
        assert one_by_one is not None
        assert at_once == one_by_one.id
