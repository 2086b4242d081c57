"""Note blobs of one repository: their bytes, and their parse, made once per process.

A blob id names its content forever, so a parse is remembered by id; a blob that is
not in this clone is never remembered, because a fetch can bring it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from majordomus.gitobjects import Objects
from majordomus.notes import Note, parse_note, union
from majordomus.notetoml import NOTE_MAX_BYTES, MissingObjectError, NoteError

if TYPE_CHECKING:
    import pygit2

PARSED_KEEP = 12_000  # parsed notes kept for a second look (a few KiB each)


class UnfitNoteError(NoteError):
    """A note entry no record can be read from, whatever its text: not a blob (a gitlink,
    a tree or a commit where a note belongs), or a blob over the read limit. A merge
    never takes one (see merge.Merger); a read counts it."""

    def __init__(self, message: str, blob_id: str) -> None:
        super().__init__(message)
        self.blob_id = blob_id


def not_a_blob(blob_id: str) -> UnfitNoteError:
    return UnfitNoteError(f"note object {blob_id[:12]} is not a blob; not read", blob_id)


def oversized(blob_id: str, size: int) -> UnfitNoteError:
    return UnfitNoteError(
        f"note blob {blob_id[:12]} is {size} bytes, over the 1 MiB limit; not parsed", blob_id
    )


class NoteBlobs:
    """Reads note blobs; the first PARSED_KEEP parses are kept for the rest of the command
    (a read that summarises every note of a large repository then shows a few of them
    parses those again, rather than hold every note at once)."""

    def __init__(
        self,
        repo: Callable[[], pygit2.Repository],
        by_git: Callable[[Sequence[str]], Objects | None] | None = None,
        stored: Callable[[str], Note | None] | None = None,
    ) -> None:
        """`repo` opens the repository with libgit2 on first use; until then `by_git`, when
        given, reads the few notes a command shows through one git process. `stored`
        gives a note parsed by an earlier command (the document cache), if it has it."""
        self._repo = repo
        self._by_git = by_git
        self._stored = stored
        self._read: Objects = {}  # read by git, not parsed yet
        self._parsed: dict[str, Note | NoteError] = {}

    @property
    def repo(self) -> pygit2.Repository:
        return self._repo()

    def data(self, blob_id: str) -> bytes:
        """A note's bytes; NoteError when the notes tree names anything but a blob we have
        (a pushed tree can hold a submodule entry, or point at an object never sent)."""
        if blob_id not in self._read:
            self._read_by_git([blob_id])
        if blob_id in self._read:
            found = self._read.pop(blob_id)
            if found is None:
                raise MissingObjectError(blob_id)
            if found[0] != "blob":
                raise not_a_blob(blob_id)
            return found[1]
        import pygit2

        try:
            # Straight from the object database: no object to make, no prefix lookup.
            kind, data = self.repo.odb.read(blob_id)
        except KeyError:
            raise MissingObjectError(blob_id) from None
        except ValueError:
            raise NoteError(f"note object {blob_id[:12]} is missing; not read") from None
        if kind != pygit2.enums.ObjectType.BLOB:
            raise not_a_blob(blob_id)
        return data

    def prefetch(self, blob_ids: Sequence[str], read: Objects | None = None) -> None:
        """Read these blobs in one git process while libgit2 is not loaded (else nothing:
        libgit2 reads each when it is parsed), or take them as `read` (by git) holds them."""
        if read is not None:
            self._read.update((b, read[b]) for b in blob_ids if b in read)
            return
        unread = [b for b in blob_ids if b not in self._parsed and b not in self._read]
        if unread:
            self._read_by_git(unread)

    def _read_by_git(self, blob_ids: Sequence[str]) -> None:
        if self._by_git is not None:
            self._read.update(self._by_git(blob_ids) or {})

    def parse(self, blob_id: str, *, keep: bool = True) -> Note | NoteError:
        """The note a blob holds, or why it cannot be read; `keep`: remembered for a second
        look (while fewer than PARSED_KEEP are)."""
        cached = self._parsed.get(blob_id)
        if cached is not None:
            return cached
        cached = None if self._stored is None else self._stored(blob_id)
        if cached is None:
            try:
                data = self.data(blob_id)
                if len(data) > NOTE_MAX_BYTES:
                    raise oversized(blob_id, len(data))
                cached = parse_note(data)
            except MissingObjectError as error:
                return error  # not remembered: it may arrive with a fetch
            except NoteError as error:
                cached = error
        if keep and len(self._parsed) < PARSED_KEEP:
            self._parsed[blob_id] = cached
        return cached

    def matching(self, blob_ids: Iterable[str], pattern: re.Pattern[bytes]) -> set[str]:
        """The blobs among these (read ahead: `prefetch`) whose bytes `pattern` searches,
        or that cannot be read (their parse says why); each kept for its parse."""
        found = set()
        for blob_id in blob_ids:
            read = self._read.get(blob_id)
            if read is None or read[0] != "blob" or pattern.search(read[1]):
                found.add(blob_id)
        return found

    def is_parsed(self, blob_id: str) -> bool:
        return blob_id in self._parsed

    def remember(self, blob_id: str, note: Note) -> None:
        """A note read another way (from the document cache), for the look about to come."""
        self._parsed[blob_id] = note

    def forget(self, blob_ids: Iterable[str]) -> None:
        """Parses of notes shown already: the memory goes back (a later look parses again)."""
        for blob_id in blob_ids:
            self._parsed.pop(blob_id, None)

    def note(self, blob_ids: Sequence[str]) -> Note:
        """The united note of the readable blobs among these; MissingObjectError when one
        is not in this clone (a read cache summarised it, and it is gone since)."""
        if len(blob_ids) > 1:
            self.prefetch(blob_ids)
        parsed = [self.parse(blob_id) for blob_id in blob_ids]
        for missing in parsed:
            if isinstance(missing, MissingObjectError):
                raise missing
        return union([note for note in parsed if not isinstance(note, NoteError)])

    def record_ids(self, blob_ids: Sequence[str]) -> set[str]:
        """The ids of the records these notes hold (those that can be read)."""
        ids: set[str] = set()
        for blob_id in blob_ids:
            parsed = self.parse(blob_id)
            if isinstance(parsed, Note):
                ids.update(record.id for record in parsed.records)
        return ids
