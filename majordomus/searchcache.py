"""The search cache: what `grep` searches of each record, by note blob and position, so that
a warm search reads one small file rather than every record's text."""

from __future__ import annotations

import array
import functools
import itertools
import marshal
import mmap
import os
import struct
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from majordomus.cachefile import LENGTH, CacheFile, framed
from majordomus.jsontext import record_text
from majordomus.notes import Note, union
from majordomus.records import HANDOVER_FIELDS, SIGNATURE_KEY

if TYPE_CHECKING:
    import json

# The text of each kind searched, in the order a record shows it; every kind's session too.
SEARCHED: Mapping[str, tuple[str, ...]] = {
    "task": ("title", "session"),
    "checkpoint": ("body", "session"),
    "handover": (*HANDOVER_FIELDS, "session"),
    "resume": ("session",),
}

# What is kept of one record: whether it holds a signature, its author, its text searched
# (the value of each field SEARCHED names for its kind, one after another, joined by line
# feeds), then how many lines of that text each field holds (0: the record has no such
# field, or one that is not text). One string per record: a warm search loads 10,000 in
# a few milliseconds.
Searched = tuple[Any, ...]


def searched(kind: str, table: Mapping[str, Any]) -> Searched:
    """What the cache keeps of a record of this kind, from its table (its JSON values or
    the values read from TOML: the text fields are the same strings)."""
    values = [table.get(key) for key in SEARCHED[kind]]
    texts = [value for value in values if type(value) is str]
    counts = (value.count("\n") + 1 if type(value) is str else 0 for value in values)
    author = table.get("author")
    return (
        SIGNATURE_KEY in table,
        sys.intern(author) if type(author) is str else author,  # one object in the file
        "\n".join(texts),
        *counts,
    )


# What a search keeps of the records of a note read alone: `searched` of each, and each
# one's JSON text (`jsontext.record_text`; None for a record it encodes whole), or None
# when the texts were not made.
NoteSearched = tuple[tuple[Searched, ...], tuple[str | None, ...] | None]


def searched_note(note: Note, texts: bool) -> NoteSearched | None:
    """What a search keeps of each record of a note, in the order a read of that note alone
    numbers them (`union` of it: records de-duplicated by id), made from its parse, with
    their JSON texts when `texts` is asked for; None when a record is of a kind no search
    reads."""
    records = union([note]).records
    if any(record.kind not in SEARCHED for record in records):
        return None
    values = tuple(searched(record.kind, record.table) for record in records)
    return values, tuple(map(record_text, records)) if texts else None


# Where each member `searched` keeps of a kind's record (and its author) starts in the
# record's JSON text (`jsontext.record_text`): on a line of its own, at one indentation.
_MEMBERS = {
    kind: tuple(f'\n      "{key}": ' for key in (*keys, "author"))
    for kind, keys in SEARCHED.items()
}


