"""The view cache (`ViewCache`: per-task views of every record, for one state of the
notes refs), the parts of the views as it keeps them, marshalled, and those parts
carried over to a new state of the notes refs from the notes that changed.

A task's view, "task ID": (rows, resolved handover ids), a row being (summary as a tuple,
commit, blobs); a shard of the ledger, "ledger N": the keys of the records, and the
handover ids resumes resolve (as often as they do), whose keys fall in shard N. The
views' meta: (invalid, task ids).
"""

from __future__ import annotations

import collections
import contextlib
import marshal
import os
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from majordomus.cachefile import SUMMARY_FIELDS, CacheFile
from majordomus.notes import Note, summarise
from majordomus.records import Record, Summary, summary_of
from majordomus.repository import NOTES_REF
from majordomus.values import WriteReport

Row = tuple[tuple[Any, ...], str, tuple[str, ...]]  # a cached summary, its commit, its blobs
View = tuple[tuple[Row, ...], tuple[str, ...]]  # a task's rows, its resolved handovers
Meta = tuple[int, tuple[str, ...]]

LEDGER_SHARDS = 16  # a first read writes each as a file: a few, each a small part of the keys
Notes = tuple[tuple[str, ...], int]  # a commit's readable note blobs, and how many are not
# The views' meta, the commits whose notes changed, and their notes (in order) before and now
# (None: an object is missing).
Changed = tuple[Meta, set[str], list[tuple[Notes | None, Notes | None]]]


def state_key(targets: Mapping[str, str]) -> str:
    """The key of a state of the notes refs: each ref and its target."""
    return ";".join(f"{name}={target}" for name, target in sorted(targets.items()))


def task_part(task: str) -> str:
    return f"task {task}"


def pack(rows: Sequence[Row], resolved: Collection[str]) -> bytes:
    return marshal.dumps((tuple(rows), tuple(sorted(resolved))))


def unpack(data: bytes | None) -> View:
    if data is None:
        return (), ()
    rows, resolved = marshal.loads(data)
    return rows, resolved


def _record_key(summary: tuple[Any, ...]) -> str:
    """A record's key in the ledger, from its summary as a tuple: its kind and its id."""
    return f"{summary[0]} {summary[1]}"


def _handover_key(handover: str) -> str:
    return _record_key(("handover", handover))


def resolving(summary: tuple[Any, ...]) -> tuple[str, ...]:
    """The handover ids a record's summary resolves (a resume's handover and supersedes)."""
    return (summary[5], *summary[6]) if summary[0] == "resume" else ()


def _shard_of(key: str) -> str:
    return _shard_name(_shard_number(key))


def _shard_number(key: str) -> int:
    return zlib.crc32(key.encode()) % LEDGER_SHARDS


def _shard_name(number: int) -> str:
    return f"ledger {number}"


class Ledger:
    """Every record's key and every handover id a resume resolves, kept to carry the views
    over exactly: a copy of a record, or a resume of another task's handover, is told
    apart from a new record. Sharded by key: a change loads and rewrites only the shards
    of the keys it concerns (a handover id goes with its handover's key)."""

    def __init__(self, part: Callable[[str], bytes | None]) -> None:
        self._part = part
        self._shards: dict[str, tuple[set[str], collections.Counter[str]]] = {}
        self._changed: set[str] = set()

    def _shard(
        self, key: str, *, change: bool = False
    ) -> tuple[set[str], collections.Counter[str]]:
        name = _shard_of(key)
        shard = self._shards.get(name)
        if shard is None:
            data = self._part(name)
            keys, resolved = marshal.loads(data) if data else ((), ())
            shard = self._shards[name] = (set(keys), collections.Counter(resolved))
        if change:
            self._changed.add(name)
        return shard

    def has(self, key: str) -> bool:
        return key in self._shard(key)[0]

    def add(self, key: str) -> None:
        self._shard(key, change=True)[0].add(key)

    def discard(self, key: str) -> None:
        self._shard(key, change=True)[0].discard(key)

    def resolve(self, handover: str, count: int) -> None:
        self._shard(_handover_key(handover), change=True)[1][handover] += count

    def is_resolved(self, handover: str) -> bool:
        return self._shard(_handover_key(handover))[1][handover] > 0

    def changed_parts(self) -> dict[str, bytes | None]:
        return {name: _shard_bytes(*self._shards[name]) for name in self._changed}

    def record(self, summary: tuple[Any, ...]) -> None:
        """A record (its summary as a tuple) added: its key, and the handovers it resolves."""
        self.add(_record_key(summary))
        for handover in resolving(summary):
            self.resolve(handover, +1)

    @staticmethod
    def built(summaries: Sequence[tuple[Any, ...]]) -> dict[str, bytes | None]:
        """Every shard of the ledger of these records (their summaries)."""
        # Keys by shard number first (one set per shard, not one per key made and dropped;
        # each key and its shard as `_record_key` and `_shard_number` make them, inline).
        numbered: dict[int, set[str]] = collections.defaultdict(set)
        crc32 = zlib.crc32
        for key in [f"{summary[0]} {summary[1]}" for summary in summaries]:
            numbered[crc32(key.encode()) % LEDGER_SHARDS].add(key)
        shards = {_shard_name(n): (k, collections.Counter[str]()) for n, k in numbered.items()}
        resumes = [summary for summary in summaries if summary[0] == "resume"]
        for handover in (h for summary in resumes for h in resolving(summary)):
            name = _shard_of(_handover_key(handover))
            if name not in shards:
                shards[name] = (set(), collections.Counter())
            shards[name][1][handover] += 1
        return {name: _shard_bytes(*shard) for name, shard in shards.items()}


