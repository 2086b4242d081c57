"""The command line's commands for a clone, its remotes and its agents' settings, as typer
reads them (doctor, profile, init, fetch, push, sync, context, agent install). `cli`
adds them to its app after the session's own commands, in this order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from majordomus.cliparts import JsonOpt, TaskOpt, run_with
from majordomus.invocation import OnFirstUse
from majordomus.values import (
    CONTEXT_DEFAULT_CHARS,
    CONTEXT_MAX_CHARS,
    CONTEXT_MIN_CHARS,
)

if TYPE_CHECKING:
    from majordomus import agentsetup, diagnosis, sharing
    from majordomus import context as contexts
else:
    agentsetup = OnFirstUse("majordomus.agentsetup")
    contexts = OnFirstUse("majordomus.context")
    diagnosis = OnFirstUse("majordomus.diagnosis")
    sharing = OnFirstUse("majordomus.sharing")

app = typer.Typer()  # what cli adds to its own app: these commands are declared here only


@app.command()
def doctor(
    ctx: typer.Context,
    drop_cache: Annotated[
        bool,
        typer.Option(
            "--drop-cache",
            help="Delete the read caches in the git directory first (they are rebuilt on demand).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Configuration, identity, lock files, invalid notes, a shallow or partial clone.

    Exit 0 healthy, 1 not; a shallow or partial clone is information, not a fault.

    Examples:

    \b
      majordomus doctor
      majordomus doctor --drop-cache --json
    """
    run_with(ctx, diagnosis.doctor_command)


@app.command("profile")
def profile_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The effective profile and where each value came from.

    Examples:

    \b
      majordomus profile
      majordomus profile --json
    """
    run_with(ctx, diagnosis.profile_command)


# ---- records between clones ---------------------------------------------------------------

RemoteArg = Annotated[
    str | None,
    typer.Argument(
        metavar="REMOTE",
        help="A remote name (or URL); default: the current branch's upstream remote, else origin.",
        show_default=False,
    ),
]


@app.command()
def init(
    ctx: typer.Context,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            metavar="REMOTE",
            help="The remote whose records plain git fetch should bring (default: the current "
            "branch's upstream remote, else origin). Run once per remote.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Set this clone up so records travel with the code. Safe to run again.

    Adds, beside what you have and never over it: notes.displayRef (git log
    shows records), notes.rewriteRef with notes.rewrite.amend/rebase (records
    follow amended and rebased commits), a union merge strategy for git notes
    merge, a fetch refspec so plain git fetch brings the remote's records into
    refs/notes/remotes/REMOTE/majordomus (and never fails while it has none), and
    a pre-push hook so git push publishes records. An existing hook, or a
    core.hooksPath, is left alone: init prints the line to add.

    Examples:

    \b
      majordomus init
      majordomus init --remote origin --json
    """
    run_with(ctx, sharing.init_command)


@app.command()
def fetch(ctx: typer.Context, remote: RemoteArg = None, as_json: JsonOpt = False) -> None:
    """Fetch the remote's records and merge them into refs/notes/majordomus.

    They land in refs/notes/remotes/REMOTE/majordomus, then are united with
    yours record by record: nothing is dropped on either side. A remote with
    no records yet is not an error. Uses your own git, credentials and ssh
    set-up. Exit 4 when the fetch fails.

    Examples:

    \b
      majordomus fetch
      majordomus fetch origin --json
    """
    run_with(ctx, sharing.fetch_command)


@app.command()
def push(
    ctx: typer.Context,
    remote: RemoteArg = None,
    hook: Annotated[
        bool,
        typer.Option(
            "--hook",
            help="Run as the pre-push hook does: no prompts, at most MAJORDOMUS_HOOK_TIMEOUT "
            "seconds (30), and never fail: a failure to publish is a warning and exit 0.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Publish refs/notes/majordomus to the remote. Never forces.

    When the remote moved, its records are fetched and merged, and the push
    tried again (a bounded number of times). Exit 4 when it cannot be
    published; your records stay intact.

    Examples:

    \b
      majordomus push
      majordomus push origin --json
    """
    run_with(ctx, sharing.push_command)


@app.command()
def sync(ctx: typer.Context, remote: RemoteArg = None, as_json: JsonOpt = False) -> None:
    """Fetch and merge the remote's records, then publish yours. Exit 4 on failure.

    Examples:

    \b
      majordomus sync
      majordomus sync origin
    """
    run_with(ctx, sharing.sync_command)


# ---- coding agents ----------------------------------------------------------------------

agent_app = typer.Typer(
    help="""Wire majordomus into a coding agent's hooks (Claude Code, Codex, Gemini CLI).

    Examples:

    \b
      majordomus agent install claude
      majordomus agent install codex --dry-run
    """,
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(agent_app, name="agent")


@app.command()
def context(
    ctx: typer.Context,
    max_chars: Annotated[
        int,
        typer.Option(
            "--max-chars",
            metavar="N",
            help=f"Budget in characters ({CONTEXT_MIN_CHARS}..{CONTEXT_MAX_CHARS}; "
            f"default {CONTEXT_DEFAULT_CHARS}).",
        ),
    ] = CONTEXT_DEFAULT_CHARS,
    task: TaskOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One bounded block for a new session: the task, its open handover, staleness, the
    newest checkpoints and how to record.

    A record is included whole or replaced by a pointer line, never cut. Outside a
    repository or with no task: a short line, exit 0.

    Examples:

    \b
      majordomus context
      majordomus context --max-chars 2000 --json
    """
    run_with(ctx, contexts.context_command)


@agent_app.command("install")
def agent_install(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="claude, codex or gemini.")],
    scope: Annotated[
        str,
        typer.Option(
            "--scope",
            metavar="SCOPE",
            help="local: this clone only, kept out of git (default); project: the shared, "
            "committed file; user: your home directory.",
        ),
    ] = "local",
    enforce: Annotated[
        bool,
        typer.Option("--enforce", help="Also add a Stop hook that blocks once when stale."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the change; write nothing.")
    ] = False,
    remove: Annotated[
        bool, typer.Option("--remove", help="Remove majordomus' entries only.")
    ] = False,
) -> None:
    """Write majordomus' hook entries into the agent's settings file.

    Keeps every other key and hook; one majordomus entry per event however often it
    runs; an invalid settings file is refused and left untouched (exit 2).

    Examples:

    \b
      majordomus agent install claude
      majordomus agent install gemini --scope project --enforce
      majordomus agent install codex --remove --dry-run
    """
    run_with(ctx, agentsetup.agent_install_command)
