"""The derived caches inside the git directory: disposable, never the source of truth.

Each maps content hashes (a notes tree, a note blob, a commit) to what reading them
produced, so an entry can never be stale. Every cache file shares one base: checked
against a version made of the package version and the file's own format (a file
another release or layout wrote is ignored whole), written whole to a temporary name
and renamed, so concurrent processes see the old file or the new one; an unreadable
file is simply rebuilt. Each is loaded whole but the document cache, whose notes are
read one at a time from the open file.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import io
import marshal
import os
import struct
import sys
import time
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from majordomus import __version__
from majordomus.jsontext import record_text
from majordomus.records import RULES, Entry, Note, Summary, union, validated_record

if TYPE_CHECKING:
    import array

FILE_NAME = "majordomus-cache"
GRAPH_FILE_NAME = "majordomus-graph-cache"
RECORDS_FILE_NAME = "majordomus-records-cache"
VIEWS_FILE_NAME = "majordomus-views"
VIEWS_FOLDER_NAME = f"{VIEWS_FILE_NAME}.d"  # the parts of the views, beside the file
PATCH_FILE_NAME = "majordomus-patch-ids"
FILES = (FILE_NAME, GRAPH_FILE_NAME, RECORDS_FILE_NAME, VIEWS_FILE_NAME, PATCH_FILE_NAME)
_SUMMARY = ",".join(Summary._fields)  # a summary's fields change: so does every file's format

BlobEntry = tuple[tuple[Summary, ...], int] | str  # (summaries, invalid records) or why unreadable
OddTuple = tuple[str, str, str]  # an entry of a notes tree that is no note: path, kind, id


def plain_entry(entry: BlobEntry) -> Any:
    """A read-cache entry as marshal can write it (it knows no named tuples)."""
    return entry if isinstance(entry, str) else (tuple(map(tuple, entry[0])), entry[1])


def blob_entry(value: Any) -> BlobEntry:
    """A read-cache entry back from `plain_entry`'s form."""
    return value if isinstance(value, str) else (tuple(map(Summary._make, value[0])), value[1])


class CacheFile:
    """One cache file: its payload loaded whole when its version is this one, written
    whole or not at all. A cache that cannot be written (read-only clone, full disk)
    costs speed, not data."""

    FORMAT: ClassVar[str]  # what the payload holds: part of the version

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def version(cls) -> str:
        return f"majordomus {__version__} {RULES} {cls.FORMAT}"

    def load(self) -> tuple[Any, ...] | None:
        """The payload this release wrote, or None (no file, another version, garbage)."""
        try:
            data: Any = marshal.loads(self.path.read_bytes())
            if isinstance(data, tuple) and data and data[0] == self.version():
                return data[1:]
        except (OSError, EOFError, ValueError, TypeError):
            pass
        return None

    def write(self, *payload: Any) -> bool:
        """Concurrent readers see the old file or the new one. Whether it was written."""
        return self._replace([marshal.dumps((self.version(), *payload))])

    def _replace(self, chunks: Iterable[bytes]) -> bool:
        kept = self._replace_kept(chunks)
        if kept is not None:
            kept.close()
        return kept is not None

    def _replace_kept(self, chunks: Iterable[bytes]) -> BinaryIO | None:
        """`_replace`, the file written kept open (for reading: what a later writer puts
        in its place is another file), or None when it was not written."""
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        kept: BinaryIO | None = None
        try:
            kept = tmp.open("w+b")
            for chunk in chunks:
                kept.write(chunk)
            kept.flush()
            os.replace(tmp, self.path)
        except OSError:
            if kept is not None:
                kept.close()
            kept = None
        with contextlib.suppress(OSError):
            tmp.unlink()
        return kept

    # A large payload is written and read in frames (a length, then one marshalled value),
    # so that its plain form and its bytes are never all held at once: the first frame is
    # the version and the head of the payload, each further frame one piece of the rest.

    def load_frames(self) -> tuple[tuple[Any, ...], Iterator[Any]] | None:
        """The head this release wrote and an iterator over the other frames' values, or
        None (no file, another version, garbage); a frame cut short ends the iterator
        with ValueError."""
        try:
            data = memoryview(self.path.read_bytes())
            head, offset = _frame(data, 0)
        except (OSError, EOFError, ValueError, TypeError):
            return None
        if not (isinstance(head, tuple) and head and head[0] == self.version()):
            return None

        def rest(offset: int) -> Iterator[Any]:
            while offset < len(data):
                value, offset = _frame(data, offset)
                yield value

        return head[1:], rest(offset)

    def write_frames(self, head: tuple[Any, ...], frames: Iterable[Any]) -> bool:
        """The head, then each frame, marshalled one at a time. Whether it was written."""

        def chunks() -> Iterator[bytes]:
            yield from framed((self.version(), *head))
            for value in frames:
                yield from framed(value)

        return self._replace(chunks())


