"""Objects read by git rather than libgit2, for a plain layout (see `gitfiles.discover`):
a few objects by one `git cat-file --batch`, a commit's parents and time from its text,
one git process that reads objects one by one (`Batch`), the notes attached to one commit
found through the trees on the way to them, a notes tree listed by `git ls-tree`. Each
answers None, or raises UnsureError, where libgit2 must read instead: they never guess.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import IO

_OID = re.compile(r"[0-9a-f]{40}")
Objects = dict[str, tuple[str, bytes] | None]  # id -> (type, content), None: not here


def is_object_id(text: str) -> bool:
    """A full object id, which git reads as nothing else (anything else it resolves)."""
    return _OID.fullmatch(text) is not None


def _as_libgit2(
    gitdir: str, environ: Mapping[str, str], *args: str
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a git that reads objects as libgit2 reads them:
    replacement refs are not honoured, as libgit2 does not honour them."""
    return ["git", f"--git-dir={gitdir}", *args], {**environ, "GIT_NO_REPLACE_OBJECTS": "1"}


def _answer(
    stream: IO[bytes], oid: str, limit: int | None = None, over: dict[str, int] | None = None
) -> tuple[str, bytes] | None:
    """cat-file's answer for one object: (type, content), None when it is not in the
    repository; UnsureError for anything else (a reply cut short, another object). With
    `limit`, content over that many bytes is read past, not kept: (type, b""), its size
    in `over`."""
    header = stream.readline().split()
    if header == [oid.encode("ascii"), b"missing"]:
        return None
    if len(header) != 3 or header[0] != oid.encode("ascii") or not header[2].isdigit():
        raise UnsureError(oid)
    size = int(header[2])
    if limit is not None and over is not None and size > limit:
        left = size + 1
        while left:
            chunk = stream.read(min(left, 1 << 20))
            if not chunk:
                raise UnsureError(oid)
            left -= len(chunk)
        over[oid] = size
        return header[1].decode("ascii", "replace"), b""
    data = stream.read(size + 1)
    if len(data) != size + 1 or data[-1:] != b"\n":
        raise UnsureError(oid)
    return header[1].decode("ascii", "replace"), data[:-1]


def cat_file(gitdir: str, environ: Mapping[str, str], ids: Sequence[str]) -> Objects | None:
    """Objects by id, read by one `git cat-file --batch`: cheaper than loading libgit2 for
    a few note blobs. Each is (type, content), or None when it is not in the repository;
    None for all when git cannot run or answers otherwise. Only for a plain layout (see
    `discover`): in a partial clone git would fetch what is missing, one at a time."""
    import subprocess

    if not all(is_object_id(oid) for oid in ids):
        return None  # git would read anything else as a revision to resolve
    import io

    command, env = _as_libgit2(gitdir, environ, "cat-file", "--batch")
    try:
        result = subprocess.run(
            command,
            input="".join(f"{oid}\n" for oid in ids).encode("ascii"),
            capture_output=True,
            env=env,
            check=False,
        )
    except OSError:
        return None
    if result.returncode != 0:
        return None
    answers = io.BytesIO(result.stdout)
    try:
        return {oid: _answer(answers, oid) for oid in ids}
    except UnsureError:
        return None


def committer_time(commit: bytes) -> int | None:
    """The committer's time a commit object's headers hold (libgit2's `commit_time`)."""
    for line in commit.split(b"\n"):
        if not line:
            return None  # the headers end: the message follows
        if line.startswith(b"committer "):
            parts = line.rsplit(b" ", 2)
            return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
    return None


def commit_parents(commit: bytes) -> tuple[str, ...] | None:
    """The parents a commit object's headers name, in order (libgit2's `parent_ids`);
    None when the headers are not a commit's as git writes them."""
    lines = commit.split(b"\n")
    if not lines[0].startswith(b"tree "):
        return None
    parents = []
    for line in lines[1:]:
        if not line.startswith(b"parent "):
            break
        parent = line[7:].decode("ascii", "replace")
        if not is_object_id(parent):
            return None
        parents.append(parent)
    return tuple(parents)


class UnsureError(Exception):
    """git answered with something these functions do not read (an object of another type
    than expected, a tree not in git's order, an unusual mode, a reply cut short): ask
    libgit2, which reads it or refuses it with its own message."""


# The modes git writes, and the kind of object each names (a gitlink names a commit).
_MODES = {b"40000": "tree", b"100644": "blob", b"100755": "blob", b"120000": "link"}
_MODES[b"160000"] = "commit"
_OID_BYTES = 20
# Ids asked of one `Batch` before its answers are read: what is written (41 bytes each)
# stays well inside a pipe's buffer, so the write never waits for git to read.
PIPELINED = 256


