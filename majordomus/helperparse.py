"""Notes parsed by forked helper processes: a first read of many notes (a fresh clone, a
large fetch) parses them on every CPU (`sharedread` forks and shares out the ids).
"""

from __future__ import annotations

import array
import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

from majordomus.blobs import NoteBlobs
from majordomus.cachefile import framed, frames_of
from majordomus.documentcache import DocumentCache
from majordomus.noteforms import unnamed_file
from majordomus.notes import Note, Shown
from majordomus.readcache import plain_entry
from majordomus.summaries import FRAME_ENTRIES, parsed

if TYPE_CHECKING:
    from majordomus.searchcache import NoteSearched

# A first read of many notes (a fresh clone, a large fetch) parses them on every CPU: the
# process forks helpers that each open the repository, parse a run of the blobs and send
# back what the read cache keeps, marshalled through a pipe in frames of FRAME_ENTRIES (so
# that neither side holds the whole share twice). Below this many, one process is quicker
# than forking.
SHARED_READ_MIN = 2000
SHARE_RUN = 8192  # notes a helper reads before it unmaps the objects


def summarised(
    gitdir: str,
    blob_ids: str,
    put: Callable[[str, Any], None] | None,
    put_forms: Callable[[Sequence[str], Sequence[int], bytes], None] | None = None,
    shown: Shown | None = None,
    put_searched: Callable[[str, NoteSearched], None] | None = None,
    texts: bool = False,
) -> None:
    """`put` the entry of each blob parsed by helper processes (`sharedread`), one run of
    the ids each, in the form `readcache.plain_entry` gives it (None: the read cache
    holds them), `put_forms` the notes of those that
    are `shown`, as the document cache keeps them (a frame's blobs, the length of each
    one's form, the forms end to end), and `put_searched` what a search keeps
    of each note's records (`searchcache.searched_note`: with their JSON `texts`), when
    given; what they did not
    send the caller parses. This process parses nothing meanwhile, so the pack index and
    the parses are only ever in the helpers, never beside what it gathers."""
    search = None if put_searched is None else texts

    def work(share: list[str], writer: int) -> None:
        parse_share(gitdir, share, writer, shown, search)

    def take(pipe: BinaryIO) -> None:
        with contextlib.suppress(ValueError, EOFError, TypeError):
            for entries, blobs, lengths, forms in frames_of(pipe):  # each whole, as parsed
                for blob, (value, found) in entries.items():
                    if put is not None:
                        put(blob, value)
                    if put_searched is not None and found is not None:
                        put_searched(blob, found)
                if put_forms is not None and blobs:
                    sizes = array.array("q")
                    sizes.frombytes(lengths)
                    if len(sizes) != len(blobs) or sum(sizes) != len(forms):
                        raise ValueError("a frame's forms are cut")
                    put_forms(blobs, sizes, forms)

    from majordomus import sharedread  # here: a read its caches answer forks no helper

    sharedread.in_helpers(blob_ids, SHARED_READ_MIN // 2, work, take)


def parse_share(
    gitdir: str,
    share: Sequence[str],
    writer: int,
    shown: Shown | None,
    search: bool | None = None,
) -> None:
    """In a helper process: parse a share of the blobs, write the entries in frames to
    `writer`; each with its note as the document cache keeps it when the note is `shown`
    (else None), and what a search keeps of its records unless `search` is None (with
    their JSON texts when it is true; else None). The frames are written at the end, so
    a helper never stops parsing to wait while the parent reads another helper's pipe;
    until then they wait in an unnamed file (else in memory, marshalled). The share is
    read a run of SHARE_RUN notes at a time, the objects unmapped after each: the blob
    ids are in order, so each run reads only its part of the pack index, and the packs'
    pages it read leave this process."""
    import shutil

    import pygit2

    # Here: a read its caches answer never loads what a search keeps.
    from majordomus.searchcache import searched_note

    repo = pygit2.Repository(gitdir)
    entries: dict[str, tuple[Any, Any]] = {}
    blobs: list[str] = []  # of the notes whose forms are sent, and those forms
    forms: list[bytes] = []

    def frame() -> Iterable[bytes]:
        """The entries and the forms gathered, as one frame (forms end to end: one string
        for the other side to write, not one per note); the gathering begun again."""
        lengths = array.array("q", map(len, forms)).tobytes()
        done = framed((entries, tuple(blobs), lengths, b"".join(forms)))
        entries.clear()
        blobs.clear()
        forms.clear()
        return done

    with unnamed_file() as waiting:
        for start in range(0, len(share), SHARE_RUN):
            for blob, entry, note in parsed(
                NoteBlobs(lambda: repo), share[start : start + SHARE_RUN]
            ):
                found = None
                if isinstance(note, Note):
                    if shown is not None and shown(note):
                        form = DocumentCache.form(note)
                        if form is not None:
                            blobs.append(blob)
                            forms.append(form)
                    if search is not None:
                        found = searched_note(note, search)
                entries[blob] = (plain_entry(entry), found)
                if len(entries) == FRAME_ENTRIES:
                    waiting.writelines(frame())
            if entries:
                waiting.writelines(frame())
            repo.free()
        waiting.seek(0)
        with os.fdopen(writer, "wb") as pipe:
            shutil.copyfileobj(waiting, pipe)