def _shard_bytes(keys: set[str], resolved: collections.Counter[str]) -> bytes | None:
    if not keys and not +resolved:
        return None
    return marshal.dumps((tuple(sorted(keys)), tuple(sorted((+resolved).elements()))))


def _changed(
    commits: set[str],
    notes: Sequence[tuple[Notes | None, Notes | None]],
    note: Callable[[Sequence[str]], Note],
    invalid: int,
) -> tuple[list[tuple[Any, ...]], list[Row], int] | None:
    """The summaries of the notes of these commits before, the rows of their notes now, and
    the `invalid` count of the views carried over to now (see `carried_over`)."""
    gone: list[tuple[Any, ...]] = []
    rows: list[Row] = []
    for commit, (old, new) in zip(sorted(commits), notes, strict=True):
        if old is None or new is None:
            return None
        invalid += new[1] - old[1]
        if old[0]:
            held = note(old[0])
            invalid -= held.invalid
            gone += [tuple(summary) for summary in summarise(held)]
        if new[0]:
            held = note(new[0])
            invalid += held.invalid
            rows += [(tuple(summary), commit, new[0]) for summary in summarise(held)]
    return gone, rows, invalid


def carried_over(
    cache: ViewCache,
    changed_notes: Changed,
    note: Callable[[Sequence[str]], Note],
    unwritten: dict[str, View] | None,
) -> tuple[Meta, dict[str, bytes | None]] | None:
    """The meta and the parts of the views `cache` holds carried over to the notes that
    changed (each read by `note`): only the tasks those hold records of, before or after,
    are unpacked, and the shards of the ledger their keys fall in; None when that cannot
    be told cheaply (copies of a record, a missing object, a resume that resolves another
    task's handover). With `unwritten`, the tasks' views are kept there, not packed (a
    write is about to carry them further)."""
    meta, commits, notes = changed_notes
    changed = _changed(commits, notes, note, meta[0])
    if changed is None:
        return None
    gone, new_rows, invalid = changed
    try:
        moving = _ledger_moved(cache, gone, new_rows)
        if moving is None:
            return None
        ledger, moved, gone_keys = moving
        touched = {summary[2] for summary in gone} | {row[0][2] for row in new_rows}
        views = {task: unpack(cache.part(task_part(task))) for task in touched}
        rows = {
            task: [r for r in view[0] if r[1] not in commits]
            + [r for r in new_rows if r[0][2] == task]
            for task, view in views.items()
        }
        mine = {r[0][1] for rs in rows.values() for r in rs if r[0][0] == "handover"}
        if any(ledger.has(_handover_key(h)) for h in moved if h not in mine):
            return None  # a resume of another task's handover: that view changes too
        # A handover's resolution changes only when a change resolves it or stops
        # resolving it, or when the handover itself is new.
        recheck = moved | {
            r[0][1]
            for r in new_rows
            if r[0][0] == "handover" and _record_key(r[0]) not in gone_keys
        }
        parts = ledger.changed_parts()
        _put_views(parts, rows, views, ledger, recheck, unwritten)
    except UNREADABLE:
        return None
    emptied = {task for task, task_rows in rows.items() if not task_rows}
    ids = tuple(t for t in meta[1] if t not in emptied)
    ids += tuple(sorted(t for t in rows if t not in emptied and t not in ids))
    return (invalid, ids), parts


