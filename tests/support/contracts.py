"""What the reliability trials check: the durability contract of the notes ref, what a
terminal may receive, and JSON as a strict reader takes it; built on `tests/support/`
(hermetic clones, and a reader of the notes ref that does not trust majordomus to check
majordomus).

Shared by the fast tests in tests/reliability/ and the long campaign in `soak/run.py`.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from majordomus.notes import parse_note
from majordomus.records import KINDS
from tests.support.git import NOTES_REF, git
from tests.support.notes import note_blobs

# What must never reach a terminal from a note: C0 controls but newline and tab,
# DEL, C1 controls, bidi overrides and isolates.
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


# ---- the durability contract -------------------------------------------------------------


def store_problems(path: Path, environ: Mapping[str, str]) -> list[str]:
    """Every way the notes ref can fail the durability contract; [] when it holds.

    The ref points at a commit; history is a single line of commits (every write
    was a compare-and-swap on the one before); `git fsck` is clean; git and this
    reader see the same notes, one per object; every note parses and holds only
    valid records.
    """
    problems: list[str] = []
    fsck = subprocess.run(
        ["git", "fsck", "--full", "--strict", "--no-dangling", "--no-progress"],
        cwd=path,
        env=dict(environ),
        capture_output=True,
        text=True,
        check=False,
    )
    if fsck.returncode != 0:
        problems.append(f"git fsck failed: {fsck.stdout}{fsck.stderr}".strip())
    try:
        kind = git(path, environ, "cat-file", "-t", NOTES_REF).strip()
    except AssertionError as error:
        return [*problems, f"{NOTES_REF} cannot be read: {error}"]
    if kind != "commit":
        return [*problems, f"{NOTES_REF} points at a {kind}, not a commit"]
    for line in git(path, environ, "rev-list", "--parents", NOTES_REF).splitlines():
        if len(line.split()) > 2:
            problems.append(f"notes commit {line.split()[0]} has more than one parent")
    listed = git(path, environ, "notes", "--ref=majordomus", "list").split("\n")
    by_git = [line.split()[1] for line in listed if line]
    blobs = note_blobs(path, environ)
    if sorted(by_git) != sorted(blobs) or len(set(by_git)) != len(by_git):
        problems.append("git notes list and the notes tree disagree (two notes for one object?)")
    for target, data in sorted(blobs.items()):
        try:
            document = tomllib.loads(data.decode("utf-8"))
            note = parse_note(data)
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as error:
            problems.append(f"the note on {target} does not parse: {error}")
            continue
        if note.invalid or any(e.kind not in KINDS for e in note.entries):
            problems.append(f"the note on {target} holds invalid records: {document}")
    return problems


# ---- what a terminal may receive -----------------------------------------------------------


def terminal_problems(text: str | bytes) -> list[str]:
    """Characters a note could use to drive a terminal, found in command output."""
    if isinstance(text, bytes):
        if b"\x1b" in text:
            return ["a raw ESC byte"]
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            return [f"output is not UTF-8: {error}"]
    return [f"raw U+{ord(m.group()):04X} at {m.start()}" for m in _UNSAFE_CHARS.finditer(text)]


def strict_json(text: str) -> Any:
    """JSON as a strict reader (jq, JavaScript) takes it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)
