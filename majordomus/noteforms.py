"""Notes in the form the document cache keeps them, end to end in a file, read in runs."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import array
    import mmap

_LENGTH_MASK = 0xFFFFFFFF
_RUN_GAP = 1 << 16  # bytes between two notes read in one run of the file
_RUN_MAX = 1 << 22  # bytes of one run
COPY_PIECE = 1 << 20  # bytes a save writes at a time


def unnamed_file(folder: Path | None = None) -> BinaryIO:
    """A file that goes away when closed, for bytes that wait to be written elsewhere: in
    `folder`, else in the temporary folder, else (no file to be had) in memory."""
    import tempfile

    for where in (folder, None):
        with contextlib.suppress(OSError):
            return tempfile.TemporaryFile(dir=where)
    return io.BytesIO()


class NoteForms:
    """Marshalled notes end to end in a file, from `base` on, and where each one is."""

    def __init__(
        self, at: dict[str, int] | None = None, file: BinaryIO | None = None, base: int = 0
    ) -> None:
        self.at: dict[str, int] = {} if at is None else at  # blob -> offset << 32 | length
        self.file = file
        self._base = base
        self._end = 0  # where the next note appended goes
        self._buffer = bytearray()  # what `runs` reads a run into, again and again

    @classmethod
    def unnamed(cls, folder: Path) -> NoteForms:
        """Forms to append to, in an unnamed file in `folder` (`unnamed_file`)."""
        return cls({}, unnamed_file(folder))

    def append(self, blob: str, data: bytes) -> None:
        assert self.file is not None
        self.file.write(data)
        self.at[blob] = self._end << 32 | len(data)
        self._end += len(data)

    def append_many(self, blobs: Sequence[str], lengths: Sequence[int], data: bytes) -> None:
        """Forms end to end in `data`, of these lengths, in one write."""
        assert self.file is not None
        self.file.write(data)
        at, end = self.at, self._end
        for blob, length in zip(blobs, lengths, strict=True):
            at[blob] = end << 32 | length
            end += length
        self._end = end

    def data(self, blob: str) -> bytes | None:
        where = self.at.get(blob)
        if where is None:
            return None
        length = where & _LENGTH_MASK
        data = self._run(where >> 32, length)
        return data if data is not None and len(data) == length else None

    def runs_of(
        self, order: Iterable[str], blobs: Collection[str] | None, at: dict[str, int], offset: int
    ) -> tuple[array.array[int], int]:
        """Where the forms of the notes it holds in `order` (those of `blobs`; None: all),
        but those `at` places already, lie in its file, as runs of notes next to each other
        (copied by a few reads, not one per note), each run's start and end; and the offset
        past them once written from `offset` on in that order. Each note goes into `at`
        where it will then lie."""
        import array  # here: only a save needs it

        runs = array.array("Q")
        start = end = 0
        for blob in order:
            if blob in at or (blobs is not None and blob not in blobs):
                continue
            where = self.at[blob]
            length = where & _LENGTH_MASK
            at[blob] = offset << 32 | length
            offset += length
            if where >> 32 != end or end - start >= _RUN_MAX:
                if end > start:
                    runs.extend((start, end))
                start = where >> 32
            end = (where >> 32) + length
        if end > start:
            runs.extend((start, end))
        return runs, offset

    def copied(self, runs: Sequence[int]) -> Iterator[bytes]:
        """The bytes of these runs (start, end, start, end, ...) of the forms, in that order,
        for a save to write: in pieces of about COPY_PIECE bytes, sliced from one mapping
        of its file (a run per note, the usual case when notes are saved in another order
        than they were put, would otherwise cost a read and a write each); OSError when
        the file is cut short under us."""
        if not runs:
            return
        mapped = self._mapped(max(runs[1::2]))
        if mapped is None:  # no mapping to be had: a read per run
            for n in range(0, len(runs), 2):
                yield self.whole(runs[n], runs[n + 1] - runs[n])
            return
        with mapped:
            base = self._base
            pieces: list[bytes] = []
            size = 0
            for n in range(0, len(runs), 2):
                pieces.append(mapped[base + runs[n] : base + runs[n + 1]])
                size += runs[n + 1] - runs[n]
                if size >= COPY_PIECE:
                    yield b"".join(pieces)
                    pieces, size = [], 0
            if pieces:
                yield b"".join(pieces)

    def _mapped(self, end: int) -> mmap.mmap | None:
        """Its file mapped for reading, when it holds the forms up to `end`; else None."""
        import mmap  # here: only a save maps a file

        if self.file is None or isinstance(self.file, io.BytesIO):
            return None
        try:
            self.file.flush()
            fileno = self.file.fileno()
            if os.fstat(fileno).st_size < self._base + end:
                raise OSError("a note of the document cache could not be read")
            return mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file
            return None

    def whole(self, offset: int, length: int) -> bytes:
        """`length` bytes of the forms from `offset` on; OSError when the read is cut short
        under us."""
        data = self._run(offset, length)
        if data is None or len(data) != length:
            raise OSError("a note of the document cache could not be read")
        return data

    def runs(self, blobs: Iterable[str], elsewhere: list[str]) -> Iterator[tuple[str, memoryview]]:
        """Each of these blobs it holds in its file and its form, read in runs of notes
        close together; the others go to `elsewhere`. A form is valid until the next one
        is asked for: each run is read into one buffer, used again for the next (a fresh
        buffer of megabytes for each run costs more to map than the read itself)."""
        held = []
        for blob in blobs:
            where = self.at.get(blob) if self.file is not None else None
            if where is None:
                elsewhere.append(blob)
            else:
                held.append((where >> 32, where & _LENGTH_MASK, blob))
        held.sort()
        start = 0
        while start < len(held):
            first, end = held[start][0], held[start][0] + held[start][1]
            stop = start + 1
            while stop < len(held) and held[stop][0] - end < _RUN_GAP and end - first < _RUN_MAX:
                end = max(end, held[stop][0] + held[stop][1])
                stop += 1
            view = self._run_into_buffer(first, end - first)
            for offset, length, blob in held[start:stop]:
                part = view[offset - first : offset - first + length]
                if len(part) != length:
                    elsewhere.append(blob)
                else:
                    yield blob, part
            start = stop

    def _run_into_buffer(self, offset: int, length: int) -> memoryview:
        """As `_run`, read into the buffer (a larger one made when it is too small); empty
        when nothing can be read."""
        if self.file is None or isinstance(self.file, io.BytesIO) or not hasattr(os, "preadv"):
            data = self._run(offset, length)
            return memoryview(b"" if data is None else data)
        if len(self._buffer) < length:
            self._buffer = bytearray(length)  # a form still held keeps the old one alive
        view = memoryview(self._buffer)[:length]
        try:
            self.file.flush()
            read = os.preadv(self.file.fileno(), [view], self._base + offset)
        except OSError:
            return memoryview(b"")
        return view[:read]

    def _run(self, offset: int, length: int) -> bytes | None:
        """`length` bytes of the forms from `offset` on (fewer at a cut end), or None."""
        start = self._base + offset
        if self.file is None:
            return None
        if isinstance(self.file, io.BytesIO):  # no file to be had: memory
            with self.file.getbuffer() as held:
                return bytes(held[start : start + length])
        try:
            self.file.flush()
            return os.pread(self.file.fileno(), length, start)
        except OSError:
            return None

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
