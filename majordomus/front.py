"""The front of the command line, without typer: `run`, the one place errors become exit
codes, and the write a session makes most, `checkpoint TEXT`, read here; every other
command line goes on to typer (`cli`).

A session checkpoints many times an hour, from a prompt or an agent's tool call, and
loading typer and building its command costs about as much as the write itself.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from majordomus import interrupt
from majordomus.errors import MajordomusError
from majordomus.invocation import Invocation, OnFirstUse, Terminal, run_checkpoint

if TYPE_CHECKING:
    from majordomus import render
else:
    render = OnFirstUse("majordomus.render")


class PlainCheckpoint(NamedTuple):
    """A `checkpoint` command line as `plain_checkpoint` reads it."""

    directories: tuple[str, ...]  # -C, in order
    profile: str | None
    text: str | None
    file: str | None
    task: str | None
    session: str | None
    allow_secret: bool
    as_json: bool


_GLOBALS = {"-C": "directories", "--profile": "profile"}
_VALUED = {"--task": "task", "-t": "task", "--session": "session", "--file": "file", "-F": "file"}
_FLAGS = {"--json": "as_json", "--allow-secret": "allow_secret"}


def plain_checkpoint(argv: Sequence[str]) -> PlainCheckpoint | None:
    """`argv` when it is a checkpoint written the plain way, read as typer reads it: the
    global options (`-C PATH`, `--profile NAME`) before the command, then the text and the
    command's own options in any order, each option spelt in full and given once (`-C` as
    often as wanted), each option's value and the text a token of its own that does not
    start with `-` (a value may be `-` itself: stdin). Anything else (help, `--`, an
    unknown, abbreviated, joined or repeated option, a second text) is None: typer reads
    it, and answers or refuses it with its own words."""
    found: dict[str, Any] = {"directories": ()}
    tokens = iter(argv)
    for token in tokens:
        if token == "checkpoint":
            break
        field = _GLOBALS.get(token)
        value = next(tokens, None)
        if field is None or not _is_value(value) or (field in found and field == "profile"):
            return None
        found[field] = (*found["directories"], value) if field == "directories" else value
    else:
        return None
    for token in tokens:
        field = _VALUED.get(token)
        if field is not None:
            value = next(tokens, None)
            if field in found or not _is_value(value):
                return None
            found[field] = value
        elif token in _FLAGS:
            if _FLAGS[token] in found:
                return None
            found[_FLAGS[token]] = True
        elif "text" in found or not _is_text(token):
            return None
        else:
            found["text"] = token
    return PlainCheckpoint(
        directories=found["directories"],
        profile=found.get("profile"),
        text=found.get("text"),
        file=found.get("file"),
        task=found.get("task"),
        session=found.get("session"),
        allow_secret=found.get("allow_secret", False),
        as_json=found.get("as_json", False),
    )


def _is_text(token: str) -> bool:
    if token.startswith("-"):
        return False
    if token.isascii():
        return True
    try:  # a name the system could not decode (surrogate escapes): typer's to read
        token.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_value(token: str | None) -> bool:
    return token is not None and (token == "-" or _is_text(token))


def run(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    now: Callable[[], datetime.datetime] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    is_tty: bool | None = None,
) -> int:
    """The command line `argv` (the program name left out) run to its exit code."""
    env = dict(os.environ if environ is None else environ)
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    tty = _is_tty(out) if is_tty is None else is_tty
    terminal = Terminal(
        stdin=stdin if stdin is not None else sys.stdin.buffer,
        stdout=out,
        stderr=err,
        is_tty=tty,
        colour=tty and "NO_COLOR" not in env and env.get("TERM") != "dumb",
    )
    invocation = Invocation(
        terminal=terminal,
        environ=env,
        now=now or (lambda: datetime.datetime.now(datetime.UTC)),
        sleep=sleep,
    )
    plain = plain_checkpoint(argv)
    if plain is None:
        from majordomus import cli  # typer, and every command

        command = cli.command_for(argv)
    interrupt.reset()
    try:
        if plain is None:
            return cli.dispatch(command, argv, invocation)
        run_checkpoint(
            invocation.located(plain.directories, plain.profile),
            plain.text,
            plain.file,
            plain.task,
            plain.session,
            plain.allow_secret,
            plain.as_json,
        )
        return 0
    except MajordomusError as error:
        # Messages can quote notes (task ids, say): escaped like every other output.
        err.write(f"majordomus: {render.safe(error.message)}\n")
        return int(error.code)
    except KeyboardInterrupt:  # interrupt.Interrupted included
        interrupt.heard()
        err.write(f"majordomus: {interrupt.message()}\n")
        return 130
    except BrokenPipeError:
        return 0
    finally:
        with contextlib.suppress(Exception):
            out.flush()


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
