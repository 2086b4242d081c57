"""Property tests of the record union and the note format: merges never drop, never mangle."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from majordomus.notes import Note, parse_note, union
from majordomus.records import Record
from tests.support import properties
from tests.support.notes_merge import NotesRepo, both_sides
from tests.support.repo import Repo
from tests.support.strategies import note_families, notes, records

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
