"""Notes written by someone with push access who means harm, and a repository that holds them.

Each case is one note of the corpus in fixtures/notes/ (the exact bytes, written
with git's own plumbing, so nothing is cleaned up on the way in), the object it
is attached to, and what a reader must make of it as fixtures/notes/manifest.toml
states: how many invalid notes or records it counts, how many records it hides as
not reachable, which record ids it still lists, and whether a write may append.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.corpus import CORPUS_TASK, CorpusNote, corpus
from tests.support.git import NOTES_REF, git

HEAD40 = "0" * 40
AT = "2026-11-30T03:00:00Z"
# TOML escapes for what a terminal obeys: CSI, OSC 8 hyperlink, C1 CSI, BEL, BS, CR, DEL, NUL.
ESCAPES = (
    r"\u001b[2J\u001b[31mred"
    r" \u001b]8;;https://evil.example/\u0007click me\u001b]8;;\u0007"
    r" \u009b31m \u0007 \u0008 \r \u007f \u0000 end"
)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    invalid: int  # invalid notes or records a reader counts for it
    hidden: int = 0  # records on objects that are not commits reachable from HEAD
    listed: tuple[str, ...] = ()  # record ids `history --all` must still list
    on: str = "commit"  # commit, tree, blob, gitlink, symlink (tree entries, not notes)
    writable: bool = True  # whether a write may append to it (else it must refuse, exit 3)


def parsed(source: str) -> str:
    """What a TOML reader makes of a basic string's source text (escapes resolved)."""
    value = tomllib.loads(f'x = "{source}"')["x"]
    assert isinstance(value, str)
    return value


def record(kind: str, ident: str | None, task: str, /, **fields: str) -> str:
    """One `[[kind]]` table; each value is TOML source, so it can be anything at all."""
    values = {
        "v": "1",
        "id": f'"{ident}"' if ident is not None else None,
        "task": f'"{task}"',
        "head": f'"{HEAD40}"',
        "at": AT,
        "author": '"Mallory <mallory@example.com>"',
    }
    values.update(fields)
    lines = [f"[[{kind}]]"] + [f"{key} = {value}" for key, value in values.items() if value]
    return "\n".join(lines) + "\n"


def case_of(note: CorpusNote, task: str = CORPUS_TASK) -> Case:
    """A corpus note as a case, its task id replaced by `task` (the repository's own)."""
    listed = tuple(
        ident.replace(CORPUS_TASK, task).replace(CORPUS_TASK[:6], task[:6]) for ident in note.ids
    )
    return Case(
        name=note.name,
        data=note.note_bytes(task) if task != CORPUS_TASK else note.data,
        invalid=note.invalid,
        hidden=note.hidden,
        listed=listed,
        on=note.on,
        writable=note.writable,
    )


def cases(task: str) -> list[Case]:
    """The corpus (fixtures/notes), for records of `task` (the repository's current task).

    Notes the current code is known to misread (`known_failure` in the manifest) are
    left out: their expectation is the SPEC's, checked by tests/test_corpus.py.
    """
    return [case_of(note, task) for note in corpus() if not note.known_failure]


@dataclasses.dataclass(frozen=True)
class Planted:
    case: Case
    target: str  # the object the note annotates


