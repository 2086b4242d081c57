"""The verbs that move records between clones: `init` (this clone set up so they travel
with the code), `fetch`, `push` and `sync` (both, in that order); each a function that
returns what it did, and the command that prints it (`<verb>_command`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from majordomus import remote
from majordomus.errors import ExitCode, MajordomusError
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.tasks import open_here
from majordomus.values import FetchReport, InitReport, PushReport, SyncResult

if TYPE_CHECKING:
    from majordomus import reports
else:
    reports = OnFirstUse("majordomus.reports")


def init(inputs: Inputs, remote_name: str | None = None) -> InitReport:
    """Configure this clone so records travel with the code (see remote.configure)."""
    return remote.configure(open_here(inputs).repository, remote_name)


def fetch(inputs: Inputs, remote_name: str | None = None) -> FetchReport:
    jobs = open_here(inputs)
    name = remote.locate(jobs.repository, remote_name, inputs.cwd)
    return remote.fetch(jobs, remote.Git(jobs.repository), name, sleep=inputs.sleep)


def push(inputs: Inputs, remote_name: str | None = None, hook: bool = False) -> PushReport:
    """Publish the records; as the pre-push hook (`hook`), within a time budget and unprompted."""
    jobs = open_here(inputs)
    name = remote.locate(jobs.repository, remote_name, inputs.cwd)
    if hook and inputs.environ.get(remote.HOOK_GUARD):
        return PushReport(remote.shown(name), "skipped", None, 0, ())
    git = (
        remote.Git(jobs.repository, budget_s=remote.hook_budget(inputs.environ), detached=True)
        if hook
        else remote.Git(jobs.repository)
    )
    return remote.push(jobs, git, name, sleep=inputs.sleep)


def sync(inputs: Inputs, remote_name: str | None = None) -> SyncResult:
    jobs = open_here(inputs)
    name = remote.locate(jobs.repository, remote_name, inputs.cwd)
    git = remote.Git(jobs.repository)
    fetched = remote.fetch(jobs, git, name, sleep=inputs.sleep)
    return SyncResult(fetched, remote.push(jobs, git, name, sleep=inputs.sleep, fetched=fetched))


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
