"""Notes: the tables a note holds, read from its bytes (salvaged when they are not TOML as a
whole), united with other copies, appended to, written back as TOML. Knows nothing of git."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from majordomus.notetoml import NoteError, NotTomlError, is_bare, load_document, readable_tables
from majordomus.records import (
    KINDS,
    REFUSED_RANGE,
    SIGNATURE_KEY,
    Record,
    Summary,
    summary_of,
    validate,
)
from majordomus.tuples import NamedTuple


class Entry(NamedTuple):
    """One table of an array of tables in a note: a record, an invalid one, or an unknown kind."""

    kind: str
    table: Mapping[str, Any]
    record: Record | None  # set for a valid record of a known kind

    @property
    def key(self) -> tuple[str, str]:
        """Identity for de-duplication: the id where one can be trusted, else exact content."""
        ident = self.table.get("id")
        if isinstance(ident, str) and (self.record is not None or self.kind not in KINDS):
            # The kind too: a foreign table that reuses a record's id must not replace it.
            return (f"{self.kind} id", ident)
        return ("content", dump_tables([(self.kind, self.table)]))

    @property
    def invalid(self) -> bool:
        return self.kind in KINDS and self.record is None


class Note(NamedTuple):
    """A parsed note: its entries in order, and any plain top-level keys a foreign writer left.

    A note that is not valid TOML as a whole (edited by hand) is `salvaged`: its
    tables that parse on their own are its entries, and the text that does not
    parse is kept, part by part, in `unreadable`.
    """

    entries: tuple[Entry, ...]
    other: Mapping[str, Any]
    invalid_plain: int  # known kinds stored as something other than an array of tables
    unreadable: tuple[bytes, ...] = ()  # the parts of a salvaged note that do not parse
    salvaged: bool = False

    @property
    def records(self) -> tuple[Record, ...]:
        if len(self.entries) == 1:  # most notes: asked once per record shown
            record = self.entries[0].record
            return () if record is None else (record,)
        return tuple(entry.record for entry in self.entries if entry.record is not None)

    @property
    def invalid(self) -> int:
        return (
            self.invalid_plain
            + len(self.unreadable)
            + sum(1 for entry in self.entries if entry.invalid)
        )


Shown = Callable[[Note], bool]  # the notes a command shows whole after a read of every note


def every_note(note: Note) -> bool:
    return True


def notes_of_tasks(prefix: str) -> Shown:
    """The notes holding a record of a task whose id starts with `prefix`."""

    def holds(note: Note) -> bool:
        for entry in note.entries:
            task = entry.table.get("task")
            if isinstance(task, str) and task.startswith(prefix):
                return True
        return False

    return holds


def could_hold_task(prefix: str) -> tuple[str, ...]:
    """Extended regular expressions (for `git grep`) of which a note's bytes match one on
    some line whenever a full parse of it finds a record of a task whose id starts with
    `prefix`, or a resume (which may resolve a handover of one: it names the handover by
    its id only): a byte filter that picks every note such a read needs, and more.

    A string's text is its bytes unless an escape makes some of it: a task id (`t-` and
    lowercase hex digits) written plainly holds the prefix's bytes, and a table named
    `resume` holds that word. Only an escape of one of those characters (`\\u`, `\\U`;
    TOML 1.1 adds `\\x`) or a line-ending backslash (a multi-line string joined across
    lines) can make them otherwise, so a note with one is always picked. Comments,
    appended text and concatenated notes only add bytes."""
    if _TASK_PREFIX.fullmatch(prefix) is None:
        raise ValueError(f"not the start of a task id: {prefix!r}")
    return (prefix, _ID_ESCAPE, r"\\[[:space:]]*$", "resume")


def holds_task(prefix: str) -> re.Pattern[bytes]:
    """`could_hold_task` but for the resumes: a note's bytes it does not search holds no
    record of those tasks (it may hold a resume; see `may_name`)."""
    return re.compile(
        f"{prefix}|{_ID_ESCAPE}|{_LINE_END}".encode("ascii"),
        re.MULTILINE,
    )


def may_name(ids: Iterable[str]) -> re.Pattern[bytes]:
    """What a note's bytes hold when a string in it may be one of these record ids (a
    resume naming a handover, a copy of a record): the id written plainly, or any escape
    or line-ending backslash."""
    ids = "|".join(re.escape(ident) for ident in sorted(ids))
    return re.compile(f"{ids}{'|' if ids else ''}\\\\[uUx]|{_LINE_END}".encode(), re.MULTILINE)


_TASK_PREFIX = re.compile("t-[0-9a-f]{1,12}")
# An escape of a character of a task id or of `resume` (t - 0-9 a-f r e s u m), in both
# `git grep -E` and Python.
_ID_ESCAPE = r"\\(u00|U0000|x)(2[dD]|3[0-9]|6[1-6dD]|7[2-5])"
_LINE_END = r"\\[ \t\r\v\f]*$"  # in Python, for `[[:space:]]*$` on a line of git grep


def summarise(note: Note) -> tuple[Summary, ...]:
    return tuple(summary_of(record, position) for position, record in enumerate(note.records))


def parse_note(data: bytes) -> Note:
    """The note a blob holds; a note that is not TOML as a whole is salvaged table by table."""
    try:
        return note_from_document(load_document(data))
    except NotTomlError:
        return salvage(data)


def salvage(data: bytes) -> Note:
    """Every table of a note that is not TOML as a whole, read on its own
    (`notetoml.readable_tables`); the text after the readable start of a table is one
    unreadable part. A table cut short that is no longer a valid record counts once, as
    that unreadable part.
    """
    entries: list[Entry] = []
    other: dict[str, Any] = {}
    invalid_plain = 0
    unreadable: list[bytes] = []
    for document, rest in readable_tables(data):
        broken = bool(rest.strip())
        note = note_from_document(document) if document else Note((), {}, 0)
        if broken and note.entries and all(entry.invalid for entry in note.entries):
            note = Note((), note.other, note.invalid_plain)  # counted once, as the part below
        entries.extend(note.entries)
        for key, value in note.other.items():
            if key not in other:
                other[key] = value
                invalid_plain += key in KINDS
        if broken:
            unreadable.append(rest.strip(b"\n"))
    return Note(tuple(entries), other, invalid_plain, tuple(unreadable), salvaged=True)


def note_from_document(document: Mapping[str, Any]) -> Note:
    entries: list[Entry] = []
    other: dict[str, Any] = {}
    invalid_plain = 0
    for kind, value in document.items():
        if isinstance(value, list) and value and all(isinstance(t, dict) for t in value):
            for table in value:
                record = validate(kind, table) if kind in KINDS else None
                entries.append(Entry(kind, table, record))
        else:
            other[kind] = value
            invalid_plain += kind in KINDS
    return Note(tuple(entries), other, invalid_plain)


_ESCAPES = {
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}
# Escaped in every string majordomus writes: what TOML requires, plus C1 controls
# and bidi overrides, so that `git log --notes` never prints them raw.
_STRING_ESCAPE = f'["\\\\\t\n{REFUSED_RANGE}]'  # compiled by the first write (a read needs none)


def _string(text: str) -> str:
    def escape(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return _ESCAPES.get(char) or (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")

    return '"' + re.sub(_STRING_ESCAPE, escape, text) + '"'


def _key(key: str) -> str:
    return key if is_bare(key) else _string(key)


def _literal(value: Any) -> str:
    """One TOML value, inline: nested tables become inline tables, so every
    record stays a single `[[kind]]` table that can be concatenated safely."""
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.datetime) and value.utcoffset() == datetime.timedelta(0):
        fraction = f".{value.microsecond:06d}".rstrip("0") if value.microsecond else ""
        # isoformat, not strftime: %Y drops leading zeros (year 999 -> "999", not TOML).
        return value.replace(microsecond=0, tzinfo=None).isoformat() + fraction + "Z"
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        items = ", ".join(f"{_key(k)} = {_literal(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    # Numbers, booleans, local dates and times: tomli-w knows their TOML spelling. (Loaded
    # here, by a write: a read never needs it.)
    import tomli_w

    return tomli_w.dumps({"v": value}).partition(" = ")[2].rstrip("\n")


def dump_tables(tables: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """Each table as its own `[[kind]]` block, keys in their stored order."""
    blocks = []
    for kind, table in tables:
        lines = [f"[[{_key(kind)}]]"]
        lines += [f"{_key(key)} = {_literal(value)}" for key, value in table.items()]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def canonical(kind: str, table: Mapping[str, Any]) -> bytes:
    """A record's canonical bytes, which its signature covers: its table exactly as
    `dump_tables` writes it, the signature's own key left out."""
    unsigned = {key: value for key, value in table.items() if key != SIGNATURE_KEY}
    return dump_tables([(kind, unsigned)]).encode("utf-8")


