"""The parts of the per-task views as the view cache keeps them, marshalled, and those
parts carried over to a new state of the notes refs from the notes that changed.

A task's view, "task ID": (rows, resolved handover ids), a row being (summary as a tuple,
commit, blobs); a shard of the ledger, "ledger N": the keys of the records, and the
handover ids resumes resolve (as often as they do), whose keys fall in shard N. The
views' meta: (invalid, task ids).
"""

from __future__ import annotations

import collections
import marshal
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple

from majordomus.ledger import Ledger, handover_key, record_key, resolving
from majordomus.records import Note, summarise
from majordomus.viewcache import PartMissing, ViewCache

Row = tuple[tuple[Any, ...], str, tuple[str, ...]]  # a cached summary, its commit, its blobs
View = tuple[tuple[Row, ...], tuple[str, ...]]  # a task's rows, its resolved handovers
Meta = tuple[int, tuple[str, ...]]
Notes = tuple[tuple[str, ...], int]  # a commit's readable note blobs, and how many are not


class Changes(NamedTuple):
    """What the notes that changed since the views were cached change in them."""

    commits: set[str]  # whose notes changed
    gone: list[tuple[Any, ...]]  # the summaries of their notes before
    rows: list[Row]  # the rows of their notes now
    invalid: int  # invalid parts and records over every note now
    task_ids: tuple[str, ...]  # the tasks of the views cached


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


def changes_of(
    commits: set[str],
    notes: Sequence[tuple[Notes | None, Notes | None]],
    note: Callable[[Sequence[str]], Note],
    meta: Meta,
) -> Changes | None:
    """What the notes of these commits (in order), before and now (their readable blobs,
    and how many are not; None: an object is missing), change in the views of `meta`,
    each note read by `note`; None when an object is missing."""
    invalid, task_ids = meta
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
    return Changes(commits, gone, rows, invalid, task_ids)


def carried_over(
    cache: ViewCache, changes: Changes, unwritten: dict[str, View] | None
) -> tuple[Meta, dict[str, bytes | None]] | None:
    """The meta and the parts of the views `cache` holds, carried over the `changes`: only
    the tasks the changed notes hold records of, before or after, and the shards of the
    ledger their keys fall in; None when that cannot be told cheaply (copies of a
    record, a resume that resolves another task's handover). With `unwritten`, the
    tasks' views are kept there, not packed (a write is about to carry them further)."""
    gone, new_rows = changes.gone, changes.rows
    # Only what the changes add or take away touches the ledger: a note that grew by
    # one record (`git notes append`) still holds all the others.
    gone_keys = {record_key(summary) for summary in gone}
    new_keys = {record_key(row[0]) for row in new_rows}
    if len(new_keys) < len(new_rows):
        return None  # a record twice among the changes: copies
    resolutions = collections.Counter(h for row in new_rows for h in resolving(row[0]))
    resolutions.subtract(h for summary in gone for h in resolving(summary))
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
        views = {task: unpack(cache.part(task_part(task))) for task in touched}
        rows = {
            task: [r for r in view[0] if r[1] not in changes.commits]
            + [r for r in new_rows if r[0][2] == task]
            for task, view in views.items()
        }
        mine = {r[0][1] for rs in rows.values() for r in rs if r[0][0] == "handover"}
        if any(ledger.has(handover_key(h)) for h in moved if h not in mine):
            return None  # a resume of another task's handover: that view changes too
        # A handover's resolution changes only when a change resolves it or stops
        # resolving it, or when the handover itself is new.
        recheck = moved | {
            r[0][1] for r in new_rows if r[0][0] == "handover" and record_key(r[0]) not in gone_keys
        }
        parts = ledger.changed_parts()
        _put_views(parts, rows, views, ledger, recheck, unwritten)
    except (PartMissing, ValueError, TypeError, EOFError):
        return None
    emptied = {task for task, task_rows in rows.items() if not task_rows}
    ids = tuple(t for t in changes.task_ids if t not in emptied)
    ids += tuple(sorted(t for t in rows if t not in emptied and t not in ids))
    return (changes.invalid, ids), parts


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
