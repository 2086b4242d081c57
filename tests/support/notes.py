"""An independent reader of the notes ref: git plumbing and tomllib, never majordomus.

What majordomus says it stored is checked against what this reader finds, so that a
bug in majordomus' own parser cannot hide itself.
"""

from __future__ import annotations

import dataclasses
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.env import hermetic_environ
from tests.support.git import NOTES_REF, git

# Reading a repository needs no identity and no configuration of anyone's.
_READER_ENVIRON = hermetic_environ(Path("/nonexistent/majordomus-test-home"))


@dataclasses.dataclass(frozen=True)
class Stored:
    """One table as it sits in the notes ref: the object it annotates, its kind, its keys."""

    target: str
    kind: str
    table: Mapping[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        ident = self.table.get("id")
        return (self.kind, ident if isinstance(ident, str) else repr(sorted(self.table.items())))


def ref_exists(path: Path, environ: Mapping[str, str], ref: str = NOTES_REF) -> bool:
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", ref],
        cwd=path,
        env=dict(environ),
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


def note_blobs(path: Path, environ: Mapping[str, str], ref: str = NOTES_REF) -> dict[str, bytes]:
    """Annotated object -> note bytes, read with git's plumbing (any fan-out, blobs only).

    `path` is a work tree or a git dir (a bare remote's included).
    """
    if not ref_exists(path, environ, ref):
        return {}
    listing = git(path, environ, "ls-tree", "-r", "-z", ref)
    paths: dict[str, str] = {}
    for entry in listing.split("\0"):
        if entry:
            meta, _, name = entry.partition("\t")
            _, kind, oid = meta.split()
            if kind == "blob":  # a submodule entry is no note (store_problems notices it)
                paths[name.replace("/", "")] = oid
    if not paths:
        return {}
    batch = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=path,
        env=dict(environ),
        input="".join(f"{oid}\n" for oid in paths.values()).encode(),
        capture_output=True,
        check=True,
    ).stdout
    blobs: dict[str, bytes] = {}
    offset = 0
    for target, oid in paths.items():
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].decode().split()
        assert header[0] == oid, (header, oid)
        size = int(header[2])
        blobs[target] = batch[header_end + 1 : header_end + 1 + size]
        offset = header_end + 1 + size + 1
    return blobs


def stored_records(path: Path, environ: Mapping[str, str], ref: str = NOTES_REF) -> list[Stored]:
    """Every table of every note, parsed with tomllib alone (a note that is not TOML fails)."""
    found = []
    for target, data in sorted(note_blobs(path, environ, ref).items()):
        document = tomllib.loads(data.decode("utf-8"))
        for kind, tables in document.items():
            for table in tables:
                found.append(Stored(target, kind, table))
    return found


def ref_ids(path: Path, ref: str = NOTES_REF) -> set[str]:
    """Every record id in the notes `ref` of the repository at `path` (git dir or work tree),
    as this reader finds them."""
    return {
        ident
        for record in stored_records(path, _READER_ENVIRON, ref)
        if isinstance(ident := record.table.get("id"), str)
    }