_LENGTH = struct.Struct("<Q")


def framed(value: Any) -> tuple[bytes, bytes]:
    """A frame of a cache file, or of a pipe (`frames_of`): its length, then its value."""
    data = marshal.dumps(value)
    return _LENGTH.pack(len(data)), data


def frames_of(stream: BinaryIO) -> Iterator[Any]:
    """The values of the frames written to a stream, up to its end (a frame cut short
    ends it)."""
    while len(head := stream.read(_LENGTH.size)) == _LENGTH.size:
        (length,) = _LENGTH.unpack(head)
        data = stream.read(length)
        if len(data) != length:
            return
        yield marshal.loads(data)


def _frame(data: memoryview, offset: int) -> tuple[Any, int]:
    """The value of the frame at `offset`, and where the next one starts."""
    end = offset + _LENGTH.size
    if end > len(data):
        raise ValueError("cut frame")
    (length,) = _LENGTH.unpack(data[offset:end])
    if end + length > len(data):
        raise ValueError("cut frame")
    return marshal.loads(data[end : end + length]), end + length


class ReadCache(CacheFile):
    """Notes tree id -> the notes it holds, each the commit's id then the blob's, end to end
    in one string (100,000 notes: one object, not 300,000); blob id -> the summaries of
    its records and how many are invalid, or why it is unreadable. A missing object is
    never an entry: a fetch can bring it."""

    FORMAT = (
        "frames:trees:(commit+blob)*,odd:tree->(path,kind,id)*;"
        f"blobs:(({_SUMMARY})*,invalid)|reason*"
    )
    FRAME_ENTRIES = 4096  # blob entries per frame

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.trees: dict[str, str] = {}
        # Notes tree id -> the entries in it that are no note (`notestree.OddEntry`, as
        # plain tuples), for the trees with any.
        self.odd: dict[str, tuple[OddTuple, ...]] = {}
        self._blobs: dict[str, BlobEntry] | None = {}
        self._frames: Iterator[Any] = iter(())
        self.dirty = False
        loaded = self.load_frames()
        if loaded is None:
            return
        try:
            (trees, odd), self._frames = loaded
            if not isinstance(trees, dict):
                raise TypeError(trees)
            if not isinstance(odd, dict):
                raise TypeError(odd)
        except (ValueError, TypeError):
            return
        self.trees, self.odd, self._blobs = trees, odd, None

    @property
    def blobs(self) -> dict[str, BlobEntry]:
        """The blob entries, loaded when first asked for: a command that needs only the
        trees' listings (which notes sit on which commits) never makes 100,000 summaries."""
        if self._blobs is None:
            blobs: dict[str, BlobEntry] = {}
            try:
                for frame in self._frames:
                    blobs.update((blob, blob_entry(value)) for blob, value in frame.items())
            except (ValueError, TypeError, IndexError, KeyError, AttributeError, EOFError):
                blobs = {}  # summaries cut short: the notes are parsed again, the trees kept
            self._blobs, self._frames = blobs, iter(())
        return self._blobs

    def put_tree(self, tree: str, notes: str, odd: Iterable[OddTuple] = ()) -> None:
        self.trees[tree] = notes
        entries = tuple((path, kind, oid) for path, kind, oid in odd)
        if entries:
            self.odd[tree] = entries
        self.dirty = True

    def put_blob(self, blob: str, entry: BlobEntry) -> None:
        self.blobs[blob] = entry
        self.dirty = True

    def save(self, trees: Iterable[str], blobs: Iterable[str]) -> bool:
        """Keep only what the current refs use, and write it if anything changed. Whether
        the file holds it (so that it can be loaded again rather than read afresh)."""
        if not self.dirty:
            return True
        keep_trees = {t: self.trees[t] for t in trees if t in self.trees}
        keep_odd = {t: self.odd[t] for t in keep_trees if t in self.odd}
        self.dirty = False
        return self.write_frames((keep_trees, keep_odd), self._blob_frames(blobs))

    def _blob_frames(self, blobs: Iterable[str]) -> Iterator[dict[str, Any]]:
        frame: dict[str, Any] = {}
        for blob in blobs:
            value = self.blobs.get(blob)
            if value is not None:
                frame[blob] = plain_entry(value)
                if len(frame) == self.FRAME_ENTRIES:
                    yield frame
                    frame = {}
        if frame:
            yield frame


