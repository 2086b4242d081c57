"""The base of every derived cache inside the git directory, and the names of their files.

A cache is disposable, never the source of truth: each maps content hashes (a notes
tree, a note blob, a commit) to what reading them produced, so an entry can never be
stale. Every cache file is checked against a version made of the package version and
the file's own format (a file another release or layout wrote is ignored whole),
written whole to a temporary name and renamed, so concurrent processes see the old file
or the new one; an unreadable file is simply rebuilt. Each is loaded whole but the
document cache, whose notes are read one at a time from the open file.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from majordomus import __version__
from majordomus.records import RULES, Summary

READ_FILE_NAME = "majordomus-cache"
GRAPH_FILE_NAME = "majordomus-graph-cache"
RECORDS_FILE_NAME = "majordomus-records-cache"
VIEWS_FILE_NAME = "majordomus-views"
VIEWS_FOLDER_NAME = f"{VIEWS_FILE_NAME}.d"  # the parts of the views, beside the file
PATCH_FILE_NAME = "majordomus-patch-ids"
SIGNATURES_FILE_NAME = "majordomus-signatures"
SEARCH_FILE_NAME = "majordomus-search"
FILES = (
    READ_FILE_NAME,
    GRAPH_FILE_NAME,
    RECORDS_FILE_NAME,
    VIEWS_FILE_NAME,
    PATCH_FILE_NAME,
    SIGNATURES_FILE_NAME,
    SEARCH_FILE_NAME,
)
# A summary's fields change: so does the format of each file that holds summaries.
SUMMARY_FIELDS = ",".join(Summary._fields)


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


LENGTH = struct.Struct("<Q")


def framed(value: Any) -> tuple[bytes, bytes]:
    """A frame of a cache file, or of a pipe (`frames_of`): its length, then its value."""
    data = marshal.dumps(value)
    return LENGTH.pack(len(data)), data


def frames_of(stream: BinaryIO) -> Iterator[Any]:
    """The values of the frames written to a stream, up to its end (a frame cut short
    ends it)."""
    while len(head := stream.read(LENGTH.size)) == LENGTH.size:
        (length,) = LENGTH.unpack(head)
        data = stream.read(length)
        if len(data) != length:
            return
        yield marshal.loads(data)


def _frame(data: memoryview, offset: int) -> tuple[Any, int]:
    """The value of the frame at `offset`, and where the next one starts."""
    end = offset + LENGTH.size
    if end > len(data):
        raise ValueError("cut frame")
    (length,) = LENGTH.unpack(data[offset:end])
    if end + length > len(data):
        raise ValueError("cut frame")
    return marshal.loads(data[end : end + length]), end + length
