"""The notes corpus in `fixtures/notes/`: one note per file, and what a reader must make of it.

`fixtures/notes/manifest.toml` holds one `[[note]]` table per file. The corpus
test, the hostile-notes tests, the fuzzers' seeds and the benchmark's note
generator all read the files through this module (the benchmark through its
own small reader of the same manifest, since bench/ does not import tests/).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
NOTES = ROOT / "notes"
PROFILES = ROOT / "profiles"
GOLDEN = ROOT / "golden"

# The task id the corpus files are written for; `note_bytes` puts a real one in its place.
CORPUS_TASK = "t-feedc0ffee00"


class CorpusNote(NamedTuple):
    """One file of the corpus and the expectation its manifest entry states."""

    file: str  # relative to fixtures/notes
    about: str
    records: tuple[str, ...]  # "kind id" of each record `show` lists for it, in order
    invalid: int  # invalid parts and records a reader counts for it
    hidden: int  # records `history` hides (on an object that is not a reachable commit)
    on: str  # commit, tree, blob, gitlink (a submodule entry in the notes tree), symlink
    writable: bool  # whether a write on its commit may append (else exit 3, note untouched)
    escaped: tuple[str, ...]  # text `show` must print, escaped, for what the note holds raw
    known_failure: str  # why the current code does not meet the stated expectation yet

    @property
    def name(self) -> str:
        return self.file.removesuffix(".toml")

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(record.partition(" ")[2] for record in self.records)

    @property
    def data(self) -> bytes:
        return (NOTES / self.file).read_bytes()

    def note_bytes(self, task: str) -> bytes:
        """The note with the corpus task id (and its 4-digit prefix) replaced by `task`."""
        data = self.data.replace(CORPUS_TASK.encode(), task.encode())
        return data.replace(CORPUS_TASK[:6].encode(), task[:6].encode())


def _note(table: dict[str, Any]) -> CorpusNote:
    return CorpusNote(
        file=table["file"],
        about=table["about"],
        records=tuple(table.get("records", ())),
        invalid=table.get("invalid", 0),
        hidden=table.get("hidden", 0),
        on=table.get("on", "commit"),
        writable=table.get("writable", True),
        escaped=tuple(table.get("escaped", ())),
        known_failure=table.get("known_failure", ""),
    )


def corpus() -> list[CorpusNote]:
    """Every note of the manifest, in its order."""
    manifest = tomllib.loads((NOTES / "manifest.toml").read_text("utf-8"))
    return [_note(table) for table in manifest["note"]]


def corpus_files() -> list[str]:
    """Every note file on disk, relative to fixtures/notes (to check the manifest is whole)."""
    return sorted(
        str(path.relative_to(NOTES)) for path in NOTES.glob("*/*") if path.name != "README.md"
    )
