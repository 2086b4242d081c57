"""The command line as typer reads it: every command's options, help and refusals (typer's
own refusals become exit codes here; majordomus' errors in `__main__.run`)."""

from __future__ import annotations

import contextlib
import copy
import errno
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from majordomus import __version__, interrupt, readcli, setupcli
from majordomus.cliparts import (
    AllowSecretOpt,
    FileOpt,
    JsonOpt,
    SessionOpt,
    TaskOpt,
    invocation_of,
    run_with,
)
from majordomus.errors import ExitCode, RefusedError
from majordomus.invocation import Invocation, OnFirstUse
from majordomus.profile import BUILT_IN
from majordomus.values import DEFAULT_DAYS

if TYPE_CHECKING:
    from majordomus import adopt as adoption
    from majordomus import completion, hooks, plaintext, write
else:
    adoption = OnFirstUse("majordomus.adopt")
    completion = OnFirstUse("majordomus.completion")
    hooks = OnFirstUse("majordomus.hooks")
    plaintext = OnFirstUse("majordomus.plaintext")
    write = OnFirstUse("majordomus.write")


HELP = """\
Checkpoints and handovers for debugging sessions, stored as git notes.

Records are TOML notes on refs/notes/majordomus, attached to the commit they
describe: `git log --notes=majordomus` shows them, and they travel with the code.

Examples:

\b
  majordomus init            # once per clone: records travel with git push/fetch
  majordomus task new "queue drops acks under load"
  majordomus checkpoint "reproduced with 50 concurrent enqueues"
  majordomus handover --objective ... --state ... --next ...
  majordomus push            # publish the records (git push does it after init)
  majordomus fetch           # in the next session, or another clone
  majordomus resume          # pick up the open handover
  majordomus history         # the record, newest first
  majordomus adopt           # after a squash or rebase merge on the host
  majordomus agent install claude   # agent sessions start with the handover

Every command's --help has examples; majordomus completion SHELL prints a
completion script for bash, zsh or fish.

Exit codes: 0 done, 1 a negative answer (stale, nothing open, unhealthy),
2 refused input, 3 repository state, 4 remote failure.
"""

