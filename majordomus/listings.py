"""A few notes of a listing (which notes sit on which commits) read alone, parsed, the read
cache not loaded: those of some commits (`held_notes`, `united_held`), and those that may hold
a record of one task, which `git grep` picked by their bytes (`of_task`)."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping

from majordomus.blobs import NoteBlobs
from majordomus.notes import holds_task, may_name
from majordomus.summaries import Listing, parsed_entry, united
from majordomus.values import NoteSet, NotesOn, UnreadableNote


def held_notes(listing: Listing, commits: Collection[str]) -> dict[str, dict[str, str]]:
    """The notes of these commits of `listing`: commit -> {blob: the first ref holding it}."""
    found: dict[str, dict[str, str]] = {}
    for name, _, flat in listing.refs:
        for at in range(0, len(flat), 80):  # no pair made per note: most are not wanted
            if flat[at : at + 40] in commits:
                notes = found.setdefault(flat[at : at + 40], {})
                notes.setdefault(flat[at + 40 : at + 80], name)
    return found


def united_held(blobs: NoteBlobs, listing: Listing, held: Mapping[str, dict[str, str]]) -> NoteSet:
    """The notes `held_notes` found, united per commit, each parsed (the read cache not loaded)."""
    found: dict[str, NotesOn] = {}
    unreadable: list[UnreadableNote] = []
    missing: set[str] = set()
    entry_of = functools.partial(parsed_entry, blobs)
    for commit, notes in held.items():
        on = united(blobs, commit, notes, entry_of, unreadable, missing)
        if on is not None:
            found[commit] = on
    targets = {name: target for name, target, _ in listing.refs}
    return NoteSet(found, tuple(unreadable), targets, len(missing))


def _ids(parts: Iterable[NoteSet], kind: str, prefix: str = "") -> set[str]:
    """The ids of the records of `kind` these notes hold (of the tasks `prefix` starts)."""
    return {
        summary.id
        for part in parts
        for on in part.commits.values()
        for summary in on.summaries
        if summary.kind == kind and summary.task.startswith(prefix)
    }


def of_task(
    blobs: NoteBlobs, listing: Listing, held: Mapping[str, dict[str, str]], prefix: str
) -> NoteSet:
    """Of the notes git picked (`held`), those that hold a record of the task, then those
    that may name a handover of it (a resume of another task names it by id alone), then
    those that may hold a copy of a resume read (the copy a read lists may name another
    handover), united as `read_notes` unites them."""
    holds = holds_task(prefix)
    first = {c: notes for c, notes in held.items() if blobs.matching(notes, holds)}
    parts = [united_held(blobs, listing, first)]
    handovers = _ids(parts, "handover", prefix)
    if not handovers:  # no resume can change the answer
        return parts[0]
    read = set(first)
    for kind in ("handover", "resume"):  # resumes naming them, then copies of resumes
        naming = may_name(handovers if kind == "handover" else _ids(parts, "resume"))
        more = {
            c: notes for c, notes in held.items() if c not in read and blobs.matching(notes, naming)
        }
        read.update(more)
        if more:
            parts.append(united_held(blobs, listing, more))
    if len(parts) == 1:
        return parts[0]
    return NoteSet(
        {c: on for part in parts for c, on in part.commits.items()},
        tuple(note for part in parts for note in part.unreadable),
        parts[0].refs,
        sum(part.missing for part in parts),
    )
