"""The read cache inside the git directory: derived, disposable, never the source of truth.

It maps content hashes to what reading them produced: a notes tree id to the
(commit, blob) pairs it holds, a blob id to the summaries of its records. A
hash names its content forever, so an entry can never be stale. The file is
written whole to a temporary name and renamed, so concurrent processes see the
old file or the new one; an unreadable file is simply rebuilt.
"""

from __future__ import annotations

import contextlib
import datetime
import marshal
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from majordomus.records import Summary

VERSION = 3  # 2: notes edited by hand are read table by table; 3: a missing object is never cached
FILE_NAME = "majordomus-cache"

BlobEntry = tuple[tuple[Summary, ...], int] | str  # (summaries, invalid records) or why unreadable


def _write_atomically(path: Path, data: bytes) -> None:
    """Whole or not at all: concurrent readers see the old file or the new one. A cache
    that cannot be written (read-only clone, full disk) costs speed, not data."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        tmp.write_bytes(data)
        os.replace(tmp, path)
    with contextlib.suppress(OSError):
        tmp.unlink()


class ReadCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.trees: dict[str, tuple[tuple[str, str], ...]] = {}
        self.blobs: dict[str, BlobEntry] = {}
        self.dirty = False
        self._load()

    def _load(self) -> None:
        try:
            data: Any = marshal.loads(self.path.read_bytes())
            if data[0] != VERSION:
                return
            self.trees = data[1]
            make = Summary._make
            self.blobs = {
                blob: value if isinstance(value, str) else (tuple(map(make, value[0])), value[1])
                for blob, value in data[2].items()
            }
        except (OSError, EOFError, ValueError, TypeError, IndexError, KeyError):
            self.trees, self.blobs = {}, {}

    def put_tree(self, tree: str, pairs: tuple[tuple[str, str], ...]) -> None:
        self.trees[tree] = pairs
        self.dirty = True

    def put_blob(self, blob: str, entry: BlobEntry) -> None:
        self.blobs[blob] = entry
        self.dirty = True

    def save(self, trees: Iterable[str], blobs: Iterable[str]) -> None:
        """Keep only what the current refs use, and write it if anything changed."""
        if not self.dirty:
            return
        keep_trees = {t: self.trees[t] for t in trees if t in self.trees}
        keep_blobs = {
            b: value if isinstance(value, str) else (tuple(map(tuple, value[0])), value[1])
            for b in blobs
            if (value := self.blobs.get(b)) is not None
        }
        _write_atomically(self.path, marshal.dumps((VERSION, keep_trees, keep_blobs)))
        self.dirty = False


Reach = tuple[dict[str, int], tuple[str, ...]]  # reachable commit -> rank, and checked others
Label = tuple[str, int | None, int | None]
GRAPH_FILE_NAME = "majordomus-graph-cache"
GRAPH_VERSION = 2  # 1 kept ranks derived across merges, which git's order does not follow
KEEP_REVS = 3


class GraphCache:
    """What the commit graph answered: the rank of annotated commits in `git rev-list REV`
    for a few recent revisions, and divergence labels between two commits. Commit ids
    name immutable history, so an answer stays true (a shallow clone keeps nothing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.revs: list[str] = []  # most recently used last
        self.reaches: dict[str, Reach] = {}
        self.labels: dict[str, Label] = {}
        self.dirty = False
        try:
            data: Any = marshal.loads(path.read_bytes())
            if data[0] == GRAPH_VERSION:
                self.revs, self.reaches, self.labels = list(data[1]), dict(data[2]), dict(data[3])
        except (OSError, EOFError, ValueError, TypeError, IndexError, KeyError):
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

    def save(self) -> None:
        if not self.dirty:
            return
        keep = set(self.revs)
        reach = {rev: value for rev, value in self.reaches.items() if rev in keep}
        labels = {k: v for k, v in self.labels.items() if k.split(" ")[1] in keep}
        _write_atomically(self.path, marshal.dumps((GRAPH_VERSION, self.revs, reach, labels)))
        self.dirty = False


RECORDS_FILE_NAME = "majordomus-records-cache"
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


class DocumentCache:
    """Parsed TOML documents by blob id, for commands that show many records whole:
    decoding a cached document is several times cheaper than parsing its TOML."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.documents: dict[str, Any] = {}
        self.dirty = False
        try:
            data: Any = marshal.loads(path.read_bytes())
            if data[0] == VERSION:
                self.documents = data[1]
        except (OSError, EOFError, ValueError, TypeError, IndexError, KeyError):
            self.documents = {}

    def get(self, blob: str) -> dict[str, Any] | None:
        raw = self.documents.get(blob)
        return None if raw is None else dict(_decode(raw))

    def put(self, blob: str, document: dict[str, Any]) -> None:
        self.documents[blob] = _encode(document)
        self.dirty = True

    def save(self, blobs: Iterable[str]) -> None:
        if not self.dirty:
            return
        keep = {b: self.documents[b] for b in blobs if b in self.documents}
        _write_atomically(self.path, marshal.dumps((VERSION, keep)))
        self.dirty = False


VIEWS_FILE_NAME = "majordomus-views"


class ViewCache:
    """Per-task views of every record, for one state of the notes refs.

    The key names that state (each ref's target, and HEAD when the choice of a
    record's copy depends on it), so a view is never read for another state. Each
    task's view is kept as its own marshalled bytes: a command decodes only the
    task it asks about.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.key = ""
        self.meta: Any = None
        self.tasks: dict[str, bytes] = {}
        try:
            data: Any = marshal.loads(path.read_bytes())
            if data[0] == VERSION:
                self.key, self.meta, self.tasks = data[1], data[2], dict(data[3])
        except (OSError, EOFError, ValueError, TypeError, IndexError, KeyError):
            self.key, self.meta, self.tasks = "", None, {}

    def get(self, key: str) -> tuple[Any, dict[str, bytes]] | None:
        return (self.meta, self.tasks) if key and key == self.key else None

    def put(self, key: str, meta: Any, tasks: dict[str, bytes]) -> None:
        self.key, self.meta, self.tasks = key, meta, tasks
        _write_atomically(self.path, marshal.dumps((VERSION, key, meta, tasks)))
