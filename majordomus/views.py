"""Per-task views of the index, cached for the exact state of the notes refs they
describe: a read of one task loads its view, not every note's summary; a write carries
the views over to the state it makes.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from majordomus.cachefile import VIEWS_FILE_NAME
from majordomus.errors import RepositoryError
from majordomus.index import Index, NoteSource, Ordering
from majordomus.notes import Shown
from majordomus.records import Record
from majordomus.repository import NOTES_REF
from majordomus.values import Listed, NoteSet, WriteReport
from majordomus.viewparts import (
    UNREADABLE,
    Changed,
    Ledger,
    Meta,
    Row,
    View,
    ViewCache,
    carried_over,
    pack,
    state_key,
    task_part,
    unpack,
    written,
)

if TYPE_CHECKING:
    from majordomus.readrefs import ReadRefs
    from majordomus.repository import Repository

# Where a views key names the tasks read alone (`Views._read`): no ref name holds it.
TASKS_READ = " tasks:"
CARRY_MAX = 256  # changed notes to re-read before a full read is the cheaper way


class Notes(NoteSource, Protocol):
    """What the views ask of the notes (`notesread.NotesReader`) beside what an index asks:
    the repository, its refs, every note read or one task's."""

    @property
    def repository(self) -> Repository: ...
    @property
    def refs(self) -> ReadRefs: ...
    def read_notes(self, *, shown: Shown | None = None, search: bool | None = None) -> NoteSet: ...
    def task_notes(self, prefix: str) -> NoteSet | None: ...


