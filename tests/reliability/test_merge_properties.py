"""Property tests of the record union and the note format: merges never drop, never mangle."""

from __future__ import annotations

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from majordomus.records import Note, Record, dump_note, parse_note, union
from majordomus.store import NOTES_REF, Store
from tests.conftest import Repo
from tests.reliability import properties
from tests.reliability.strategies import note_families, notes, raw_notes, records

FAST = settings(
    max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True
)


@FAST
@given(note_families())
def test_union_is_commutative_associative_idempotent_and_drops_nothing(
    family: tuple[Note, Note, Note],
) -> None:
    properties.check_union_laws(*family)


@FAST
@given(st.lists(notes(), max_size=4))
def test_union_keeps_every_id_even_when_ids_clash(family: list[Note]) -> None:
    properties.check_union_keeps_every_id(family)


@FAST
@given(notes())
def test_a_note_round_trips_exactly(note: Note) -> None:
    properties.check_note_round_trip(note)


@FAST
@given(records(), notes())
def test_a_record_round_trips_exactly_and_appending_keeps_the_old_text(
    record: Record, existing: Note
) -> None:
    properties.check_record_round_trip(record, existing)


@FAST
@given(notes(), notes())
def test_concatenated_notes_read_as_their_union(a: Note, b: Note) -> None:
    properties.check_concatenation(a, b)


class NotesRepo:
    """One repository in which each example builds two notes commits that fork from a
    common one and puts a note on the same commit in each."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.git = repo.pygit
        self.head = repo.head()
        signature = pygit2.Signature("A", "a@example.com", 0, 0)
        self.signature = signature
        self.base = self.git.create_commit(
            None, signature, signature, "base", self.git.TreeBuilder().write(), []
        )

    def notes_commit(self, data: bytes) -> pygit2.Oid:
        builder = self.git.TreeBuilder()
        builder.insert(self.head, self.git.create_blob(data), pygit2.enums.FileMode.BLOB)
        tree = builder.write()
        return self.git.create_commit(None, self.signature, self.signature, "n", tree, [self.base])

    def merge(self, ours: bytes, theirs: bytes) -> bytes:
        self.git.references.create(NOTES_REF, self.notes_commit(ours), force=True)
        their_commit = self.notes_commit(theirs)
        Store(str(self.repo.path), self.repo.environ).merge_notes(str(their_commit), "merge")
        merged = self.git.references[NOTES_REF].peel(pygit2.Commit).tree[self.head]
        blob = self.git[merged.id]
        assert isinstance(blob, pygit2.Blob)
        return bytes(blob.data)


both_sides = st.one_of(
    raw_notes,
    notes().filter(lambda n: not n.other).map(lambda n: dump_note(n).encode("utf-8")),
)


@FAST
@given(ours=both_sides, theirs=both_sides)
def test_a_merge_keeps_every_record_of_both_sides(repo: Repo, ours: bytes, theirs: bytes) -> None:
    merged = NotesRepo(repo).merge(ours, theirs)
    properties.check_store_merge(ours, theirs, merged)


def test_a_table_of_another_kind_never_stands_in_for_a_record() -> None:
    # Found by the store merge property: a foreign [[flag]] that reused a task's id made
    # the union keep the flag and drop the task record.
    head = "0" * 40
    flag = parse_note(b'[[flag]]\nid = "t-0000"\n')
    task = parse_note(
        b'[[task]]\nv = 1\nid = "t-0000"\ntask = "t-0000"\nhead = "'
        + head.encode()
        + b'"\nat = 2026-11-30T03:00:00Z\nauthor = "A <a@b>"\ntitle = "mine"\n'
    )
    assert [e.kind for e in union([flag, task]).entries] == ["flag", "task"]
    properties.check_union_keeps_every_id([flag, task])
