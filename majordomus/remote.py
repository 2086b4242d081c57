"""Talking to a remote with the user's own git: which remote (a name or a URL, the current
branch's upstream by default), where its records land, git run against it (`Git`, within
a time budget for the pre-push hook), and the note objects a partial clone left out
fetched from it in one batch.

Transport is the user's own git, so their credentials, ssh configuration and
helpers apply; remote names and URLs reach git as arguments, never a shell.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from majordomus.errors import RefusedError
from majordomus.repository import NOTES_REF

if TYPE_CHECKING:
    import subprocess

    from majordomus.repository import Repository

HOOK_TIMEOUT_S = 30.0
# Set for every git that majordomus runs against a remote: a pre-push hook that
# sees it knows it was reached from majordomus itself and does nothing.
HOOK_GUARD = "MAJORDOMUS_HOOK_ACTIVE"
INCOMING_PREFIX = "refs/majordomus-incoming/"  # records fetched from a URL pass through here


def tracking_ref(remote: str) -> str:
    """Where a named remote's records land: what a plain `git fetch` updates after `init`."""
    return f"refs/notes/remotes/{remote}/majordomus"


def fetch_refspec(remote: str) -> str:
    # A glob: git skips a glob that matches nothing, where a plain refspec for a
    # ref the remote lacks would make every `git fetch` of this remote fail. The
    # destination is the remote-tracking ref only, so forcing it (the remote is
    # the authority on its own records) can never overwrite an unpushed record.
    return f"+{NOTES_REF}*:{tracking_ref(remote)}*"


def check_remote(name: str) -> str:
    """A remote name or URL fit to hand to git as an argument."""
    if not name or name.startswith("-") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise RefusedError(
            f"{name!r} is not a remote name or URL; give one that git remote -v lists."
        )
    return name


