"""A repository's own files read directly, without libgit2: where the repository is, what
HEAD and the notes refs point at, and a few objects read by one git process (the notes
attached to one commit among them, found through the trees on the way to them). Loading
libgit2 costs more than a warm read answered from the caches, so those reads start here.

Only the plain layouts are read this way: a work tree with a `.git` directory or file,
loose and packed refs, a config that names no partial clone, reftable, include,
worktree or object format. Anything else is `None`, and the caller asks libgit2,
which reads every layout: these functions never guess.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from typing import IO, NamedTuple

# Variables that change where git looks: with any of them set, discovery is libgit2's.
_DISCOVERY_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
)
# Config that makes a repository other than plain: its refs, objects or work tree live
# elsewhere or in another format, objects may be missing (a partial clone), or an
# extension libgit2 may refuse to open is named.
_UNPLAIN = re.compile(
    rb"partialclone|promisor|refstorage|objectformat|worktree|include|\[[ \t]*extensions"
    rb"|^[ \t]*bare[ \t]*(?:$|=(?![ \t]*false[ \t]*$))",
    re.IGNORECASE | re.MULTILINE,
)
_OID = re.compile(r"[0-9a-f]{40}")
_SYMREF_DEPTH = 5  # git follows at most five symbolic refs
REMOTE_NOTES_PREFIX = "refs/notes/remotes/"
Objects = dict[str, tuple[str, bytes] | None]  # id -> (type, content), None: not here


class Found(NamedTuple):
    gitdir: str  # real paths, as libgit2 reports them
    workdir: str
    commondir: str


def discover(path: str, environ: Mapping[str, str]) -> Found | None:
    """The repository whose work tree holds `path`, found as git finds it; None when the
    layout is not a plain one (then libgit2 discovers)."""
    if any(environ.get(name) for name in _DISCOVERY_VARIABLES):
        return None
    try:
        here = os.path.realpath(path)  # needs the working directory: it may be gone
        device = os.stat(here).st_dev
    except OSError:
        return None
    while True:
        stop, found = _at(here, device)
        if stop:
            return found
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _at(directory: str, device: int) -> tuple[bool, Found | None]:
    """Whether discovery stops at one directory, and the repository found there."""
    try:
        info = os.stat(directory)
    except OSError:
        return True, None
    if info.st_dev != device:
        return True, None  # git stops at a file-system boundary
    if os.path.exists(os.path.join(directory, "HEAD")):
        return True, None  # maybe a bare repository or a git directory: libgit2 decides
    dotgit = os.path.join(directory, ".git")
    try:
        mode = os.stat(dotgit).st_mode
    except OSError:
        return False, None
    gitdir = dotgit if stat.S_ISDIR(mode) else None
    if stat.S_ISREG(mode):
        gitdir = _gitfile_target(dotgit)
    if gitdir is None:
        return True, None
    return True, _plain(os.path.realpath(gitdir), directory)


def _gitfile_target(dotgit: str) -> str | None:
    try:
        with open(dotgit, encoding="utf-8") as file:
            text = file.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    return os.path.join(os.path.dirname(dotgit), text.removeprefix("gitdir: "))


def _plain(gitdir: str, workdir: str) -> Found | None:
    """`gitdir` when it is a repository of the plain layout, owned by this user."""
    try:
        if os.stat(gitdir).st_uid != os.geteuid():
            return None  # libgit2 checks safe.directory
        commondir = gitdir
        pointer = os.path.join(gitdir, "commondir")
        if os.path.exists(pointer):
            with open(pointer, encoding="utf-8") as file:
                commondir = os.path.realpath(os.path.join(gitdir, file.read().strip()))
        # The shared config; a linked work tree's own (config.worktree) needs the
        # worktreeConfig extension, which the shared one would name.
        with open(os.path.join(commondir, "config"), "rb") as file:
            if _UNPLAIN.search(file.read()):
                return None
        if not os.path.isfile(os.path.join(gitdir, "HEAD")):
            return None
        if not os.path.isdir(os.path.join(commondir, "objects")):
            return None
        if os.path.exists(os.path.join(commondir, "reftable")):
            return None
    except (OSError, UnicodeDecodeError):
        return None
    return Found(gitdir, workdir, commondir)


class Refs:
    """Loose and packed refs of one plain repository, read once per command."""

    def __init__(self, found: Found) -> None:
        self.found = found
        self._packed: bytes | None = None

    def head(self) -> str | None:
        """The commit id HEAD names; None when it names none (or in a way not read here)."""
        return self._resolve("HEAD", 0)

    def notes_targets(self, local: str, suffix: str) -> dict[str, str] | None:
        """`local` and every `refs/notes/remotes/*<suffix>` ref with their targets, the local
        one first and the rest by name; None when one of them cannot be read here."""
        names = set(self._loose_under(REMOTE_NOTES_PREFIX))
        names.update(self._packed_names(REMOTE_NOTES_PREFIX))
        ordered = [local, *sorted(n for n in names if n.endswith(suffix))]
        targets: dict[str, str] = {}
        for name in ordered:
            target = self._resolve(name, 0)
            if target is None:
                if name != local or self._exists(name):
                    return None
                continue
            targets[name] = target
        return targets

    def _exists(self, name: str) -> bool:
        return os.path.lexists(self._loose_path(name)) or self._packed_target(name) is not None

    def _loose_path(self, name: str) -> str:
        # HEAD and the refs of one work tree live in its git directory, the rest are shared.
        per_worktree = name == "HEAD" or name.startswith(("refs/bisect/", "refs/worktree/"))
        base = self.found.gitdir if per_worktree else self.found.commondir
        return os.path.join(base, *name.split("/"))

    def _resolve(self, name: str, depth: int) -> str | None:
        if depth > _SYMREF_DEPTH:
            return None
        try:
            with open(self._loose_path(name), encoding="ascii") as file:
                text = file.read().strip()
        except FileNotFoundError:
            text = self._packed_target(name) or ""
            return text if _OID.fullmatch(text) else None
        except (OSError, UnicodeDecodeError):
            return None
        if text.startswith("ref: "):
            return self._resolve(text.removeprefix("ref: "), depth + 1)
        return text if _OID.fullmatch(text) else None

    def _loose_under(self, prefix: str) -> list[str]:
        top = os.path.join(self.found.commondir, *prefix.rstrip("/").split("/"))
        names = []
        for directory, _dirs, files in os.walk(top):
            relative = os.path.relpath(directory, self.found.commondir).replace(os.sep, "/")
            names += [f"{relative}/{f}" for f in files if not f.endswith(".lock")]
        return names

    def has_under(self, prefix: str) -> bool:
        """Whether any ref, loose or packed, is named under `prefix` (`refs/replace/`)."""
        if self._loose_under(prefix):
            return True
        return b" " + prefix.encode("utf-8", "replace") in self._packed_lines()

    # packed-refs is searched, not parsed: after `git gc` it holds every tag and branch,
    # and a ref or two is all a command asks of it.
    def _packed_lines(self) -> bytes:
        """packed-refs with a newline before its first line and after its last."""
        if self._packed is None:
            try:
                with open(os.path.join(self.found.commondir, "packed-refs"), "rb") as file:
                    self._packed = b"\n" + file.read() + b"\n"
            except FileNotFoundError:
                self._packed = b"\n"
        return self._packed

    def _packed_target(self, name: str) -> str | None:
        """What a line `<id> <name>` says (or an id that is not one: the caller checks)."""
        data = self._packed_lines()
        needle = b" " + name.encode("utf-8", "replace") + b"\n"
        at = data.find(needle)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            if data[start : start + 1] not in (b"#", b"^"):
                return data[start:at].decode("ascii", "replace")
            at = data.find(needle, at + 1)
        return None

    def _packed_names(self, prefix: str) -> list[str]:
        data = self._packed_lines()
        needle = b" " + prefix.encode("utf-8")
        names = []
        at = data.find(needle)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            if data[start : start + 1] not in (b"#", b"^"):
                names.append(data[at + 1 : end].decode("utf-8", "replace"))
            at = data.find(needle, end)
        return names


def is_object_id(text: str) -> bool:
    """A full object id, which git reads as nothing else (anything else it resolves)."""
    return _OID.fullmatch(text) is not None


def _as_libgit2(
    gitdir: str, environ: Mapping[str, str], *args: str
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a git that reads objects as libgit2 reads them:
    replacement refs are not honoured, as libgit2 does not honour them."""
    return ["git", f"--git-dir={gitdir}", *args], {**environ, "GIT_NO_REPLACE_OBJECTS": "1"}


