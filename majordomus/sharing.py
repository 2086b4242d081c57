"""The verbs that move records between clones: `init` (this clone set up so they travel
with the code), `fetch`, `push` and `sync` (both, in that order); each a function that
returns what it did, and the command that prints it (`<verb>_command`). A fetch brings
the remote's records into its remote-tracking ref and merges them into ours; a push is
never forced: leased on the remote value whose records are merged here, and when the
remote moved, fetched, merged and tried again.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from majordomus.errors import ExitCode, MajordomusError, RemoteError
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.remote import (
    HOOK_GUARD,
    INCOMING_PREFIX,
    Git,
    fetch_objects,
    git_reason,
    hook_budget,
    locate,
    promisor_remote,
    shown,
    tracking_ref,
)
from majordomus.repository import NOTES_REF, Repository
from majordomus.tasks import Jobs, missing_note_objects, open_here
from majordomus.values import FetchReport, InitReport, PushReport, SyncResult

if TYPE_CHECKING:
    from majordomus import reports
else:
    reports = OnFirstUse("majordomus.reports")

PUSH_ATTEMPTS = 12


def init(inputs: Inputs, remote_name: str | None = None) -> InitReport:
    """Configure this clone so records travel with the code (see clonesetup.configure)."""
    from majordomus import clonesetup  # init's alone: fetch and push do not load it

    return clonesetup.configure(open_here(inputs).repository, remote_name)


def fetch(inputs: Inputs, remote_name: str | None = None) -> FetchReport:
    jobs = open_here(inputs)
    name = locate(jobs.repository, remote_name, inputs.cwd)
    return fetch_records(jobs, Git(jobs.repository), name, sleep=inputs.sleep)


def push(inputs: Inputs, remote_name: str | None = None, hook: bool = False) -> PushReport:
    """Publish the records; as the pre-push hook (`hook`), within a time budget and unprompted."""
    jobs = open_here(inputs)
    name = locate(jobs.repository, remote_name, inputs.cwd)
    if hook and inputs.environ.get(HOOK_GUARD):
        return PushReport(shown(name), "skipped", None, 0, ())
    git = (
        Git(jobs.repository, budget_s=hook_budget(inputs.environ), detached=True)
        if hook
        else Git(jobs.repository)
    )
    return push_records(jobs, git, name, sleep=inputs.sleep)


def sync(inputs: Inputs, remote_name: str | None = None) -> SyncResult:
    jobs = open_here(inputs)
    name = locate(jobs.repository, remote_name, inputs.cwd)
    git = Git(jobs.repository)
    fetched = fetch_records(jobs, git, name, sleep=inputs.sleep)
    return SyncResult(fetched, push_records(jobs, git, name, sleep=inputs.sleep, fetched=fetched))


# ---- fetching and pushing records ------------------------------------------------------


def fetch_records(
    jobs: Jobs, git: Git, remote: str, *, sleep: Callable[[float], None] = time.sleep
) -> FetchReport:
    """Bring the remote's records into its remote-tracking ref, then merge them into ours."""
    named = remote in jobs.repository.remote_names()
    where = shown(remote)
    # A URL has no remote-tracking ref: its records pass through a private ref
    # that is removed once merged.
    dest = tracking_ref(remote) if named else f"{INCOMING_PREFIX}{os.urandom(6).hex()}/majordomus"
    repository = jobs.repository
    before = repository.ref_target(dest) if named else None
    # What follows needs libgit2 unless the fetch fast-forwards our notes (see
    # Writer.merge), as it does when we wrote nothing since the last fetch: else
    # libgit2 is loaded while git fetches, on the other CPU.
    quick = repository.by_git and before is not None and before == repository.ref_target(NOTES_REF)
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
            meanwhile=None if quick else lambda: repository.repo,
        )
        if result.returncode != 0:
            raise RemoteError(
                f"cannot fetch records from {where}: "
                f"{git_reason(result.stderr, f'git fetch exited {result.returncode}')}; nothing "
                f"was merged (check the remote with git fetch {where})."
            )
        theirs = repository.ref_target(dest)
        if theirs is not None and not jobs.history.commits_here([theirs]):
            _put_back(repository, dest, before)
            raise RemoteError(
                f"{where}'s {NOTES_REF} points at {theirs[:12]}, which is not a commit, so its "
                "records cannot be read; nothing here was changed (ask whoever published it "
                f"to repair {NOTES_REF} on {where})."
            )
        complete(jobs, git, remote)
        if theirs is None:
            return FetchReport(where, None, None)
        from majordomus.writer import Writer  # here: a fetch that brought records merges

        merge = Writer(jobs.repository, jobs.reader, jobs.history).merge(
            theirs, f"majordomus: merge records from {where}", sleep=sleep
        )
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


def push_records(
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
            report = fetch_records(jobs, git, remote, sleep=sleep)
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
            f"{git_reason(result.stderr, f'git push exited {result.returncode}')}; your "
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
        from majordomus.writer import Writer  # here: records to merge before the push

        Writer(jobs.repository, jobs.reader, jobs.history).merge(
            tracked, f"majordomus: merge records from {shown(remote)}", sleep=sleep
        )
    return tracked or ""


def complete(jobs: Jobs, git: Git, remote: str) -> None:
    """Bring the note objects a partial clone lacks from `remote`, in one batch."""
    if jobs.repository.refs is not None:
        return  # a plain layout names no promisor remote: git left nothing out
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


# ---- the commands ----------------------------------------------------------------------


def init_command(invocation: Invocation, remote: str | None = None, as_json: bool = False) -> int:
    invocation.out(reports.init(init(invocation.inputs(), remote), as_json))
    return ExitCode.OK


def fetch_command(invocation: Invocation, remote: str | None = None, as_json: bool = False) -> int:
    invocation.out(reports.fetch(fetch(invocation.inputs(), remote), as_json))
    return ExitCode.OK


def push_command(
    invocation: Invocation, remote: str | None = None, hook: bool = False, as_json: bool = False
) -> int:
    if not hook:
        invocation.out(reports.push(push(invocation.inputs(), remote), as_json))
        return ExitCode.OK
    # As the pre-push hook, a failure must never stop the user's own push: the
    # error becomes a warning here, and records wait for the next push.
    try:
        result = push(invocation.inputs(), remote, hook=True)
    except MajordomusError as error:
        why = error.message.rstrip(".")
        invocation.warn(f"records were not published ({why}); the push goes on.")
        return ExitCode.OK
    line = reports.push_hook(result)
    if line is not None:
        invocation.terminal.stderr.write(line + "\n")
    return ExitCode.OK


def sync_command(invocation: Invocation, remote: str | None = None, as_json: bool = False) -> int:
    invocation.out(reports.sync(sync(invocation.inputs(), remote), as_json))
    return ExitCode.OK
