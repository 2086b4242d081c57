"""The only module that touches the repository: notes read in bulk, written by compare-and-swap.

Notes live in the tree of the commit `refs/notes/majordomus` points at, laid out
as git lays them out (flat, or fanned out into `ab/cdef…` subtrees). Reads walk
the whole tree once; writes rebuild only the path to one note and move the ref
with a compare-and-swap, retried with jittered back-off.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import random
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pygit2

from majordomus.errors import RepositoryError
from majordomus.records import Note, NoteError, Record, append_text, parse_note, union

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


@dataclasses.dataclass(frozen=True, slots=True)
class UnreadableNote:
    """A note (or a whole notes ref) that could not be read, and why."""

    commit: str
    ref: str
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class NoteSet:
    """Every note of the local and remote-tracking refs, united per annotated object."""

    notes: Mapping[str, Note]
    unreadable: tuple[UnreadableNote, ...]
    refs: Mapping[str, str]  # ref name -> target it was read at

    @property
    def invalid(self) -> int:
        return len(self.unreadable) + sum(note.invalid for note in self.notes.values())


@dataclasses.dataclass(frozen=True, slots=True)
class StaleLock:
    path: str
    age_s: int


@dataclasses.dataclass(frozen=True, slots=True)
class WriteReport:
    notes_commit: str
    attempts: int
    stale_locks: tuple[StaleLock, ...]


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

    def rev_list(self, rev: str) -> list[str]:
        """Every commit reachable from `rev`, in git's default order (children first)."""
        return self.git("rev-list", rev).stdout.split()

    def merge_base(self, a: str, b: str) -> str | None:
        result = self.git("merge-base", a, b, check=False)
        return result.stdout.strip() or None if result.returncode == 0 else None

    def ahead_behind(self, commit: str, base: str) -> tuple[int, int]:
        """(commits in `commit` not in `base`, commits in `base` not in `commit`)."""
        out = self.git("rev-list", "--left-right", "--count", f"{commit}...{base}").stdout.split()
        return int(out[0]), int(out[1])

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
        per_commit: dict[str, list[Note]] = {}
        unreadable: list[UnreadableNote] = []
        seen_blobs: set[str] = set()
        targets: dict[str, str] = {}
        for name in self.notes_refs():
            target, tree = self._notes_tree(name)
            targets[name] = target
            if tree is None:
                unreadable.append(UnreadableNote("", name, f"{name} does not point at a commit"))
                continue
            for commit, blob_id in self._walk(tree, ""):
                parsed = self._parse_blob(blob_id)
                if isinstance(parsed, NoteError):
                    if blob_id not in seen_blobs:
                        unreadable.append(UnreadableNote(commit, name, str(parsed)))
                else:
                    per_commit.setdefault(commit, []).append(parsed)
                seen_blobs.add(blob_id)
        notes = {commit: union(parts) for commit, parts in per_commit.items()}
        return NoteSet(notes, tuple(unreadable), targets)

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

    def _parse_blob(self, blob_id: str) -> Note | NoteError:
        cached = self._cache.get(blob_id)
        if cached is None:
            try:
                blob = self.repo[blob_id]
                data = blob.data if isinstance(blob, pygit2.Blob) else b""
                cached = parse_note(data)
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
    ) -> WriteReport:
        """Append records to the note on `commit`, all or nothing, by compare-and-swap."""
        author = self.identity()
        name, _, email = author.rpartition(" <")
        budget = timeout_s if timeout_s is not None else self._write_timeout()
        deadline = monotonic() + budget
        attempts = 0
        stale: dict[str, StaleLock] = {}
        while True:
            attempts += 1
            ref = self.repo.references.get(NOTES_REF)
            parent_tree, parents = self._write_base(ref)
            blob_id = self._note_blob(parent_tree, commit, records)
            tree_id = self._insert(parent_tree, commit, blob_id)
            now = datetime.datetime.now(datetime.UTC)
            signature = pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)
            new_commit = self.repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )
            try:
                if ref is None:
                    self.repo.references.create(NOTES_REF, new_commit, force=False)
                else:
                    ref.set_target(new_commit, message)
                return WriteReport(str(new_commit), attempts, tuple(stale.values()))
            except (pygit2.GitError, pygit2.AlreadyExistsError, OSError, ValueError):
                for lock in self.stale_locks():
                    stale[lock.path] = lock
            if monotonic() >= deadline:
                raise RepositoryError(self._contention_message(attempts, budget, stale))
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
        self, attempts: int, budget: float, stale: Mapping[str, StaleLock]
    ) -> str:
        if stale:
            lock = next(iter(stale.values()))
            return (
                f"{NOTES_REF} stayed locked for {budget:g} s ({attempts} attempts): {lock.path} is "
                f"{lock.age_s} s old; if no git or majordomus process is running, remove it "
                f"(rm '{lock.path}') and try again; nothing was recorded."
            )
        return (
            f"{NOTES_REF} kept moving or stayed locked for {budget:g} s ({attempts} attempts); "
            "nothing was recorded; try again (MAJORDOMUS_WRITE_TIMEOUT raises the budget)."
        )

    def lock_paths(self) -> list[Path]:
        common = Path(self.repo.path)
        commondir = common / "commondir"
        if commondir.exists():
            common = (common / commondir.read_text().strip()).resolve()
        return [common / (NOTES_REF + ".lock"), common / "packed-refs.lock"]

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
    ) -> pygit2.Oid:
        texts = []
        for blob_id in self._find(tree, commit, "") if tree is not None else []:
            blob = self.repo[blob_id]
            data = blob.data if isinstance(blob, pygit2.Blob) else b""
            try:
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
        return self.repo.create_blob(text.encode("utf-8"))

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
        builder = self.repo.TreeBuilder(tree) if tree is not None else self.repo.TreeBuilder()
        if builder.get(rest) is not None:
            builder.remove(rest)
        fanned = tree is not None and any(
            entry.filemode == _TREE and _HEX2.fullmatch(entry.name or "") for entry in tree
        )
        if fanned and len(rest) > 2:
            assert tree is not None
            head = rest[:2]
            sub_entry = _entry(tree, head)
            sub = self._tree(sub_entry.id) if sub_entry and sub_entry.filemode == _TREE else None
            if sub_entry is not None and sub is None:
                builder.remove(head)
            builder.insert(head, self._insert(sub, rest[2:], blob_id), _TREE)
            return builder.write()
        builder.insert(rest, blob_id, _BLOB)
        level = self.repo[builder.write()]
        assert isinstance(level, pygit2.Tree)
        return self._fan_out(level, len(rest))

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
