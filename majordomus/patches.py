"""Stable patch ids, as `git patch-id --stable` computes them: the facts `adopt` proves a
landing with, and the ones stored in a record when it is written.

A commit's patch id is that of its diff against its first parent (a root commit:
against the empty tree); a merge commit and a commit that changes nothing have
none. The diff text is made in-process (`Store.patch_text`) or by `git diff-tree`
(plumbing: no rename detection, no diff configuration applies), and hashed by
`git patch-id --stable` itself, so every id is git's own.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from majordomus.errors import RepositoryError
from majordomus.store import Store

BRANCH_COMMITS_MAX = 250  # beyond this a handover stores the branch's base and patch only
_HEX40 = re.compile(r"[0-9a-f]{40}")


class BranchFacts(NamedTuple):
    """What a handover stores about the branch it closes."""

    base: str  # the merge base with the branch it will land on
    commits: tuple[str, ...]  # base..HEAD, newest first (empty when over the limit)
    patch: str | None  # the patch id of the whole change base..HEAD


def _run(store: Store, args: Sequence[str], data: bytes) -> bytes:
    try:
        result = subprocess.run(
            ["git", f"--git-dir={store.gitdir}", *args],
            input=data,
            capture_output=True,
            env=dict(store.environ),
            check=False,
        )
    except FileNotFoundError:
        raise RepositoryError("git is not installed or not on PATH; install git.") from None
    if result.returncode != 0:
        lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = lines[-1] if lines else f"exit {result.returncode}"
        raise RepositoryError(f"git {args[0]} failed: {detail}.")
    return result.stdout


def _parse(output: bytes) -> dict[str, str]:
    """`git patch-id` output (`<patch id> <commit id>` lines) as commit -> patch id."""
    ids: dict[str, str] = {}
    for line in output.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 2:
            ids[parts[1]] = parts[0]
    return ids


def ids_of_texts(store: Store, texts: Mapping[str, str]) -> dict[str, str]:
    """Patch ids of diff texts, one `git patch-id` process for all; keys are 40-hex labels
    (the label a text is filed under in git's input), empty texts have none."""
    stream = "".join(f"commit {label}\n{text}" for label, text in texts.items() if text)
    if not stream:
        return {}
    return _parse(_run(store, ["patch-id", "--stable"], stream.encode("utf-8", "surrogateescape")))


def ids_of_commits(store: Store, commits: Iterable[str]) -> dict[str, str]:
    """Commit -> patch id, for many commits: `git diff-tree --stdin` piped into `git patch-id`."""
    listing = "".join(f"{commit}\n" for commit in commits)
    if not listing:
        return {}
    env = dict(store.environ)
    base = ["git", f"--git-dir={store.gitdir}"]
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


def commit_fact(store: Store, commit: str) -> dict[str, Any]:
    """The `patch` field of a record written on `commit` ({} when it has no patch of its own)."""
    text = store.patch_text(commit)
    found = ids_of_texts(store, {commit: text}) if text else {}
    return {"patch": found[commit]} if commit in found else {}


def handover_facts(store: Store, commit: str) -> dict[str, Any]:
    """The `patch` field and the branch facts of a handover written on `commit`."""
    own = store.patch_text(commit)
    branch = _branch(store, commit)
    texts = {commit: own} if own else {}
    if branch is not None:
        texts[branch[0]] = store.patch_text(commit, base=branch[0])
    found = ids_of_texts(store, texts)
    fields: dict[str, Any] = {}
    if commit in found:
        fields["patch"] = found[commit]
    if branch is not None and branch[0] in found:
        base, commits = branch
        fields["branch_base"] = base
        if len(commits) <= BRANCH_COMMITS_MAX:
            fields["branch_commits"] = list(commits)
        fields["branch_patch"] = found[base]
    return fields


def _branch(store: Store, commit: str) -> tuple[str, tuple[str, ...]] | None:
    """(merge base, commits since) with the branch HEAD will land on; None on that branch."""
    target = landing_ref(store)
    if target is None:
        return None
    base = store.merge_base(commit, target)
    if base is None or base == commit:
        return None
    commits = tuple(store.git("rev-list", f"{base}..{commit}").stdout.split())
    return (base, commits) if commits else None


def landing_ref(store: Store) -> str | None:
    """The branch the current one will land on: its upstream when that is another branch,
    else the remote's default branch, else main or master (remote, then local)."""
    branch = store.current_branch()
    if branch is None:
        return None
    remote = store.config_value(f"branch.{branch}.remote") or "origin"
    merge = store.config_value(f"branch.{branch}.merge")
    candidates = []
    if merge and merge != f"refs/heads/{branch}":
        if remote == ".":
            candidates.append(merge)
        else:
            candidates.append(f"refs/remotes/{remote}/{merge.removeprefix('refs/heads/')}")
    default = store.symbolic_target(f"refs/remotes/{remote}/HEAD")
    if default is not None:
        candidates.append(default)
    for name in ("main", "master"):
        candidates += [f"refs/remotes/{remote}/{name}", f"refs/heads/{name}"]
    own = {f"refs/heads/{branch}", f"refs/remotes/{remote}/{branch}"}
    for ref in candidates:
        if ref not in own and store.ref_target(ref) is not None:
            return ref
    return None


def is_patch_id(value: object) -> bool:
    return isinstance(value, str) and _HEX40.fullmatch(value) is not None
