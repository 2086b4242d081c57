"""The first read of one task, by the notes `git grep` picks: run with the pick checked to
have been made, and its answer compared with a read after every note was read."""

from __future__ import annotations

from typing import Any

from majordomus.notesread import NotesReader
from majordomus.values import NoteSet
from tests.support.repo import Repo


def but_invalid(filtered: Any, full: Any) -> bool:
    """Equal answers but for `invalid`, which counts among fewer notes when filtered."""
    if isinstance(filtered, dict) and isinstance(full, dict):
        if filtered.keys() != full.keys():
            return False
        for name, value in filtered.items():
            if name == "invalid":
                if not value <= full[name]:
                    return False
            elif not but_invalid(value, full[name]):
                return False
        return True
    if isinstance(filtered, list) and isinstance(full, list):
        return len(filtered) == len(full) and all(map(but_invalid, filtered, full))
    return bool(filtered == full)


def picked(repo: Repo, argv: tuple[str, ...]) -> Any:
    """The read of `argv` with no views, checked to have read by the filter."""
    reads: list[NoteSet | None] = []
    task_notes = NotesReader.task_notes

    def counted(self: NotesReader, prefix: str) -> NoteSet | None:
        found = task_notes(self, prefix)
        reads.append(found)
        return found

    NotesReader.task_notes = counted  # type: ignore[method-assign]
    try:
        result = repo.run(*argv)
    finally:
        NotesReader.task_notes = task_notes  # type: ignore[method-assign]
    assert reads and all(found is not None for found in reads), argv
    return result
