"""The view cache: per-task views of every record, for one state of the notes refs."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from majordomus.cachefile import SUMMARY_FIELDS, CacheFile


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
        f"part 'task ID':(rows(({SUMMARY_FIELDS}),commit,blobs),resolved), "
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
