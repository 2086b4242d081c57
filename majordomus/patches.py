"""Stable patch ids, as `git patch-id --stable` computes them: the facts `adopt` proves a
landing with, and the ones stored in a record when it is written (the recent ones kept
in the patch cache, `PatchCache`).

A commit's patch id is that of its diff against its first parent (a root commit:
against the empty tree); a merge commit and a commit that changes nothing have
none. Every diff is made by `git diff-tree` (plumbing: no rename detection, no diff
configuration applies) and hashed by `git patch-id --stable`, so every id is git's
own; libgit2's diff text differs from git's (an empty file added or deleted), so it
is never hashed.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from majordomus.cachefile import PATCH_FILE_NAME, CacheFile
from majordomus.errors import RepositoryError
from majordomus.history import History

BRANCH_COMMITS_MAX = 250  # beyond this a handover stores the branch's base and patch only


def _parse(output: bytes) -> dict[str, str]:
    """`git patch-id` output (`<patch id> <commit id>` lines) as commit -> patch id."""
    ids: dict[str, str] = {}
    for line in output.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 2:
            ids[parts[1]] = parts[0]
    return ids


def ids_of_commits(history: History, commits: Iterable[str]) -> dict[str, str]:
    """Commit -> patch id, for many commits: `git diff-tree --stdin` piped into `git patch-id`."""
    return _ids(history, "".join(f"{commit}\n" for commit in commits))


def ids_against(history: History, bases: Mapping[str, str]) -> dict[str, str]:
    """Tip -> patch id of the change from `bases[tip]` to tip (a whole branch squashed),
    through the same pipeline: diff-tree takes the base as the tip's parent."""
    return _ids(history, "".join(f"{tip} {base}\n" for tip, base in bases.items()))


def _ids(history: History, listing: str) -> dict[str, str]:
    """Patch ids of commits as they are stored, whatever replacement this clone has in force
    (a graft changes a commit's parents here only): what a record states, and what it is
    compared with, is the same in every clone."""
    if not listing:
        return {}
    env = history.repository.stored_environ()
    base = ["git", f"--git-dir={history.repository.gitdir}"]
    try:
        diff = subprocess.Popen(
            [*base, "diff-tree", "--stdin", "-p", "--root", "--no-renames"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        ids = subprocess.Popen(
            [*base, "patch-id", "--stable"],
            stdin=diff.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    except FileNotFoundError:
        raise RepositoryError("git is not installed or not on PATH; install git.") from None
    assert diff.stdin is not None and diff.stdout is not None
    diff.stdout.close()  # patch-id holds it now: diff-tree sees a broken pipe if it exits
    stdin = diff.stdin

    def feed() -> None:
        # From another thread: with many commits every pipe fills, and writing them all
        # before reading patch-id's answer would leave the three processes waiting forever.
        with contextlib.suppress(BrokenPipeError):
            stdin.write(listing.encode("ascii"))
        with contextlib.suppress(BrokenPipeError):
            stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    out, _ = ids.communicate()
    feeder.join()
    if diff.wait() != 0 or ids.returncode != 0:
        raise RepositoryError(
            "git diff-tree could not compute the patches of the commits to compare (a partial "
            "clone missing objects?); run git fetch --refetch, then try again."
        )
    return _parse(out)


def commit_fact(history: History, commit: str) -> dict[str, Any]:
    """The `patch` field of a record written on `commit` ({} when it has no patch of its own,
    or none that can be known here: a shallow clone's boundary commit, whose parents it
    lacks): computed once per commit, since a commit's diff against the parents it names
    never changes."""
    if commit in history.shallow_boundary():
        return {}
    cache = PatchCache(history.repository.commondir / PATCH_FILE_NAME)
    patch = cache.get(commit)
    if patch is None:
        patch = ids_of_commits(history, [commit]).get(commit, "")
        cache.put(commit, patch)
    return {"patch": patch} if patch else {}


def handover_facts(history: History, commit: str) -> dict[str, Any]:
    """The `patch` field and the branch facts of a handover written on `commit`."""
    fields = commit_fact(history, commit)
    branch = _branch(history, commit)
    whole = ids_against(history, {commit: branch[0]}) if branch is not None else {}
    if branch is not None and commit in whole:
        base, commits = branch
        fields["branch_base"] = base
        if len(commits) <= BRANCH_COMMITS_MAX:
            fields["branch_commits"] = list(commits)
        fields["branch_patch"] = whole[commit]
    return fields


def _branch(history: History, commit: str) -> tuple[str, tuple[str, ...]] | None:
    """(merge base, commits since) with the branch HEAD will land on, in the history as
    stored (the facts travel to clones without this one's replacements); None on that
    branch, and None where a shallow clone's boundary commit lies between either side and
    the base, or is the base (its parents are unknown here): never a guess."""
    target = landing_ref(history)
    if target is None:
        return None
    base = history.merge_base(commit, target, stored=True)
    if base is None or base == commit:
        return None
    commits = tuple(history.between(base, commit))
    boundary = history.shallow_boundary()
    if boundary:
        landing = history.between(base, target)
        if base in boundary or not boundary.isdisjoint([*commits, *landing]):
            return None
    return (base, commits) if commits else None


def landing_ref(history: History) -> str | None:
    """The branch the current one will land on: its upstream when that is another branch,
    else the remote's default branch, else main or master (remote, then local)."""
    branch = history.repository.current_branch()
    if branch is None:
        return None
    remote = history.repository.config_value(f"branch.{branch}.remote") or "origin"
    merge = history.repository.config_value(f"branch.{branch}.merge")
    candidates = []
    if merge and merge != f"refs/heads/{branch}":
        if remote == ".":
            candidates.append(merge)
        else:
            candidates.append(f"refs/remotes/{remote}/{merge.removeprefix('refs/heads/')}")
    default = history.repository.symbolic_target(f"refs/remotes/{remote}/HEAD")
    if default is not None:
        candidates.append(default)
    for name in ("main", "master"):
        candidates += [f"refs/remotes/{remote}/{name}", f"refs/heads/{name}"]
    own = {f"refs/heads/{branch}", f"refs/remotes/{remote}/{branch}"}
    for ref in candidates:
        if ref not in own and history.repository.ref_target(ref) is not None:
            return ref
    return None


class PatchCache(CacheFile):
    """Commit id -> its stable patch id ("" for a commit with none), for the commits records
    were written on lately: consecutive records on one commit compute it once."""

    FORMAT = "patches:commit->patch-id-stable"
    KEEP = 256

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.ids: dict[str, str] = {}
        loaded = self.load()
        if loaded is not None and len(loaded) == 1 and isinstance(loaded[0], dict):
            self.ids = loaded[0]

    def get(self, commit: str) -> str | None:
        return self.ids.get(commit)

    def put(self, commit: str, patch: str) -> None:
        self.ids.pop(commit, None)
        self.ids[commit] = patch  # newest last: the oldest go first
        self.write(dict(list(self.ids.items())[-self.KEEP :]))
