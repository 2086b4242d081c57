"""Note objects a partial clone left out: whether git may have left any out, and those a
read needs fetched from the promisor remote in one batch; when they cannot be, the
command stops (exit 3) rather than answer from what happens to be here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from majordomus.errors import RepositoryError

if TYPE_CHECKING:
    from majordomus.repository import Repository

# Fetches note objects a partial clone left out, in one batch; returns the remote it
# asked and why it failed (or None). Called only when objects are missing.
Fetcher = Callable[["Repository", Sequence[str]], tuple[str, str | None]]
NOT_ASKED = ("the promisor remote", "majordomus did not ask it")  # no fetcher was given


class PartialClone:
    """The note objects one repository may lack, and how they are fetched (`fetch`)."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self.fetch: Fetcher | None = None

    def is_partial(self) -> bool:
        """Whether git may have left objects out of this clone (a promisor remote is set)."""
        import pygit2

        config = self.repository.repo.config
        for entry in config:
            name = entry.name.lower()
            if name == "extensions.partialclone" and entry.value:
                return True
            if name.startswith("remote.") and name.endswith(".promisor"):
                with contextlib.suppress(pygit2.GitError, ValueError):
                    if config.get_bool(entry.name):
                        return True
        return False

    def may_be_partial(self) -> bool:
        """Whether this clone may be partial, told from its files without libgit2: its
        configuration names a promisor or a partial clone (in any spelling, even in a
        comment, or through an include), or a pack came from a promisor remote. A clone
        that is not partial may be taken for one; one that is, never for complete."""
        commondir = self.repository.commondir
        for name in ("config", "config.worktree"):
            try:
                text = (commondir / name).read_bytes().lower()
            except FileNotFoundError:
                continue
            except OSError:
                return True
            if b"promisor" in text or b"partialclone" in text or b"include" in text:
                return True
        try:
            packs = os.listdir(commondir / "objects" / "pack")
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return any(name.endswith(".promisor") for name in packs)

    def asked(self, ids: Sequence[str]) -> tuple[str, str]:
        """The promisor remote asked for these objects in one batch: its name, and why
        what is still missing after it is (its fetch failed, or it does not have them)."""
        assert self.fetch is not None
        remote, failure = self.fetch(self.repository, ids)
        return remote, failure or "it does not have them"

    def fetch_lost(self, blob: str, note: Sequence[str], read: Collection[str]) -> None:
        """A note object an earlier read summarised (its summary is kept by id) that is not
        here now, one of the blobs of a `note`: fetched from the promisor remote of a
        partial clone, with every other note object of this command's read (`read`) lost
        likewise, in one batch; when they cannot be, or the clone is not partial, the
        command stops (exit 3) with what to run."""
        if not self.is_partial():
            raise RepositoryError(
                f"note object {blob[:12]} is missing from this clone, though an earlier "
                f"read found it; run majordomus doctor to see what else is missing, then "
                f"majordomus doctor --drop-cache to read every note afresh."
            )
        odb = self.repository.repo.odb
        lost = [b for b in dict.fromkeys([*note, *read]) if not odb.exists(b)]
        remote, reason = NOT_ASKED
        if self.fetch is not None:
            remote, reason = self.asked(lost)
        unsent = [b for b in note if not odb.exists(b)]
        if unsent:
            raise RepositoryError(unsent_objects(len(unsent), remote, reason))


def unsent_objects(count: int, remote: str, reason: str) -> str:
    return (
        f"{count} note object(s) are missing from this partial clone and {remote} did "
        f"not send them ({reason}); check that {remote} is reachable, then run "
        f"majordomus fetch {remote}."
    )