Reach = tuple[dict[str, int], tuple[str, ...]]  # reachable commit -> rank, and checked others
Label = tuple[str, int | None, int | None]
KEEP_REVS = 3


class GraphCache(CacheFile):
    """What the commit graph answered: the rank of annotated commits in `git rev-list REV`
    for a few recent revisions, and divergence labels between two commits. Commit ids
    name immutable history, so an answer stays true: nothing is kept where they do not
    (a shallow clone, a replacement in force), and a label of a handover off REV's
    history is used only while that commit is here (graph.CommitGraph)."""

    # Ranks follow git's own order across merges (an older layout derived them).
    # Never written while git reads the history through replacements (graph.CommitGraph).
    FORMAT = "graph:revs reach:(rank-in-rev-list,checked) labels:(label,ahead,behind) unreplaced"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.revs: list[str] = []  # most recently used last
        self.reaches: dict[str, Reach] = {}
        self.labels: dict[str, Label] = {}
        self.dirty = False
        loaded = self.load()
        try:
            if loaded is not None:
                self.revs, self.reaches, self.labels = (
                    list(loaded[0]),
                    dict(loaded[1]),
                    dict(loaded[2]),
                )
        except (ValueError, TypeError, IndexError):
            self.revs, self.reaches, self.labels = [], {}, {}

    def _touch(self, rev: str) -> None:
        if rev in self.revs:
            self.revs.remove(rev)
        self.revs.append(rev)
        del self.revs[:-KEEP_REVS]
        self.dirty = True

    def reach(self, rev: str) -> Reach | None:
        return self.reaches.get(rev)

    def put_reach(self, rev: str, reach: Reach) -> None:
        self.reaches[rev] = reach
        self._touch(rev)

    def put_label(self, handover: str, rev: str, label: Label) -> None:
        self.labels[f"{handover} {rev}"] = label
        self._touch(rev)

    def label(self, handover: str, rev: str) -> Label | None:
        return self.labels.get(f"{handover} {rev}")

    def kept(self) -> list[str]:
        return self.revs[::-1]

    def save(self) -> None:
        if not self.dirty:
            return
        keep = set(self.revs)
        reach = {rev: value for rev, value in self.reaches.items() if rev in keep}
        labels = {k: v for k, v in self.labels.items() if k.split(" ")[1] in keep}
        self.write(self.revs, reach, labels)
        self.dirty = False


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
        "invalid-plain)"
    )

    @classmethod
    def version(cls) -> str:
        """The release, the format, and the text this code makes of a sample record: a
        text kept by another encoder is never spliced into this one's output."""
        return f"{super().version()} {_sample_text()}"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._file = _Forms()  # the file read
        self._put = _Forms()  # the notes put by this command, not saved yet
        self._changed = False
        self._open()

    def _open(self) -> None:
        try:
            file = self.path.open("rb")
        except OSError:
            return
        try:
            (length,) = _LENGTH.unpack(file.read(_LENGTH.size))
            if length > os.fstat(file.fileno()).st_size - _LENGTH.size:
                raise ValueError("cut head")
            head = marshal.loads(file.read(length))
            if (
                isinstance(head, tuple)
                and len(head) == 2
                and head[0] == self.version()
                and isinstance(head[1], dict)
            ):
                self._file = _Forms(head[1], file, _LENGTH.size + length)
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
        return b"".join((_LENGTH.pack(len(texts)), texts, marshal.dumps(flat)))

    def put(self, blob: str, note: Note) -> None:
        """A note read whole from TOML (a salvaged note is not kept: it is read again)."""
        form = self.form(note)
        if form is not None:
            self.put_form(blob, form)

    def put_form(self, blob: str, form: bytes) -> None:
        """A note in the form `form` made of it (in this process or in a helper)."""
        if not self.has(blob):
            if self._put.file is None:  # the first note put since the last save
                self._put = _Forms.unnamed(self.path.parent)
            self._put.append(blob, form)
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
        runs: list[tuple[_Forms, array.array[int]]] = []
        for forms, blobs_in_order in sources:
            held, offset = forms.runs_of(blobs_in_order, blobs, at, offset)
            runs.append((forms, held))

        head = framed((self.version(), at))

        def chunks() -> Iterator[bytes]:
            yield from head
            for forms, held in runs:
                for n in range(0, len(held), 2):
                    yield forms.whole(held[n], held[n + 1] - held[n])

        written = self._replace_kept(chunks())
        if written is not None:  # read from now on, with the head it was written with
            self._file.close()
            self._put.close()
            self._file, self._put = _Forms(at, written, sum(map(len, head))), _Forms()
        self._changed = False