class Batch:
    """One `git cat-file --batch`, asked one object at a time: what a read learns from one
    object (a tree) names the next. Only for a plain layout (see `cat_file`)."""

    def __init__(self, gitdir: str, environ: Mapping[str, str]) -> None:
        """OSError when git cannot run."""
        import subprocess

        command, env = _as_libgit2(gitdir, environ, "cat-file", "--batch")
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def read(self, oid: str) -> tuple[str, bytes] | None:
        """(type, content) of one object; None when it is not in the repository."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        if not is_object_id(oid):
            raise UnsureError(oid)
        try:
            stdin.write(f"{oid}\n".encode("ascii"))
            stdin.flush()
        except OSError:  # git stopped (a broken pipe)
            raise UnsureError(oid) from None
        return _answer(stdout, oid)

    def objects(self, ids: Sequence[str]) -> Objects | None:
        """Objects by id, as `cat_file` reads them; None when git did not answer."""
        try:
            return {oid: self.read(oid) for oid in ids}
        except UnsureError:
            return None

    def read_many(
        self, ids: Sequence[str], limit: int | None = None, over: dict[str, int] | None = None
    ) -> Objects:
        """Objects by id, as `read` answers each, asked PIPELINED at a time: one write and
        one flush for them all, not one per object; content over `limit` bytes read past,
        its size put in `over` (see `_answer`). UnsureError as `read`."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        found: Objects = {}
        for at in range(0, len(ids), PIPELINED):
            chunk = ids[at : at + PIPELINED]
            if not all(is_object_id(oid) for oid in chunk):
                raise UnsureError("not an object id")
            try:
                stdin.write("".join(f"{oid}\n" for oid in chunk).encode("ascii"))
                stdin.flush()
            except OSError:  # git stopped (a broken pipe)
                raise UnsureError(chunk[0]) from None
            for oid in chunk:
                found[oid] = _answer(stdout, oid, limit, over)
        return found

    def close(self) -> None:
        """Ends git, waiting for it: no process outlives the read."""
        process = self._process
        # At the end of its input git exits; a git still writing meets a closed pipe.
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        process.wait()


def attached_notes(
    batch: Batch, targets: Sequence[str], commit: str
) -> tuple[list[str], list[tuple[str, str]]] | None:
    """The ids of every note (every blob, executable or not) attached to `commit` in the
    notes commits `targets`, at every fan-out depth, in the order of `notestree.find`, each
    once; and the entries at those paths that are no note (kind and id, each once, as
    `notestree.find_kinds` names them). None when an object on the way is not in the
    repository. UnsureError when a target is not a commit here, or git's answer is not
    one read here."""
    trees = []
    for target in targets:  # every target checked before any tree is read, as libgit2 does
        found = batch.read(target)
        if found is None or found[0] != "commit":
            raise UnsureError(target)
        first = found[1].split(b"\n", 1)[0]
        if not (first.startswith(b"tree ") and is_object_id(first[5:].decode("latin-1"))):
            raise UnsureError(target)
        trees.append(first[5:].decode("ascii"))
    notes: dict[str, None] = {}
    odd: dict[tuple[str, str], None] = {}
    for tree_id in trees:
        copies = _copies(batch, tree_id, commit)
        if copies is None:
            return None
        for kind, oid in copies:
            if kind == "note":
                notes[oid] = None
            else:
                odd[kind, oid] = None
    return list(notes), list(odd)


# The kind of entry at a note's path (see `notestree.find_kinds`), by the kind of object
# its mode names.
_AT_NOTE_PATH = {"blob": "note", "link": "link", "commit": "gitlink", "tree": "tree"}


def _copies(batch: Batch, tree_id: str, rest: str) -> list[tuple[str, str]] | None:
    """The entries for `rest` in the tree `tree_id` (kind and id): the entry named `rest`,
    then the same in the subtree named by its next two digits, and so on."""
    copies = []
    while True:
        found = batch.read(tree_id)
        if found is None:
            return None
        if found[0] != "tree":
            raise UnsureError(tree_id)
        entries = tree_entries(found[1])
        flat = entries.get(rest)
        if flat is not None:  # git reads no note from anything but a blob
            copies.append((_AT_NOTE_PATH[flat[0]], flat[1]))
        sub = entries.get(rest[:2]) if len(rest) > 2 else None
        if sub is None or sub[0] != "tree":
            return copies
        tree_id, rest = sub[1], rest[2:]