class Views:
    """Per-task indexes for the current state of the notes refs, from the view cache when
    it describes exactly this state, else built from a full read and cached."""

    def __init__(
        self,
        reader: Notes,
        history: Ordering,
        *,
        writing: bool = False,
        shown: Shown | None = None,
        every: bool = False,
        task: str | None = None,
        search: bool | None = None,
        alone: bool = False,
    ) -> None:
        """`writing`: a record is about to be written, and `recorded` will write the views
        of the state it makes: views carried over to the current state are only staged.
        `shown`: the notes the command shows whole next (a task's), kept as they are
        parsed when the views are built from every note. `every`: the command reads
        every task (`whole`): an index of every note made by a full read is kept.
        `task`: the command reads only the tasks whose id starts with this (`t-` and hex
        digits): where no view describes this state, the notes that could hold their
        records are read (`NotesReader.task_notes`), not every note, and nothing is
        cached; `invalid` then counts the unreadable parts among those notes. `search`:
        unless None, every record is searched next: a full read keeps what a search keeps
        of the notes it parses (`NotesReader.searched`; with JSON texts when true).
        `alone`: built by `cached` for that one task (nothing looked up here)."""
        self._reader, self._history = reader, history
        self._shown = shown
        self._search = search
        self._writing = writing
        self._every = every
        # Task views carried over and not written yet (`writing`): `recorded` packs them.
        self._unwritten: dict[str, View] = {}
        self._last: tuple[str, View] | None = None  # the task view last read from the cache
        self._cache = ViewCache(reader.repository.commondir / VIEWS_FILE_NAME)
        self._targets = reader.refs.ref_targets()
        self._key = state_key(self._targets)
        self.full: Index | None = None  # the index of every task, while it is kept
        self.full_read = False  # whether this state's views were built from every note
        self._noteset: NoteSet | None = None
        self._at_rev: tuple[str | None, Index] | None = None  # every note, read from a REV
        self.dependent_on_head = False
        if alone:
            return  # `cached`: the meta is looked up there
        head = self._head
        meta = self._cache.get(self._key)
        if meta is None and head is not None and history.graph().lasting:
            # Built where copies exist: which copy a read lists depends on HEAD's history,
            # which HEAD names only where the graph's answers last (`CommitGraph.lasting`).
            meta = self._cache.get(f"{self._key}@{head}")
        if meta is None and task is not None:
            meta = self._task_views(task)
        if meta is None:
            meta = self._carried_over()
        self._meta: Meta = meta or self._read(task)
        self.dependent_on_head = self._cache.key.partition(TASKS_READ)[0] != self._key

    @classmethod
    def cached(
        cls, reader: Notes, history: Ordering, task: str, *, new: bool = False
    ) -> Views | None:
        """The views of the notes refs as they are, for a command on one task named by its
        id in full, when the view cache describes this state and holds the task (`new`: a
        task about to be made, which it holds not); its view is read when asked for, no
        note, no other task's view, no index of every task. None when the cache cannot
        say: then `Views` carries the cache over, or reads."""
        views = cls(reader, history, alone=True)
        meta = views._cache.get(views._key)
        try:
            invalid, task_ids = meta
            if (task in task_ids) == new:
                return None
        except UNREADABLE:  # none, or not a meta
            return None
        views._meta = (invalid, task_ids)
        if new:
            views._last = (task, ((), ()))  # no record yet: its view is known, not read
        return views

    @functools.cached_property
    def _head(self) -> str | None:
        try:
            return self._history.head()
        except RepositoryError:
            return None

    def _task_views(self, prefix: str) -> Meta | None:
        """The views a read of the tasks of a shorter or equal prefix cached for this
        state (see `_read`): what they hold of the tasks `prefix` names is whole."""
        key, _, read = self._cache.key.partition(TASKS_READ)
        if key != self._key or not read or not prefix.startswith(read):
            return None
        meta: Meta = self._cache.meta
        return meta

    def _read(self, prefix: str | None = None) -> Meta:
        """Notes read into an index (`full`), and the views of this state built from them
        and cached: with `prefix`, the notes that could hold a record of the tasks it names
        where they can be picked, their views cached under the prefix (the views of every
        task, when they are built, take their place; of any other task the index may hold
        a part only); else, or where they cannot be picked, every note."""
        self._last = None
        noteset = None if prefix is None else self._reader.task_notes(prefix)
        self.full_read = noteset is None
        if noteset is None:
            prefix = None
            noteset = self._reader.read_notes(shown=self._shown, search=self._search)
        self._noteset = noteset
        if noteset.refs != self._targets:
            # A write landed since the refs were read: these views are of the state read.
            self._targets = dict(noteset.refs)
            self._key = state_key(self._targets)
        full = self.full = Index(noteset, self._reader, self._history)
        named = tuple(dict.fromkeys(item.summary.task for item in full.records))
        if prefix is not None:
            meta = (full.invalid, tuple(task for task in named if task.startswith(prefix)))
            if not noteset.missing and not full.has_copies:
                parts = _task_parts(full, meta[1], full.resolved_handovers())
                self._cache.put(f"{self._key}{TASKS_READ}{prefix}", meta, parts, base=False)
            return meta
        meta = (full.invalid, named)
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
            except UNREADABLE:
                self._read()  # a part lost: read from the notes, and cached again
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
        if unwritten:
            return unwritten
        if self._last is None or self._last[0] != task:
            # The last one read is kept: a write's `recorded` carries over the view its
            # `index` read, not unpacked twice (and a read of every task holds one).
            self._last = (task, unpack(self._cache.part(task_part(task))))
        return self._last[1]

    def recorded(self, report: WriteReport, record: Record) -> None:
        """Carry the views over to the state a write of ours just made, when nothing else
        moved the ref in between (else the next read rebuilds them)."""
        before = self._targets.get(NOTES_REF)
        if self.dependent_on_head or report.parent != before:
            return
        if self._noteset is not None and self._noteset.missing:
            return
        if self._cache.key != self._key:
            return  # rebuilt for this HEAD since (a lost part, and copies): not carried
        try:
            view = self._view(record.task)
        except UNREADABLE:
            return
        written(self._cache, self._targets, self._meta, view, self._unwritten, record, report)


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
