"""The parts of the per-task views as the view cache keeps them, marshalled.

A task's view, "task ID": (rows, resolved handover ids), a row being (summary as a tuple,
commit, blobs); a shard of the ledger, "ledger N": the keys of the records, and the
handover ids resumes resolve (as often as they do), whose keys fall in shard N. The
views' meta: (invalid, task ids).
"""

from __future__ import annotations

import marshal
from collections.abc import Collection, Mapping, Sequence
from typing import Any

Row = tuple[tuple[Any, ...], str, tuple[str, ...]]  # a cached summary, its commit, its blobs
View = tuple[tuple[Row, ...], tuple[str, ...]]  # a task's rows, its resolved handovers
Meta = tuple[int, tuple[str, ...]]


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