def dump_note(note: Note) -> str:
    body = dump_tables((entry.kind, entry.table) for entry in note.entries)
    if not note.other:
        return body
    # Plain keys must come before any table header to stay top-level.
    plain = "".join(f"{_key(key)} = {_literal(value)}\n" for key, value in note.other.items())
    return plain + "\n" + body


def union(notes: Sequence[Note]) -> Note:
    """Union by record identity: every entry of every note, each once, first copy kept."""
    if len(notes) == 1 and not notes[0].salvaged:
        note = notes[0]  # the common case: one note, each record once
        first = note.entries
        if len(first) < 2 or len({entry.key for entry in first}) == len(first):
            return note
    seen: set[tuple[str, str]] = set()
    entries: list[Entry] = []
    other: dict[str, Any] = {}
    invalid_plain = 0
    unreadable: dict[bytes, None] = {}  # one part in two copies of a note is one part
    for note in notes:
        for entry in note.entries:
            if entry.key not in seen:
                seen.add(entry.key)
                entries.append(entry)
        for key, value in note.other.items():
            if key not in other:
                other[key] = value
                invalid_plain += key in KINDS
        unreadable.update(dict.fromkeys(note.unreadable))
    salvaged = any(note.salvaged for note in notes)
    return Note(tuple(entries), other, invalid_plain, tuple(unreadable), salvaged)


