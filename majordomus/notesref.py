"""The notes ref `refs/notes/majordomus`: moved only by compare-and-swap, retried with jittered
back-off when another writer moved it or holds its lock; locks a killed writer left.

Neither libgit2's `create_note` nor `git notes add` compares before it moves the ref,
and concurrent writers lose records that way: every write here builds its notes
commit itself and moves the ref only from the value it was built on.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from majordomus import interrupt
from majordomus.errors import RepositoryError
from majordomus.notestree import tree
from majordomus.notetoml import MissingObjectError
from majordomus.repository import NOTES_REF, Repository, not_a_commit
from majordomus.values import StaleLock, Swap

if TYPE_CHECKING:
    import pygit2

DEFAULT_WRITE_TIMEOUT_S = 10.0
STALE_LOCK_S = 10.0

T = TypeVar("T")
# What a write makes of the ref's current tree and parents: the notes commit to move the
# ref to (None: nothing to move), and what the write has to say about it.
Build = Callable[["pygit2.Tree | None", "list[pygit2.Oid]"], "tuple[pygit2.Oid | None, T]"]


class NotesRef:
    """The notes ref of one repository, for writing."""

    def __init__(
        self, repo: pygit2.Repository, commondir: Path, environ: Mapping[str, str]
    ) -> None:
        self.repo = repo
        self.commondir = commondir
        self.environ = environ

    def swap(
        self,
        build: Build[T],
        message: str,
        undone: str,
        timeout_s: float | None,
        sleep: Callable[[float], None],
        monotonic: Callable[[], float],
    ) -> tuple[Swap, T]:
        """Move the notes ref to what `build` makes of its current value, by compare-and-swap;
        returns where the ref is now and what the last build said.

        When another writer moved the ref first (or holds its lock), re-read, rebuild and
        retry with jittered back-off until the budget runs out. A lock a killed writer
        left is reported, also when it did not block us; it is never removed.
        """
        import pygit2

        budget = timeout_s if timeout_s is not None else self._write_timeout()
        deadline = monotonic() + budget
        attempts = 0
        stale: dict[str, StaleLock] = {}
        while True:
            attempts += 1
            ref = self._moved()
            try:
                base, parents = self._write_base(ref)
                target, built = build(base, parents)
            except MissingObjectError as error:
                raise _missing(error, undone) from None
            except (pygit2.GitError, OSError) as error:
                raise _unwritable(error, undone) from None
            parent = str(parents[0]) if parents else None
            if target is None:
                return Swap(parent or "", parent, attempts, ()), built
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
                return Swap(str(target), parent, attempts, tuple(stale.values())), built
            except (pygit2.GitError, pygit2.AlreadyExistsError, OSError, ValueError):
                for lock in self.stale_locks():
                    stale[lock.path] = lock
            if monotonic() >= deadline:
                raise RepositoryError(self._contention_message(attempts, budget, stale, undone))
            import random  # here: only contention pays for it

            sleep(random.uniform(0.002, 0.02) * min(attempts, 10))

    def _moved(self) -> pygit2.Reference | None:
        """The ref a write moves: the notes ref, or for a symbolic one (set by hand) the ref
        it names, as git moves it, compared against its own value."""
        import pygit2

        ref = self.repo.references.get(NOTES_REF)
        if ref is not None and ref.type == pygit2.enums.ReferenceType.SYMBOLIC:
            with contextlib.suppress(KeyError, pygit2.GitError):
                ref = ref.resolve()
        return ref

    def check_writable(self) -> None:
        """Refuse early when the notes ref is something a write would have to destroy."""
        try:
            self._write_base(self.repo.references.get(NOTES_REF))
        except MissingObjectError as error:
            raise _missing(error, "nothing was recorded") from None

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
        return lock_paths(self.commondir)

    def stale_locks(self, older_than_s: float = STALE_LOCK_S) -> list[StaleLock]:
        return stale_locks(self.commondir, older_than_s)

    def _write_base(self, ref: Any) -> tuple[pygit2.Tree | None, list[pygit2.Oid]]:
        import pygit2

        if ref is None:
            return None, []
        target = ref.resolve().target
        obj = self.repo.get(target)
        if not isinstance(obj, pygit2.Commit):
            raise RepositoryError(not_a_commit(str(target)))
        return tree(self.repo, obj.tree_id), [obj.id]


def lock_paths(commondir: Path) -> list[Path]:
    return [commondir / (NOTES_REF + ".lock"), commondir / "packed-refs.lock"]


def stale_locks(commondir: Path, older_than_s: float = STALE_LOCK_S) -> list[StaleLock]:
    found = []
    now = time.time()
    for path in lock_paths(commondir):
        try:
            age = now - path.stat().st_mtime
        except FileNotFoundError:
            continue
        if age >= older_than_s:
            found.append(StaleLock(str(path), int(age)))
    return found


def move_by_git(repository: Repository, old: str, new: str, message: str) -> Swap | None:
    """The notes ref moved from `old` to `new` by `git update-ref`, which compares before it
    moves as the swap does, without loading libgit2: where it is now; None when git did
    not move it (another writer moved it first or holds its lock: the swap retries)."""
    interrupt.pause("before-write", repository.environ)
    with interrupt.held():
        result = repository.git("update-ref", "-m", message, NOTES_REF, new, old, check=False)
        # Ctrl-C reaches git too: a git stopped after the ref moved still moved it.
        moved = result.returncode == 0 or repository.ref_target(NOTES_REF) == new
        if moved:
            interrupt.stored()
    if not moved:
        return None
    interrupt.pause("after-write", repository.environ)
    return Swap(new, old, 1, tuple(stale_locks(repository.commondir)))


def _unwritable(error: Exception, undone: str) -> RepositoryError:
    """A write git could not store (a read-only .git, a sandbox, a full disk): one sentence,
    the notes ref untouched."""
    return RepositoryError(
        f"git could not store the record in this repository ({error}); {undone}: check that "
        "this process may write to .git (a sandbox may make it read-only) and that the disk "
        "has room."
    )


def _missing(error: MissingObjectError, undone: str) -> RepositoryError:
    """A write that met an object a partial clone left out: the one sentence for every write."""
    return RepositoryError(
        f"object {error.object_id[:12]} of the notes is missing from this partial clone; "
        f"{undone}: run majordomus fetch, then try again."
    )
