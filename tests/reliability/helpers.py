"""What every reliability trial stands on: hermetic clones, real processes, and a reader
of the notes ref that does not trust majordomus to check majordomus.

Shared by the fast tests in this package and the long campaign in `soak/run.py`.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import os
import re
import subprocess
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pygit2

from majordomus import cli
from majordomus.records import KINDS, parse_note
from tests.conftest import MAJORDOMUS, hermetic_environ

NOTES_REF = "refs/notes/majordomus"
KILL_SETTLE_S = 5.0  # a killed process is reaped within this

# What must never reach a terminal from a note: C0 controls but newline and tab,
# DEL, C1 controls, bidi overrides and isolates.
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

__all__ = ["MAJORDOMUS", "hermetic_environ"]


# ---- repositories ----------------------------------------------------------------------


def isolate_pygit2(empty_dir: Path) -> None:
    """Point libgit2's config search paths at an empty folder (before any repository opens)."""
    empty_dir.mkdir(parents=True, exist_ok=True)
    for level in (
        pygit2.enums.ConfigLevel.SYSTEM,
        pygit2.enums.ConfigLevel.XDG,
        pygit2.enums.ConfigLevel.GLOBAL,
    ):
        pygit2.settings.search_path[level] = str(empty_dir)


def git(cwd: Path, environ: Mapping[str, str], *args: str, stdin: bytes | None = None) -> str:
    """Real git; an AssertionError with git's own words when it fails."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=dict(environ),
        input=stdin,
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.decode()}")
    return result.stdout.decode("utf-8", "replace")


def make_clone(path: Path, environ: Mapping[str, str]) -> Path:
    """A repository with one commit on `main`."""
    path.mkdir(parents=True)
    git(path, environ, "init", "-q", "-b", "main")
    git(path, environ, "commit", "-q", "--allow-empty", "-m", "initial")
    return path


def commit(path: Path, environ: Mapping[str, str], message: str) -> str:
    git(path, environ, "commit", "-q", "--allow-empty", "-m", message)
    return git(path, environ, "rev-parse", "HEAD").strip()


def add_worktrees(clone: Path, environ: Mapping[str, str], count: int) -> list[Path]:
    """`count` linked work trees of `clone`, each on its own branch with its own commit."""
    trees = []
    for i in range(count):
        tree = clone.parent / f"{clone.name}-wt{i}"
        git(clone, environ, "worktree", "add", "-q", "-b", f"wt{i}", str(tree))
        commit(tree, environ, f"work in wt{i}")
        trees.append(tree)
    return trees


def common_dir(path: Path, environ: Mapping[str, str]) -> Path:
    out = git(path, environ, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(out.strip())


def lock_files(path: Path, environ: Mapping[str, str]) -> list[Path]:
    """Lock files a killed writer of the notes ref can leave behind."""
    common = common_dir(path, environ)
    candidates = [common / (NOTES_REF + ".lock"), common / "packed-refs.lock"]
    return [lock for lock in candidates if lock.exists()]


# ---- running majordomus ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def run_cli(
    cwd: Path,
    environ: Mapping[str, str],
    *argv: str,
    stdin: bytes = b"",
    now: datetime.datetime | None = None,
) -> Run:
    """majordomus in-process with a real clock and real sleeps (the fast path for checks)."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(
        ["-C", str(cwd), *argv],
        environ=environ,
        stdin=io.BytesIO(stdin),
        stdout=out,
        stderr=err,
        now=(lambda: now) if now is not None else None,
        is_tty=False,
    )
    return Run(code, out.getvalue(), err.getvalue())


def spawn(
    cwd: Path | bytes,
    environ: Mapping[str, str] | Mapping[bytes, bytes],
    *argv: str | bytes,
    stdin: bool = False,
) -> subprocess.Popen[bytes]:
    """majordomus as a real process: `python -m majordomus -C cwd argv…`."""
    return subprocess.Popen(
        [*MAJORDOMUS, "-C", cwd if isinstance(cwd, bytes) else str(cwd), *argv],
        env=environ,  # str or bytes mappings both work
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@dataclasses.dataclass(frozen=True)
class Finished:
    code: int
    out: bytes
    err: bytes
    max_rss_kib: int
    seconds: float


def wait_measured(proc: subprocess.Popen[bytes], started: float) -> Finished:
    """Reap a process that has already closed its pipes, with its peak memory (Linux, KiB)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    return Finished(proc.returncode, out, err, usage.ru_maxrss, time.monotonic() - started)


# ---- an independent reader of the notes ref ----------------------------------------------


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


def note_blobs(path: Path, environ: Mapping[str, str], ref: str = NOTES_REF) -> dict[str, bytes]:
    """Annotated object -> note bytes, read with git's plumbing (any fan-out, blobs only)."""
    exists = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", ref],
        cwd=path,
        env=dict(environ),
        capture_output=True,
        check=False,
    )
    if exists.returncode != 0:
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


def stored_records(path: Path, environ: Mapping[str, str]) -> list[Stored]:
    """Every table of every note, parsed with tomllib alone."""
    found = []
    for target, data in sorted(note_blobs(path, environ).items()):
        document = tomllib.loads(data.decode("utf-8"))
        for kind, tables in document.items():
            for table in tables:
                found.append(Stored(target, kind, table))
    return found


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


def as_json_record(stored: Stored) -> dict[str, Any]:
    """A stored table the way `--json` shows a record: `at` in RFC 3339, `kind` and `commit`."""
    out: dict[str, Any] = {"kind": stored.kind}
    for key, value in stored.table.items():
        if isinstance(value, datetime.datetime) and key == "at":
            out[key] = value.astimezone(datetime.UTC).isoformat().removesuffix("+00:00") + "Z"
        else:
            out[key] = value
    out["commit"] = stored.target
    return out


def sessions(records: Sequence[Stored], prefix: str) -> list[str]:
    """The `session` of each record written by one trial (its sessions share a prefix)."""
    return sorted(
        str(r.table["session"])
        for r in records
        if str(r.table.get("session", "")).startswith(prefix)
    )


def strict_json(text: str) -> Any:
    """JSON as a strict reader (jq, JavaScript) takes it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)