def _ledger_moved(
    cache: ViewCache, gone: list[tuple[Any, ...]], new_rows: list[Row]
) -> tuple[Ledger, set[str], set[str]] | None:
    """The ledger with the keys the changes take away and add, the handovers whose
    resolution they move, and the keys they take away; None when a record is twice among
    them, or one they add is there already (copies)."""
    # Only what the changes add or take away touches the ledger: a note that grew by
    # one record (`git notes append`) still holds all the others.
    gone_keys = {_record_key(summary) for summary in gone}
    new_keys = {_record_key(row[0]) for row in new_rows}
    if len(new_keys) < len(new_rows):
        return None  # a record twice among the changes: copies
    resolutions = collections.Counter(h for row in new_rows for h in resolving(row[0]))
    resolutions.subtract(h for summary in gone for h in resolving(summary))
    moved = {h for h, count in resolutions.items() if count}
    ledger = Ledger(cache.part)
    for key in gone_keys - new_keys:
        ledger.discard(key)
    for key in new_keys - gone_keys:
        if ledger.has(key):
            return None  # a copy: which one a read lists depends on the graph
        ledger.add(key)
    for handover in moved:
        ledger.resolve(handover, resolutions[handover])
    return ledger, moved, gone_keys


def _put_views(
    parts: dict[str, bytes | None],
    rows: Mapping[str, list[Row]],
    views: Mapping[str, View],
    ledger: Ledger,
    recheck: Collection[str],
    unwritten: dict[str, View] | None,
) -> None:
    """Each touched task's view with its `rows`, into `parts` (None: a task with none left)
    or `unwritten`; a handover's resolution read from the ledger if it is to be checked
    again, else as the task's view had it."""
    for task, task_rows in sorted(rows.items()):
        if not task_rows:
            parts[task_part(task)] = None
            continue
        was = set(views[task][1])
        handovers = {row[0][1] for row in task_rows if row[0][0] == "handover"}
        resolved = {h for h in handovers if (ledger.is_resolved(h) if h in recheck else h in was)}
        if unwritten is not None:
            unwritten[task] = (tuple(task_rows), tuple(sorted(resolved)))
        else:
            parts[task_part(task)] = pack(task_rows, resolved)


def written(
    cache: ViewCache,
    targets: Mapping[str, str],
    meta: Meta,
    view: View,
    unwritten: Mapping[str, View],
    record: Record,
    report: WriteReport,
) -> None:
    """The views of the state a write of ours made (`report`) from `targets` and `meta`,
    put in `cache`: `view` (the task's, before) with the record's row and the rows of the
    note's records moved on (`_moved_on`), the ledger's shard, and the views not written
    yet (`unwritten`). Nothing when a part cannot be read, or when the note held another
    task's records (views this write does not hold): the next read carries them over."""
    if not report.alone:
        return
    rows = _moved_on(view[0], record.head, report)
    if rows is None:
        return
    summary = tuple(summary_of(record, report.position))
    ledger = Ledger(cache.part)
    try:
        ledger.record(summary)
    except UNREADABLE:
        return
    resolved = view[1]
    rows = (*rows, (summary, record.head, (report.blob,)))
    if record.kind == "resume":
        resolved = (*resolved, *resolving(summary))
    parts = ledger.changed_parts()
    parts.update((task_part(t), pack(*unwritten_view)) for t, unwritten_view in unwritten.items())
    parts[task_part(record.task)] = pack(rows, set(resolved))
    invalid, task_ids = meta
    if record.task not in task_ids:
        task_ids = (*task_ids, record.task)
    after = state_key({**targets, NOTES_REF: report.notes_commit})
    cache.put(after, (invalid, task_ids), parts.items(), base=True)


_POSITION = Summary._fields.index("position")


def _moved_on(rows: tuple[Row, ...], commit: str, report: WriteReport) -> tuple[Row, ...] | None:
    """`rows` as the write `report` tells left them: those of records in the note on
    `commit` name its new blob, one place on where they come after the record written
    (`WriteReport.in_place`); None when one of them was read from another blob than the
    one the write replaced (a note on another notes ref, the copies of a damaged tree)."""
    moved: list[Row] = []
    for summary, on, blobs in rows:
        if on != commit:
            moved.append((summary, on, blobs))
            continue
        if report.replaced is None or blobs != (report.replaced,):
            return None
        position = summary[_POSITION]
        if report.in_place or position < report.position:
            moved.append((summary, on, (report.blob,)))
            continue
        later = (*summary[:_POSITION], position + 1, *summary[_POSITION + 1 :])
        moved.append((later, on, (report.blob,)))
    return tuple(moved)


class PartMissing(Exception):
    """A part the views file names is gone (removed by hand, or by a writer that pruned it
    long after this process read the file): what it held must be read from the notes."""


# A part that cannot be read as written: gone, cut short, or no part (marshal, unpacking).
UNREADABLE = (PartMissing, ValueError, TypeError, EOFError)


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
        "one copy of each (kind,task,id), "
        "part->file,retired file->time; "
        f"part 'task ID':(rows(({SUMMARY_FIELDS}),commit,blobs),resolved), "
        f"part 'ledger N' of {LEDGER_SHARDS}:(keys,resolved)"
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
