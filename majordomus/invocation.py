"""What a command runs with: its terminal, environment, clock, directory and profile (an
`Invocation`), and `checkpoint`, the one command both readers of the command line run
(typer in `cli`, and `front` for a checkpoint written the plain way)."""

from __future__ import annotations

import datetime
import importlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from majordomus.errors import RefusedError
from majordomus.records import TEXT_CEILING

if TYPE_CHECKING:
    from majordomus import ops, render
    from majordomus.values import StaleLock


class OnFirstUse:
    """A module imported when a command first uses it: `--version`, `--help` and a refused
    flag answer without loading git (pygit2) and everything behind `ops`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


if not TYPE_CHECKING:
    ops = OnFirstUse("majordomus.ops")
    render = OnFirstUse("majordomus.render")


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

    def context(self) -> ops.Context:
        return ops.Context(
            cwd=self.cwd,
            environ=self.environ,
            profile_name=self.profile,
            now=self.now,
            sleep=self.sleep,
        )

    def located(self, directories: Iterable[str], profile: str | None) -> Invocation:
        """The invocation the global options make: each `-C` relative to the one before."""
        cwd = self.cwd
        for path in directories:
            cwd = os.path.join(cwd, path)
        return self._replace(cwd=cwd, profile=profile)

    def out(self, text: str) -> None:
        self.terminal.stdout.write(text + "\n")

    def out_parts(self, parts: Iterable[str]) -> None:
        """`out` of the parts' text, each written as it comes."""
        for part in parts:
            self.terminal.stdout.write(part)
        self.terminal.stdout.write("\n")

    def warn(self, text: str) -> None:
        self.terminal.stderr.write(f"majordomus: warning: {render.safe(text)}\n")

    def locks(self, locks: Sequence[StaleLock]) -> None:
        for lock in locks:
            self.warn(
                f"{lock.path} is {lock.age_s} s old; if no git or "
                f"majordomus process is running, remove it (rm '{lock.path}')."
            )


def run_checkpoint(
    invocation: Invocation,
    text: str | None,
    file: str | None,
    task: str | None,
    session: str | None,
    allow_secret: bool,
    as_json: bool,
) -> None:
    """`majordomus checkpoint`, however its command line was read."""
    if (text is None) == (file is None):
        raise RefusedError("give the checkpoint text as an argument or with -F FILE (- for stdin).")
    if file is not None:
        stdin = invocation.terminal.stdin
        text = ops.read_input_file(
            invocation.context(), file, stdin, "checkpoint body", TEXT_CEILING
        )
    assert text is not None
    result = ops.checkpoint(invocation.context(), text, task, session, allow_secret)
    invocation.locks(result.stale_locks)
    invocation.out(render.checkpoint(result, as_json))