app = typer.Typer(
    help=HELP,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
task_app = typer.Typer(
    help="""Create, list and pick tasks: the investigations that records belong to.

    Examples:

    \b
      majordomus task new "queue drops acks under load"
      majordomus task list
    """,
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(task_app, name="task")


def _version(ctx: typer.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:  # a completion reads the line, runs nothing
        print(f"majordomus {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    ctx: typer.Context,
    directory: Annotated[
        list[str] | None,
        typer.Option(
            "-C",
            metavar="PATH",
            help="Run as if started in PATH, like git -C (repeatable: each is relative to "
            "the one before).",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile", metavar="NAME", help="Profile to use (beats MAJORDOMUS_PROFILE)."
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    ctx.obj = invocation_of(ctx).located(directory or (), profile)


# ---- tasks -------------------------------------------------------------------------------


@task_app.command("new")
def task_new(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(metavar="TITLE", help="What the investigation is about.")],
    session_name: SessionOpt = None,
    allow_secret: AllowSecretOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Create a task, record it on HEAD and make it current; prints its id.

    Examples:

    \b
      majordomus task new "queue drops acks under load"
      majordomus task new --json "login fails after a token refresh"
    """
    run_with(ctx, write.task_new_command)


@task_app.command("list")
def task_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Tasks with title, last activity, checkpoint age and open handover (* = current).

    Examples:

    \b
      majordomus task list
      majordomus task list --json
    """
    run_with(ctx, write.task_list_command)


@task_app.command("use")
def task_use(
    ctx: typer.Context,
    task: Annotated[
        str,
        typer.Argument(metavar="TASK", help="Task id or a unique prefix of 4+ hex digits."),
    ],
) -> None:
    """Make a task current in this work tree.

    Examples:

    \b
      majordomus task use TASK   # TASK: an id (or 4+ of its digits) from task list
    """
    run_with(ctx, write.task_use_command)


# ---- writing -----------------------------------------------------------------------------


@app.command(
    help=f"""Record what is true right now on HEAD, for the current task.

    The body is capped by the profile's checkpoint_max ({BUILT_IN["checkpoint_max"]}
    characters by default): an over-long body is refused, never truncated.

    Examples:

    \b
      majordomus checkpoint "reproduced with 50 concurrent enqueues"
      majordomus checkpoint --task TASK "the race is in ack(), not in enqueue()"
    """
)
def checkpoint(
    ctx: typer.Context,
    text: Annotated[
        str | None, typer.Argument(metavar="TEXT", help="What is true right now.")
    ] = None,
    file: FileOpt = None,
    task: TaskOpt = None,
    session_name: SessionOpt = None,
    allow_secret: AllowSecretOpt = False,
    as_json: JsonOpt = False,
) -> None:
    run_with(ctx, write.checkpoint_command)


@app.command()
def handover(
    ctx: typer.Context,
    objective: Annotated[
        str | None, typer.Option("--objective", "-o", metavar="TEXT", help="What the work is for.")
    ] = None,
    state: Annotated[
        str | None,
        typer.Option("--state", "-s", metavar="TEXT", help="What is known and done now."),
    ] = None,
    next_action: Annotated[
        str | None, typer.Option("--next", "-n", metavar="TEXT", help="The next action to take.")
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            "-F",
            metavar="FILE",
            help="A TOML table with objective, state and next (- for stdin).",
        ),
    ] = None,
    task: TaskOpt = None,
    session_name: SessionOpt = None,
    allow_secret: AllowSecretOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Record a handover on HEAD: objective, state and next action, all three required.

    Each field is capped by the profile's handover_max. Warns (does not refuse)
    when the work tree has uncommitted changes.

    Examples:

    \b
      majordomus handover -o "stop dropped acks" -s "race in ack()" -n "add a lock"
      majordomus handover --objective ... --state ... --next ... --json
    """
    run_with(ctx, write.handover_command)


@app.command()
def resume(
    ctx: typer.Context,
    peek: Annotated[bool, typer.Option("--peek", help="Show it but record nothing.")] = False,
    task: TaskOpt = None,
    session_name: SessionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pick up the newest open handover of the task and say how the code moved since.

    Records a resume on HEAD that resolves it (and supersedes older open
    handovers of the task). Exit 1 when nothing is open.

    Examples:

    \b
      majordomus resume --peek   # read it, record nothing
      majordomus resume
    """
    run_with(ctx, write.resume_command)


app.registered_commands += readcli.app.registered_commands
app.registered_commands += setupcli.app.registered_commands
app.registered_groups += setupcli.app.registered_groups


@app.command()
def hook(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="claude, codex or gemini.")],
    event: Annotated[
        str | None,
        typer.Argument(
            metavar="EVENT", help="The hook event (default: hook_event_name from the input)."
        ),
    ] = None,
    enforce: Annotated[
        bool,
        typer.Option("--enforce", help="On Stop, block once per stale episode."),
    ] = False,
) -> None:
    """What an agent's hook runs: reads the hook's JSON on stdin, answers in that agent's
    format, always exits 0, never writes a record.

    Invocation start: the context block. Prompt submit: a one-line reminder when the
    task is stale. Stop: silent unless --enforce. Anything else, or bad input: silent.
    agent install writes the lines that run it.

    Examples:

    \b
      majordomus hook claude SessionStart   # the hook's JSON comes on stdin
      majordomus hook codex
    """
    run_with(ctx, hooks.hook_command)


@app.command()
def mcp(ctx: typer.Context) -> None:
    """A stdio MCP server with tools context, checkpoint, handover, resume, history, search,
    check, task_new, task_list and task_use (needs the extra: pip install 'majordomus[mcp]').

    It serves until its input ends. An MCP client starts it: claude mcp add
    majordomus -- majordomus mcp, say.

    Examples:

    \b
      majordomus mcp
    """
    from majordomus import mcpfront  # the SDK itself is imported beside the handshake

    invocation = invocation_of(ctx)
    missing = RefusedError(
        "the MCP SDK is not installed; install it with pip install 'majordomus[mcp]'."
    )
    if not mcpfront.sdk_installed():  # a usage problem of this installation (exit 2)
        raise missing
    assert invocation.command_line is not None  # `__main__.run` hands itself down
    try:
        mcpfront.serve(invocation.cwd, invocation.environ, invocation.command_line)
    except ImportError:  # found, but broken
        raise missing from None


# ---- after a host's merge -------------------------------------------------------------------


@app.command()
def adopt(
    ctx: typer.Context,
    rev: Annotated[
        str | None,
        typer.Argument(
            metavar="REV",
            help="The branch the work landed on (default HEAD).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be adopted; write nothing.")
    ] = False,
    days: Annotated[
        int,
        typer.Option(
            "--days",
            metavar="N",
            show_default=False,
            help="Consider records written at most N days before REV's commit "
            f"(default {DEFAULT_DAYS}).",
        ),
    ] = DEFAULT_DAYS,
    as_json: JsonOpt = False,
) -> None:
    """After a host's squash or rebase merge: copy the records it left on commits not
    reachable from REV onto the commit where their change landed.

    Proved by stable patch ids (git patch-id --stable), never guessed: a record
    whose change matches two commits is adopted onto neither. Copies keep their
    head (where they were written); commit says where they are read now. Safe
    to run again: what is adopted is reachable, so nothing is done twice.

    Examples:

    \b
      majordomus adopt --dry-run main
      majordomus adopt main
    """
    run_with(ctx, adoption.adopt_command)


# ---- shell completion ---------------------------------------------------------------------


@app.command("completion")
def completion_cmd(
    ctx: typer.Context,
    shell: Annotated[
        str,
        typer.Argument(metavar="SHELL", help="bash, zsh or fish."),
    ],
) -> None:
    """Print the shell completion script: Tab completes commands, options, task ids and
    REVs (branches and tags), files for --file and directories for -C.

    Load it from the shell's start-up file:

    \b
      eval "$(majordomus completion bash)"   # in ~/.bashrc
      eval "$(majordomus completion zsh)"    # in ~/.zshrc, after compinit
      majordomus completion fish | source    # in ~/.config/fish/config.fish

    Examples:

    \b
      majordomus completion bash
      majordomus completion zsh
      majordomus completion fish
    """
    run_with(ctx, completion.completion_command)


# ---- the one place errors become exit codes ------------------------------------------------


_GLOBAL_WITH_VALUE = ("-C", "--profile")


def command_for(argv: Sequence[str]) -> Any:
    """The click command typer builds for the app, with only the command `argv` names (and
    the global options): typer reads the signature of every command it is given, which
    costs more than most commands' own work. Anything else (no command, a flag before
    it, a name that is not a command) gets the whole app, with its help and its errors."""
    name = None
    tokens = iter(argv)
    for token in tokens:
        if token in _GLOBAL_WITH_VALUE:
            next(tokens, None)
        elif token.startswith("-C") or token.startswith("--profile="):
            continue
        elif not token.startswith("-"):
            name = token
            break
        else:
            break
    return _command_named(name if name in _command_names() else None)


def _name_of(info: typer.models.CommandInfo) -> str | None:
    if info.callback is None:
        return None
    return info.name or typer.main.get_command_name(info.callback.__name__)


@functools.cache
def _command_names() -> frozenset[str]:
    commands = {name for info in app.registered_commands if (name := _name_of(info))}
    return frozenset(commands | {str(info.name) for info in app.registered_groups})


@functools.cache
def _command_named(name: str | None) -> Any:
    """Built once per process (the MCP server runs many commands; click commands are
    reused from one run to the next); None: the whole app."""
    if name is None:
        return typer.main.get_command(app)
    partial = copy.copy(app)
    partial.registered_commands = [
        info for info in app.registered_commands if _name_of(info) == name
    ]
    partial.registered_groups = [info for info in app.registered_groups if info.name == name]
    return typer.main.get_command(partial)


def dispatch(command: Any, argv: Sequence[str], invocation: Invocation) -> int:
    """`argv` read by typer (`command`: `command_for(argv)`) and run: typer's own refusals
    become exit codes here; majordomus' errors go on to `__main__.run`, which answers them."""
    terminal = invocation.terminal
    instruction = invocation.environ.get("_MAJORDOMUS_COMPLETE")
    if instruction:  # the completion script asking, as the user presses Tab
        return completion.answer(command, instruction, invocation)
    try:
        with (
            contextlib.redirect_stdout(terminal.stdout),
            contextlib.redirect_stderr(terminal.stderr),
        ):
            result: Any = command.main(
                args=list(argv), prog_name="majordomus", standalone_mode=False, obj=invocation
            )
    except typer.Exit as done:
        return int(done.exit_code)
    except SystemExit as stop:
        # typer's answer to a reader that left (EPIPE: `majordomus history | head`) is
        # exit 1, here a negative answer: the reader had what it wanted, as `__main__.run`
        # answers a closed pipe for every command.
        gone = stop.__context__
        if isinstance(gone, OSError) and gone.errno == errno.EPIPE:
            return 0
        raise
    except typer.TyperException as error:
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        if getattr(error, "exit_code", 2) == 0:
            return 0
        usage = getattr(error, "ctx", None)
        hint = f" (see {usage.command_path} --help)" if usage is not None else ""
        terminal.stderr.write(f"majordomus: {plaintext.safe(message)}{hint}\n")
        return int(ExitCode.REFUSED)
    if result == 130:
        # typer's own answer to a KeyboardInterrupt: an exit status no command of ours
        # returns, and no word said.
        interrupt.heard()
        terminal.stderr.write(f"majordomus: {interrupt.message()}\n")
    return int(result) if isinstance(result, int) else 0
