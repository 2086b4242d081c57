"""Records between clones: `init` configuration, the pre-push hook, and the notes ref over git.

Transport is the user's own git, so their credentials, ssh configuration and
helpers apply; remote names and URLs reach git as arguments, never a shell.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus.errors import RefusedError, RemoteError
from majordomus.repository import NOTES_REF
from majordomus.values import FetchReport, HookReport, InitReport, PushReport, Setting

if TYPE_CHECKING:
    from majordomus.jobs import Jobs
    from majordomus.repository import Repository

PUSH_ATTEMPTS = 12
HOOK_TIMEOUT_S = 30.0
# Set for every git that majordomus runs against a remote: a pre-push hook that
# sees it knows it was reached from majordomus itself and does nothing.
HOOK_GUARD = "MAJORDOMUS_HOOK_ACTIVE"
HOOK_MARK = "# majordomus pre-push hook"
HOOK_LINE = (
    'command -v majordomus >/dev/null 2>&1 && majordomus push --hook "$1" </dev/null || true'
)
DISPLAY_REFS = (NOTES_REF, "refs/notes/remotes/*/majordomus")
_INCOMING = "refs/majordomus-incoming/"


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
_CHATTER = re.compile(
    r"(remote: )?(Enumerating|Counting|Compressing|Writing|Receiving|Resolving|Total|Unpacking"
    r"|Delta compression|Checking connectivity)\b"
    r"|From |To | [-+*!= t] |\s*\[|\s+[0-9a-f]+\.\.|.*\d+% \("
)


def _reason(stderr: str, fallback: str) -> str:
    """git's own reason: its first fatal line (what follows is advice), else its last line."""
    lines = [
        line.strip()
        for line in stderr.replace("\r", "\n").splitlines()
        if line.strip() and not _CHATTER.match(line)
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
        raw = repository.config_value(REMOTE_TIMEOUT_KEY)
        self.silence_s = remote_timeout(raw)
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


# ---- fetch and push ------------------------------------------------------------------------


def fetch(
    jobs: Jobs, git: Git, remote: str, *, sleep: Callable[[float], None] = time.sleep
) -> FetchReport:
    """Bring the remote's records into its remote-tracking ref, then merge them into ours."""
    named = remote in jobs.repository.remote_names()
    where = shown(remote)
    # A URL has no remote-tracking ref: its records pass through a private ref
    # that is removed once merged.
    dest = tracking_ref(remote) if named else f"{_INCOMING}{os.urandom(6).hex()}/majordomus"
    before = jobs.repository.ref_target(dest) if named else None
    try:
        # --no-filter: in a partial clone, the notes' trees and blobs come with them.
        # --prune: a ref the remote no longer has must not stay behind as the value the
        # next push is leased on (every push would be refused as stale).
        result = git.run(
            "fetch",
            "--no-tags",
            "--quiet",
            "--prune",
            "--no-filter",
            "--",
            remote,
            f"+{NOTES_REF}*:{dest}*",
            # What follows needs libgit2: loaded while git fetches, on the other CPU.
            meanwhile=lambda: jobs.repository.repo,
        )
        if result.returncode != 0:
            raise RemoteError(
                f"cannot fetch records from {where}: "
                f"{_reason(result.stderr, f'git fetch exited {result.returncode}')}; nothing "
                f"was merged (check the remote with git fetch {where})."
            )
        theirs = jobs.repository.ref_target(dest)
        if theirs is not None and not jobs.history.has_commit(theirs):
            _put_back(jobs.repository, dest, before)
            raise RemoteError(
                f"{where}'s {NOTES_REF} points at {theirs[:12]}, which is not a commit, so its "
                "records cannot be read; nothing here was changed (ask whoever published it "
                f"to repair {NOTES_REF} on {where})."
            )
        complete(jobs, git, remote)
        if theirs is None:
            return FetchReport(where, None, None)
        merge = jobs.writer.merge(theirs, f"majordomus: merge records from {where}", sleep=sleep)
        return FetchReport(where, theirs, merge)
    finally:
        if not named:
            jobs.repository.delete_refs(dest.rsplit("/", 1)[0] + "/")


def _put_back(repository: Repository, ref: str, target: str | None) -> None:
    """A remote-tracking ref back where it was before a fetch moved it (None: absent)."""
    if target is None:
        repository.git("update-ref", "-d", ref, check=False)
    else:
        repository.git("update-ref", ref, target, check=False)


def push(
    jobs: Jobs,
    git: Git,
    remote: str,
    *,
    attempts: int = PUSH_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    fetched: FetchReport | None = None,
) -> PushReport:
    """Publish the local notes ref; never forced: when rejected, fetch, merge and try again.

    A ref that descends from the remote's can still lack records the remote has
    (removed here by hand), so every push is leased on the remote value whose
    records are already merged into ours: the last one fetched (`fetched`, else
    the remote-tracking ref, merged first). Ours descends from that value, so a
    push the lease lets through is a fast-forward that keeps every record; any
    other remote value is refused, fetched and merged, and the push retried.
    """
    fetches: list[FetchReport] = []
    where = shown(remote)
    expected = _merged_remote_value(jobs, git, remote, fetched, sleep)
    for attempt in range(1, attempts + 1):
        local = jobs.repository.ref_target(NOTES_REF)
        if local is None:
            return PushReport(where, "nothing", None, attempt - 1, tuple(fetches))
        result = git.run(
            "push",
            "--porcelain",
            "--no-verify",
            f"--force-with-lease={NOTES_REF}:{expected}",
            "--",
            remote,
            f"{NOTES_REF}:{NOTES_REF}",
        )
        flag, summary = _push_status(result.stdout)
        if result.returncode == 0:
            outcome = "up-to-date" if flag == "=" else "pushed"
            if remote in jobs.repository.remote_names():
                # As git does for branches: the remote-tracking ref follows what was
                # pushed, so the next push is leased on the value the remote holds.
                jobs.repository.git("update-ref", tracking_ref(remote), local, check=False)
            return PushReport(where, outcome, local, attempt, tuple(fetches))
        _refuse_unless_moved(result, flag, summary, where)
        if attempt < attempts:
            # Wait first, then fetch: pushers rejected together wake at different
            # times, and each then fetches what the earlier ones published.
            import random  # here: only a rejected push pays for it

            sleep(random.uniform(0.0, 0.1 * 2 ** min(attempt - 1, 4)))
            report = fetch(jobs, git, remote, sleep=sleep)
            fetches.append(report)
            expected = report.remote_commit or ""
    raise RemoteError(
        f"{where} kept moving: {attempts} pushes of the records were rejected "
        f"({summary}); your records are intact in {NOTES_REF}; run majordomus push again."
    )


def _refuse_unless_moved(
    result: subprocess.CompletedProcess[str], flag: str | None, summary: str, where: str
) -> None:
    """Refuse a failed push that fetching and pushing again cannot mend: the remote
    was not moved by another writer, it failed or refused the records."""
    if flag != "!":
        raise RemoteError(
            f"cannot push records to {where}: "
            f"{_reason(result.stderr, f'git push exited {result.returncode}')}; your "
            f"records are intact in {NOTES_REF}."
        )
    if not _retryable(summary):
        raise RemoteError(
            f"{where} refused the records: {summary}; your records are intact in "
            f"{NOTES_REF}; ask the remote's owner to accept {NOTES_REF}."
        )


def _merged_remote_value(
    jobs: Jobs,
    git: Git,
    remote: str,
    fetched: FetchReport | None,
    sleep: Callable[[float], None],
) -> str:
    """The remote value the first push is leased on, its records merged into ours first.

    "" leases on the remote having no records: right for a remote never fetched
    from, and otherwise refused and fetched like any remote that moved.
    """
    if fetched is not None:
        return fetched.remote_commit or ""
    if remote not in jobs.repository.remote_names():
        return ""  # a URL keeps no remote-tracking ref
    tracked = jobs.repository.ref_target(tracking_ref(remote))
    if tracked is not None and not jobs.history.has_commit(tracked):
        # Left out of every read (a blob or a tag a teammate pushed): nothing to merge.
        # The push is leased on no records, refused if the remote has any, and fetched.
        return ""
    if tracked is not None and jobs.repository.ref_target(NOTES_REF) is not None:
        complete(jobs, git, remote)
        jobs.writer.merge(tracked, f"majordomus: merge records from {shown(remote)}", sleep=sleep)
    return tracked or ""


def missing_note_objects(jobs: Jobs) -> list[str]:
    """The objects under the notes refs' trees this clone lacks, as git lists them
    (never fetching them one by one as it would to read them)."""
    commits = jobs.reader.refs.notes_commits()
    if not commits or not jobs.reader.partial.is_partial():
        return []
    out = jobs.repository.git(
        "rev-list", "--objects", "--no-walk", "--missing=print", *commits
    ).stdout
    return [line[1:].strip() for line in out.splitlines() if line.startswith("?")]


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
    reason = _reason(result.stderr, f"git fetch exited {result.returncode}")
    # A server that serves only what it advertises (protocol v0 without
    # uploadpack.allowAnySHA1InWant): everything under its notes ref instead,
    # --refetch because a plain fetch stops at a tip that is already here. The
    # refspec names the ref exactly: git 2.39 waits forever on a --refetch that
    # wants nothing, and an exact ref the remote lacks fails at once.
    dest = f"{_INCOMING}{os.urandom(6).hex()}/majordomus"
    try:
        whole = git.run(*noop[2:], "--refetch", "--", remote, f"+{NOTES_REF}:{dest}")
    finally:
        repository.delete_refs(dest.rsplit("/", 1)[0] + "/")
    return None if whole.returncode == 0 else reason


def complete(jobs: Jobs, git: Git, remote: str) -> None:
    """Bring the note objects a partial clone lacks from `remote`, in one batch."""
    ids = missing_note_objects(jobs)
    if not ids:
        return
    reason = fetch_objects(jobs.repository, git, remote, ids) or "it did not send them"
    still = missing_note_objects(jobs)
    promisor = promisor_remote(jobs.repository)
    if still and promisor != remote:
        # Objects under our own ref that only the remote this clone came from has.
        fetch_objects(jobs.repository, git, promisor, still)
        still = missing_note_objects(jobs)
    if still:
        where = shown(remote)
        raise RemoteError(
            f"{len(still)} object(s) the records need are missing from this partial clone and "
            f"{where} did not send them ({reason}); nothing was merged (check the remote with "
            f"git fetch {where})."
        )


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


def missing_fetcher(repository: Repository) -> Callable[[Sequence[str]], tuple[str, str | None]]:
    """What a read calls when a partial clone lacks note objects: one batched fetch."""

    def fetch_missing(ids: Sequence[str]) -> tuple[str, str | None]:
        remote = promisor_remote(repository)
        return shown(remote), fetch_objects(repository, Git(repository), remote, ids)

    return fetch_missing


def _push_status(porcelain: str) -> tuple[str | None, str]:
    """The flag and summary `git push --porcelain` gives the notes ref."""
    for line in porcelain.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[1].endswith(f":{NOTES_REF}") and len(parts[0]) == 1:
            return parts[0], parts[2]
    return None, ""


def _retryable(summary: str) -> bool:
    """Rejections another writer caused: the remote moved, or its ref was locked."""
    if summary.startswith("[rejected]"):
        return True
    lowered = summary.lower()
    return summary.startswith("[remote rejected]") and any(
        word in lowered for word in ("lock", "expected", "failed to update", "incorrect old value")
    )


# ---- init: configuration and the hook --------------------------------------------------------


def configure(repository: Repository, remote: str | None) -> InitReport:
    """Set this clone up so records travel with the code; idempotent, never clobbering."""
    names = repository.remote_names()
    chosen = remote if remote is not None else default_remote(repository)
    if remote is not None:
        check_remote(remote)
        if remote not in names:
            known = f" (this clone has: {', '.join(names)})" if names else ""
            raise RefusedError(
                f"there is no remote named {remote}{known}; add it with git remote add "
                f"{remote} URL, then run majordomus init --remote {remote} again."
            )
    settings = [_add_value(repository, "notes.displayRef", ref) for ref in DISPLAY_REFS]
    settings.append(_add_value(repository, "notes.rewriteRef", NOTES_REF))
    settings += [
        _set_value(
            repository, "notes.rewrite.amend", "true", "records will not follow git commit --amend"
        ),
        _set_value(
            repository, "notes.rewrite.rebase", "true", "records will not follow git rebase"
        ),
        _set_value(
            repository,
            "notes.rewriteMode",
            "concatenate",
            "a rewrite that lands on a commit with a note may drop or garble records",
        ),
        _set_value(
            repository,
            "notes.majordomus.mergeStrategy",
            "union",
            "git notes merge by hand may not keep the notes valid TOML",
        ),
    ]
    if chosen not in names:
        why = (
            f"no remote named {chosen} yet: after git remote add {chosen} URL, run majordomus init"
        )
        return InitReport(None, tuple(settings), install_hook(repository), why)
    settings += _remote_settings(repository, chosen)
    return InitReport(chosen, tuple(settings), install_hook(repository))


def _config_values(repository: Repository, key: str) -> list[str]:
    return repository.git("config", "--get-all", key, check=False).stdout.splitlines()


def _covers(pattern: str, ref: str) -> bool:
    return pattern == ref or ("*" in pattern and fnmatch.fnmatchcase(ref, pattern))


def _add_value(repository: Repository, key: str, value: str, *, glob: bool = True) -> Setting:
    """One value of a multi-valued key, added beside whatever the user has.

    With `glob`, a value the user already covers with a pattern (notes.displayRef
    = refs/notes/*) is not added again.
    """
    existing = _config_values(repository, key)
    if value in existing or (glob and any(_covers(pattern, value) for pattern in existing)):
        return Setting(key, value, "already")
    repository.git("config", "--local", "--add", key, value)
    return Setting(key, value, "added")


def _set_value(repository: Repository, key: str, value: str, consequence: str) -> Setting:
    """A single-valued key, set only when the user has not set it."""
    typed = ["--type=bool"] if value in ("true", "false") else []
    current = repository.git("config", *typed, "--get", key, check=False)
    have = current.stdout.strip()
    if current.returncode != 0 or not have:
        repository.git("config", "--local", key, value)
        return Setting(key, value, "added")
    if have.lower() == value:
        return Setting(key, value, "already")
    return Setting(
        key,
        have,
        "kept",
        f"{key} is {have}, not {value}: {consequence}; change it if you want that",
    )


def _remote_settings(repository: Repository, remote: str) -> list[Setting]:
    key = f"remote.{remote}.fetch"
    settings = [_add_value(repository, key, fetch_refspec(remote), glob=False)]
    for spec in _config_values(repository, key):
        destination = spec.lstrip("+").partition(":")[2]
        if spec != fetch_refspec(remote) and _covers(destination, NOTES_REF):
            settings.append(
                Setting(
                    key,
                    spec,
                    "kept",
                    f"{key} has {spec}, which lets git fetch overwrite records not yet pushed; "
                    f"remove it with git config --unset {key} '{spec}'",
                )
            )
    return settings


def hook_script(python: str = sys.executable) -> str:
    """The pre-push hook majordomus installs when there is none."""
    interpreter = shlex.quote(python)
    return f"""#!/bin/sh
{HOOK_MARK} (written by majordomus init; safe to delete).
# Publishes the records in {NOTES_REF} to the remote being pushed to.
# It never fails the push and gives up after MAJORDOMUS_HOOK_TIMEOUT seconds
# ({HOOK_TIMEOUT_S:g} by default): a failure to publish is a warning.
while read -r _local _oid remote_ref _remote_oid; do
    # This push publishes the records itself: a second push of them would race it.
    if [ "$remote_ref" = {NOTES_REF} ]; then exit 0; fi
done
if command -v majordomus >/dev/null 2>&1; then
    majordomus push --hook "$1" </dev/null
elif [ -x {interpreter} ]; then
    {interpreter} -m majordomus push --hook "$1" </dev/null
else
    echo "majordomus: warning: majordomus is not on PATH; records were not published." >&2
fi
exit 0
"""


def hook_line(environ: Mapping[str, str], python: str = sys.executable) -> str:
    """The line to add to a hook majordomus may not write: it finds majordomus as the
    user's shell will, or, when majordomus is not on PATH, through this interpreter."""
    if shutil.which("majordomus", path=environ.get("PATH", os.defpath)):
        return HOOK_LINE
    # stdin stays with the user's hook: it may read the refs being pushed after us.
    return f'{shlex.quote(python)} -m majordomus push --hook "$1" </dev/null || true'


def install_hook(repository: Repository) -> HookReport:
    """Install the pre-push hook, or say exactly what to add to the one that is there."""
    hooks_path = repository.git("config", "--get", "core.hooksPath", check=False).stdout.strip()
    hooks = Path(repository.git("rev-parse", "--git-path", "hooks").stdout.strip())
    if not hooks.is_absolute():
        hooks = (repository.workdir or repository.gitdir) / hooks
    path = hooks / "pre-push"
    script = hook_script()
    try:
        existing: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        existing = None
    except (OSError, UnicodeDecodeError):
        existing = ""
    if existing is not None and existing.startswith(f"#!/bin/sh\n{HOOK_MARK}"):
        if existing == script:
            return HookReport(str(path), "already")
        _write_hook(path, script, replace=True)
        return HookReport(str(path), "updated")
    if existing is not None and "majordomus push --hook" in existing:
        return HookReport(str(path), "already")
    if hooks_path:
        # Often a directory the team shares: the portable line, no path of this machine.
        why = f"core.hooksPath is set to {hooks_path}, which majordomus does not write to"
        return HookReport(str(path), "manual", why, HOOK_LINE)
    line = hook_line(repository.environ)
    if existing is not None:
        return HookReport(str(path), "manual", "a pre-push hook is already there", line)
    try:
        _write_hook(path, script, replace=False)
    except FileExistsError:
        return HookReport(str(path), "manual", "a pre-push hook appeared meanwhile", line)
    except OSError as error:
        return HookReport(str(path), "manual", f"cannot write it ({error.strerror})", line)
    return HookReport(str(path), "installed")


def _write_hook(path: Path, script: str, *, replace: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if replace:
        tmp = path.with_name(f"pre-push.majordomus-{os.getpid()}")
        tmp.write_text(script, encoding="utf-8")
        tmp.chmod(0o755)
        os.replace(tmp, path)
        return
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(script)
    path.chmod(0o755)


def hook_budget(environ: Mapping[str, str]) -> float:
    raw = environ.get("MAJORDOMUS_HOOK_TIMEOUT", "")
    try:
        value = float(raw)
    except ValueError:
        return HOOK_TIMEOUT_S
    return value if value > 0 else HOOK_TIMEOUT_S
