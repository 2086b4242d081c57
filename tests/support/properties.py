"""The properties the merge tests and the fuzzers check, one plain function each.

Each raises AssertionError (or the unexpected exception itself) when a property
fails; hypothesis drives them with a small budget in the tests and a large one
in the soak.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Sequence

from majordomus import jsontext, render, write
from majordomus.errors import RefusedError
from majordomus.notes import Entry, Note, append_note, dump_note, dump_tables, parse_note, union
from majordomus.notetoml import NOTE_MAX_BYTES, NoteError
from majordomus.profile import parse_config, resolve
from majordomus.records import KINDS, Record
from majordomus.values import AttachedRecord
from tests.support.contracts import strict_json, terminal_problems

COMMIT = "0123456789abcdef0123456789abcdef01234567"
NOW = datetime.datetime(2026, 11, 30, 3, 0, 0, tzinfo=datetime.UTC)


def keys(note: Note) -> set[tuple[str, str]]:
    return {entry.key for entry in note.entries}


def contents(note: Note) -> set[str]:
    """The entries as exact text: the set of records, content and all."""
    return {dump_tables([(entry.kind, entry.table)]) for entry in note.entries}


def check_union_laws(a: Note, b: Note, c: Note) -> None:
    """Commutative as a set of records, associative, idempotent, and nothing dropped.

    The notes share one pool of entries in which an id names one content, as the
    format promises (ids are unique); `other` holds foreign plain keys.
    """
    ab, ba = union([a, b]), union([b, a])
    assert contents(ab) == contents(ba)
    assert set(ab.other) == set(ba.other) and ab.invalid == ba.invalid
    left, right, flat = union([union([a, b]), c]), union([a, union([b, c])]), union([a, b, c])
    assert left == right == flat
    assert union([a, a]) == union([a])
    assert union([union([a, b]), a]) == ab
    assert union([flat]) == flat
    assert keys(flat) == keys(a) | keys(b) | keys(c)
    assert set(flat.other) == set(a.other) | set(b.other) | set(c.other)
    assert len(flat.entries) == len(keys(flat))
    assert flat.invalid == sum(1 for e in flat.entries if e.invalid) + sum(
        1 for key in flat.other if key in KINDS
    )


def kind_ids(note: Note) -> set[tuple[str, str]]:
    """(kind, id) of every entry that carries an id it can be known by, read from the tables."""
    return {
        (entry.kind, entry.table["id"])
        for entry in note.entries
        if isinstance(entry.table.get("id"), str) and (entry.record or entry.kind not in KINDS)
    }


def check_union_keeps_every_id(notes: Sequence[Note]) -> None:
    """With ids that clash (same id, other content, even another kind), union keeps every
    (kind, id) once: a table of one kind never stands in for a record of another."""
    forward, backward = union(notes), union(list(reversed(notes)))
    expected = set().union(*(keys(n) for n in notes)) if notes else set()
    assert keys(forward) == keys(backward) == expected
    assert len(forward.entries) == len(expected)
    named = set().union(*(kind_ids(n) for n in notes)) if notes else set()
    assert kind_ids(forward) == kind_ids(backward) == named


def _without_clashes(note: Note) -> bool:
    """Whether a note can be written as one TOML document (no plain key named like a kind)."""
    return not (set(note.other) & {entry.kind for entry in note.entries})


def grouped(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """Entries in the order a TOML reader returns them: by kind, kinds in order of first use."""
    kinds = list(dict.fromkeys(entry.kind for entry in entries))
    return tuple(entry for kind in kinds for entry in entries if entry.kind == kind)


def check_note_round_trip(note: Note) -> None:
    """dump_note then parse_note gives the same note (entries grouped by kind, as TOML
    arrays are), and from then on the same text, byte for byte."""
    if not _without_clashes(note):
        return
    text = dump_note(note)
    again = parse_note(text.encode("utf-8"))
    assert again == Note(grouped(note.entries), note.other, note.invalid_plain), (text, again)
    settled = dump_note(again)
    assert parse_note(settled.encode("utf-8")) == again
    assert dump_note(parse_note(settled.encode("utf-8"))) == settled


def check_record_round_trip(record: Record, existing: Note) -> None:
    """A new record appended to any note: the old text kept byte for byte, the record exact."""
    alone = parse_note(append_note(None, [record]))
    assert alone.records == (record,)
    assert alone.entries[0].table == record.table
    assert dump_note(alone) == append_note(None, [record]).decode()
    if not _without_clashes(existing) or existing.other:
        return
    old = dump_note(existing)
    text = append_note(old.encode(), [record]).decode()
    assert text.startswith(old.rstrip("\n"))
    parsed = parse_note(text.encode("utf-8"))
    assert parsed.entries == grouped((*existing.entries, *alone.entries))


def check_concatenation(a: Note, b: Note) -> None:
    """Two notes concatenated (git's union merge, a squash) read as their union."""
    if a.other or b.other:
        return  # plain keys are not the format; only foreign writers leave them
    joined = parse_note((dump_note(a) + "\n" + dump_note(b)).encode("utf-8"))
    assert keys(union([joined])) == keys(union([a, b]))
    assert contents(union([joined])) == contents(union([a, b]))


def read_note(data: bytes) -> None:
    """What a reader does with a note from anywhere: parse, unite, render, re-serialise.

    Only NoteError may escape; nothing unsafe may reach the output; a note that
    parses must survive the rewrite a merge gives it.
    """
    try:
        note = parse_note(data)
    except NoteError:
        return
    united = union([note, note])
    assert keys(united) == keys(note)
    for position, record in enumerate(united.records):
        located = AttachedRecord(record, COMMIT, position)
        text = render.record_block(located)
        as_json = jsontext.dumps(render.record_json(located))
        strict_json(as_json)
        assert terminal_problems(text + as_json) == [], (text, as_json)
    rewritten = dump_note(united)
    assert keys(parse_note(rewritten.encode("utf-8"))) == keys(united), rewritten


def read_profile(data: bytes) -> None:
    """A profile file from anywhere: a profile, or RefusedError, nothing else."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # read_config refuses it before parsing
    try:
        layer = parse_config(text, "/repo/.majordomus.toml")
        resolve([layer], None, {})
    except RefusedError:
        pass


def read_handover_file(data: bytes) -> None:
    """A `handover -F` file from anywhere: three fields, or RefusedError, nothing else."""
    try:
        fields = write.parse_handover_file(data.decode("utf-8", "replace"), "standard input")
    except RefusedError:
        return
    assert sorted(fields) == ["next", "objective", "state"]


def valid_ids(data: bytes) -> set[tuple[str, str]]:
    """The (kind, id) of every valid record of a note, or nothing when it does not parse."""
    try:
        note = parse_note(data)
    except NoteError:
        return set()
    return {(record.kind, record.id) for record in note.records}


def check_store_merge(ours: bytes, theirs: bytes, merged: bytes) -> None:
    """A note on both sides of a merge: every valid record of either side is in the result,
    and a side that cannot be read whole is kept, byte for byte or in an `[[unreadable]]`
    table, beside them. A side over the read limit holds no record a read can read, and
    a merge never takes it (nor joins it to the other side): it is expected in none."""
    ours, theirs = (side if len(side) <= NOTE_MAX_BYTES else b"" for side in (ours, theirs))
    try:
        result = parse_note(merged)
    except NoteError:
        # The last resort: every distinct text concatenated, unread.
        assert ours.rstrip(b"\n") in merged and theirs.rstrip(b"\n") in merged
        return
    assert valid_ids(ours) | valid_ids(theirs) <= {(r.kind, r.id) for r in result.records}
    kept = {
        entry.table.get("text", "").encode() or base64.b64decode(entry.table.get("base64", ""))
        for entry in result.entries
        if entry.kind == "unreadable"
    }
    for side in (ours, theirs):
        try:
            parts = parse_note(side).unreadable  # a salvaged note: the parts that do not parse
        except NoteError:
            parts = (side,)  # not read at all: kept whole
        for part in parts:
            assert any(part in text for text in kept) or part.rstrip(b"\n") in merged, part
