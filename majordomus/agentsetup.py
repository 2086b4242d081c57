"""The verb `agent install`: majordomus' hook entries written into (or removed from) a coding
agent's settings file (`agents` knows each agent's file and format); `agent_install`
returns the change, `agent_install_command` prints it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from majordomus.errors import ExitCode, RepositoryError
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.repository import Repository
from majordomus.tasks import open_here
from majordomus.values import Change

if TYPE_CHECKING:
    from majordomus import reports
else:
    reports = OnFirstUse("majordomus.reports")


def agent_install(
    inputs: Inputs,
    agent: str,
    scope: str = "local",
    enforce: bool = False,
    dry_run: bool = False,
    remove: bool = False,
) -> Change:
    """Write (or remove) majordomus' hook entries in a coding agent's settings file."""
    try:
        repository: Repository | None = open_here(inputs).repository
    except RepositoryError:
        if scope != "user":
            raise
        repository = None  # the user's own settings need no repository
    from majordomus import agents  # two commands use it: not loaded by the others

    return agents.install(repository, inputs.environ, agent, scope, enforce, dry_run, remove)


def agent_install_command(
    invocation: Invocation,
    agent: str,
    scope: str = "local",
    enforce: bool = False,
    dry_run: bool = False,
    remove: bool = False,
) -> int:
    change = agent_install(invocation.inputs(), agent, scope, enforce, dry_run, remove)
    for warning in change.warnings:
        invocation.warn(warning)
    invocation.out(reports.agent_change(change, dry_run, remove))
    return ExitCode.OK
