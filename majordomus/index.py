"""The index of records a read works on: one copy of each record, open handovers, labels;
and per-task views of it, cached for the exact state of the notes refs they describe.

Everything here works on summaries; a record is parsed whole (`locate`) only
when it is to be shown.
"""

from __future__ import annotations

import collections
import marshal
import operator
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from majordomus.cachefile import VIEWS_FILE_NAME
from majordomus.errors import RepositoryError
from majordomus.notes import Note, Shown, summarise
from majordomus.records import Record, Summary, summary_of
from majordomus.repository import NOTES_REF
from majordomus.values import AttachedRecord, Listed, NoteSet, WriteReport
from majordomus.viewcache import PartMissing, ViewCache

if TYPE_CHECKING:
    from majordomus.history import History
    from majordomus.notesread import NotesReader

UNREACHED = 1 << 62  # the rank of a commit REV does not reach: after all it reaches
CARRY_MAX = 256  # changed notes to re-read before a full read is the cheaper way
PRELOAD_THRESHOLD = 24  # notes to show whole before the document cache pays for its load
Row = tuple[tuple[Any, ...], str, tuple[str, ...]]  # a cached summary, its commit, its blobs


def newest_first(items: Iterable[Listed], order_of: Callable[[str], int]) -> list[Listed]:
    """By `at`, then graph order (children first), then position in the note, newest first;
    records nothing of that orders (on two commits REV does not reach, in one second) by
    commit id, whatever order they were found in. (Stable sorts, each by one key: cheaper
    than one sort by a key of four.)"""
    ordered = sorted(items, key=_commit)
    ordered.sort(key=lambda item: (order_of(item.commit), -item.summary.position))
    ordered.sort(key=_at, reverse=True)  # a stable sort, reversed or not
    return ordered


def newest_copy(copies: Sequence[Listed], history: History) -> Listed:
    """Of copies of one record on commits REV does not reach: the one a read lists, the
    copy on the newest commit."""
    if len(copies) == 1:
        return copies[0]
    return max(copies, key=lambda c: history.commit_time(c.commit) or 0)


_at: Callable[[Listed], float] = operator.attrgetter("summary.at")  # C: no call of ours
_commit: Callable[[Listed], str] = operator.attrgetter("commit")


