"""A repository's own files read directly, without libgit2: where the repository is, what
HEAD and the notes refs point at (the objects git reads for such a layout: `gitobjects`).
Loading libgit2 costs more than a warm read answered from the caches, so those reads
start here.

Only the plain layouts are read this way: a work tree with a `.git` directory or file,
loose and packed refs, a config that names no partial clone, reftable, include,
worktree or object format. Anything else is `None`, and the caller asks libgit2,
which reads every layout: these functions never guess.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import NamedTuple

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
_PLAIN_REF = re.compile(r"refs/[A-Za-z0-9._/-]+")  # a ref name read here: no odd characters
_SYMREF_DEPTH = 5  # git follows at most five symbolic refs
REMOTE_NOTES_PREFIX = "refs/notes/remotes/"


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


def _plain_name(name: str) -> bool:
    """A ref name read here: no odd characters, nothing git would refuse in a name."""
    return bool(_PLAIN_REF.fullmatch(name)) and not any(
        part in name for part in ("..", "//", "/.", ".lock")
    )


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

    def target(self, name: str) -> tuple[bool, str | None]:
        """(whether it was read here, what `name` points at: None when there is no such
        ref). Not read here (False): a ref these files do not tell, ask libgit2."""
        if not _plain_name(name):
            return False, None  # libgit2 says what such a name is
        found = self._resolve(name, 0)
        if found is not None:
            return True, found
        return not self._exists(name), None

    def is_direct(self, name: str) -> bool:
        """Whether `name` is a ref these files tell that names an object itself (no
        symbolic ref, which `git update-ref` would follow and move another ref through)."""
        if not _plain_name(name):
            return False
        text = self._text(name)
        return text is not None and _OID.fullmatch(text) is not None

    def _text(self, name: str) -> str | None:
        """What the ref file says (packed-refs' object id when there is no loose file, ""
        when neither names it); None when the file cannot be read as a ref."""
        try:
            with open(self._loose_path(name), encoding="ascii") as file:
                return file.read().strip()
        except FileNotFoundError:
            packed = self._packed_target(name) or ""  # packed-refs holds no symbolic ref
            return packed if _OID.fullmatch(packed) else ""
        except (OSError, UnicodeDecodeError):
            return None

    def _exists(self, name: str) -> bool:
        return os.path.lexists(self._loose_path(name)) or self._packed_target(name) is not None

    def _loose_path(self, name: str) -> str:
        # HEAD and the refs of one work tree live in its git directory, the rest are shared.
        per_worktree = name == "HEAD" or name.startswith(("refs/bisect/", "refs/worktree/"))
        base = self.found.gitdir if per_worktree else self.found.commondir
        return os.path.join(base, *name.split("/"))

    def _resolve(self, name: str, depth: int) -> str | None:
        text = self._text(name) if depth <= _SYMREF_DEPTH else None
        if text is None:
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
