"""The document cache: notes by blob id as read and validated, each in a flat form that
rebuilds it several times faster than parsing its TOML."""

from __future__ import annotations

import datetime
import functools
import marshal
import os
import struct
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from majordomus.cachefile import LENGTH, CacheFile, framed
from majordomus.jsontext import record_text
from majordomus.noteforms import NoteForms
from majordomus.notes import Entry, Note, union
from majordomus.records import validated_record

if TYPE_CHECKING:
    import array

_TIME = "\0time"  # tags a date or time value; TOML never yields tuples, so no clash


def _encode(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return (_TIME, type(value).__name__, value.isoformat())
    return value


_TIME_TYPES: dict[str, Any] = {
    "datetime": datetime.datetime,
    "date": datetime.date,
    "time": datetime.time,
}


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, tuple) and len(value) == 3 and value[0] == _TIME:
        return _TIME_TYPES[value[1]].fromisoformat(value[2])
    return value


_SCALARS = frozenset({str, int, float, bool})
_AT = (("at", "datetime"),)  # the dates of nearly every entry: one object, one marshal ref


def _flat(entry: Entry) -> tuple[Any, ...]:
    """An entry as marshal keeps it: kind, its table (with dates as ISO text), which keys
    hold a date and of what type, which keys hold a container with a date deeper inside
    (kept tagged, rare: only a hand-written key holds one), whether it is a valid record.
    Keys are interned, so marshal writes each name once per file."""
    valid = entry.record is not None
    table = dict(zip(map(sys.intern, entry.table), entry.table.values(), strict=True))
    at = table.get("at")
    if type(at) is datetime.datetime:  # the usual entry: text and numbers, and its date
        table["at"] = at.isoformat()
        if _SCALARS.issuperset(map(type, table.values())):
            return (entry.kind, table, _AT, (), valid)
    table = {}
    times: list[tuple[str, str]] = []
    nested: list[str] = []
    for name, value in entry.table.items():
        key = sys.intern(name)
        if isinstance(value, datetime.datetime | datetime.date | datetime.time):
            times.append((key, type(value).__name__))
            table[key] = value.isoformat()
        elif isinstance(value, dict | list):
            table[key] = _encode(value)
            if table[key] != value:  # a date inside
                nested.append(key)
        else:
            table[key] = value
    dates = _AT if times == list(_AT) else tuple(times)
    return (entry.kind, table, dates, tuple(nested), valid)


def _unflat(flat: tuple[Any, ...]) -> Entry:
    kind, stored, times, nested, valid = flat
    table = dict(stored)  # the loaded payload stays as it was, for a second look or a save
    for key, name in times:
        table[key] = _TIME_TYPES[name].fromisoformat(table[key])
    for key in nested:
        table[key] = _decode(table[key])
    return Entry(kind, table, validated_record(kind, table) if valid else None)