class Index:
    """Records, each listed once with the copy chosen as the spec says: the copy on a
    commit reachable from REV when there is one, else the copy on the newest commit."""

    def __init__(
        self, noteset: NoteSet, reader: NotesReader, history: History, rev: str | None = None
    ) -> None:
        self._reader, self._history = reader, history
        self._rev = rev
        self._order: dict[str, int] | None = None
        self._notes: dict[tuple[str, ...], Note] = {}
        self._row_blobs: Mapping[tuple[str, str], tuple[str, ...]] = {}
        self._blobs: Mapping[str, tuple[str, ...]] = {
            commit: annotated.blobs for commit, annotated in noteset.commits.items()
        }
        self.invalid = noteset.invalid
        self._resolved: set[str] | None = None
        self._task_ids: tuple[str, ...] | None = None
        self._by_task: dict[str, list[Listed]] | None = None
        self._tasks: dict[str, Listed | None] | None = None
        self.records: list[Listed] = [
            Listed(summary, commit)
            for commit, annotated in noteset.commits.items()
            for summary in annotated.summaries
        ]
        self.has_copies = len({item.summary.id for item in self.records}) < len(self.records)
        if not self.has_copies:  # the usual read: every record once, nothing to choose
            return
        # Copies of one record share kind and id; a record of another kind that reuses
        # the id (only a forged note does) is another record, never a newer copy.
        copies: dict[tuple[str, str], list[Listed]] = {}
        for item in self.records:
            copies.setdefault((item.summary.kind, item.summary.id), []).append(item)
        self.has_copies = any(len(c) > 1 for c in copies.values())
        self.records = [self._choose(c) for c in copies.values()]

    @classmethod
    def of_view(
        cls,
        reader: NotesReader,
        history: History,
        rows: Sequence[Row],
        resolved: set[str],
        task_ids: tuple[str, ...],
        invalid: int,
        rev: str | None = None,
    ) -> Index:
        """An index holding one task's records, as a view cached them.

        Each row names the note blobs its position refers to (after a write of ours,
        older rows on the same commit still name the older blob, which holds them at
        the same place).
        """
        index = cls.__new__(cls)
        index._reader, index._history = reader, history
        index._rev, index._order, index._notes = rev, None, {}
        index.records = [Listed(Summary._make(row[0]), row[1]) for row in rows]
        index._blobs = {row[1]: row[2] for row in rows}
        index._row_blobs = {(row[0][0], row[0][1]): row[2] for row in rows}
        index.invalid, index._resolved, index._task_ids = invalid, resolved, task_ids
        index.has_copies, index._by_task, index._tasks = False, None, None
        return index

    @property
    def graph_order(self) -> dict[str, int]:
        """Commit -> rank in `git rev-list REV` (children first), for the commits it holds."""
        if self._order is None:
            rev = self._rev or self._history.head()
            self._order = self._history.graph().order(rev, self._blobs.keys())
        return self._order

    def _choose(self, copies: list[Listed]) -> Listed:
        if len(copies) == 1:
            return copies[0]
        reachable = [c for c in copies if c.commit in self.graph_order]
        if reachable:
            return min(reachable, key=lambda c: self.graph_order[c.commit])
        return newest_copy(copies, self._history)

    def locate(self, listed: Listed) -> AttachedRecord:
        """The whole record, parsed from its note."""
        blobs = self._blobs_of(listed)
        note = self._notes.get(blobs)
        if note is None:
            note = self._reader.note(blobs)
            self._notes[blobs] = note
        position = listed.summary.position
        return AttachedRecord(note.records[position], listed.commit, position)

    def preload(self, items: Sequence[Listed]) -> None:
        """Before showing many records whole: parse their notes in one go (the notes the
        document cache lacks are kept in it newest first, as a history reads them)."""
        blobs = {b for item in items for b in self._blobs_of(item)}
        if len(blobs) <= PRELOAD_THRESHOLD:  # a few: read in one go (one git process
            self._reader.blobs.prefetch(list(blobs))  # while libgit2 is not loaded)
            return

        def blobs_newest_first() -> Iterator[str]:  # asked for only when notes are kept anew
            for item in sorted(items, key=_at, reverse=True):
                yield from self._blobs_of(item)

        self._reader.preload(blobs, blobs_newest_first())

    def load(self, items: Iterable[Listed]) -> None:
        """The notes of a part of the records shown, read in one go before each is located
        (after `preload`, which made the document cache hold them)."""
        self._reader.load(b for item in items for b in self._blobs_of(item))

    def texts(self, items: Sequence[Listed]) -> list[str | None]:
        """Each record's JSON text as the document cache keeps it (after `preload`), or None
        (a note it lacks, or one of several on a commit: their records are renumbered)."""
        if self._row_blobs:
            of = map(self._blobs_of, items)
        else:  # `_blobs_of` of an index of every note, without a call per record
            of = map(self._blobs.__getitem__, (item.commit for item in items))
        blobs = [blobs[0] if len(blobs) == 1 else "" for blobs in of]
        texts = self._reader.texts(blobs)
        found: list[str | None] = []
        for item, blob in zip(items, blobs, strict=True):
            held = texts.get(blob)
            position = item.summary.position
            found.append(held[position] if held is not None and position < len(held) else None)
        return found

    def forget(self, items: Iterable[Listed]) -> None:
        """The notes of records shown already: their memory goes back (a second look
        parses them again)."""
        for item in items:
            blobs = self._blobs_of(item)
            self._notes.pop(blobs, None)
            self._reader.blobs.forget(blobs)

    def _blobs_of(self, listed: Listed) -> tuple[str, ...]:
        if not self._row_blobs:  # an index of every note: its commit's notes
            return self._blobs[listed.commit]
        key = (listed.summary.kind, listed.summary.id)
        return self._row_blobs.get(key) or self._blobs[listed.commit]

    def of_task(self, task: str) -> list[Listed]:
        """One task's records; grouped once, so per-task questions do not rescan them all."""
        if self._by_task is None:
            self._by_task = {}
            for item in self.records:
                self._by_task.setdefault(item.summary.task, []).append(item)
        return self._by_task.get(task, [])

    def of_kind(self, kind: str, task: str | None = None) -> list[Listed]:
        items = self.records if task is None else self.of_task(task)
        return [item for item in items if item.summary.kind == kind]

    def tasks(self) -> Mapping[str, Listed | None]:
        """Task id -> its task record (None when only other records name it, or when this
        index holds another task's view); found once per index."""
        if self._tasks is None:
            found: dict[str, Listed | None] = dict.fromkeys(self._task_ids or ())
            for item in self.records:
                if item.summary.kind == "task":
                    found[item.summary.task] = item
                else:
                    found.setdefault(item.summary.task, None)
            self._tasks = found
        return self._tasks

    def resolved_handovers(self) -> set[str]:
        if self._resolved is not None:
            return self._resolved
        resolved: set[str] = set()
        for item in self.of_kind("resume"):
            resolved.add(item.summary.handover)
            resolved.update(item.summary.supersedes)
        self._resolved = resolved
        return resolved

    def open_handovers(self, task: str) -> list[Listed]:
        resolved = self.resolved_handovers()
        pending = [h for h in self.of_kind("handover", task) if h.summary.id not in resolved]
        return self.newest_first(pending)

    def last(self, kind: str, task: str) -> Listed | None:
        items = self.of_kind(kind, task)
        if not items:
            return None
        newest = max(item.summary.at for item in items)
        return self.newest_first([item for item in items if item.summary.at == newest])[0]

    def newest_first(self, items: Sequence[Listed]) -> list[Listed]:
        """`newest_first`, with the graph consulted only when two records on different
        commits share a second (on one commit, their place in the note orders them)."""
        if self._order is None:
            commits: dict[float, str] = {}
            for item in items:
                if commits.setdefault(item.summary.at, item.commit) != item.commit:
                    self.graph_order  # noqa: B018 (computes and keeps the order)
                    break
        return newest_first(items, self.order_of)

    def order_of(self, commit: str) -> int:
        """Graph order when it is already known, else a neutral rank (ties stay in note order);
        a commit REV does not reach comes after every one it reaches, however few of those
        this index holds (its rank was once their count, below the ranks of older ones)."""
        if self._order is None:
            return 0
        return self._order.get(commit, UNREACHED)


