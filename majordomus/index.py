"""The index of records a read works on: one copy of each record, open handovers, labels;
and per-task views of it, cached for the exact state of the notes refs they describe.

Everything here works on summaries; a record is parsed whole (`locate`) only
when it is to be shown.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from majordomus.cachefile import VIEWS_FILE_NAME
from majordomus.errors import RepositoryError
from majordomus.notes import Note, Shown
from majordomus.records import Record, Summary, summary_of
from majordomus.repository import NOTES_REF
from majordomus.values import AttachedRecord, Listed, NoteSet, WriteReport
from majordomus.viewparts import (
    Changed,
    Ledger,
    Meta,
    PartMissing,
    Row,
    View,
    ViewCache,
    carried_over,
    pack,
    resolving,
    state_key,
    task_part,
    unpack,
)

if TYPE_CHECKING:
    from majordomus.history import History
    from majordomus.notesread import NotesReader

UNREACHED = 1 << 62  # the rank of a commit REV does not reach: after all it reaches
# Where a views key names the tasks read alone (`Views._read_task`): no ref name holds it.
TASKS_READ = " tasks:"
CARRY_MAX = 256  # changed notes to re-read before a full read is the cheaper way
PRELOAD_THRESHOLD = 24  # notes to show whole before the document cache pays for its load


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
        self._row_blobs: Mapping[tuple[str, str, str], tuple[str, ...]] = {}
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
        # Copies of one record share kind, task and id; a record of another kind or task
        # that reuses the id (only a forged note does) is another record, never a newer
        # copy: a note on some other task's commit cannot hide a record of this one.
        copies: dict[tuple[str, str, str], list[Listed]] = {}
        for item in self.records:
            summary = item.summary
            copies.setdefault((summary.kind, summary.task, summary.id), []).append(item)
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
        # By commit too: a forged copy of a record on another commit is another row.
        index._row_blobs = {(row[0][0], row[0][1], row[1]): row[2] for row in rows}
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

        self._reader.shown.preload(self._reader.blobs, blobs, blobs_newest_first())

    def load(self, items: Iterable[Listed]) -> None:
        """The notes of a part of the records shown, read in one go before each is located
        (after `preload`, which made the document cache hold them)."""
        blobs = (b for item in items for b in self._blobs_of(item))
        self._reader.shown.load(self._reader.blobs, blobs)

    def texts(self, items: Sequence[Listed]) -> list[str | None]:
        """Each record's JSON text as the document cache keeps it (after `preload`), or None
        (a note it lacks, or one of several on a commit: their records are renumbered)."""
        blobs = self.note_blobs(items)
        texts = self._reader.shown.texts(blobs)
        found: list[str | None] = []
        for item, blob in zip(items, blobs, strict=True):
            held = texts.get(blob)
            position = item.summary.position
            found.append(held[position] if held is not None and position < len(held) else None)
        return found

    def note_blobs(self, items: Sequence[Listed]) -> list[str]:
        """The one note blob each record is read from, where its position is that note's
        own; "" for a record on a commit with several notes (numbered as one note)."""
        if self._row_blobs:
            of = map(self._blobs_of, items)
        else:  # `_blobs_of` of an index of every note, without a call per record
            of = map(self._blobs.__getitem__, (item.commit for item in items))
        return [blobs[0] if len(blobs) == 1 else "" for blobs in of]

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
        key = (listed.summary.kind, listed.summary.id, listed.commit)
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
        task: str | None = None,
    ) -> None:
        """`writing`: a record is about to be written, and `recorded` will write the views
        of the state it makes: views carried over to the current state are only staged.
        `shown`: the notes the command shows whole next (a task's), kept as they are
        parsed when the views are built from every note. `every`: the command reads
        every task (`whole`): an index of every note made by a full read is kept.
        `task`: the command reads only the tasks whose id starts with this (`t-` and hex
        digits): where no view describes this state, the notes that could hold their
        records are read (`NotesReader.task_notes`), not every note, and nothing is
        cached; `invalid` then counts the unreadable parts among those notes."""
        self._reader, self._history = reader, history
        self._shown = shown
        self._writing = writing
        self._every = every
        # Task views carried over and not written yet (`writing`): `recorded` packs them.
        self._unwritten: dict[str, View] = {}
        self._cache = ViewCache(reader.repository.commondir / VIEWS_FILE_NAME)
        self._targets = reader.refs.ref_targets()
        self._key = state_key(self._targets)
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
        if meta is None and task is not None:
            meta = self._task_views(task)
        if meta is None:
            meta = self._carried_over()
        if meta is None and task is not None:
            meta = self._read_task(task)
        self._meta: Meta = meta or self._read_everything()
        self.dependent_on_head = self._cache.key.partition(TASKS_READ)[0] != self._key

    def _read_everything(self) -> Meta:
        """Every note read, and the views of this state built from them and cached."""
        self.full_read = True
        noteset = self._noteset = self._reader.read_notes(shown=self._shown)
        if noteset.refs != self._targets:
            # A write landed since the refs were read: these views are of the state read.
            self._targets = dict(noteset.refs)
            self._key = state_key(self._targets)
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

    def _task_views(self, prefix: str) -> Meta | None:
        """The views a read of the tasks of a shorter or equal prefix cached for this
        state (see `_read_task`): what they hold of the tasks `prefix` names is whole."""
        key, _, read = self._cache.key.partition(TASKS_READ)
        if key != self._key or not read or not prefix.startswith(read):
            return None
        meta: Meta = self._cache.meta
        return meta

    def _read_task(self, prefix: str) -> Meta | None:
        """The notes that could hold a record of the tasks `prefix` names, read into an
        index of them (`full`), and their views cached for this state under the prefix
        (the views of every task, when they are built, take their place); None where the
        notes cannot be picked. Of any other task the index may hold a part only."""
        noteset = self._reader.task_notes(prefix)
        if noteset is None:
            return None
        self._noteset = noteset
        if noteset.refs != self._targets:
            self._targets = dict(noteset.refs)
            self._key = state_key(self._targets)
        full = self.full = Index(noteset, self._reader, self._history)
        named = dict.fromkeys(item.summary.task for item in full.records)
        tasks = tuple(task for task in named if task.startswith(prefix))
        meta = (full.invalid, tasks)
        if not noteset.missing and not full.has_copies:
            parts = _task_parts(full, tasks, full.resolved_handovers())
            self._cache.put(f"{self._key}{TASKS_READ}{prefix}", meta, parts, base=False)
        return meta

    def _carried_over(self) -> Meta | None:
        """The cached views brought to the current state by re-reading only the notes that
        changed since (another writer, `git notes`, a fetch): what a full read would build,
        or None when that cannot be told cheaply; every part the changed notes do not
        touch stays as it was, byte for byte (see `viewparts.carried_over`)."""
        cache = self._cache
        if not cache.key or "@" in cache.key or TASKS_READ in cache.key or not cache.meta:
            return None
        before = dict(item.partition("=")[::2] for item in cache.key.split(";"))
        if state_key(before) != cache.key or before.keys() != self._targets.keys():
            return None
        changed = self._changed_notes(before)
        if changed is None:
            return None
        unwritten = self._unwritten if self._writing else None
        carried = carried_over(cache, changed, self._reader.note, unwritten)
        if carried is None:
            return None
        meta, parts = carried
        if self._writing:
            cache.stage(self._key, meta, parts)
        else:
            cache.put(self._key, meta, parts.items(), base=True)
        return meta

    def _changed_notes(self, before: Mapping[str, str]) -> Changed | None:
        """The meta of the cached views, the commits whose notes changed since the state
        `before` (each ref's target), and each one's notes before and now, found without
        a walk; None when the trees cannot be compared or too many notes changed."""
        from majordomus.commitnotes import CommitNotes  # here: only a carry-over compares trees

        reader = self._reader
        notes = CommitNotes(reader.repository, reader.refs, reader.blobs)
        changed: set[str] = set()
        for name, target in self._targets.items():
            if before[name] != target:
                found = notes.changed_notes(before[name], target)
                if found is None:
                    return None
                changed |= found
        if len(changed) > CARRY_MAX:
            return None
        try:
            invalid, task_ids = self._cache.meta
            both = [
                (notes.notes_on(c, before), notes.notes_on(c, self._targets))
                for c in sorted(changed)
            ]
        except (RepositoryError, ValueError, TypeError):
            return None
        return (invalid, task_ids), changed, both

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

    def _view(self, task: str) -> View:
        unwritten = self._unwritten.get(task)
        return unwritten or unpack(self._cache.part(task_part(task)))

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
            ledger.record(summary)
        except (PartMissing, ValueError, TypeError, EOFError):
            return
        rows = (*rows, (summary, record.head, (blob,)))
        if record.kind == "resume":
            resolved = (*resolved, *resolving(summary))
        parts = ledger.changed_parts()
        parts.update((task_part(t), pack(*view)) for t, view in self._unwritten.items())
        parts[task_part(record.task)] = pack(rows, set(resolved))
        invalid, task_ids = self._meta
        if record.task not in task_ids:
            task_ids = (*task_ids, record.task)
        self._cache.put(state_key(targets), (invalid, task_ids), parts.items(), base=True)


def _build(index: Index) -> Iterator[tuple[str, bytes | None]]:
    """Every part of the views of a full read: each task's view, each shard of the ledger;
    made one at a time, so that only one task's rows are ever held beside the index."""
    tasks = dict.fromkeys(item.summary.task for item in index.records)
    yield from _task_parts(index, tasks, index.resolved_handovers())
    summaries = [item.summary for item in index.records]
    yield from Ledger.built(summaries).items()


def _task_parts(
    index: Index, tasks: Iterable[str], resolved: Collection[str]
) -> Iterator[tuple[str, bytes | None]]:
    """The view of each of these tasks, made one at a time from `index`."""
    blobs = index._blobs
    for task in tasks:
        items = index.of_task(task)
        task_rows = [(tuple(item.summary), item.commit, blobs[item.commit]) for item in items]
        mine = {item.summary.id for item in items if item.summary.kind == "handover"}
        yield task_part(task), pack(task_rows, mine & set(resolved))
