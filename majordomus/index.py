"""The index of records a read works on: one copy of each record, open handovers, labels
(`views` keeps per-task views of it, cached for the exact state of the notes refs).

Everything here works on summaries; a record is parsed whole (`locate`) only
when it is to be shown.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from majordomus.notes import Note
from majordomus.records import Summary
from majordomus.values import AttachedRecord, Listed, NoteSet
from majordomus.viewparts import Row

if TYPE_CHECKING:
    from majordomus.blobs import NoteBlobs
    from majordomus.graph import CommitGraph

UNREACHED = 1 << 62  # the rank of a commit REV does not reach: after all it reaches
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


def newest_copy(copies: Sequence[Listed], history: Ordering) -> Listed:
    """Of copies of one record on commits REV does not reach: the one a read lists, the
    copy on the newest commit."""
    if len(copies) == 1:
        return copies[0]
    return max(copies, key=lambda c: history.commit_time(c.commit) or 0)


class Ordering(Protocol):
    """What an index asks of the commits (`history.History`): HEAD, a commit's time, the
    graph that orders them."""

    def head(self) -> str: ...
    def commit_time(self, hex_id: str) -> int | None: ...
    def graph(self) -> CommitGraph: ...


class NoteTexts(Protocol):
    """The notes shown whole, as the document cache keeps them (`notesread.ShownNotes`)."""

    def preload(
        self, note_blobs: NoteBlobs, blobs: Collection[str], order: Iterable[str] = ()
    ) -> None: ...
    def load(self, note_blobs: NoteBlobs, blobs: Iterable[str]) -> None: ...
    def texts(self, blobs: Iterable[str]) -> dict[str, tuple[str | None, ...]]: ...


class NoteSource(Protocol):
    """What an index asks of the notes (`notesread.NotesReader`): their blobs, a note
    parsed, the notes shown whole."""

    @property
    def blobs(self) -> NoteBlobs: ...
    @property
    def shown(self) -> NoteTexts: ...
    def note(self, blobs: Sequence[str]) -> Note: ...


_at: Callable[[Listed], float] = operator.attrgetter("summary.at")  # C: no call of ours
_commit: Callable[[Listed], str] = operator.attrgetter("commit")


class Index:
    """Records, each listed once with the copy chosen as the spec says: the copy on a
    commit reachable from REV when there is one, else the copy on the newest commit."""

    def __init__(
        self, noteset: NoteSet, reader: NoteSource, history: Ordering, rev: str | None = None
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
        reader: NoteSource,
        history: Ordering,
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