def append_note(existing: bytes | None, records: Sequence[Record]) -> bytes:
    """The note with `records` appended after the existing bytes, which are kept byte for byte.

    A note that is not valid TOML as a whole takes them too: every table in it
    stays as readable as it was. Raises NoteError when the result would not read
    back every record the note held plus the new ones (a note too large or too
    deep to parse): a write never destroys what it cannot read.
    """
    return appended(existing, records)[0]


def appended(
    existing: bytes | None, records: Sequence[Record], before: Note | None = None
) -> tuple[bytes, Note]:
    """`append_note`, and the note it makes as read back; `before`: the existing note as
    parsed already (each parse of a note of many records costs)."""
    addition = dump_tables((record.kind, record.table) for record in records).encode("utf-8")
    if not existing:
        return addition, parse_note(addition)
    if before is None:
        before = parse_note(existing)
    data = existing + (b"\n" if existing.endswith(b"\n") else b"\n\n") + addition
    try:
        after = parse_note(data)
    except NoteError as error:
        raise NoteError(f"the existing note cannot take more records ({error})") from None
    kept = {entry.key for entry in after.entries}
    lost = [entry for entry in before.entries if entry.record and entry.key not in kept]
    written = {(record.kind, record.id) for record in after.records}
    if lost or not all((record.kind, record.id) in written for record in records):
        raise NoteError("the existing note cannot take more records and stay readable")
    return data, after
