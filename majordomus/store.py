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
    append_text,
    dump_note,
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


class Store:
    """One repository, opened once per command."""

    def __init__(self, path: str, environ: Mapping[str, str]) -> None:
        self.environ = environ
        if not os.path.isdir(path):
            raise RepositoryError(f"cannot change to '{path}': no such directory.")
        try:
            found = pygit2.discover_repository(path)
        except pygit2.GitError:
            found = None
        if found is None:
            raise RepositoryError(
                f"not a git repository (or any parent up to /): {os.path.abspath(path)}; "
                "run majordomus inside a clone, or pass -C PATH."
            )
        try:
            self.repo = pygit2.Repository(found)
        except pygit2.GitError as error:
            raise RepositoryError(f"cannot open the repository at {found}: {error}.") from None
        self.gitdir = Path(self.repo.path)
        workdir = self.repo.workdir
        self.workdir = Path(workdir) if workdir else None
        self._cache: dict[str, Note | NoteError] = {}
        self._disk_cache: ReadCache | None = None
        self._graph: CommitGraph | None = None
        self._current_blobs: set[str] = set()
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
        return targets

    def read_notes(self) -> NoteSet:
        """Every note of every notes ref, read in one pass (through the read cache)."""
        cache = self._read_cache()
        found: dict[str, dict[str, str]] = {}  # commit -> blob -> first ref holding it
        unreadable: list[UnreadableNote] = []
        targets: dict[str, str] = {}
        trees: list[str] = []
        for name in self.notes_refs():
            target, tree = self._notes_tree(name)
            targets[name] = target
            if tree is None:
                unreadable.append(UnreadableNote("", name, f"{name} does not point at a commit"))
                continue
            tree_id = str(tree.id)
            trees.append(tree_id)
            pairs = cache.trees.get(tree_id)
            if pairs is None:
                pairs = tuple(self._walk(tree, ""))
                cache.put_tree(tree_id, pairs)
            for commit, blob in pairs:
                found.setdefault(commit, {}).setdefault(blob, name)
        commits: dict[str, Annotated] = {}
        for commit, blobs in found.items():
            readable: list[tuple[str, tuple[tuple[Summary, ...], int]]] = []
            for blob, name in blobs.items():
                entry = self._blob_entry(blob, cache)
                if isinstance(entry, str):
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
        return NoteSet(commits, tuple(unreadable), targets)

    def note(self, blobs: Sequence[str]) -> Note:
        """The united note of readable blobs, parsed (once per process)."""
        parsed = [self._parse_blob(blob) for blob in blobs]
        return union([note for note in parsed if not isinstance(note, NoteError)])

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

    def _blob_entry(self, blob: str, cache: ReadCache) -> BlobEntry:
        entry = cache.blobs.get(blob)
        if entry is None:
            parsed = self._parse_blob(blob)
            if isinstance(parsed, NoteError):
                entry = str(parsed)
            else:
                # Summarised as `note` presents it: records de-duplicated by id.
                united = union([parsed])
                entry = (summarise(united), united.invalid)
            cache.put_blob(blob, entry)
        return entry

    def _notes_tree(self, name: str) -> tuple[str, pygit2.Tree | None]:
        ref = self.repo.references[name].resolve()
        target = str(ref.target)
        obj = self.repo.get(ref.target)
        if not isinstance(obj, pygit2.Commit):
            return target, None
        return target, obj.tree

    def _walk(self, tree: pygit2.Tree, prefix: str) -> Iterator[tuple[str, str]]:
        for entry in tree:
            name = entry.name or ""
            if entry.filemode == _TREE:
                if _HEX2.fullmatch(name) and len(prefix) < 38:
                    yield from self._walk(self._tree(entry.id), prefix + name)
            elif _is_note_path(prefix + name):
                yield prefix + name, str(entry.id)

    def _tree(self, oid: pygit2.Oid) -> pygit2.Tree:
        tree = self.repo[oid]
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
                except NoteError as error:
                    self._cache[blob] = error
                    continue
                documents.put(blob, document)
            self._cache[blob] = note_from_document(document)
        documents.save(self._current_blobs or blobs)

    def _blob_data(self, blob_id: str) -> bytes:
        """A note's bytes; NoteError when the notes tree names anything but a blob we have
        (a pushed tree can hold a submodule entry, or point at an object never sent)."""
        try:
            blob = self.repo[blob_id]
        except (KeyError, ValueError):
            raise NoteError(f"note object {blob_id[:12]} is missing; not read") from None
        if not isinstance(blob, pygit2.Blob):
            raise NoteError(f"note object {blob_id[:12]} is not a blob; not read")
        return blob.data

    def _parse_blob(self, blob_id: str) -> Note | NoteError:
        cached = self._cache.get(blob_id)
        if cached is None:
            try:
                cached = parse_note(self._blob_data(blob_id))
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

        swap = self._swap(build, message, "nothing was recorded", timeout_s, sleep, monotonic)
        return WriteReport(
            notes_commit=swap.target,
            attempts=swap.attempts,
            stale_locks=swap.stale_locks,
            parent=swap.parent,
            blob=written["blob"],
            position=written["position"],
        )

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
            try:
                if ref is None:
                    self.repo.references.create(NOTES_REF, target, force=False)
                else:
                    ref.set_target(target, message)
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
            raise RepositoryError(
                f"{NOTES_REF} points at {str(target)[:12]}, which is not a commit; majordomus "
                "will not overwrite it: inspect it with git cat-file -t, then repair or move it."
            )
        return obj.tree, [obj.id]

    def _note_blob(
        self, tree: pygit2.Tree | None, commit: str, records: Sequence[Record]
    ) -> tuple[pygit2.Oid, int]:
        texts = []
        for blob_id in self._find(tree, commit, "") if tree is not None else []:
            try:
                data = self._blob_data(str(blob_id))
                parse_note(data)
                texts.append(data.decode("utf-8"))
            except NoteError as error:
                raise RepositoryError(
                    f"the note on {commit[:12]} cannot be read ({error}); majordomus will not "
                    f"overwrite it: inspect it with git notes --ref=majordomus show {commit[:12]}."
                ) from None
        existing = "\n".join(text.rstrip("\n") for text in texts) if texts else None
        try:
            text = append_text(existing, records)
        except NoteError as error:
            raise RepositoryError(
                f"the note on {commit[:12]} is not in majordomus format ({error}); majordomus "
                "will not overwrite it."
            ) from None
        data = text.encode("utf-8")
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
                outcome.update(kind="created", added=self._records_added(None, their_commit.tree))
                return their_commit.id
            if parents[0] == their_commit.id or self.repo.descendant_of(
                parents[0], their_commit.id
            ):
                outcome.update(kind="up-to-date", added=0)
                return None
            if self.repo.descendant_of(their_commit.id, parents[0]):
                added = self._records_added(ours_tree, their_commit.tree)
                outcome.update(kind="fast-forward", added=added)
                return their_commit.id
            assert ours_tree is not None
            tree_id, added, united, raw = self._merged_tree(ours_tree, their_commit.tree)
            outcome.update(kind="merged", added=added, united=united, raw=raw)
            signature = self._merge_signature()
            return self.repo.create_commit(
                None, signature, signature, message + "\n", tree_id, [parents[0], their_commit.id]
            )

        swap = self._swap(build, message, "nothing was merged", timeout_s, sleep, monotonic)
        return MergeReport(
            outcome["kind"],
            swap.target,
            outcome["added"],
            outcome["united"],
            outcome["raw"],
            swap.attempts,
        )

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
        for commit, blob_id in self._walk(tree, "") if tree is not None else []:
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

    outcome: str  # up-to-date, created, fast-forward, merged
    notes_commit: str
    records_added: int
    notes_united: int  # notes present on both sides, united record by record
    notes_raw: int  # of those, notes kept as concatenated text (one side is not valid TOML)
    attempts: int
