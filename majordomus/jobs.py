"""The jobs one command does on one repository, each an object built with what it needs:
git and the refs (`repository`), the commits (`history`), reading notes (`reader`),
moving the notes ref (`writer`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from majordomus.history import History
from majordomus.location import open_repository
from majordomus.notesread import NotesReader
from majordomus.repository import Repository
from majordomus.writer import Writer


class Jobs(NamedTuple):
    repository: Repository
    history: History
    reader: NotesReader
    writer: Writer


def open_jobs(path: str, environ: Mapping[str, str]) -> Jobs:
    """The repository at (or above) `path`, and its jobs; nothing is read yet."""
    repository = open_repository(path, environ)
    reader = NotesReader(repository)
    return Jobs(repository, History(repository), reader, Writer(repository, reader))
