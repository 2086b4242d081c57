"""Real remotes for the transport tests: bare repositories, clones, `git daemon` on 127.0.0.1.

Built on `tests/support/`; the names stay here because the transport tests import them.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.env import hermetic_environ
from tests.support.git import NOTES_REF, bare, free_port, git, git_daemon
from tests.support.notes import ref_ids as _ref_ids
from tests.support.repo import Repo, clone, seeded

__all__ = ["bare", "clone", "free_port", "git", "git_daemon", "history_ids", "ref_ids", "seeded"]

# Reading a repository needs no identity and no configuration of anyone's.
_READER_ENVIRON = hermetic_environ(Path("/nonexistent/majordomus-test-home"))


def ref_ids(path: Path, ref: str = NOTES_REF) -> set[str]:
    """Every record id in the notes `ref` of the repository at `path` (git dir or work tree),
    as the independent reader (git plumbing and tomllib) finds them."""
    return _ref_ids(path, _READER_ENVIRON, ref)


def history_ids(repo: Repo) -> list[str]:
    """Record ids as every read command sees them (local and remote-tracking refs united)."""
    result = repo.run("history", "--all", "--json")
    assert result.code == 0, result.err
    return sorted(record["id"] for record in json.loads(result.out)["records"])