def plant(path: Path, environ: Mapping[str, str], corpus: Sequence[Case]) -> list[Planted]:
    """Each case on a fresh commit (or its tree, or a blob) of the current branch.

    The commits, the blobs and the notes on commits are written by one git fast-import
    (the exact bytes, as `git notes add -C` takes them; its notes tree fanned out as git
    notes fans it out), then the notes on a tree or a blob by `git notes add`, which
    fast-import does not attach to anything but a commit, and a gitlink by git's plumbing.
    """
    branch = git(path, environ, "symbolic-ref", "HEAD").strip()
    head = git(path, environ, "rev-parse", "HEAD").strip()
    tree = git(path, environ, "rev-parse", "HEAD^{tree}").strip()
    notes = git(path, environ, "rev-parse", "--verify", "-q", NOTES_REF, check=False).strip()
    committer = f"{environ['GIT_COMMITTER_NAME']} <{environ['GIT_COMMITTER_EMAIL']}>"
    stream = bytearray()
    for index, case in enumerate(corpus):
        message = f"hostile {index}: {case.name}\n".encode()
        stream += f"commit {branch}\nmark :{2 * index + 1}\ncommitter {committer} now\n".encode()
        stream += b"data %d\n%s" % (len(message), message)
        stream += f"from {head}\n\n".encode() if index == 0 else b"\n"
        if case.on == "blob":
            blob = f"a blob {index}\n".encode()
            stream += b"blob\nmark :%d\ndata %d\n%s\n" % (2 * index + 2, len(blob), blob)
    on_commits = [(i, case) for i, case in enumerate(corpus) if case.on == "commit"]
    if on_commits:
        stream += f"commit {NOTES_REF}\ncommitter {committer} now\n".encode()
        stream += b"data 22\nNotes added by plant()\n"
        stream += f"from {notes}\n".encode() if notes else b""
        for index, case in on_commits:
            stream += b"N inline :%d\ndata %d\n%s\n" % (2 * index + 1, len(case.data), case.data)
        stream += b"\n"
    marks = path / ".git" / "plant-marks"
    git(path, environ, "fast-import", "--quiet", "--date-format=now",
        f"--export-marks={marks}", stdin=bytes(stream))  # fmt: skip
    found = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    planted = []
    for index, case in enumerate(corpus):
        target = found[f":{2 * index + 1}"]
        if case.on == "tree":
            target = tree
        elif case.on == "blob":
            target = found[f":{2 * index + 2}"]
        if case.on == "gitlink":
            _plant_gitlink(path, environ, target)
        elif case.on == "symlink":
            _plant_symlink(path, environ, target, case.data)
        elif case.on != "commit":
            blob_id = git(path, environ, "hash-object", "-w", "--stdin", stdin=case.data).strip()
            git(path, environ, "notes", "--ref=majordomus", "add", "-f", "--allow-empty",
                "-C", blob_id, target)  # fmt: skip
        planted.append(Planted(case, target))
    return planted


def _plant_gitlink(path: Path, environ: Mapping[str, str], target: str) -> None:
    """A notes tree whose entry for `target` is a submodule commit, not a blob."""
    old = git(path, environ, "rev-parse", NOTES_REF).strip()
    listing = git(path, environ, "ls-tree", NOTES_REF)
    listing += f"160000 commit {'1' * 40}\t{target}\n"
    tree = git(path, environ, "mktree", "--missing", stdin=listing.encode()).strip()
    new = git(path, environ, "commit-tree", tree, "-p", old, "-m", "gitlink").strip()
    git(path, environ, "update-ref", NOTES_REF, new, old)


def _plant_symlink(path: Path, environ: Mapping[str, str], target: str, data: bytes) -> None:
    """A notes tree whose entry for `target` is a symbolic link to a blob of `data`."""
    old = git(path, environ, "rev-parse", NOTES_REF).strip()
    blob = git(path, environ, "hash-object", "-w", "--stdin", stdin=data).strip()
    listing = git(path, environ, "ls-tree", NOTES_REF)
    listing += f"120000 blob {blob}\t{target}\n"
    tree = git(path, environ, "mktree", stdin=listing.encode()).strip()
    new = git(path, environ, "commit-tree", tree, "-p", old, "-m", "symlink").strip()
    git(path, environ, "update-ref", NOTES_REF, new, old)


def plant_remote_refs(path: Path, environ: Mapping[str, str], task: str) -> int:
    """A remote-tracking notes ref a fetch could bring, with escapes.

    Returns the invalid count it adds. (A ref at a blob stops every command with
    exit 3: test_a_notes_ref_that_is_not_a_commit.)
    """
    (note,) = (n for n in corpus() if n.file == "hostile/remote-tracking-escapes.toml")
    data = note.note_bytes(task)
    blob_id = git(path, environ, "hash-object", "-w", "--stdin", stdin=data).strip()
    git(
        path,
        environ,
        "notes",
        "--ref=remotes/mallory/majordomus",
        "add",
        "-f",
        "-C",
        blob_id,
        "HEAD",
    )
    return 0


# The read commands every hostile note goes through, and the exit codes each may give.
READS = [
    ("history",),
    ("history", "--all"),
    ("show",),
    ("check",),
    ("check", "--all"),
    ("task", "list"),
    ("resume", "--peek"),
    ("doctor",),
    ("history", "--graph"),
    ("history", "--graph", "--all"),
    ("grep", "e"),
    ("grep", "-i", "--all", "E"),
    ("context",),
]
ALLOWED = {
    "history": {0},
    "grep": {0, 1},  # 1 when nothing matched
    "context": {0},
    "show": {0},
    "check": {0, 1},
    "task": {0},
    "resume": {0, 1},
    "doctor": {0, 1},  # 1 (unhealthy) when something is invalid
}