def _answer(stream: IO[bytes], oid: str) -> tuple[str, bytes] | None:
    """cat-file's answer for one object: (type, content), None when it is not in the
    repository; UnsureError for anything else (a reply cut short, another object)."""
    header = stream.readline().split()
    if header == [oid.encode("ascii"), b"missing"]:
        return None
    if len(header) != 3 or header[0] != oid.encode("ascii") or not header[2].isdigit():
        raise UnsureError(oid)
    size = int(header[2])
    data = stream.read(size + 1)
    if len(data) != size + 1 or data[-1:] != b"\n":
        raise UnsureError(oid)
    return header[1].decode("ascii", "replace"), data[:-1]


def cat_file(gitdir: str, environ: Mapping[str, str], ids: Sequence[str]) -> Objects | None:
    """Objects by id, read by one `git cat-file --batch`: cheaper than loading libgit2 for
    a few note blobs. Each is (type, content), or None when it is not in the repository;
    None for all when git cannot run or answers otherwise. Only for a plain layout (see
    `discover`): in a partial clone git would fetch what is missing, one at a time."""
    if not all(is_object_id(oid) for oid in ids):
        return None  # git would read anything else as a revision to resolve
    import io
    import subprocess

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
        if not (first.startswith(b"tree ") and _OID.fullmatch(first[5:].decode("latin-1"))):
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
    if not is_object_id(tree_id):
        return None
    import subprocess

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