def default_remote(repository: Repository) -> str:
    """The current branch's upstream remote, else `origin`."""
    branch = repository.git("symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
    if branch:
        configured = repository.git("config", "--get", f"branch.{branch}.remote", check=False)
        upstream = configured.stdout.strip()
        if upstream and upstream != ".":
            return upstream
    return "origin"


def locate(repository: Repository, name: str | None, cwd: str) -> str:
    """The remote to talk to: a configured name, or a URL (a relative path taken from `cwd`)."""
    if name is None:
        return default_remote(repository)
    check_remote(name)
    if name not in repository.remote_names() and os.path.exists(os.path.join(cwd, name)):
        return os.path.abspath(os.path.join(cwd, name))
    return name


def shown(remote: str) -> str:
    """A remote as messages show it: a password or token in a URL is never printed."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1***@", remote, flags=re.IGNORECASE)


# What git --progress prints, and the refs a fetch lists: no reason for anything.
_CHATTER = (  # compiled when git fails (the first `re.match` of it)
    r"(remote: )?(Enumerating|Counting|Compressing|Writing|Receiving|Resolving|Total|Unpacking"
    r"|Delta compression|Checking connectivity)\b"
    r"|From |To | [-+*!= t] |\s*\[|\s+[0-9a-f]+\.\.|.*\d+% \("
)


def git_reason(stderr: str, fallback: str) -> str:
    """git's own reason: its first fatal line (what follows is advice), else its last line."""
    lines = [
        line.strip()
        for line in stderr.replace("\r", "\n").splitlines()
        if line.strip() and not re.match(_CHATTER, line)
    ]
    for prefix in ("fatal: ", "error: "):
        for line in lines:
            if line.startswith(prefix):
                return line.removeprefix(prefix).rstrip(".")
    return lines[-1].rstrip(".") if lines else fallback


# ---- running git against a remote --------------------------------------------------------


class Git:
    """git subprocesses that talk to a remote, within an optional time budget.

    `detached` is for the pre-push hook: no terminal prompt (git's and ssh's
    alike: the process has no controlling terminal), and when the budget runs
    out the whole process group, ssh included, is killed.
    """

    def __init__(
        self,
        repository: Repository,
        *,
        budget_s: float | None = None,
        detached: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        # Here: a command that talks to no remote does not load the process machinery.
        from majordomus.gitprocess import REMOTE_TIMEOUT_KEY, Budget, remote_timeout

        self.repository = repository
        self.detached = detached
        self.silence_s = remote_timeout(_config_value(repository, REMOTE_TIMEOUT_KEY))
        self._monotonic = monotonic
        self._budget = None if budget_s is None else Budget(budget_s, monotonic)

    def run(
        self, *args: str, input: str | None = None, meanwhile: Callable[[], object] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """git with these arguments; `meanwhile` runs while git does (it writes no more
        than a pipe holds before `meanwhile` returns, or waits for it)."""
        from majordomus.gitprocess import run_git

        env = dict(self.repository.environ)
        env[HOOK_GUARD] = "1"
        if self.detached:
            env["GIT_TERMINAL_PROMPT"] = "0"
        remote = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--"), "the remote")
        return run_git(
            self.repository.gitdir,
            args,
            where=shown(remote),
            cwd=self.repository.workdir or self.repository.gitdir,
            env=env,
            input=input,
            detached=self.detached,
            budget=self._budget,
            silence_s=self.silence_s,
            monotonic=self._monotonic,
            meanwhile=meanwhile,
        )


def _config_value(repository: Repository, name: str) -> str | None:
    """A configuration value: asked of git while libgit2 is not loaded (loading it costs
    more than a git process), else of libgit2."""
    if not repository.by_git:
        return repository.config_value(name)
    result = repository.git("config", "--get", name, check=False)
    if result.returncode == 1:
        return None  # not set
    if result.returncode != 0:
        return repository.config_value(name)  # git refused it: libgit2 says what it reads
    return result.stdout.removesuffix("\n")


def fetch_objects(repository: Repository, git: Git, remote: str, ids: Sequence[str]) -> str | None:
    """Fetch objects by id from `remote` in one request, each with everything under it
    (--no-filter); None when git succeeded, else its reason.

    What git does to fetch one promised object, for all of them at once: no
    negotiation (what this clone has says nothing about what it lacks), ids on stdin.
    """
    noop = (
        "-c",
        "fetch.negotiationAlgorithm=noop",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--recurse-submodules=no",
        "--no-filter",
    )
    result = git.run(*noop, "--stdin", "--", remote, input="".join(f"{i}\n" for i in ids))
    if result.returncode == 0:
        return None
    reason = git_reason(result.stderr, f"git fetch exited {result.returncode}")
    # A server that serves only what it advertises (protocol v0 without
    # uploadpack.allowAnySHA1InWant): everything under its notes ref instead,
    # --refetch because a plain fetch stops at a tip that is already here. The
    # refspec names the ref exactly: git 2.39 waits forever on a --refetch that
    # wants nothing, and an exact ref the remote lacks fails at once.
    dest = f"{INCOMING_PREFIX}{os.urandom(6).hex()}/majordomus"
    try:
        whole = git.run(*noop[2:], "--refetch", "--", remote, f"+{NOTES_REF}:{dest}")
    finally:
        repository.delete_refs(dest.rsplit("/", 1)[0] + "/")
    return None if whole.returncode == 0 else reason


def promisor_remote(repository: Repository) -> str:
    """The remote a partial clone fetches the objects it left out from."""
    named = repository.git("config", "--get", "extensions.partialclone", check=False).stdout.strip()
    if named:
        return named
    for name in repository.remote_names():
        flag = repository.git(
            "config", "--type=bool", "--get", f"remote.{name}.promisor", check=False
        )
        if flag.stdout.strip() == "true":
            return name
    return default_remote(repository)


def fetch_missing(repository: Repository, ids: Sequence[str]) -> tuple[str, str | None]:
    """What a read calls when a partial clone lacks note objects: one batched fetch from
    the promisor remote; the remote asked, and why it failed (None: it did not)."""
    remote = promisor_remote(repository)
    return shown(remote), fetch_objects(repository, Git(repository), remote, ids)


def hook_budget(environ: Mapping[str, str]) -> float:
    raw = environ.get("MAJORDOMUS_HOOK_TIMEOUT", "")
    try:
        value = float(raw)
    except ValueError:
        return HOOK_TIMEOUT_S
    return value if value > 0 else HOOK_TIMEOUT_S