class DocumentCache(CacheFile):
    """Notes by blob id, as read and validated, for commands that show many records
    whole: rebuilding a note from its flat form is several times cheaper than parsing
    its TOML and checking every field again (this release's checks made the form).

    Each note is marshalled on its own, end to end after the file's head, which says
    where each one is: a command reads the notes it shows, one at a time, from the open
    file, so it never holds the forms of every note (100,000 notes: 60 MB as bytes, 150
    MB decoded) to show a thousand of them at a time, and one task's notes are read
    without the others'. The file stays open for the command: a writer replaces it
    under another name, so what this process reads is always the file it opened. The
    notes put by this command wait in an unnamed file beside it until they are saved."""

    FORMAT = (
        "documents:head(blob->offset<<32|length),then each note: length of its texts, "
        "marshal(record texts),marshal(entries(kind,table,dates,nested,valid),plain,"
        "invalid-plain);signed records kept without text"
    )

    @classmethod
    def version(cls) -> str:
        """The release, the format, and the text this code makes of a sample record: a
        text kept by another encoder is never spliced into this one's output."""
        return f"{super().version()} {_sample_text()}"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._file = NoteForms()  # the file read
        self._put = NoteForms()  # the notes put by this command, not saved yet
        self._changed = False
        self._open()

    def _open(self) -> None:
        try:
            file = self.path.open("rb")
        except OSError:
            return
        try:
            (length,) = LENGTH.unpack(file.read(LENGTH.size))
            if length > os.fstat(file.fileno()).st_size - LENGTH.size:
                raise ValueError("cut head")
            head = marshal.loads(file.read(length))
            if (
                isinstance(head, tuple)
                and len(head) == 2
                and head[0] == self.version()
                and isinstance(head[1], dict)
            ):
                self._file = NoteForms(head[1], file, LENGTH.size + length)
                return
        except (OSError, EOFError, ValueError, TypeError, struct.error):
            pass
        file.close()

    def has(self, blob: str) -> bool:
        return blob in self._file.at or blob in self._put.at

    @property
    def put_blobs(self) -> Collection[str]:
        """The blobs of the notes put since the last save."""
        return self._put.at.keys()

    def get(self, blob: str) -> Note | None:
        data = self._file.data(blob) if blob in self._file.at else self._put.data(blob)
        return None if data is None else _note(data)

    def get_many(self, blobs: Iterable[str]) -> Iterator[tuple[str, Note]]:
        """The notes of these blobs it holds, each once, read in runs of the file (a part
        of a history shown: a few reads, not one per note)."""
        for blob, data in self._forms(blobs):
            note = _note(data)
            if note is not None:
                yield blob, note

    def texts_many(self, blobs: Iterable[str]) -> Iterator[tuple[str, tuple[str | None, ...]]]:
        """The texts of the records (`jsontext.record_text`, in the order of the note's
        records; None for a record kept without) of these blobs it holds, each once, read
        as `get_many` reads notes."""
        for blob, data in self._forms(blobs):
            texts = _texts(data)
            if texts is not None:
                yield blob, texts

    def _forms(self, blobs: Iterable[str]) -> Iterator[tuple[str, bytes | memoryview]]:
        put: list[str] = []
        yield from self._file.runs(dict.fromkeys(blobs), put)
        for blob in put:
            data = self._put.data(blob)
            if data is not None:
                yield blob, data

    @staticmethod
    def form(note: Note) -> bytes | None:
        """A note read whole from TOML as the cache keeps it, marshalled; None for a
        salvaged note, which is not kept: it is read again."""
        if note.salvaged or note.unreadable:
            return None
        flat = (tuple(map(_flat, note.entries)), _encode(dict(note.other)), note.invalid_plain)
        # In the order of the records a read numbers: those of the note read alone.
        texts = marshal.dumps(tuple(map(record_text, union([note]).records)))
        return b"".join((LENGTH.pack(len(texts)), texts, marshal.dumps(flat)))

    def put(self, blob: str, note: Note) -> None:
        """A note read whole from TOML (a salvaged note is not kept: it is read again)."""
        form = self.form(note)
        if form is not None:
            self.put_form(blob, form)

    def put_form(self, blob: str, form: bytes) -> None:
        """A note in the form `form` made of it (in this process or in a helper)."""
        if not self.has(blob):
            if self._put.file is None:  # the first note put since the last save
                self._put = NoteForms.unnamed(self.path.parent)
            self._put.append(blob, form)
            self._changed = True

    def put_forms(self, blobs: Sequence[str], lengths: Sequence[int], forms: bytes) -> None:
        """Notes in their forms (made in a helper), end to end in `forms`, of these lengths."""
        if any(map(self.has, blobs)):  # some kept already: each put alone, once
            at = 0
            for blob, length in zip(blobs, lengths, strict=True):
                self.put_form(blob, forms[at : at + length])
                at += length
            return
        if self._put.file is None:
            self._put = NoteForms.unnamed(self.path.parent)
        self._put.append_many(blobs, lengths, forms)
        self._changed = True

    def save(self, blobs: Collection[str] | None, first: Iterable[str] = ()) -> None:
        """When a note was put: keep the notes of `blobs` (the current ones; None: every
        note kept), the new ones and the others copied from the files they are in. The
        file written is then the one read, and the unnamed file is let go. The new notes
        follow the kept ones, those of `first` first, in its order: the order a history
        reads them, so that a part of it lies in one run of the file."""
        if not self._changed:
            return
        put = self._put.at
        if blobs is not None and not isinstance(blobs, set | frozenset | dict):
            # Asked of every note of every file: one set made beats a search of the ids
            # (`objectids.BlobIds`) for each.
            blobs = set(blobs)
        # The notes kept, then those put in the order named, then the others put. Each is
        # written once: `runs_of` passes over one placed already (a blob on two commits is
        # named twice).
        sources = (
            (self._file, self._file.at),
            (self._put, (blob for blob in first if blob in put)),
            (self._put, put),
        )

        at: dict[str, int] = {}  # the new file's head
        offset = 0
        runs: list[tuple[NoteForms, array.array[int]]] = []
        for forms, blobs_in_order in sources:
            held, offset = forms.runs_of(blobs_in_order, blobs, at, offset)
            runs.append((forms, held))

        head = framed((self.version(), at))

        def chunks() -> Iterator[bytes]:
            yield from head
            for forms, held in runs:
                yield from forms.copied(held)

        written = self._replace_kept(chunks())
        if written is not None:  # read from now on, with the head it was written with
            self._file.close()
            self._put.close()
            self._file, self._put = NoteForms(at, written, sum(map(len, head))), NoteForms()
        self._changed = False


def _note(data: bytes | memoryview) -> Note | None:
    """A note from its form; None when it is not in this layout after all (the blob is
    then read again)."""
    try:
        (skip,) = LENGTH.unpack_from(data)
        entries, other, invalid_plain = marshal.loads(data[LENGTH.size + skip :])
        return Note(tuple(map(_unflat, entries)), _decode(other) if other else {}, invalid_plain)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, EOFError, struct.error):
        return None


def _texts(data: bytes | memoryview) -> tuple[str | None, ...] | None:
    """The texts of a note's records from its form, without the rest of it; None when it
    is not in this layout after all."""
    try:
        (length,) = LENGTH.unpack_from(data)
        texts = marshal.loads(data[LENGTH.size : LENGTH.size + length])
    except (ValueError, TypeError, EOFError, struct.error):
        return None
    if type(texts) is not tuple:
        return None
    if len(texts) == 1 and type(texts[0]) is str:  # most notes: one record
        return texts
    return texts if all(type(t) is str or t is None for t in texts) else None


@functools.cache
def _sample_text() -> str:
    """A short digest of the text `record_text` makes of a sample record with every kind of
    value a record can hold."""
    import zlib

    sample = validated_record(
        "checkpoint",
        {
            "v": 1,
            "id": "c-0123456789abcdef",
            "task": "t-0123456789ab",
            "head": "0" * 40,
            "at": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
            "author": "A <a@example.com>",
            "body": 'x\n"\u00e9\u202e\x7f',
            "extra": {"list": [1, 2.5, float("nan"), True], "when": datetime.date(2026, 1, 2)},
        },
    )
    text = None if sample is None else record_text(sample)
    assert text is not None
    return f"{zlib.crc32(text.encode()):08x}"
