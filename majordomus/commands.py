"""What a command runs with (its terminal, environment, clock, directory and profile: an
`Invocation`), and the commands both readers of the command line run, typer in `cli` and
`front` for a command line written the plain way: each returns its exit code."""

from __future__ import annotations

import datetime
import importlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from majordomus.errors import ExitCode, RefusedError
from majordomus.records import TEXT_CEILING
from majordomus.values import CONTEXT_DEFAULT_CHARS

if TYPE_CHECKING:
    from majordomus import jsontext, markdowntext, ops, plaintext, render, reports
    from majordomus.values import StaleLock


class OnFirstUse:
    """A module imported when a command first uses it: `--version`, `--help` and a refused
    flag answer without loading git (pygit2) and everything behind `ops`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


if not TYPE_CHECKING:
    jsontext = OnFirstUse("majordomus.jsontext")
    markdowntext = OnFirstUse("majordomus.markdowntext")
    ops = OnFirstUse("majordomus.ops")
    plaintext = OnFirstUse("majordomus.plaintext")
    render = OnFirstUse("majordomus.render")
    reports = OnFirstUse("majordomus.reports")


class Terminal(NamedTuple):
    """The streams and facts about them that a command may use."""

    stdin: IO[bytes]
    stdout: IO[str]
    stderr: IO[str]
    is_tty: bool
    colour: bool


class Invocation(NamedTuple):
    """What `run` hands to every command (through typer's context, where the global
    options replace it with a changed copy)."""

    terminal: Terminal
    environ: Mapping[str, str]
    now: Callable[[], datetime.datetime]
    sleep: Callable[[float], None]
    cwd: str = "."
    profile: str | None = None
    # What runs a whole command line as `majordomus` does (`front.run`): the MCP server's
    # tools run theirs through it.
    command_line: Callable[..., int] | None = None

    def context(self) -> ops.Context:
        return ops.Context(
            cwd=self.cwd,
            environ=self.environ,
            profile_name=self.profile,
            now=self.now,
            sleep=self.sleep,
            warn=self.warn,
        )

    def located(self, directories: Iterable[str], profile: str | None) -> Invocation:
        """The invocation the global options make: each `-C` relative to the one before."""
        cwd = self.cwd
        for path in directories:
            cwd = os.path.join(cwd, path)
        return self._replace(cwd=cwd, profile=profile)

    def read_file(self, file: str, what: str) -> str:
        """The text of `-F FILE` (from where `-C` went) or `-F -` (standard input)."""
        return ops.read_input_file(self.context(), file, self.terminal.stdin, what, TEXT_CEILING)

    def out(self, text: str) -> None:
        self.terminal.stdout.write(text + "\n")

    def out_parts(self, parts: Iterable[str]) -> None:
        """`out` of the parts' text, each written as it comes."""
        for part in parts:
            self.terminal.stdout.write(part)
        self.terminal.stdout.write("\n")

    def warn(self, text: str) -> None:
        self.terminal.stderr.write(f"majordomus: warning: {plaintext.safe(text)}\n")

    def locks(self, locks: Sequence[StaleLock]) -> None:
        for lock in locks:
            self.warn(
                f"{lock.path} is {lock.age_s} s old; if no git or "
                f"majordomus process is running, remove it (rm '{lock.path}')."
            )


def checkpoint(
    invocation: Invocation,
    text: str | None = None,
    file: str | None = None,
    task: str | None = None,
    session_name: str | None = None,
    allow_secret: bool = False,
    as_json: bool = False,
) -> int:
    if (text is None) == (file is None):
        raise RefusedError("give the checkpoint text as an argument or with -F FILE (- for stdin).")
    if file is not None:
        text = invocation.read_file(file, "checkpoint body")
    assert text is not None
    result = ops.checkpoint(invocation.context(), text, task, session_name, allow_secret)
    invocation.locks(result.stale_locks)
    invocation.out(render.checkpoint(result, as_json))
    return ExitCode.OK


