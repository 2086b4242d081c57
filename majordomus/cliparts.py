"""What every command's declaration shares, in `cli`, `readcli` and `setupcli`: the
options several commands take, and how a command runs its verb."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from majordomus.invocation import Invocation

if TYPE_CHECKING:
    from collections.abc import Callable


def invocation_of(ctx: typer.Context) -> Invocation:
    invocation = ctx.find_root().obj
    assert isinstance(invocation, Invocation)
    return invocation


def run_with(ctx: typer.Context, command: Callable[..., int]) -> None:
    """A verb module's command function, given what typer read (its parameters are the
    function's own, by name: see tests/test_front.py), and its exit code the way typer
    exits."""
    code = command(invocation_of(ctx), **ctx.params)
    if code:
        raise typer.Exit(int(code))


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
TaskOpt = Annotated[
    str | None,
    typer.Option(
        "--task",
        "-t",
        metavar="TASK",
        help="Task id or a unique prefix of 4+ hex digits (beats MAJORDOMUS_TASK and the "
        "current task).",
    ),
]
SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session", metavar="TEXT", help="Free text naming the session (or MAJORDOMUS_SESSION)."
    ),
]
AllowSecretOpt = Annotated[
    bool,
    typer.Option(
        "--allow-secret",
        help="Record text that looks like a key or token anyway (notes are pushed and permanent).",
    ),
]
FileOpt = Annotated[
    str | None,
    typer.Option("--file", "-F", metavar="FILE", help="Read the text from FILE, or - for stdin."),
]
