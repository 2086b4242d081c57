"""The only module that touches the repository: notes read in bulk, written by compare-and-swap.

Notes live in the tree of the commit `refs/notes/majordomus` points at, laid out
as git lays them out (flat, or fanned out into `ab/cdef…` subtrees). Reads walk
the whole tree once; writes rebuild only the path to one note and move the ref
with a compare-and-swap, retried with jittered back-off.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import os
import random
import re
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pygit2

from majordomus import interrupt
from majordomus.cache import FILE_NAME as CACHE_FILE
from majordomus.cache import GRAPH_FILE_NAME as GRAPH_FILE
from majordomus.cache import RECORDS_FILE_NAME as DOCUMENTS_FILE
from majordomus.cache import VIEWS_FILE_NAME as VIEWS_FILE
from majordomus.cache import BlobEntry, DocumentCache, GraphCache, ReadCache
from majordomus.errors import RepositoryError
from majordomus.graph import CommitGraph
from majordomus.records import (
    Entry,
    Note,
    NoteError,
    Record,
    Summary,
    append_note,
    dump_note,
    dump_tables,
    load_document,
    note_from_document,
    parse_note,
    summarise,
    union,
)

NOTES_REF = "refs/notes/majordomus"
REMOTE_NOTES_PREFIX = "refs/notes/remotes/"
REMOTE_NOTES_SUFFIX = "/majordomus"
TASK_FILE = "majordomus-task"
DEFAULT_WRITE_TIMEOUT_S = 10.0
STALE_LOCK_S = 10.0
_TREE = int(pygit2.enums.FileMode.TREE)
_BLOB = int(pygit2.enums.FileMode.BLOB)
_HEX = re.compile(r"[0-9a-f]+")
_HEX2 = re.compile(r"[0-9a-f]{2}")


class MissingObjectError(NoteError):
    """A note object (blob or tree) that is not in this clone: a partial clone left it out,
    or whoever published the notes never sent it. Never cached: a fetch can bring it."""

    def __init__(self, object_id: str) -> None:
        super().__init__(f"note object {object_id[:12]} is missing; not read")
        self.object_id = object_id


class UnreadableNote(NamedTuple):
    """A note (or a whole notes ref) that could not be read, and why."""

    commit: str
    ref: str
    reason: str


class Annotated(NamedTuple):
    """The readable notes on one object, united across refs and summarised."""

    blobs: tuple[str, ...]  # distinct note blobs (one per ref that differs)
    summaries: tuple[Summary, ...]
    invalid: int


class NoteSet(NamedTuple):
    """Every note of the local and remote-tracking refs, united per annotated object."""

    commits: Mapping[str, Annotated]
    unreadable: tuple[UnreadableNote, ...]
    refs: Mapping[str, str]  # ref name -> target it was read at
    missing: int = 0  # note objects not in this clone (yet): an answer not to cache

    @property
    def invalid(self) -> int:
        return len(self.unreadable) + sum(a.invalid for a in self.commits.values())


class StaleLock(NamedTuple):
    path: str
    age_s: int


class WriteReport(NamedTuple):
    notes_commit: str
    attempts: int
    stale_locks: tuple[StaleLock, ...]
    parent: str | None  # the notes commit the write was built on
    blob: str  # the note blob now on the commit
    position: int  # of the first record written, among the note's records


def _entry(tree: pygit2.Tree, name: str) -> pygit2.Object | None:
    return tree[name] if name in tree else None  # noqa: SIM401 (pygit2.Tree has no get)


def _is_note_path(name: str) -> bool:
    return len(name) == 40 and _HEX.fullmatch(name) is not None


_LOCATION_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")


def _located_by_environment(path: str, environ: Mapping[str, str]) -> tuple[str, str | None] | None:
    """(git dir, work tree or None) as git finds them when its environment names them.

    libgit2 ignores GIT_DIR and GIT_WORK_TREE, so git itself is asked, from `path`
    (where -C went): relative values resolve from there, GIT_DIR without
    GIT_WORK_TREE makes `path` the top of the work tree, a bare repository has none.
    None when the environment names nothing, and discovery is libgit2's, as git's.
    """
    named = {name: environ[name] for name in _LOCATION_VARIABLES if environ.get(name)}
    if not named:
        return None
    command = ["git", "rev-parse", "--absolute-git-dir", "--git-common-dir"]
    command += ["--is-bare-repository", "--show-toplevel"]
    try:
        result = subprocess.run(
            command,
            cwd=path,
            env=dict(environ),
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise RepositoryError("git is not installed or not on PATH; install git.") from None
    lines = result.stdout.splitlines()
    if len(lines) < 3:
        where = ", ".join(
            f"{name} names {os.path.normpath(os.path.join(os.path.abspath(path), value))}"
            for name, value in named.items()
        )
        fatal = [line for line in result.stderr.splitlines() if line.startswith("fatal: ")]
        if fatal and "not a git repository" not in fatal[0]:
            raise RepositoryError(
                f"git cannot use the repository the environment names ({where}): "
                f"{fatal[0].removeprefix('fatal: ').rstrip('.')}; fix that, or unset "
                f"{' and '.join(named)}."
            )
        raise RepositoryError(
            f"{where}, which is not a git repository; point "
            f"{' and '.join(named)} at one, or unset {'it' if len(named) == 1 else 'them'}."
        )
    gitdir, common = lines[0], os.path.join(path, lines[1])
    own_common = Path(gitdir)
    if (own_common / "commondir").exists():
        own_common = own_common / (own_common / "commondir").read_text().strip()
    if os.path.realpath(common) != os.path.realpath(own_common):
        raise RepositoryError(
            f"GIT_COMMON_DIR names {os.path.realpath(common)}, but the repository at {gitdir} "
            "keeps its refs elsewhere and majordomus reads them from there; unset GIT_COMMON_DIR."
        )
    bare = lines[2] == "true"
    return gitdir, None if bare or len(lines) < 4 else lines[3]


def _discover(path: str) -> str:
    try:
        found = pygit2.discover_repository(path)
    except pygit2.GitError:
        found = None
    if found is None:
        raise RepositoryError(
            f"not a git repository (or any parent up to /): {os.path.abspath(path)}; "
            "run majordomus inside a clone, or pass -C PATH."
        )
    return str(found)


def _absolute_locations(
    environ: Mapping[str, str], gitdir: Path, workdir: Path | None
) -> Mapping[str, str]:
    if not any(environ.get(name) for name in _LOCATION_VARIABLES):
        return environ
    env = {k: v for k, v in environ.items() if k not in _LOCATION_VARIABLES}
    env["GIT_DIR"] = str(gitdir)
    if workdir is not None:
        env["GIT_WORK_TREE"] = str(workdir)
    return env


def _unopenable(found: str, error: Exception) -> str:
    gitdir = found.rstrip("/")
    if "object format" in str(error) and "sha256" in str(error):
        return (
            f"{gitdir} is a SHA-256 repository, which majordomus cannot read (its git library, "
            "libgit2, is built for SHA-1 only); use it from a SHA-1 clone."
        )
    return f"cannot open the repository at {gitdir}: {str(error).rstrip('.')}."


class Store:
    """One repository, opened once per command."""

    def __init__(self, path: str, environ: Mapping[str, str]) -> None:
        if not os.path.isdir(path):
            raise RepositoryError(f"cannot change to '{path}': no such directory.")
        located = _located_by_environment(path, environ)
        found, workdir = located if located is not None else (_discover(path), None)
        try:
            self.repo = pygit2.Repository(found)
        except pygit2.GitError as error:
            raise RepositoryError(_unopenable(found, error)) from None
        self.gitdir = Path(self.repo.path)
        if located is None:
            workdir = self.repo.workdir
        self.workdir = Path(workdir) if workdir else None
        # The git subprocesses run elsewhere than `path`: what the environment names
        # reaches them as absolute paths, so they read what this object reads.
        self.environ: Mapping[str, str] = _absolute_locations(environ, self.gitdir, self.workdir)
        self._cache: dict[str, Note | NoteError] = {}
        self._disk_cache: ReadCache | None = None
        self._graph: CommitGraph | None = None
        self._current_blobs: set[str] = set()
        # Set by the caller that knows the remotes: fetches note objects a partial clone
        # left out, in one batch; returns the remote it asked and why it failed (or None).
        self.fetch_missing: Callable[[Sequence[str]], tuple[str, str | None]] | None = None
        common = self.gitdir
        if (common / "commondir").exists():
            common = (common / (common / "commondir").read_text().strip()).resolve()
        self.commondir = common

    # ---- git subprocesses ------------------------------------------------

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the user's own git on this repository; arguments never pass through a shell."""
        command = ["git", f"--git-dir={self.gitdir}", *args]
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=dict(self.environ),
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise RepositoryError("git is not installed or not on PATH; install git.") from None
        if check and result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            detail = lines[-1] if lines else f"exit {result.returncode}"
            raise RepositoryError(f"git {args[0]} failed: {detail}.")
        return result

    # ---- commits ----------------------------------------------------------

    def head(self) -> str:
        try:
            if self.repo.head_is_unborn:
                raise RepositoryError(
                    "HEAD has no commit yet; make a first commit so records have one to attach to."
                )
            return str(self.repo.head.target)
        except pygit2.GitError as error:
            raise RepositoryError(f"cannot read HEAD: {error}.") from None

    def resolve(self, rev: str | None) -> str:
        if rev is None:
            return self.head()
        try:
            obj = self.repo.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            if self.repo.is_shallow:
                raise RepositoryError(
                    f"cannot find a commit named '{rev}' in this shallow clone, whose history "
                    "stops at its boundary; run git fetch --unshallow (or --deepen N) to bring "
                    "the older commits, or give a branch, tag or commit id that is here."
                ) from None
            raise RepositoryError(
                f"cannot find a commit named '{rev}'; give a branch, tag or commit id."
            ) from None
        return str(commit.id)

    def has_commit(self, hex_id: str) -> bool:
        try:
            obj = self.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return False
        return isinstance(obj, pygit2.Commit)

    def commit_time(self, hex_id: str) -> int | None:
        try:
            obj = self.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return None
        return obj.commit_time if isinstance(obj, pygit2.Commit) else None

    def is_shallow(self) -> bool:
        return bool(self.repo.is_shallow)

    # ---- the commit graph (graph.Source) -----------------------------------

    def walk(self, tips: Sequence[str], hide: Sequence[str]) -> list[list[str]]:
        """`git rev-list --parents TIPS ^HIDE`: git's order, and a shallow cut as git sees it."""
        args = ["rev-list", "--parents", *tips, *(f"^{commit}" for commit in hide)]
        return [line.split() for line in self.git(*args).stdout.splitlines()]

    def parents(self, commit: str) -> tuple[str, ...] | None:
        try:
            obj = self.repo.get(commit)
        except (ValueError, pygit2.GitError):
            return None
        if not isinstance(obj, pygit2.Commit):
            return None
        return tuple(str(parent) for parent in obj.parent_ids)

    def true_parents(self, commit: str) -> tuple[str, ...] | None:
        try:
            kind, data = self.repo.odb.read(commit)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        if kind != pygit2.enums.ObjectType.COMMIT:
            return None
        header = data.split(b"\n\n", 1)[0]
        return tuple(
            line[7:].decode("ascii") for line in header.split(b"\n") if line.startswith(b"parent ")
        )

    def shallow_boundary(self) -> frozenset[str]:
        if not self.repo.is_shallow:
            return frozenset()
        try:
            text = (self.commondir / "shallow").read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            text = ""
        return frozenset(text.split())

    def merge_base(self, a: str, b: str) -> str | None:
        result = self.git("merge-base", a, b, check=False)
        return result.stdout.strip() or None if result.returncode == 0 else None

    def ahead_behind(self, commit: str, base: str) -> tuple[int, int]:
        """(commits in `commit` not in `base`, commits in `base` not in `commit`)."""
        out = self.git("rev-list", "--left-right", "--count", f"{commit}...{base}").stdout.split()
        return int(out[0]), int(out[1])

    def patch_text(self, commit: str, base: str | None = None) -> str:
        """The diff of `commit` against `base` (default: its first parent; a root commit:
        the empty tree) as git prints it; "" for a merge commit with no base given."""
        try:
            obj = self.repo.get(commit)
            if not isinstance(obj, pygit2.Commit):
                return ""
            if base is None:
                if len(obj.parents) > 1:
                    return ""
                if not obj.parents:
                    return obj.tree.diff_to_tree(swap=True).patch or ""
                return self.repo.diff(obj.parents[0], obj).patch or ""
            old = self.repo.get(base)
            if not isinstance(old, pygit2.Commit):
                return ""
            return self.repo.diff(old, obj).patch or ""
        except (KeyError, ValueError, pygit2.GitError):
            return ""  # objects a partial clone left out: no patch is stated, none is guessed

    def current_branch(self) -> str | None:
        """The short name of the branch HEAD is on, or None when detached or unborn."""
        try:
            if self.repo.head_is_detached or self.repo.head_is_unborn:
                return None
            return self.repo.head.shorthand
        except pygit2.GitError:
            return None

    def config_value(self, name: str) -> str | None:
        try:
            value = self.repo.config[name]
        except (KeyError, pygit2.GitError, ValueError):
            return None
        return value if isinstance(value, str) else None

    def symbolic_target(self, name: str) -> str | None:
        """Where a symbolic ref such as refs/remotes/origin/HEAD points, when it does."""
        ref = self.repo.references.get(name)
        if ref is None or ref.type != pygit2.enums.ReferenceType.SYMBOLIC:
            return None
        target = ref.target
        return target if isinstance(target, str) else None

    def graph(self) -> CommitGraph:
        """The graph's answers for this command, with what earlier commands kept."""
        if self._graph is None:
            self._graph = CommitGraph(self, GraphCache(self.commondir / GRAPH_FILE))
        return self._graph

    def flush(self) -> None:
        """Write what the graph answered this time, for the next command."""
        if self._graph is not None and isinstance(self._graph.memory, GraphCache):
            self._graph.memory.save()

    def is_dirty(self) -> bool:
        if self.workdir is None:
            return False
        result = self.git(
            f"--work-tree={self.workdir}",
            "status",
            "--porcelain",
            "--untracked-files=no",
            check=False,
        )
        return result.returncode != 0 or bool(result.stdout.strip())

    def identity(self) -> str:
        """`Name <email>` as git itself would sign a commit, or git's own refusal."""
        result = self.git("var", "GIT_COMMITTER_IDENT", check=False)
        if result.returncode != 0:
            lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
            why = lines[-1].removeprefix("fatal: ") if lines else "no identity"
            raise RepositoryError(
                f"git has no identity to sign records with ({why}): run "
                'git config --global user.name "Your Name" and '
                "git config --global user.email you@example.com."
            )
        ident = result.stdout.strip()
        return ident.rsplit(" ", 2)[0]

    # ---- the current task -------------------------------------------------

    def current_task(self) -> str | None:
        try:
            text = (self.gitdir / TASK_FILE).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        return text or None

    def set_current_task(self, task: str) -> None:
        path = self.gitdir / TASK_FILE
        tmp = path.with_name(f"{TASK_FILE}.{os.getpid()}.tmp")
        tmp.write_text(task + "\n", encoding="utf-8")
        os.replace(tmp, path)

    # ---- reading notes ----------------------------------------------------

    def notes_refs(self) -> list[str]:
        names = [NOTES_REF] if NOTES_REF in self.repo.references else []
        names += sorted(
            name
            for name in self.repo.references
            if name.startswith(REMOTE_NOTES_PREFIX) and name.endswith(REMOTE_NOTES_SUFFIX)
        )
        return names

    def ref_targets(self) -> dict[str, str]:
        """Each notes ref and its target: cheap, for noticing that something was written."""
        targets = {}
        for name in self.notes_refs():
            ref = self.repo.references.get(name)
            if ref is not None:
                targets[name] = str(ref.resolve().target)
                self._notes_commit(name, targets[name])
        return targets

    def _notes_commit(self, name: str, target: str) -> pygit2.Commit:
        """The commit a notes ref points at; a ref at anything else stops every command."""
        obj = self.repo.get(target)
        if isinstance(obj, pygit2.Commit):
            return obj
        if name == NOTES_REF:
            raise RepositoryError(_not_a_commit(target))
        raise RepositoryError(
            f"{name} points at {target[:12]}, which is not a commit; majordomus will not read "
            f"it: inspect it with git cat-file -t {target[:12]}, then delete it "
            f"(git update-ref -d {name}) and fetch again."
        )

    def read_notes(self) -> NoteSet:
        """Every note of every notes ref, read in one pass (through the read cache).

        In a partial clone, note objects the clone left out are fetched from the
        promisor remote in one batch (`fetch_missing`), then read; when they cannot
        be, the read stops (exit 3) rather than answer from what happens to be here.
        """
        noteset, missing = self._read_present()
        if not missing or not self.is_partial():
            return noteset
        remote, reason = "the promisor remote", "majordomus did not ask it"
        asked: set[str] = set()
        # One batch brings each tree with everything under it; a second round is
        # only for objects the first could not name (under a tree that was missing).
        while self.fetch_missing is not None and missing - asked:
            asked |= missing
            remote, failure = self.fetch_missing(sorted(missing))
            reason = failure or "it did not send them"
            noteset, missing = self._read_present()
        if missing:
            raise RepositoryError(
                f"{len(missing)} note object(s) are missing from this partial clone and "
                f"{remote} did not send them ({reason}); check that {remote} is reachable, "
                f"then run majordomus fetch {remote}."
            )
        return noteset

    def _read_present(self) -> tuple[NoteSet, set[str]]:
        """The notes whose objects are here, and the ids of the note objects that are not.

        A missing object is never cached: it can arrive with the next fetch.
        """
        cache = self._read_cache()
        found: dict[str, dict[str, str]] = {}  # commit -> blob -> first ref holding it
        unreadable: list[UnreadableNote] = []
        targets: dict[str, str] = {}
        trees: list[str] = []
        missing: set[str] = set()
        for name in self.notes_refs():
            target, tree_id = self._notes_tree_id(name)
            targets[name] = target
            trees.append(tree_id)
            pairs = cache.trees.get(tree_id)
            if pairs is None:
                lacking: set[str] = set()
                pairs = tuple(self._walk_present(tree_id, lacking))
                if lacking:
                    missing |= lacking
                    for object_id in sorted(lacking):
                        reason = f"notes tree {object_id[:12]} is missing; not read"
                        unreadable.append(UnreadableNote("", name, reason))
                else:
                    cache.put_tree(tree_id, pairs)
            for commit, blob in pairs:
                found.setdefault(commit, {}).setdefault(blob, name)
        commits: dict[str, Annotated] = {}
        for commit, blobs in found.items():
            readable: list[tuple[str, tuple[tuple[Summary, ...], int]]] = []
            for blob, name in blobs.items():
                entry = self._blob_entry(blob, cache)
                if entry is None:
                    missing.add(blob)
                    why = f"note object {blob[:12]} is missing; not read"
                    unreadable.append(UnreadableNote(commit, name, why))
                elif isinstance(entry, str):
                    unreadable.append(UnreadableNote(commit, name, entry))
                else:
                    readable.append((blob, entry))
            if len(readable) == 1:
                blob, (summaries, invalid) = readable[0]
                commits[commit] = Annotated((blob,), summaries, invalid)
            elif readable:
                ids = tuple(blob for blob, _ in readable)
                note = self.note(ids)
                commits[commit] = Annotated(ids, summarise(note), note.invalid)
        self._current_blobs = {blob for blobs in found.values() for blob in blobs}
        cache.save(trees, self._current_blobs)
        return NoteSet(commits, tuple(unreadable), targets, len(missing)), missing

    def is_partial(self) -> bool:
        """Whether git may have left objects out of this clone (a promisor remote is set)."""
        config = self.repo.config
        for entry in config:
            name = entry.name.lower()
            if name == "extensions.partialclone" and entry.value:
                return True
            if name.startswith("remote.") and name.endswith(".promisor"):
                with contextlib.suppress(pygit2.GitError, ValueError):
                    if config.get_bool(entry.name):
                        return True
        return False

    def note(self, blobs: Sequence[str]) -> Note:
        """The united note of readable blobs, parsed (once per process)."""
        parsed = [self._parse_blob(blob) for blob in blobs]
        return union([note for note in parsed if not isinstance(note, NoteError)])

    def notes_on(
        self, commit: str, targets: Mapping[str, str] | None = None
    ) -> tuple[tuple[str, ...], int] | None:
        """The readable note blobs attached to one commit over every notes ref (or over the
        notes commits `targets` names, in that order), and how many of its notes are
        unreadable, found without walking the notes trees; None when an object on the way
        is missing (`read_notes` fetches it, or says why it cannot)."""
        blobs: dict[str, None] = {}
        try:
            if targets is None:
                trees = [self._notes_tree_id(name)[1] for name in self.notes_refs()]
            else:
                trees = [str(self._notes_commit(n, t).tree_id) for n, t in targets.items()]
            for tree_id in trees:
                tree = self._tree(pygit2.Oid(hex=tree_id))
                blobs.update(dict.fromkeys(str(oid) for oid in self._find(tree, commit, "")))
        except MissingObjectError:
            return None
        readable: list[str] = []
        unreadable = 0
        for blob in blobs:
            parsed = self._parse_blob(blob)
            if isinstance(parsed, MissingObjectError):
                return None
            if isinstance(parsed, NoteError):
                unreadable += 1
            else:
                readable.append(blob)
        return tuple(readable), unreadable

    def changed_notes(self, old: str, new: str) -> set[str] | None:
        """The commits whose notes differ between two notes commits, from a diff of their
        trees (which skips every subtree the two share); None when either is not here."""
        try:
            trees = [self.repo[target].peel(pygit2.Tree) for target in (old, new)]
            diff = trees[0].diff_to_tree(trees[1])
        except (KeyError, ValueError, pygit2.GitError):
            return None
        changed: set[str] = set()
        for delta in diff.deltas:
            for path in (delta.old_file.path, delta.new_file.path):
                name = path.replace("/", "")
                if _is_note_path(name):
                    changed.add(name)
        return changed

    def _read_cache(self) -> ReadCache:
        if self._disk_cache is None:
            self._disk_cache = ReadCache(self.commondir / CACHE_FILE)
        return self._disk_cache

    def drop_cache(self) -> bool:
        """Remove every derived cache file; the next command rebuilds what it needs."""
        dropped = False
        for name in (CACHE_FILE, GRAPH_FILE, DOCUMENTS_FILE, VIEWS_FILE):
            with contextlib.suppress(FileNotFoundError):
                (self.commondir / name).unlink()
                dropped = True
        self._disk_cache = self._graph = None
        return dropped

    def _blob_entry(self, blob: str, cache: ReadCache) -> BlobEntry | None:
        """A note's summaries (or why it is unreadable); None when its blob is not here."""
        entry = cache.blobs.get(blob)
        if entry is None:
            parsed = self._parse_blob(blob)
            if isinstance(parsed, MissingObjectError):
                return None
            if isinstance(parsed, NoteError):
                entry = str(parsed)
            else:
                # Summarised as `note` presents it: records de-duplicated by id.
                united = union([parsed])
                entry = (summarise(united), united.invalid)
            cache.put_blob(blob, entry)
        return entry

    def _notes_tree_id(self, name: str) -> tuple[str, str]:
        """A notes ref's target and the id of its tree, which may be missing from a partial
        clone; a ref at anything but a commit stops every command."""
        target = str(self.repo.references[name].resolve().target)
        return target, str(self._notes_commit(name, target).tree_id)

    def notes_commits(self) -> list[str]:
        """The commit each notes ref points at (what holds every object the notes need)."""
        targets = [str(self.repo.references[name].resolve().target) for name in self.notes_refs()]
        return [t for t in targets if isinstance(self.repo.get(t), pygit2.Commit)]

    def _walk_present(self, tree_id: str, missing: set[str]) -> Iterator[tuple[str, str]]:
        """`_walk` over the trees that are here; the ids of those that are not go to `missing`."""
        try:
            tree = self._tree(pygit2.Oid(hex=tree_id))
        except MissingObjectError:
            missing.add(tree_id)
            return
        yield from self._walk(tree, "", missing)

    def _walk(
        self, tree: pygit2.Tree, prefix: str, missing: set[str] | None = None
    ) -> Iterator[tuple[str, str]]:
        for entry in tree:
            name = entry.name or ""
            if entry.filemode == _TREE:
                if _HEX2.fullmatch(name) and len(prefix) < 38:
                    try:
                        sub = self._tree(entry.id)
                    except MissingObjectError:
                        if missing is None:
                            raise
                        missing.add(str(entry.id))
                        continue
                    yield from self._walk(sub, prefix + name, missing)
            elif _is_note_path(prefix + name):
                yield prefix + name, str(entry.id)

    def _tree(self, oid: pygit2.Oid) -> pygit2.Tree:
        try:
            tree = self.repo[oid]
        except KeyError:
            raise MissingObjectError(str(oid)) from None
        assert isinstance(tree, pygit2.Tree)
        return tree

    def preload(self, blobs: Collection[str]) -> None:
        """Parse many notes through the document cache (decoding beats parsing TOML)."""
        missing = [blob for blob in blobs if blob not in self._cache]
        if not missing:
            return
        documents = DocumentCache(self.commondir / DOCUMENTS_FILE)
        for blob in missing:
            document = documents.get(blob)
            if document is None:
                try:
                    document = load_document(self._blob_data(blob))
                except MissingObjectError:
                    continue
                except NoteError:
                    # Not one TOML document: read the way every other read does.
                    self._cache[blob] = self._parse_blob(blob)
                    continue
                documents.put(blob, document)
            self._cache[blob] = note_from_document(document)
        documents.save(self._current_blobs or blobs)

    def _blob_data(self, blob_id: str) -> bytes:
        """A note's bytes; NoteError when the notes tree names anything but a blob we have
        (a pushed tree can hold a submodule entry, or point at an object never sent)."""
        try:
            blob = self.repo[blob_id]
        except KeyError:
            raise MissingObjectError(blob_id) from None
        except ValueError:
            raise NoteError(f"note object {blob_id[:12]} is missing; not read") from None
        if not isinstance(blob, pygit2.Blob):
            raise NoteError(f"note object {blob_id[:12]} is not a blob; not read")
        return blob.data

    def _parse_blob(self, blob_id: str) -> Note | NoteError:
        cached = self._cache.get(blob_id)
        if cached is None:
            try:
                cached = parse_note(self._blob_data(blob_id))
            except MissingObjectError as error:
                return error  # not remembered: it may arrive with a fetch
            except NoteError as error:
                cached = error
            self._cache[blob_id] = cached
        return cached

    # ---- writing notes ----------------------------------------------------

    def append(
        self,
        commit: str,
        records: Sequence[Record],
        message: str,
        *,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        author: str | None = None,
    ) -> WriteReport:
        """Append records to the note on `commit`, all or nothing, by compare-and-swap."""
        author = author or self.identity()
        name, _, email = author.rpartition(" <")
        written: dict[str, Any] = {}

        def build(tree: pygit2.Tree | None, parents: list[pygit2.Oid]) -> pygit2.Oid:
            blob_id, written["position"] = self._note_blob(tree, commit, records)
            written["blob"] = str(blob_id)
            now = datetime.datetime.now(datetime.UTC)
            signature = pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)
            tree_id = self._insert(tree, commit, blob_id)
            return self.repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )

        interrupt.writing(records[0].kind, records[0].id)
        try:
            swap = self._swap(build, message, "nothing was recorded", timeout_s, sleep, monotonic)
        except MissingObjectError as error:
            raise RepositoryError(
                f"note object {error.object_id[:12]} is missing from this clone; nothing was "
                "recorded: run majordomus fetch, then try again."
            ) from None
        return WriteReport(
            notes_commit=swap.target,
            attempts=swap.attempts,
            stale_locks=swap.stale_locks,
            parent=swap.parent,
            blob=written["blob"],
            position=written["position"],
        )

    def append_many(
        self,
        notes: Mapping[str, Sequence[Record]],
        message: str,
        *,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> Swap:
        """Append records to the notes of several commits in one compare-and-swap: all or
        nothing. The notes commit is bookkeeping, signed as a merge of fetched records is."""

        def build(tree: pygit2.Tree | None, parents: list[pygit2.Oid]) -> pygit2.Oid | None:
            changes = {}
            for commit, records in notes.items():
                # Another writer may have copied some of them meanwhile: never twice.
                found = self._find(tree, commit, "") if tree is not None else iter(())
                have = self._record_ids([str(blob) for blob in found])
                missing = [record for record in records if record.id not in have]
                if missing:
                    changes[commit] = self._note_blob(tree, commit, missing)[0]
            if not changes:
                return None
            signature = self._merge_signature()
            tree_id = self._insert_many(tree, changes)
            return self.repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )

        return self._swap(build, message, "nothing was adopted", timeout_s, sleep, monotonic)

    def _swap(
        self,
        build: Callable[[pygit2.Tree | None, list[pygit2.Oid]], pygit2.Oid | None],
        message: str,
        undone: str,
        timeout_s: float | None,
        sleep: Callable[[float], None],
        monotonic: Callable[[], float],
    ) -> Swap:
        """Move the notes ref to what `build` makes of its current value, by compare-and-swap.

        When another writer moved the ref first (or holds its lock), re-read, rebuild and
        retry with jittered back-off until the budget runs out. `build` returning None
        means there is nothing to move. A lock a killed writer left is reported, also
        when it did not block us; it is never removed.
        """
        budget = timeout_s if timeout_s is not None else self._write_timeout()
        deadline = monotonic() + budget
        attempts = 0
        stale: dict[str, StaleLock] = {}
        while True:
            attempts += 1
            ref = self.repo.references.get(NOTES_REF)
            tree, parents = self._write_base(ref)
            parent = str(parents[0]) if parents else None
            target = build(tree, parents)
            if target is None:
                return Swap(parent or "", parent, attempts, ())
            interrupt.pause("before-write", self.environ)
            try:
                # Ctrl-C waits for the ref to move and be noted, so the line an
                # interrupted command prints says truly whether the record is stored.
                with interrupt.held():
                    if ref is None:
                        self.repo.references.create(NOTES_REF, target, force=False)
                    else:
                        ref.set_target(target, message)
                    interrupt.stored()
                interrupt.pause("after-write", self.environ)
                for lock in self.stale_locks():
                    stale.setdefault(lock.path, lock)
                return Swap(str(target), parent, attempts, tuple(stale.values()))
            except (pygit2.GitError, pygit2.AlreadyExistsError, OSError, ValueError):
                for lock in self.stale_locks():
                    stale[lock.path] = lock
            if monotonic() >= deadline:
                raise RepositoryError(self._contention_message(attempts, budget, stale, undone))
            sleep(random.uniform(0.002, 0.02) * min(attempts, 10))

    def check_writable(self) -> None:
        """Refuse early when the notes ref is something a write would have to destroy."""
        self._write_base(self.repo.references.get(NOTES_REF))

    def _write_timeout(self) -> float:
        raw = self.environ.get("MAJORDOMUS_WRITE_TIMEOUT", "")
        try:
            value = float(raw)
        except ValueError:
            return DEFAULT_WRITE_TIMEOUT_S
        return value if value > 0 else DEFAULT_WRITE_TIMEOUT_S

    def _contention_message(
        self, attempts: int, budget: float, stale: Mapping[str, StaleLock], undone: str
    ) -> str:
        if not stale:
            # A lock too young to call stale may still be what blocked every attempt.
            stale = {lock.path: lock for lock in self.stale_locks(older_than_s=0)}
        if stale:
            lock = next(iter(stale.values()))
            return (
                f"{NOTES_REF} stayed locked for {budget:g} s ({attempts} attempts): {lock.path} is "
                f"{lock.age_s} s old; if no git or majordomus process is running, remove it "
                f"(rm '{lock.path}') and try again; {undone}."
            )
        return (
            f"{NOTES_REF} kept moving or stayed locked for {budget:g} s ({attempts} attempts); "
            f"{undone}; try again (MAJORDOMUS_WRITE_TIMEOUT raises the budget)."
        )

    def lock_paths(self) -> list[Path]:
        return [self.commondir / (NOTES_REF + ".lock"), self.commondir / "packed-refs.lock"]

    def stale_locks(self, older_than_s: float = STALE_LOCK_S) -> list[StaleLock]:
        found = []
        now = time.time()
        for path in self.lock_paths():
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:
                continue
            if age >= older_than_s:
                found.append(StaleLock(str(path), int(age)))
        return found

    def _write_base(self, ref: Any) -> tuple[pygit2.Tree | None, list[pygit2.Oid]]:
        if ref is None:
            return None, []
        target = ref.resolve().target
        obj = self.repo.get(target)
        if not isinstance(obj, pygit2.Commit):
            raise RepositoryError(_not_a_commit(str(target)))
        try:
            tree = self._tree(obj.tree_id)
        except MissingObjectError:
            raise RepositoryError(
                f"the notes tree of {NOTES_REF} is missing from this partial clone; nothing was "
                "recorded: run majordomus fetch, then try again."
            ) from None
        return tree, [obj.id]

    def _note_blob(
        self, tree: pygit2.Tree | None, commit: str, records: Sequence[Record]
    ) -> tuple[pygit2.Oid, int]:
        texts = []
        for blob_id in self._find(tree, commit, "") if tree is not None else []:
            try:
                data = self._blob_data(str(blob_id))
                parse_note(data)
                texts.append(data)
            except NoteError as error:
                raise RepositoryError(
                    f"the note on {commit[:12]} cannot be read ({error}); majordomus will not "
                    f"overwrite it: inspect it with git notes --ref=majordomus show {commit[:12]}."
                ) from None
        # Two copies of one note (a damaged tree) become one, each copy's text kept.
        existing = (texts[0] if len(texts) == 1 else _joined(texts)) if texts else None
        try:
            data = append_note(existing, records)
        except NoteError as error:
            raise RepositoryError(
                f"the note on {commit[:12]} is not in majordomus format ({error}); majordomus "
                "will not overwrite it: inspect it with git notes --ref=majordomus show "
                f"{commit[:12]}."
            ) from None
        written = union([parse_note(data)]).records
        first = records[0]
        position = next(
            i for i, r in enumerate(written) if (r.kind, r.id) == (first.kind, first.id)
        )
        return self.repo.create_blob(data), position

    def _find(self, tree: pygit2.Tree, rest: str, prefix: str) -> Iterator[pygit2.Oid]:
        """Every copy of the note for `rest`, at any fan-out depth."""
        flat = _entry(tree, rest)
        if flat is not None and flat.filemode != _TREE:
            yield flat.id
        head = rest[:2]
        if len(rest) > 2 and head in tree:
            sub = tree[head]
            if sub.filemode == _TREE:
                yield from self._find(self._tree(sub.id), rest[2:], prefix + head)

    def _insert(self, tree: pygit2.Tree | None, rest: str, blob_id: pygit2.Oid) -> pygit2.Oid:
        """The tree with the note for `rest` at the place git would look, every other copy gone."""
        return self._insert_many(tree, {rest: blob_id})

    def _fan_out(self, tree: pygit2.Tree, width: int) -> pygit2.Oid:
        """Fan a flat level out the way git does once it is crowded enough.

        git moves a level into two-digit subtrees when every one of the sixteen
        values of the next hex digit is shared by at least two notes (notes.c,
        determine_fanout); the same test is then applied inside each subtree.
        """
        notes = [
            entry
            for entry in tree
            if entry.filemode != _TREE
            and len(entry.name or "") == width
            and _HEX.fullmatch(entry.name or "")
        ]
        counts: dict[str, int] = {}
        for entry in notes:
            counts[(entry.name or "")[0]] = counts.get((entry.name or "")[0], 0) + 1
        if width <= 2 or len(counts) < 16 or min(counts.values()) < 2:
            return tree.id
        groups: dict[str, list[Any]] = {}
        for entry in notes:
            groups.setdefault((entry.name or "")[:2], []).append(entry)
        builder = self.repo.TreeBuilder(tree)
        for head, entries in groups.items():
            sub = self.repo.TreeBuilder()
            for entry in entries:
                builder.remove(entry.name)
                sub.insert((entry.name or "")[2:], entry.id, entry.filemode)
            sub_tree = self.repo[sub.write()]
            assert isinstance(sub_tree, pygit2.Tree)
            builder.insert(head, self._fan_out(sub_tree, width - 2), _TREE)
        return builder.write()

    # ---- merging notes refs (remote) ----------------------------------------------------

    def notes_target(self) -> str | None:
        """Where the local notes ref points, or None when nothing was written here yet."""
        return self.ref_target(NOTES_REF)

    def ref_target(self, name: str) -> str | None:
        ref = self.repo.references.get(name)
        return None if ref is None else str(ref.resolve().target)

    def delete_refs(self, prefix: str) -> None:
        """Remove every ref under `prefix` (a private namespace of fetched records)."""
        for name in [n for n in self.repo.references if n.startswith(prefix)]:
            with contextlib.suppress(KeyError, pygit2.GitError):
                self.repo.references.delete(name)

    def merge_notes(
        self,
        theirs: str,
        message: str,
        *,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> MergeReport:
        """Unite the notes commit `theirs` into the local ref by record id, by compare-and-swap.

        Nothing is dropped on either side: a note on one side only is taken as it
        is, a note on both sides becomes the union of their records in canonical
        form, and a note that is not valid TOML keeps its text, byte for byte.
        """
        their_commit = self.repo.get(theirs)
        if not isinstance(their_commit, pygit2.Commit):
            raise RepositoryError(
                f"the fetched records point at {theirs[:12]}, which is not a commit; nothing was "
                "merged: ask whoever published them to repair their refs/notes/majordomus."
            )
        outcome: dict[str, Any] = {}

        def build(ours_tree: pygit2.Tree | None, parents: list[pygit2.Oid]) -> pygit2.Oid | None:
            outcome.update(united=0, raw=0)
            if not parents:
                their_tree = self._tree(their_commit.tree_id)
                outcome.update(kind="created", added=self._records_added(None, their_tree))
                return their_commit.id
            assert ours_tree is not None
            ours, their_tree = parents[0], self._tree(their_commit.tree_id)
            if ours == their_commit.id:
                outcome.update(kind="up-to-date", added=0)
                return None
            if self.repo.descendant_of(ours, their_commit.id):
                # Their ref is in our history: what it has and we lack was removed here
                # by hand (git notes prune/remove), which holds in this clone only until
                # a fetch from a remote that still has it brings it back.
                if not self._lacks(ours_tree, their_tree):
                    outcome.update(kind="up-to-date", added=0)
                    return None
                tree_id, added, united, raw = self._merged_tree(ours_tree, their_tree)
                if tree_id == ours_tree.id:
                    outcome.update(kind="up-to-date", added=0)
                    return None
                outcome.update(kind="restored", added=added, united=united, raw=raw)
                return self._merge_commit(message, tree_id, [ours])
            if self.repo.descendant_of(their_commit.id, ours) and not self._lacks(
                their_tree, ours_tree
            ):
                added = self._records_added(ours_tree, their_tree)
                outcome.update(kind="fast-forward", added=added)
                return their_commit.id
            # Diverged, or their ref descends from ours but dropped records we have:
            # never a fast-forward over a deletion, a union instead.
            tree_id, added, united, raw = self._merged_tree(ours_tree, their_tree)
            outcome.update(kind="merged", added=added, united=united, raw=raw)
            return self._merge_commit(message, tree_id, [ours, their_commit.id])

        interrupt.writing("fetched records")
        try:
            swap = self._swap(build, message, "nothing was merged", timeout_s, sleep, monotonic)
        except MissingObjectError as error:
            raise RepositoryError(
                f"{error}; the fetched records are incomplete and nothing was merged: run "
                "majordomus fetch again (in a partial clone it brings what the notes need)."
            ) from None
        return MergeReport(
            outcome["kind"],
            swap.target,
            outcome["added"],
            outcome["united"],
            outcome["raw"],
            swap.attempts,
        )

    def _merge_commit(
        self, message: str, tree_id: pygit2.Oid, parents: list[pygit2.Oid]
    ) -> pygit2.Oid:
        signature = self._merge_signature()
        return self.repo.create_commit(None, signature, signature, message + "\n", tree_id, parents)

    def _lacks(self, tree: pygit2.Tree, other: pygit2.Tree) -> bool:
        """Whether `tree` lacks anything `other` holds: a note, a record (by id), or text
        it could not read. Only notes whose blobs differ are parsed."""
        if tree.id == other.id:
            return False
        mine = self._note_copies(tree)
        for commit, blobs in self._note_copies(other).items():
            have = mine.get(commit)
            if have is None:
                return True
            if set(blobs) <= set(have):
                continue
            if not self._atoms(blobs) <= self._atoms(have):
                return True
        return False

    def _atoms(self, blob_ids: Sequence[str]) -> set[tuple[str, ...]]:
        """What a note holds, as identities: its records' ids, other tables by content, and
        the blob id of a text that is not valid TOML (kept whole in `[[unreadable]]`)."""
        atoms: set[tuple[str, ...]] = set()
        for blob_id in blob_ids:
            parsed = self._parse_blob(blob_id)
            if isinstance(parsed, NoteError):
                atoms.add(("blob", blob_id))
                continue
            for entry in parsed.entries:
                atoms.add(entry.key)
                kept = entry.table.get("blob")
                if entry.kind == "unreadable" and isinstance(kept, str):
                    atoms.add(("blob", kept))
            atoms.update(("plain", key, repr(value)) for key, value in parsed.other.items())
        return atoms

    def _merge_signature(self) -> pygit2.Signature:
        # The notes commit's author is bookkeeping, not part of any record: a CI
        # job without a git identity must still be able to merge what it fetched.
        try:
            name, _, email = self.identity().rpartition(" <")
        except RepositoryError:
            name, email = "majordomus", "majordomus@localhost>"
        now = datetime.datetime.now(datetime.UTC)
        return pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)

    def _note_copies(self, tree: pygit2.Tree | None) -> dict[str, list[str]]:
        """Annotated object -> the blob ids of its notes (more than one only in a damaged tree)."""
        copies: dict[str, list[str]] = {}
        if tree is None:
            return copies
        pairs = self._read_cache().trees.get(str(tree.id))
        for commit, blob_id in self._walk(tree, "") if pairs is None else pairs:
            copies.setdefault(commit, []).append(blob_id)
        return copies

    def _merged_tree(
        self, ours: pygit2.Tree, theirs: pygit2.Tree
    ) -> tuple[pygit2.Oid, int, int, int]:
        """Their notes written into our tree.

        Returns the tree, the records it adds, the notes on both sides that were
        united, and how many of those kept their texts unread (not valid TOML).
        """
        mine = self._note_copies(ours)
        changes: dict[str, pygit2.Oid] = {}
        added = united = raw = 0
        for commit, their_blobs in self._note_copies(theirs).items():
            have = mine.get(commit, [])
            blobs = have + [blob for blob in their_blobs if blob not in have]
            if len(blobs) == len(have):
                continue
            added += len(self._record_ids(blobs) - self._record_ids(have))
            if len(blobs) == 1:
                changes[commit] = pygit2.Oid(hex=blobs[0])
            else:
                changes[commit], readable = self._united_blob(blobs)
                united += 1
                raw += not readable
        tree = self._insert_many(ours, changes) if changes else ours.id
        return tree, added, united, raw

    def _insert_many(self, tree: pygit2.Tree | None, notes: Mapping[str, pygit2.Oid]) -> pygit2.Oid:
        """The tree with these notes (name: the remaining hex digits) where git would look
        for them, every other copy gone, each tree on the way written once.

        Into the subtrees where a level is fanned out, else flat, then fanned out if
        the level is crowded: the same layout as inserting them one by one.
        """
        builder = self.repo.TreeBuilder(tree) if tree is not None else self.repo.TreeBuilder()
        for rest in notes:
            if builder.get(rest) is not None:
                builder.remove(rest)
        fanned = tree is not None and any(
            entry.filemode == _TREE and _HEX2.fullmatch(entry.name or "") for entry in tree
        )
        if fanned:
            assert tree is not None
            groups: dict[str, dict[str, pygit2.Oid]] = {}
            for rest, blob_id in notes.items():
                if len(rest) > 2:
                    groups.setdefault(rest[:2], {})[rest[2:]] = blob_id
                else:
                    builder.insert(rest, blob_id, _BLOB)
            for head, group in groups.items():
                sub_entry = _entry(tree, head)
                sub = (
                    self._tree(sub_entry.id) if sub_entry and sub_entry.filemode == _TREE else None
                )
                if sub_entry is not None and sub is None:
                    builder.remove(head)
                builder.insert(head, self._insert_many(sub, group), _TREE)
            return builder.write()
        for rest, blob_id in notes.items():
            builder.insert(rest, blob_id, _BLOB)
        level = self.repo[builder.write()]
        assert isinstance(level, pygit2.Tree)
        return self._fan_out(level, len(next(iter(notes))))

    def _united_blob(self, blob_ids: Sequence[str]) -> tuple[pygit2.Oid, bool]:
        """One note from several: the union of their records.

        A note that cannot be read is kept as text inside an `[[unreadable]]` table
        (an unknown kind, which every reader keeps and ignores), so the readable
        records beside it stay readable. Only when even that cannot make one valid
        note (foreign plain keys that disagree, or the result over the size limit)
        is every distinct text concatenated, unread; nothing is ever dropped.
        """
        parsed = [self._parse_blob(blob_id) for blob_id in blob_ids]
        if any(isinstance(note, Note) and note.salvaged for note in parsed):
            onto = self._united_onto_text(blob_ids, parsed)
            if onto is not None:
                return onto
            notes: list[Note] = []  # every text is kept as it is, below
        else:
            notes = [note for note in parsed if isinstance(note, Note)]
        if notes and _plain_keys_agree(notes):
            kept = [
                _unreadable_entry(blob_id, self._blob_data(blob_id))
                for blob_id, note in zip(blob_ids, parsed, strict=True)
                if isinstance(note, NoteError)
            ]
            united = union(notes)
            text = dump_note(Note(united.entries + tuple(kept), united.other, united.invalid_plain))
            data = text.encode("utf-8")
            try:
                parse_note(data)
            except NoteError:
                pass
            else:
                return self.repo.create_blob(data), not kept
        kept_data: list[bytes] = []
        for blob_id in blob_ids:
            data = self._blob_data(blob_id)
            if any(data in other for other in kept_data):
                continue
            kept_data = [other for other in kept_data if other not in data] + [data]
        parts = [data if data.endswith(b"\n") else data + b"\n" for data in kept_data]
        return self.repo.create_blob(b"\n".join(parts)), False

    def _united_onto_text(
        self, blob_ids: Sequence[str], parsed: Sequence[Note | NoteError]
    ) -> tuple[pygit2.Oid, bool] | None:
        """Notes united on the bytes of the first one that is not TOML as a whole (edited
        by hand): its text stays byte for byte, and what the others hold that it lacks is
        appended as tables, as a write would. None when that cannot keep everything.
        """
        base_id, base = next(
            (blob_id, note)
            for blob_id, note in zip(blob_ids, parsed, strict=True)
            if isinstance(note, Note) and note.salvaged
        )
        data = self._blob_data(base_id)
        present = {entry.key for entry in base.entries}
        extra: list[Entry] = []
        for blob_id, note in zip(blob_ids, parsed, strict=True):
            if blob_id == base_id:
                continue
            if isinstance(note, NoteError):
                extra.append(_unreadable_entry(blob_id, self._blob_data(blob_id)))
                continue
            if any(base.other.get(key, value) != value for key, value in note.other.items()):
                return None
            if note.other.keys() - base.other.keys():
                return None  # plain keys cannot be appended below tables
            for entry in note.entries:
                if entry.key not in present:
                    present.add(entry.key)
                    extra.append(entry)
            if any(part not in data for part in note.unreadable):
                extra.append(_unreadable_entry(blob_id, self._blob_data(blob_id)))
        if extra:
            addition = dump_tables((entry.kind, entry.table) for entry in extra).encode("utf-8")
            data += (b"\n" if data.endswith(b"\n") else b"\n\n") + addition
        try:
            united = parse_note(data)
        except NoteError:
            return None
        if not present <= {entry.key for entry in united.entries}:
            return None
        readable = not any(isinstance(note, NoteError) for note in parsed)
        return self.repo.create_blob(data), readable

    def _records_added(self, before: pygit2.Tree | None, after: pygit2.Tree) -> int:
        """Records the move from `before` to `after` adds, counted per annotated commit."""
        old = self._note_copies(before)
        added = 0
        for commit, blobs in self._note_copies(after).items():
            previous = old.get(commit, [])
            if blobs != previous:
                added += len(self._record_ids(blobs) - self._record_ids(previous))
        return added

    def _record_ids(self, blob_ids: Sequence[str]) -> set[str]:
        ids: set[str] = set()
        for blob_id in blob_ids:
            parsed = self._parse_blob(blob_id)
            if isinstance(parsed, Note):
                ids.update(record.id for record in parsed.records)
        return ids


