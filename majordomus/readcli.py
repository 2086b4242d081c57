"""The command line's read commands, as typer reads them (history, show, grep, check,
watch). `cli` adds them to its app after the session's own writes, in this order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from majordomus.cliparts import JsonOpt, TaskOpt, run_with
from majordomus.invocation import OnFirstUse

if TYPE_CHECKING:
    from majordomus import freshness, read, search
else:
    freshness = OnFirstUse("majordomus.freshness")
    read = OnFirstUse("majordomus.read")
    search = OnFirstUse("majordomus.search")

app = typer.Typer()  # what cli adds to its own app: these commands are declared here only


@app.command()
def history(
    ctx: typer.Context,
    rev: Annotated[
        str | None,
        typer.Argument(
            metavar="REV",
            help="Read from this commit (default HEAD).",
        ),
    ] = None,
    include_all: Annotated[
        bool, typer.Option("--all", help="Also records on commits not reachable from REV.")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", metavar="N", help="Show at most N records.")
    ] = None,
    task: Annotated[
        str | None,
        typer.Option("--task", "-t", metavar="TASK", help="Only this task (default: every task)."),
    ] = None,
    as_json: JsonOpt = False,
    graph: Annotated[
        bool,
        typer.Option("--graph", help="Draw the records on the commit graph, as git log --graph."),
    ] = False,
) -> None:
    """Records on commits reachable from REV, newest first; handovers with their label.

    Examples:

    \b
      majordomus history -n 5
      majordomus history --all --json
      majordomus history --graph
    """
    run_with(ctx, read.history_command)


@app.command()
def show(
    ctx: typer.Context,
    rev: Annotated[
        str | None,
        typer.Argument(metavar="REV", help="The commit (default HEAD)."),
    ] = None,
    as_json: JsonOpt = False,
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown",
            help="Print Markdown, for a CI job summary or a pull-request comment "
            "(note text is shown in code blocks, never interpreted).",
        ),
    ] = False,
) -> None:
    """The records attached to one commit: what CI reads.

    Examples:

    \b
      majordomus show
      majordomus show HEAD~1 --json
      majordomus show --markdown
    """
    run_with(ctx, read.show_command)


@app.command()
def grep(
    ctx: typer.Context,
    pattern: Annotated[
        str | None, typer.Argument(metavar="PATTERN", help="A Python regular expression.")
    ] = None,
    task: Annotated[
        str | None,
        typer.Option("--task", "-t", metavar="TASK", help="Only this task (default: every task)."),
    ] = None,
    include_all: Annotated[
        bool, typer.Option("--all", help="Also records on commits not reachable from HEAD.")
    ] = False,
    ignore_case: Annotated[
        bool, typer.Option("--ignore-case", "-i", help="Match upper and lower case alike.")
    ] = False,
    fixed: Annotated[bool, typer.Option("--fixed-strings", "-F", help="A fixed string.")] = False,
    extended: Annotated[
        bool, typer.Option("--extended-regexp", "-E", help="A regular expression (the default).")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", metavar="N", help="Show at most N records.")
    ] = None,
    trusted: Annotated[
        bool, typer.Option("--trusted", help='Under trust = "signed": verified records only.')
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Records with a line of text (bodies, handover fields, titles, sessions) matching
    PATTERN, newest first. Exit 0 when one matched, 1 when none did (docs/grep.md).

    Examples:

    \b
      majordomus grep -i 'REPRODUCED with'
      majordomus grep -F 'ack()' --task TASK --json
      majordomus grep 'dropped|race' --all
    """
    run_with(ctx, search.grep_command)


@app.command()
def check(
    ctx: typer.Context,
    all_tasks: Annotated[bool, typer.Option("--all", help="Every task, one line each.")] = False,
    task: TaskOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Age of the last checkpoint against the profile's interval. Exit 0 fresh, 1 stale.

    Examples:

    \b
      majordomus check
      majordomus check --all --json
    """
    run_with(ctx, freshness.check_command)


@app.command()
def watch(
    ctx: typer.Context,
    every: Annotated[
        float, typer.Option("--every", metavar="SECONDS", help="Seconds between looks.")
    ] = 5.0,
    count: Annotated[
        int | None, typer.Option("--count", metavar="N", help="Stop after N reports.")
    ] = None,
    seconds: Annotated[
        float | None,
        typer.Option("--seconds", metavar="SECONDS", help="Stop after about SECONDS seconds."),
    ] = None,
    task: TaskOpt = None,
) -> None:
    """Keep reporting what check reports; Ctrl-C stops (exit 0).

    On a terminal the line is redrawn in place; otherwise a line is printed each
    time the status, the last checkpoint or the open handover changes.

    Examples:

    \b
      majordomus watch --every 60 --count 1
      majordomus watch --task TASK --count 3
    """
    run_with(ctx, freshness.watch_command)