def tree_entries(data: bytes) -> dict[str, tuple[str, str]]:
    """A tree object's entries: name -> (kind, id). UnsureError for a tree git would not
    write (an unknown mode, a name twice, entries out of git's order), where a lookup by
    name could answer otherwise than libgit2's."""
    entries: dict[str, tuple[str, str]] = {}
    previous = b""
    at, end = 0, len(data)
    while at < end:
        space = data.find(b" ", at)
        nul = data.find(b"\0", space + 1)
        if space < 0 or nul < 0 or nul + 1 + _OID_BYTES > end:
            raise UnsureError("a tree cut short")
        kind = _MODES.get(data[at:space])
        name = data[space + 1 : nul]
        key = name + b"/" if kind == "tree" else name
        if kind is None or not name or key <= previous:
            raise UnsureError("a tree git would not write")
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            text = ""  # never a note's name: it is only kept from matching
        if text in entries:
            raise UnsureError("a tree git would not write")
        if text:
            entries[text] = (kind, data[nul + 1 : nul + 1 + _OID_BYTES].hex())
        previous = key
        at = nul + 1 + _OID_BYTES
    return entries


# One record of `git ls-tree -r -t -z` that is a note: a blob, executable or not, at a path
# a walk of a notes tree reaches (`notestree.walk`): `ab/` folders, at most 38 digits above
# the last one, then the rest of the digits; whether they are 40 is for the caller to
# count. Only where a record starts (after a NUL): a name can hold spaces, tabs and
# newlines.
_LISTED_NOTE = re.compile(
    rb"(?<![^\0])100(?:644|755) blob ([0-9a-f]{40})"
    rb"\t((?:[0-9a-f]{2}/){0,19}[0-9a-f]{2,40})\0"
)
# One that is a fan-out folder the walk enters: `ab/` folders, 36 digits at most above
# its own two; with the NUL before it (so that a search looks for that first: 20 times
# quicker than a match tried at every byte).
_LISTED_FAN_OUT = re.compile(
    rb"\x00040000 tree [0-9a-f]{40}\t(?:[0-9a-f]{2}/){0,18}[0-9a-f]{2}(?=\x00)"
)


def tree_notes(gitdir: str, environ: Mapping[str, str], tree_id: str) -> str | None:
    """The notes under a notes tree, read by one `git ls-tree -r -t`, as libgit2's walk finds
    them (`notestree.walk`): each annotated object's id and its note's id, end to end, in
    the walk's order (both list a tree's entries as the tree stores them). Only `ab`
    subtrees are entered, 38 digits deep at most, and a blob at a 40-digit path is a note.
    None: ask libgit2 (git cannot run, or cannot read the tree: an object missing, a tree
    it finds malformed), and for a tree that holds anything else (a symlink, a gitlink, a
    tree that is not entered, a name that is no commit id): the walk says what each is."""
    import subprocess

    if not is_object_id(tree_id):
        return None

    command, env = _as_libgit2(gitdir, environ, "ls-tree", "-r", "-t", "-z", "--full-tree", tree_id)
    try:
        result = subprocess.run(command, capture_output=True, env=env, check=False)
    except OSError:
        return None
    if result.returncode != 0:
        return None
    listed = result.stdout
    notes = []
    for blob, path in _LISTED_NOTE.findall(listed):
        name = path.replace(b"/", b"")
        if len(name) == 40:
            notes.append(name + blob)
    fan_out = len(_LISTED_FAN_OUT.findall(b"\0" + listed))
    if len(notes) + fan_out != listed.count(b"\0"):
        return None  # a record that is neither: an entry that is no note
    return b"".join(notes).decode("ascii")


def notes_matching(
    gitdir: str, environ: Mapping[str, str], tree_ids: Sequence[str], patterns: Sequence[str]
) -> set[str] | None:
    """The annotated objects whose note, under any of these notes trees, has a line that
    one of these extended regular expressions matches: one `git grep` over the trees
    (threaded, in C), no blob read here. The names are as `tree_notes` reads them (the
    digits of the path, fan-out folders joined); a name that is no object id is left
    out. None: git cannot run or cannot read a tree (an object missing: ask libgit2).
    Only for a plain layout that is no partial clone: there git would fetch every blob
    it lacks, one at a time."""
    import subprocess

    if not tree_ids or not all(is_object_id(tree) for tree in tree_ids):
        return None
    expressions = [arg for pattern in patterns for arg in ("-e", pattern)]
    command, env = _as_libgit2(
        gitdir,
        {**environ, "LC_ALL": "C"},  # bytes, whatever the locale
        "grep",
        "--threads=1",  # threads cost more CPU than they save time on a tree of small blobs
        "--text",
        "--no-textconv",
        "--files-with-matches",
        "--null",
        "--extended-regexp",
        "--no-color",
        *expressions,
        *tree_ids,
        "--",
    )
    try:
        result = subprocess.run(command, capture_output=True, env=env, check=False)
    except OSError:
        return None
    if result.returncode not in (0, 1):  # 1: no line matched
        return None
    found: set[str] = set()
    for listed in result.stdout.split(b"\0"):
        _, colon, path = listed.partition(b":")
        name = path.replace(b"/", b"").decode("ascii", "replace")
        if colon and is_object_id(name):
            found.add(name)
    return found