def searched_text(kind: str, text: str) -> Searched | None:
    """`searched` of an unsigned record from its JSON text (`jsontext.record_text`: each
    member of the record starts a line of its own, at one indentation; a nested value's
    members are indented further, and no string holds a line feed), the values of its
    searched members decoded alone rather than the whole record; None when the text is
    not as `record_text` writes it (then the record is decoded whole)."""
    import json.decoder  # here: only a first search reads JSON texts

    string: Callable[[str, int], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009
    decode = _decoder().raw_decode
    values: list[Any] = []
    try:
        for marker in _MEMBERS[kind]:
            at = text.find(marker)
            if at < 0:
                values.append(None)
                continue
            at += len(marker)  # a string (most values), else any JSON value
            values.append(string(text, at + 1)[0] if text[at] == '"' else decode(text, at)[0])
    except (ValueError, IndexError):
        return None
    author = values.pop()
    return (
        False,  # `record_text` makes no text of a signed record
        sys.intern(author) if type(author) is str else author,
        "\n".join(value for value in values if type(value) is str),
        *(value.count("\n") + 1 if type(value) is str else 0 for value in values),
    )


@functools.cache
def _decoder() -> json.JSONDecoder:
    import json

    return json.JSONDecoder()


class SearchCache(CacheFile):
    """Note blob and a record's position in it (`"BLOB POSITION"`, the position as a read
    of that note alone numbers it) -> what `searched` keeps of that record, and the JSON
    text `history --json` shows of it (`jsontext.record_text`; None for a record it
    encodes whole). A blob names its content for good, so an entry is never stale; the
    file keeps the records of the notes of the last search of every task, and of those
    searched since.

    The file is two frames: the records searched, which every search loads, then the
    JSON texts, which only a search answered in JSON reads (from the file opened first:
    another process replaces the file, never writes into it), with the version of the
    encoder that made them (`DocumentCache.version`: a text another encoder made is
    never shown)."""

    FORMAT = (
        "search:frames:'blob position'->(signed,author,text,lines of each field of "
        "SEARCHED[kind]),then (encoder,array('q') of the UTF-8 lengths of the JSON texts in "
        "the order of the keys, -1 for none, -2 unknown),then those texts joined, to the end"
    )

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.records: dict[str, Searched] = {}
        self._texts: JsonTexts | None = None  # read on first use
        self._put_texts: dict[str, str | None] = {}
        self._rest: BinaryIO | None = None  # the file read, at the frame of the texts
        self._loaded = 0  # the records read from the file: the first of `records`
        self.added = 0  # records and texts put since the file was read
        try:
            file = path.open("rb")
        except OSError:
            return
        try:
            head = _frame(file)
            if (
                isinstance(head, tuple)
                and len(head) == 2
                and head[0] == self.version()
                and isinstance(head[1], dict)
            ):
                self.records, self._rest = head[1], file
                self._loaded = len(self.records)
                return
        except (OSError, EOFError, ValueError, TypeError, struct.error):
            pass
        file.close()

    def texts(self, encoder: str) -> JsonTexts:
        """The JSON texts the file keeps, when `encoder` made them (else none), and those
        put since."""
        if self._texts is None:
            self._texts = JsonTexts((), b"")
            rest, self._rest = self._rest, None
            if rest is not None:
                with rest:
                    try:
                        frame = _frame(rest)
                        if (
                            isinstance(frame, tuple)
                            and len(frame) == 2
                            and frame[0] == encoder
                            and isinstance(frame[1], bytes)
                        ):
                            keys = list(itertools.islice(self.records, self._loaded))
                            self._texts = JsonTexts(keys, frame[1], *_mapped(rest))
                    except (OSError, EOFError, ValueError, TypeError, struct.error):
                        pass
            self._texts.put.update(self._put_texts)
        return self._texts

    def close(self) -> None:
        """The file let go: the JSON texts not read by now are never read."""
        rest, self._rest = self._rest, None
        if rest is not None:
            rest.close()

    def put(self, key: str, value: Searched, text: str | None) -> None:
        self.records[key] = value
        self.put_text(key, text)

    def put_searched(self, key: str, value: Searched) -> None:
        """A record whose JSON text is not known yet (a `grep --json` that shows it puts it
        then: `put_text`)."""
        self.records[key] = value
        self.added += 1

    def put_text(self, key: str, text: str | None) -> None:
        """The JSON text of a record it keeps."""
        self._put_texts[key] = text
        if self._texts is not None:
            self._texts.put[key] = text
        self.added += 1

    def save(self, current: Collection[str] | None, encoder: str) -> None:
        """When a record was put: write the file, keeping only the records of `current`
        (the keys of every record a search of every task read; None: keep every one)."""
        if not self.added and (current is None or len(current) == len(self.records)):
            return
        records, texts = self.records, self.texts(encoder)
        if current is not None:
            records = {key: records[key] for key in current if key in records}
        kept = [texts.known(key, _UNKNOWN) for key in records]
        encoded = [text.encode() if text else b"" for text in kept]
        lengths = array.array("q", map(_length, kept, encoded))
        head = framed((self.version(), records))
        self._replace([*head, *framed((encoder, lengths.tobytes())), b"".join(encoded)])
        self.added = 0


_UNKNOWN = ""  # a record whose JSON text is not known (another encoder made the file's)


def _length(text: str | None, encoded: bytes) -> int:
    return -1 if text is None else -2 if text == _UNKNOWN else len(encoded)


def _mapped(file: BinaryIO) -> tuple[bytes | mmap.mmap, int]:
    """The file mapped, and where in it the file is read: only the pages of what is shown
    are read in (the mapping outlives the file's closing; another process replaces the
    file, never writes into it)."""
    offset = file.tell()
    if os.fstat(file.fileno()).st_size <= offset:
        return b"", 0
    return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ), offset


class JsonTexts:
    """The JSON texts of the records a search cache keeps: their UTF-8 bytes end to end
    from `start` in `data`, cut where the lengths say (-1: a record without one; -2: one
    whose text is not known), the Nth for the Nth key, each decoded when asked for; and
    those put since."""

    def __init__(
        self,
        keys: Sequence[str],
        lengths: bytes,
        data: bytes | mmap.mmap = b"",
        start: int = 0,
    ) -> None:
        self.put: dict[str, str | None] = {}
        self._keys = keys
        self._data = data
        self._start = start
        self._lengths = array.array("q")
        self._lengths.frombytes(lengths)
        whole = sum(max(n, 0) for n in self._lengths)
        if len(self._lengths) != len(keys) or whole != len(data) - start:
            self._keys, self._lengths = (), array.array("q")
        self._at: dict[str, int] | None = None
        self._starts: list[int] = []

    def _place(self) -> dict[str, int]:
        if self._at is None:
            lengths = self._lengths
            self._at = {key: n for n, key in enumerate(self._keys) if lengths[n] >= -1}
            starts = itertools.accumulate((max(n, 0) for n in lengths), initial=self._start)
            self._starts = list(starts)
        return self._at

    def known(self, key: str, default: str | None) -> str | None:
        """The text of the record (None: it has none), or `default` when none is known."""
        try:
            return self[key]
        except KeyError:
            return default

    def __getitem__(self, key: str) -> str | None:
        """The text of the record (None: it has none); KeyError when none is known (or
        what the file holds of it is not UTF-8)."""
        if key in self.put:
            return self.put[key]
        n = self._place()[key]
        if self._lengths[n] < 0:
            return None
        try:
            return str(self._data[self._starts[n] : self._starts[n + 1]], "utf-8")
        except UnicodeDecodeError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        return key in self.put or key in self._place()


def _frame(file: BinaryIO) -> Any:
    """The value of the frame the file is at (`cachefile.framed`), the file left past it."""
    (length,) = LENGTH.unpack(file.read(LENGTH.size))
    if length > os.fstat(file.fileno()).st_size - file.tell():  # another layout's bytes
        raise ValueError("cut frame")
    data = file.read(length)
    if len(data) != length:
        raise ValueError("cut frame")
    return marshal.loads(data)