# ---- per-task views ---------------------------------------------------------------------

# The views' parts, marshalled: a task's view, "task ID": (rows, resolved handover ids), a
# row being (summary as a tuple, commit, blobs); a shard of the ledger, "ledger N": the keys
# of the records, and the handover ids resumes resolve (as often as they do), whose keys
# fall in shard N. The views' meta: (invalid, task ids).

Meta = tuple[int, tuple[str, ...]]
LEDGER_SHARDS = 64


def _pack(rows: Sequence[Row], resolved: Collection[str]) -> bytes:
    return marshal.dumps((tuple(rows), tuple(sorted(resolved))))


def _task_part(task: str) -> str:
    return f"task {task}"


def _record_key(summary: tuple[Any, ...]) -> str:
    return f"{summary[0]} {summary[1]}"


def _handover_key(handover: str) -> str:
    return _record_key(("handover", handover))


def _resolving(summary: tuple[Any, ...]) -> tuple[str, ...]:
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

    @staticmethod
    def built(keys: Iterable[str], resolved: Iterable[str]) -> dict[str, bytes | None]:
        # Keys by shard number first (one set per shard, not one per key made and dropped).
        numbered: dict[int, set[str]] = collections.defaultdict(set)
        for key in keys:
            numbered[_shard_number(key)].add(key)
        shards = {_shard_name(n): (k, collections.Counter[str]()) for n, k in numbered.items()}
        for handover in resolved:
            name = _shard_of(_handover_key(handover))
            if name not in shards:
                shards[name] = (set(), collections.Counter())
            shards[name][1][handover] += 1
        return {name: _shard_bytes(*shard) for name, shard in shards.items()}