def _unreadable_entry(blob_id: str, data: bytes) -> Entry:
    """A note that could not be read, kept whole as an unknown-kind table."""
    table: dict[str, Any] = {"blob": blob_id}
    try:
        table["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        table["base64"] = base64.b64encode(data).decode("ascii")
    return Entry("unreadable", table, None)


def _not_a_commit(target: str) -> str:
    return (
        f"{NOTES_REF} points at {target[:12]}, which is not a commit; majordomus will not "
        "overwrite it: inspect it with git cat-file -t, then repair or move it."
    )


def _joined(texts: Sequence[bytes]) -> bytes:
    return b"\n".join(text if text.endswith(b"\n") else text + b"\n" for text in texts)


def _plain_keys_agree(notes: Sequence[Note]) -> bool:
    """Whether foreign top-level keys can be united without dropping a value, and written
    beside the records (`checkpoint = "x"` and a `[[checkpoint]]` cannot share a document)."""
    seen: dict[str, Any] = {}
    for note in notes:
        for key, value in note.other.items():
            if key in seen and seen[key] != value:
                return False
            seen[key] = value
    kinds = {entry.kind for note in notes for entry in note.entries}
    return not kinds & set(seen)


class Swap(NamedTuple):
    """Where a compare-and-swap left the notes ref."""

    target: str
    parent: str | None  # the value it was built on
    attempts: int
    stale_locks: tuple[StaleLock, ...]


class MergeReport(NamedTuple):
    """What uniting fetched records into the local notes ref did."""

    outcome: str  # up-to-date, created, fast-forward, merged, restored (removed here by hand)
    notes_commit: str
    records_added: int
    notes_united: int  # notes present on both sides, united record by record
    notes_raw: int  # of those, notes kept as concatenated text (one side is not valid TOML)
    attempts: int