_LENGTH_MASK = 0xFFFFFFFF
_RUN_GAP = 1 << 16  # bytes between two notes read in one run of the file
_RUN_MAX = 1 << 22  # bytes of one run


def unnamed_file(folder: Path | None = None) -> BinaryIO:
    """A file that goes away when closed, for bytes that wait to be written elsewhere: in
    `folder`, else in the temporary folder, else (no file to be had) in memory."""
    import tempfile

    for where in (folder, None):
        with contextlib.suppress(OSError):
            return tempfile.TemporaryFile(dir=where)
    return io.BytesIO()


def _note(data: bytes | memoryview) -> Note | None:
    """A note from its form; None when it is not in this layout after all (the blob is
    then read again)."""
    try:
        (skip,) = _LENGTH.unpack_from(data)
        entries, other, invalid_plain = marshal.loads(data[_LENGTH.size + skip :])
        return Note(tuple(map(_unflat, entries)), _decode(other) if other else {}, invalid_plain)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, EOFError, struct.error):
        return None


def _texts(data: bytes | memoryview) -> tuple[str | None, ...] | None:
    """The texts of a note's records from its form, without the rest of it; None when it
    is not in this layout after all."""
    try:
        (length,) = _LENGTH.unpack_from(data)
        texts = marshal.loads(data[_LENGTH.size : _LENGTH.size + length])
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


