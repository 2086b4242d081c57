"""The search cache: what `grep` searches of each record, by note blob and position, so that
a warm search reads one small file rather than every record's text."""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from majordomus.cachefile import CacheFile
from majordomus.records import HANDOVER_FIELDS, SIGNATURE_KEY

# The text of each kind searched, in the order a record shows it; every kind's session too.
SEARCHED: Mapping[str, tuple[str, ...]] = {
    "task": ("title", "session"),
    "checkpoint": ("body", "session"),
    "handover": (*HANDOVER_FIELDS, "session"),
    "resume": ("session",),
}

# What is kept of one record: whether it holds a signature, its author, its text searched
# (the value of each field SEARCHED names for its kind, one after another, joined by line
# feeds), then how many lines of that text each field holds (0: the record has no such
# field, or one that is not text). One string per record: a warm search loads 10,000 in
# a few milliseconds.
Searched = tuple[Any, ...]


def searched(kind: str, table: Mapping[str, Any]) -> Searched:
    """What the cache keeps of a record of this kind, from its table (its JSON values or
    the values read from TOML: the text fields are the same strings)."""
    values = [table.get(key) for key in SEARCHED[kind]]
    texts = [value for value in values if type(value) is str]
    counts = (value.count("\n") + 1 if type(value) is str else 0 for value in values)
    author = table.get("author")
    return (
        SIGNATURE_KEY in table,
        sys.intern(author) if type(author) is str else author,  # one object in the file
        "\n".join(texts),
        *counts,
    )


def fields_of(kind: str, value: Searched) -> Iterator[tuple[str, list[str]]]:
    """Each field of the record that `value` keeps, with its lines."""
    lines = value[2].split("\n")
    at = 0
    for key, count in zip(SEARCHED[kind], value[3:], strict=True):
        if count:
            yield key, lines[at : at + count]
            at += count


class SearchCache(CacheFile):
    """Note blob and a record's position in it (`"BLOB POSITION"`, the position as a read
    of that note alone numbers it) -> what `searched` keeps of that record. A blob names
    its content for good, so an entry is never stale; the file keeps the records of the
    notes of the last search of every task, and of those searched since."""

    FORMAT = "search:'blob position'->(signed,author,text,lines of each field of SEARCHED[kind])"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.records: dict[str, Searched] = {}
        self.added = 0
        loaded = self.load()
        if loaded is not None and len(loaded) == 1 and isinstance(loaded[0], dict):
            self.records = loaded[0]

    def put(self, key: str, value: Searched) -> None:
        self.records[key] = value
        self.added += 1

    def save(self, current: Collection[str] | None) -> None:
        """When a record was put: write the file, keeping only the records of `current`
        (the keys of every record a search of every task read; None: keep every one)."""
        if not self.added and (current is None or len(current) == len(self.records)):
            return
        records = self.records
        if current is not None:
            records = {key: records[key] for key in current if key in records}
        self.write(records)
        self.added = 0