def _shard_bytes(keys: set[str], resolved: collections.Counter[str]) -> bytes | None:
    if not keys and not +resolved:
        return None
    return marshal.dumps((tuple(sorted(keys)), tuple(sorted((+resolved).elements()))))


class Views:
    """Per-task indexes for the current state of the notes refs, from the view cache when
    it describes exactly this state, else built from a full read and cached."""

    def __init__(
        self,
        reader: NotesReader,
        history: History,
        *,
        writing: bool = False,
        shown: Shown | None = None,
        every: bool = False,
    ) -> None:
        """`writing`: a record is about to be written, and `recorded` will write the views
        of the state it makes: views carried over to the current state are only staged.
        `shown`: the notes the command shows whole next (a task's), kept as they are
        parsed when the views are built from every note. `every`: the command reads
        every task (`whole`): an index of every note made by a full read is kept."""
        self._reader, self._history = reader, history
        self._shown = shown
        self._writing = writing
        self._every = every
        # Task views carried over and not written yet (`writing`): `recorded` packs them.
        self._unwritten: dict[str, tuple[tuple[Row, ...], tuple[str, ...]]] = {}
        self._cache = ViewCache(reader.commondir / VIEWS_FILE_NAME)
        self._targets = reader.ref_targets()
        self._key = _key(self._targets)
        try:
            head: str | None = history.head()
        except RepositoryError:
            head = None
        self._head = head
        self.full: Index | None = None  # the index of every task, while it is kept
        self.full_read = False  # whether this state's views were built from every note
        self._noteset: NoteSet | None = None
        self._at_rev: tuple[str | None, Index] | None = None  # every note, read from a REV
        meta = self._cache.get(self._key)
        if meta is None and head is not None and history.graph().lasting:
            # Built where copies exist: which copy a read lists depends on HEAD's history,
            # which HEAD names only where the graph's answers last (`CommitGraph.lasting`).
            meta = self._cache.get(f"{self._key}@{head}")
        if meta is None:
            meta = self._carried_over()
        self._meta: Meta = meta or self._read_everything()
        self.dependent_on_head = self._cache.key != self._key

    def _read_everything(self) -> Meta:
        """Every note read, and the views of this state built from them and cached."""
        self.full_read = True
        noteset = self._noteset = self._reader.read_notes(shown=self._shown)
        if noteset.refs != self._targets:
            # A write landed since the refs were read: these views are of the state read.
            self._targets = dict(noteset.refs)
            self._key = _key(self._targets)
        full = self.full = Index(noteset, self._reader, self._history)
        meta = (full.invalid, tuple(dict.fromkeys(item.summary.task for item in full.records)))
        # Nothing remembered while objects are still to arrive, nor a choice of copies
        # where HEAD does not name its history for good (a shallow or replaced graph).
        kept = not noteset.missing and not (full.has_copies and not self._history.graph().lasting)
        if kept:
            key = f"{self._key}@{self._head}" if full.has_copies else self._key
            if self._cache.put(key, meta, _build(full), base=False) and not self._every:
                # Written: each task's index is read from its view, as the next command
                # reads it, and every record of every task is let go (at 100,000 notes,
                # ~90 MiB no longer held while the graph is walked).
                self.full = self._noteset = None
        return meta

    def _carried_over(self) -> Meta | None:
        """The cached views brought to the current state by re-reading only the notes that
        changed since (another writer, `git notes`, a fetch): what a full read would build,
        or None when that cannot be told cheaply (copies of a record, a missing object, a
        resume that resolves another task's handover).

        Only the tasks the changed notes hold records of, before or after, are unpacked
        and written again, with the shards of the ledger their keys fall in: every other
        part stays as it was, byte for byte."""
        cache, reader = self._cache, self._reader
        if not cache.key or "@" in cache.key or not cache.meta:
            return None
        before = dict(item.partition("=")[::2] for item in cache.key.split(";"))
        if _key(before) != cache.key or before.keys() != self._targets.keys():
            return None
        changed: set[str] = set()
        for name, target in self._targets.items():
            if before[name] != target:
                found = reader.changed_notes(before[name], target)
                if found is None:
                    return None
                changed |= found
        if len(changed) > CARRY_MAX:
            return None
        try:
            invalid, task_ids = cache.meta
            notes = [
                (reader.notes_on(c, before), reader.notes_on(c, self._targets))
                for c in sorted(changed)
            ]
        except (RepositoryError, ValueError, TypeError):
            return None
        gone: list[tuple[Any, ...]] = []  # summaries of the changed notes before
        new_rows: list[Row] = []
        for commit, (old, new) in zip(sorted(changed), notes, strict=True):
            if old is None or new is None:
                return None
            invalid += new[1] - old[1]
            if old[0]:
                note = reader.note(old[0])
                invalid -= note.invalid
                gone += [tuple(summary) for summary in summarise(note)]
            if new[0]:
                note = reader.note(new[0])
                invalid += note.invalid
                new_rows += [(tuple(summary), commit, new[0]) for summary in summarise(note)]
        # Only what the changes add or take away touches the ledger: a note that grew by
        # one record (`git notes append`) still holds all the others.
        gone_keys = {_record_key(summary) for summary in gone}
        new_keys = {_record_key(row[0]) for row in new_rows}
        if len(new_keys) < len(new_rows):
            return None  # a record twice among the changes: copies
        resolutions = collections.Counter(h for row in new_rows for h in _resolving(row[0]))
        resolutions.subtract(h for summary in gone for h in _resolving(summary))
        moved = {h for h, count in resolutions.items() if count}
        ledger = Ledger(cache.part)
        try:
            for key in gone_keys - new_keys:
                ledger.discard(key)
            for key in new_keys - gone_keys:
                if ledger.has(key):
                    return None  # a copy: which one a read lists depends on the graph
                ledger.add(key)
            for handover in moved:
                ledger.resolve(handover, resolutions[handover])
            touched = {summary[2] for summary in gone} | {row[0][2] for row in new_rows}
            views = {task: _unpack(cache.part(_task_part(task))) for task in touched}
            rows = {
                task: [r for r in view[0] if r[1] not in changed]
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
            for task, task_rows in sorted(rows.items()):
                if not task_rows:
                    parts[_task_part(task)] = None
                    continue
                was = set(views[task][1])
                handovers = {row[0][1] for row in task_rows if row[0][0] == "handover"}
                resolved = {
                    h for h in handovers if (ledger.is_resolved(h) if h in recheck else h in was)
                }
                if self._writing:
                    self._unwritten[task] = (tuple(task_rows), tuple(sorted(resolved)))
                else:
                    parts[_task_part(task)] = _pack(task_rows, resolved)
        except (PartMissing, ValueError, TypeError, EOFError):
            return None
        emptied = {task for task, task_rows in rows.items() if not task_rows}
        ids = tuple(t for t in task_ids if t not in emptied)
        ids += tuple(sorted(t for t in rows if t not in emptied and t not in ids))
        meta = (invalid, ids)
        if self._writing:
            cache.stage(self._key, meta, parts)
        else:
            cache.put(self._key, meta, parts.items(), base=True)
        return meta

    @property
    def task_ids(self) -> tuple[str, ...]:
        return self._meta[1]

    @property
    def invalid(self) -> int:
        """Invalid parts and records over every note of this state."""
        return self._meta[0]

    def index(self, task: str, rev: str | None = None) -> Index:
        """The index of one task, read from REV (HEAD) (see `_index_of`)."""
        return self._index_of((task,), rev)

    def whole(self, rev: str | None = None) -> Index:
        """Every task's records in one index, read from REV (HEAD): at 100,000 notes,
        10,000 rows of the views read rather than every note's summary."""
        return self._index_of(self.task_ids, rev)

    def listed(self, tasks: Collection[str], rev: str | None = None) -> Iterator[Listed]:
        """The records of these tasks, each once, as a read from REV (HEAD) lists it."""
        index = self._index_of(tasks, rev)
        for task in tasks:
            yield from index.of_task(task)

    def _index_of(self, tasks: Iterable[str], rev: str | None) -> Index:
        """An index holding the records of these tasks, read from REV (HEAD): from their
        views when these list the copies a read from REV lists, else the index of every
        note (one per REV, however many times it is asked for)."""
        at_head = rev is None or rev == self._head
        if self.full is None and (at_head or not self.dependent_on_head):
            try:
                rows: list[Row] = []
                resolved: set[str] = set()
                for task in tasks:
                    task_rows, task_resolved = self._view(task)
                    rows += task_rows
                    resolved.update(task_resolved)
            except (PartMissing, ValueError, TypeError, EOFError):
                self._read_everything()  # a part lost: read from the notes, and cached again
            else:
                return Index.of_view(
                    self._reader, self._history, rows, resolved, self.task_ids, self.invalid, rev
                )
        if self.full is not None and at_head:
            return self.full
        # The copy a read lists depends on REV: chosen again from everything.
        if self._at_rev is None or self._at_rev[0] != rev:
            if self._noteset is None:
                self._noteset = self._reader.read_notes(shown=self._shown)
            self._at_rev = (rev, Index(self._noteset, self._reader, self._history, rev=rev))
        return self._at_rev[1]

    def _view(self, task: str) -> tuple[tuple[Row, ...], tuple[str, ...]]:
        unwritten = self._unwritten.get(task)
        return unwritten or _unpack(self._cache.part(_task_part(task)))

    def recorded(self, report: WriteReport, record: Record, blob: str, position: int) -> None:
        """Carry the views over to the state a write of ours just made, when nothing else
        moved the ref in between (else the next read rebuilds them)."""
        before = self._targets.get(NOTES_REF)
        if self.dependent_on_head or report.parent != before:
            return
        if self._noteset is not None and self._noteset.missing:
            return
        if self._cache.key != self._key:
            return  # rebuilt for this HEAD since (a lost part, and copies): not carried
        targets = {**self._targets, NOTES_REF: report.notes_commit}
        summary = tuple(summary_of(record, position))
        ledger = Ledger(self._cache.part)
        try:
            rows, resolved = self._view(record.task)
            ledger.add(_record_key(summary))
            for handover in _resolving(summary):
                ledger.resolve(handover, +1)
        except (PartMissing, ValueError, TypeError, EOFError):
            return
        rows = (*rows, (summary, record.head, (blob,)))
        if record.kind == "resume":
            resolved = (*resolved, *_resolving(summary))
        parts = ledger.changed_parts()
        parts.update((_task_part(t), _pack(*view)) for t, view in self._unwritten.items())
        parts[_task_part(record.task)] = _pack(rows, set(resolved))
        invalid, task_ids = self._meta
        if record.task not in task_ids:
            task_ids = (*task_ids, record.task)
        self._cache.put(_key(targets), (invalid, task_ids), parts.items(), base=True)


def _key(targets: Mapping[str, str]) -> str:
    return ";".join(f"{name}={target}" for name, target in sorted(targets.items()))


def _unpack(data: bytes | None) -> tuple[tuple[Row, ...], tuple[str, ...]]:
    if data is None:
        return (), ()
    rows, resolved = marshal.loads(data)
    return rows, resolved


def _build(index: Index) -> Iterator[tuple[str, bytes | None]]:
    """Every part of the views of a full read: each task's view, each shard of the ledger;
    made one at a time, so that only one task's rows are ever held beside the index."""
    resolved = index.resolved_handovers()
    for task in dict.fromkeys(item.summary.task for item in index.records):
        items = index.of_task(task)
        blobs = index._blobs
        task_rows = [(tuple(item.summary), item.commit, blobs[item.commit]) for item in items]
        mine = {item.summary.id for item in items if item.summary.kind == "handover"}
        yield _task_part(task), _pack(task_rows, mine & resolved)
    summaries = [item.summary for item in index.records]
    yield from Ledger.built(
        (_record_key(summary) for summary in summaries),
        (h for summary in summaries for h in _resolving(summary)),
    ).items()