class _Forms:
    """Marshalled notes end to end in a file, from `base` on, and where each one is."""

    def __init__(
        self, at: dict[str, int] | None = None, file: BinaryIO | None = None, base: int = 0
    ) -> None:
        self.at: dict[str, int] = {} if at is None else at  # blob -> offset << 32 | length
        self.file = file
        self._base = base
        self._end = 0  # where the next note appended goes
        self._buffer = bytearray()  # what `runs` reads a run into, again and again

    @classmethod
    def unnamed(cls, folder: Path) -> _Forms:
        """Forms to append to, in an unnamed file in `folder` (`unnamed_file`)."""
        return cls({}, unnamed_file(folder))

    def append(self, blob: str, data: bytes) -> None:
        assert self.file is not None
        self.file.write(data)
        self.at[blob] = self._end << 32 | len(data)
        self._end += len(data)

    def data(self, blob: str) -> bytes | None:
        where = self.at.get(blob)
        if where is None:
            return None
        length = where & _LENGTH_MASK
        data = self._run(where >> 32, length)
        return data if data is not None and len(data) == length else None

    def runs_of(
        self, order: Iterable[str], blobs: Collection[str] | None, at: dict[str, int], offset: int
    ) -> tuple[array.array[int], int]:
        """Where the forms of the notes it holds in `order` (those of `blobs`; None: all),
        but those `at` places already, lie in its file, as runs of notes next to each other
        (copied by a few reads, not one per note), each run's start and end; and the offset
        past them once written from `offset` on in that order. Each note goes into `at`
        where it will then lie."""
        import array  # here: only a save needs it

        runs = array.array("Q")
        start = end = 0
        for blob in order:
            if blob in at or (blobs is not None and blob not in blobs):
                continue
            where = self.at[blob]
            length = where & _LENGTH_MASK
            at[blob] = offset << 32 | length
            offset += length
            if where >> 32 != end or end - start >= _RUN_MAX:
                if end > start:
                    runs.extend((start, end))
                start = where >> 32
            end = (where >> 32) + length
        if end > start:
            runs.extend((start, end))
        return runs, offset

    def whole(self, offset: int, length: int) -> bytes:
        """`length` bytes of the forms from `offset` on; OSError when the read is cut short
        under us."""
        data = self._run(offset, length)
        if data is None or len(data) != length:
            raise OSError("a note of the document cache could not be read")
        return data

    def runs(self, blobs: Iterable[str], elsewhere: list[str]) -> Iterator[tuple[str, memoryview]]:
        """Each of these blobs it holds in its file and its form, read in runs of notes
        close together; the others go to `elsewhere`. A form is valid until the next one
        is asked for: each run is read into one buffer, used again for the next (a fresh
        buffer of megabytes for each run costs more to map than the read itself)."""
        held = []
        for blob in blobs:
            where = self.at.get(blob) if self.file is not None else None
            if where is None:
                elsewhere.append(blob)
            else:
                held.append((where >> 32, where & _LENGTH_MASK, blob))
        held.sort()
        start = 0
        while start < len(held):
            first, end = held[start][0], held[start][0] + held[start][1]
            stop = start + 1
            while stop < len(held) and held[stop][0] - end < _RUN_GAP and end - first < _RUN_MAX:
                end = max(end, held[stop][0] + held[stop][1])
                stop += 1
            view = self._run_into_buffer(first, end - first)
            for offset, length, blob in held[start:stop]:
                part = view[offset - first : offset - first + length]
                if len(part) != length:
                    elsewhere.append(blob)
                else:
                    yield blob, part
            start = stop

    def _run_into_buffer(self, offset: int, length: int) -> memoryview:
        """As `_run`, read into the buffer (a larger one made when it is too small); empty
        when nothing can be read."""
        if self.file is None or isinstance(self.file, io.BytesIO) or not hasattr(os, "preadv"):
            data = self._run(offset, length)
            return memoryview(b"" if data is None else data)
        if len(self._buffer) < length:
            self._buffer = bytearray(length)  # a form still held keeps the old one alive
        view = memoryview(self._buffer)[:length]
        try:
            self.file.flush()
            read = os.preadv(self.file.fileno(), [view], self._base + offset)
        except OSError:
            return memoryview(b"")
        return view[:read]

    def _run(self, offset: int, length: int) -> bytes | None:
        """`length` bytes of the forms from `offset` on (fewer at a cut end), or None."""
        start = self._base + offset
        if self.file is None:
            return None
        if isinstance(self.file, io.BytesIO):  # no file to be had: memory
            with self.file.getbuffer() as held:
                return bytes(held[start : start + length])
        try:
            self.file.flush()
            return os.pread(self.file.fileno(), length, start)
        except OSError:
            return None

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class PatchCache(CacheFile):
    """Commit id -> its stable patch id ("" for a commit with none), for the commits records
    were written on lately: consecutive records on one commit compute it once."""

    FORMAT = "patches:commit->patch-id-stable"
    KEEP = 256

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.ids: dict[str, str] = {}
        loaded = self.load()
        if loaded is not None and len(loaded) == 1 and isinstance(loaded[0], dict):
            self.ids = loaded[0]

    def get(self, commit: str) -> str | None:
        return self.ids.get(commit)

    def put(self, commit: str, patch: str) -> None:
        self.ids.pop(commit, None)
        self.ids[commit] = patch  # newest last: the oldest go first
        self.write(dict(list(self.ids.items())[-self.KEEP :]))


class PartMissing(Exception):
    """A part the views file names is gone (removed by hand, or by a writer that pruned it
    long after this process read the file): what it held must be read from the notes."""


