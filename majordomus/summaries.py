"""What a read makes of the notes trees' listings and of note blobs, whichever cache keeps
it: the notes of every ref by commit; each blob's entry (its records' summaries and how
many are invalid, or why it cannot be read), parsed a batch at a time; and each commit's
notes over every ref united into one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from majordomus.notes import Note, summarise, union
from majordomus.notetoml import MissingObjectError, NoteError
from majordomus.objectids import pairs
from majordomus.records import Summarised
from majordomus.tuples import NamedTuple
from majordomus.values import NotesOn, UnreadableNote

FRAME_ENTRIES = 2000  # blobs read in one go, and sent in one frame by a helper

# Commit -> its note blob on the first ref read (the usual case, kept as the bare id), or
# blob -> first ref holding it when another ref holds another note on it.
Found = dict[str, str | dict[str, str]]


class Blobs(Protocol):
    """What a read's summaries take of the note blobs (`blobs.NoteBlobs`)."""

    def prefetch(self, blob_ids: Sequence[str]) -> None: ...

    def parse(self, blob_id: str, *, keep: bool = True) -> Note | NoteError: ...

    def note(self, blob_ids: Sequence[str]) -> Note: ...


class Listing(NamedTuple):
    """Each notes ref's name, its target and its notes, as `ReadCache.trees` keeps them."""

    refs: tuple[tuple[str, str, str], ...]

    def commits(self) -> set[str]:
        """Every annotated object."""
        return {flat[at : at + 40] for *_, flat in self.refs for at in range(0, len(flat), 80)}


def by_commit(listed: Sequence[tuple[str, str]]) -> tuple[Found, str]:
    """The notes of every ref's listing by commit (see `Found`), and the first ref."""
    found: Found = {}
    first = ""
    for name, flat in listed:
        if not found:  # the first ref: one note per commit, unless its tree is damaged
            found, first = dict(pairs(flat)), name
            if len(found) == len(flat) // 80:
                continue
            found = {}
        for commit, blob in pairs(flat):
            held = found.get(commit)
            if held is None:
                found[commit] = blob if name == first else {blob: name}
            elif isinstance(held, str):
                if held != blob:
                    found[commit] = {held: first, blob: name}
            else:
                held.setdefault(blob, name)
    return found, first


def united(
    blobs: Blobs,
    commit: str,
    held: dict[str, str],
    entry_of: Callable[[str], Summarised | str | None],
    unreadable: list[UnreadableNote],
    missing: set[str],
) -> NotesOn | None:
    """One commit's notes (blob -> the first ref holding it) as one: the summaries of
    the readable ones (`entry_of` each blob); each unreadable or missing one added to
    `unreadable` (and `missing`). None when none is readable."""
    readable: list[tuple[str, Summarised]] = []
    for blob, name in held.items():
        entry = entry_of(blob)
        if entry is None:
            missing.add(blob)
            why = f"note object {blob[:12]} is missing; not read"
            unreadable.append(UnreadableNote(commit, name, why))
        elif isinstance(entry, str):
            unreadable.append(UnreadableNote(commit, name, entry))
        else:
            readable.append((blob, entry))
    if len(readable) == 1:
        blob, (summaries, invalid) = readable[0]
        return NotesOn((blob,), summaries, invalid)
    if not readable:
        return None
    note_ids = tuple(blob for blob, _ in readable)
    try:
        note = blobs.note(note_ids)
    except MissingObjectError as error:  # summarised once, gone since: missing, as any
        lost = error.object_id
        missing.add(lost)
        unreadable.append(UnreadableNote(commit, held[lost], str(error)))
        rest = {blob: name for blob, name in held.items() if blob != lost}
        return united(blobs, commit, rest, entry_of, unreadable, missing)
    return NotesOn(note_ids, summarise(note), note.invalid)


def parsed_entry(blobs: Blobs, blob: str) -> Summarised | str | None:
    """What the read cache keeps of a note blob, parsed (the parse kept for a second look,
    see `blobs.NoteBlobs.parse`); None when the blob is not here."""
    return _note_entry(blobs.parse(blob))


def newest(on: NotesOn) -> float:
    """The date of the newest record of a commit's notes (the order a history shows them)."""
    summaries = on.summaries
    if len(summaries) == 1:  # most notes
        return summaries[0].at
    return max((summary.at for summary in summaries), default=float("-inf"))


def _note_entry(parsed: Note | NoteError) -> Summarised | str | None:
    """What the read cache keeps of a parse; None for a blob that is not here."""
    if isinstance(parsed, MissingObjectError):
        return None
    if isinstance(parsed, NoteError):
        return str(parsed)
    note = union([parsed])  # summarised as `note` presents it: records de-duplicated by id
    return summarise(note), note.invalid


def parsed(
    blobs: Blobs, share: Sequence[str]
) -> Iterator[tuple[str, Summarised | str, Note | NoteError]]:
    """The entry of each blob of a share that is here, with the parse it was made of (read
    by one git process a batch at a time while libgit2 is not loaded, else by libgit2
    one by one)."""
    for start in range(0, len(share), FRAME_ENTRIES):
        batch = share[start : start + FRAME_ENTRIES]
        blobs.prefetch(batch)
        for blob in batch:
            note = blobs.parse(blob, keep=False)
            entry = _note_entry(note)
            if entry is not None:
                yield blob, entry, note