def handover(
    invocation: Invocation,
    objective: str | None = None,
    state: str | None = None,
    next_action: str | None = None,
    file: str | None = None,
    task: str | None = None,
    session_name: str | None = None,
    allow_secret: bool = False,
    as_json: bool = False,
) -> int:
    fields: dict[str, str | None] = {"objective": objective, "state": state, "next": next_action}
    if file is not None:
        if any(value is not None for value in fields.values()):
            raise RefusedError(
                "give the handover either with -F FILE or with the three flags, not both."
            )
        source = "standard input" if file == "-" else file
        fields = dict(ops.parse_handover_file(invocation.read_file(file, "handover file"), source))
    result = ops.handover(invocation.context(), fields, task, session_name, allow_secret)
    invocation.locks(result.stale_locks)
    if result.dirty:
        invocation.warn(
            "the work tree has uncommitted changes; the handover is attached to "
            f"{result.record.commit[:12]}, which does not contain them."
        )
    invocation.out(render.handover(result, as_json))
    return ExitCode.OK


def resume(
    invocation: Invocation,
    peek: bool = False,
    task: str | None = None,
    session_name: str | None = None,
    as_json: bool = False,
) -> int:
    result = ops.resume(invocation.context(), task, peek, session_name)
    invocation.locks(result.stale_locks)
    if result.implied:
        made = "" if peek else "; it is now the current task here"
        invocation.terminal.stderr.write(
            f"majordomus: no current task: took {plaintext.safe(result.task)}, the one task with "
            f"an open handover reachable from HEAD{made}.\n"
        )
    if result.handover is None:
        if as_json:
            invocation.out(render.resume_json(result))
        else:
            invocation.terminal.stderr.write(
                f"majordomus: no open handover for {plaintext.safe(result.task)}; "
                "nothing to resume.\n"
            )
            invocation.out(render.resume_nothing_open(result))
        return ExitCode.NEGATIVE
    invocation.out(render.resume(result, invocation.now(), as_json))
    return ExitCode.OK


def history(
    invocation: Invocation,
    rev: str | None = None,
    include_all: bool = False,
    limit: int | None = None,
    task: str | None = None,
    as_json: bool = False,
) -> int:
    result = ops.history(invocation.context(), rev, task, include_all, limit, as_json)
    invocation.out_parts(render.history_parts(result, as_json))
    return ExitCode.OK


def show(
    invocation: Invocation, rev: str | None = None, as_json: bool = False, markdown: bool = False
) -> int:
    if as_json and markdown:
        raise RefusedError("give --json or --markdown, not both.")
    result = ops.show(invocation.context(), rev)
    if result.missing:
        invocation.warn(
            f"{result.commit[:12]} names no commit in this clone; listing what the notes hold "
            "for it (fetch the commit to see it in history)."
        )
    invocation.out(markdowntext.show(result) if markdown else render.show(result, as_json))
    return ExitCode.OK


def check(
    invocation: Invocation, all_tasks: bool = False, task: str | None = None, as_json: bool = False
) -> int:
    results = ops.check(invocation.context(), task, all_tasks)
    invocation.out(render.check(results, as_json, invocation.terminal.colour, all_tasks))
    return ExitCode.NEGATIVE if any(result.stale for result in results) else ExitCode.OK


def fetch(invocation: Invocation, remote: str | None = None, as_json: bool = False) -> int:
    invocation.out(reports.fetch(ops.fetch(invocation.context(), remote), as_json))
    return ExitCode.OK


def context(
    invocation: Invocation,
    max_chars: int = CONTEXT_DEFAULT_CHARS,
    task: str | None = None,
    as_json: bool = False,
) -> int:
    from majordomus import context as contexts

    result = contexts.build(invocation.context(), max_chars, task)
    if as_json:
        invocation.out(
            jsontext.dumps(
                {
                    "task": result.task,
                    "text": result.text,
                    "chars": result.chars,
                    "included": list(result.included),
                    "omitted": result.omitted,
                }
            )
        )
    else:
        invocation.out(result.text)
    return ExitCode.OK