class ViewCache(CacheFile):
    """Per-task views of every record, for one state of the notes refs.

    The key names that state (each ref's target, and HEAD when the choice of a
    record's copy depends on it: never where HEAD does not name its history for good,
    a shallow clone or a replacement in force), so a view is never read for another
    state. The file
    holds the key, a small meta and, for each part (a task's view, a shard of the
    ledger), the name of the file in the folder beside it that holds the part's bytes.
    Those files are named by a hash of their content and never rewritten: a write
    writes only the parts it changed, and a read loads only the parts it asks for.

    A file the views stop naming is retired, with the time, in the views file itself;
    it is deleted by a write at least RETIRE_S later, so a process that read the older
    views file still finds its parts. A file no views file ever named (a writer that
    lost a race, or died) is deleted once it is RETIRE_S old.
    """

    FORMAT = (
        "views:refs(@head lasting)->(invalid counting entries that are no note,tasks),"
        "part->file,retired file->time; "
        f"part 'task ID':(rows(({_SUMMARY}),commit,blobs),resolved), "
        "part 'ledger N':(keys,resolved)"
    )
    RETIRE_S = 600.0

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.folder = path.with_name(f"{path.name}.d")
        self.key = ""
        self.meta: Any = None
        self.files: dict[str, str] = {}
        self.retired: dict[str, float] = {}
        self._read: dict[str, bytes] = {}  # parts read or written by this process
        self._staged: dict[str, bytes | None] = {}  # parts the next put writes
        loaded = self.load()
        try:
            if loaded is not None:
                key, meta, files, retired = loaded
                if isinstance(key, str) and isinstance(files, dict) and isinstance(retired, dict):
                    self.key, self.meta, self.files, self.retired = key, meta, files, retired
        except (ValueError, TypeError):
            pass

    def get(self, key: str) -> Any:
        """The meta of the views of this state, or None when the file describes another."""
        return self.meta if key and key == self.key else None

    def part(self, name: str) -> bytes | None:
        """A part's bytes; None for a part these views do not have (a task with no records);
        PartMissing when its file cannot be read whole."""
        data = self._read.get(name)
        if data is not None or name in self._staged:
            return data
        file = self.files.get(name)
        if file is None:
            return None
        try:
            data = (self.folder / file).read_bytes()
        except OSError:
            raise PartMissing(name) from None
        if _content_name(data) != file:
            with contextlib.suppress(OSError):
                os.unlink(self.folder / file)  # so that the part can be written again
            raise PartMissing(name)
        self._read[name] = data
        return data

    def stage(self, key: str, meta: Any, parts: dict[str, bytes | None]) -> None:
        """The views of state `key` for this process, written by the next `put` over them
        (a write that carries the views over twice writes them once), or never."""
        for name, data in parts.items():
            self._staged[name] = data
            if data is None:
                self._read.pop(name, None)
            else:
                self._read[name] = data
        self.key, self.meta = key, meta

    def put(
        self, key: str, meta: Any, parts: Iterable[tuple[str, bytes | None]], *, base: bool
    ) -> bool:
        """The views of state `key`: these parts (None removes one) over the parts of the
        views read and staged (`base`), or these alone. The parts of views written whole
        are taken one at a time and not kept: a later look reads its part's file. Whether
        the views file and every part were written."""
        written = True
        if base:
            parts = {**self._staged, **dict(parts)}.items()
        else:
            self._read = {}
        self._staged = {}
        files = dict(self.files) if base else {}
        for name, data in parts:
            if data is None:
                files.pop(name, None)
                self._read.pop(name, None)
                continue
            file = files[name] = _content_name(data)
            if base:
                self._read[name] = data
            target = self.folder / file
            if target.exists():
                continue
            tmp = self.folder / f"{file}.{os.getpid()}.tmp"
            try:
                self.folder.mkdir(exist_ok=True)
                tmp.write_bytes(data)
                os.replace(tmp, target)
            except OSError:
                written = False
        kept = set(files.values())
        now = time.time()
        retired = {file: when for file, when in self.retired.items() if file not in kept}
        for file in set(self.files.values()) - kept:
            retired.setdefault(file, now)
        for file, when in list(retired.items()):
            if now - when > self.RETIRE_S:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.folder / file)
                del retired[file]
        self.key, self.meta, self.files, self.retired = key, meta, files, retired
        written = self.write(key, meta, files, retired) and written
        self._sweep(kept | retired.keys(), now)
        return written

    def _sweep(self, known: set[str], now: float) -> None:
        """Delete the files no views file named, once they are RETIRE_S old."""
        try:
            entries = [entry for entry in os.scandir(self.folder) if entry.name not in known]
        except OSError:
            return
        for entry in entries:
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > self.RETIRE_S:
                    os.unlink(entry.path)


def _content_name(data: bytes) -> str:
    # Here, not at the top: a command that reads no views part (show) does not pay for it.
    # hashlib itself loads OpenSSL's digests first (2 ms a command); blake2b is CPython's.
    try:
        from _blake2 import blake2b
    except ImportError:  # a Python without it
        from hashlib import blake2b

    return blake2b(data, digest_size=16).hexdigest()
