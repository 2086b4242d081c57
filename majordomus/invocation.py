"""What a command runs with: its terminal, environment, clock, directory and profile (an
`Invocation`, what `run` hands every command function), the part of it a verb's work
takes (`Inputs`), the text a command reads from `-F FILE` or standard input, and the
modules a command loads when it first uses them (`OnFirstUse`)."""

from __future__ import annotations

import datetime
import importlib
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from majordomus.errors import RefusedError
from majordomus.records import TEXT_CEILING
from majordomus.tuples import NamedTuple

if TYPE_CHECKING:
    from majordomus import plaintext
    from majordomus.values import StaleLock

INPUT_MAX_BYTES = 64 * 1024  # no cap is near this: larger input is refused unread


class OnFirstUse:
    """A module imported when a command first uses it: `--version`, `--help` and a refused
    flag answer without loading git (pygit2) and everything behind the verbs."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


if not TYPE_CHECKING:
    plaintext = OnFirstUse("majordomus.plaintext")


class Inputs(NamedTuple):
    """What a verb's work takes from the command that runs it: where it started (after
    `-C`), the environment, the profile named, the clock, how to wait, and where a
    warning goes."""

    cwd: str
    environ: Mapping[str, str]
    profile_name: str | None = None
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    sleep: Callable[[float], None] = time.sleep
    warn: Callable[[str], None] | None = None  # a warning line on stderr; None: not said


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
    # What runs a whole command line as `majordomus` does (`__main__.run`): the MCP
    # server's tools run theirs through it.
    command_line: Callable[..., int] | None = None

    def inputs(self) -> Inputs:
        return Inputs(
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
        return read_input_file(self.cwd, file, self.terminal.stdin, what, TEXT_CEILING)

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


def read_bounded(stream: IO[bytes], what: str, cap: int) -> str:
    """Read text input, refusing (unread) anything larger than INPUT_MAX_BYTES."""
    data = stream.read(INPUT_MAX_BYTES + 1)
    if len(data) > INPUT_MAX_BYTES:
        raise RefusedError(
            f"{what} is over {INPUT_MAX_BYTES} bytes, far over the cap of {cap} characters; "
            "nothing was recorded."
        )
    try:
        # A byte-order mark some editors put first is no part of the text.
        return bytes(data).decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise RefusedError(f"{what} is not UTF-8 text; nothing was recorded.") from None


def read_input_file(cwd: str, source: str, stdin: IO[bytes], what: str, cap: int) -> str:
    """Text from `-F FILE` (relative to `cwd`, where `-C` went, as `git -C` reads
    `commit -F`) or `-F -` (standard input)."""
    if source == "-":
        return read_bounded(stdin, what, cap)
    try:
        with open(os.path.join(cwd, source), "rb") as handle:
            return read_bounded(handle, what, cap)
    except OSError as error:
        raise RefusedError(
            f"cannot read {source} ({error.strerror}); nothing was recorded."
        ) from None
