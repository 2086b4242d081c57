"""The commands a session, an agent and CI run most (checkpoint, handover, resume, history,
show, check, fetch, context, grep), read without typer when written the plain way (`plain`)
and run by their verb module's command function (`dispatch`); every other command line
goes on to typer (`cli`).

Loading typer and building a command's parser cost 20-30 ms, about as much as a
checkpoint itself or a warm read's whole work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from majordomus.invocation import Invocation, OnFirstUse
from majordomus.tuples import NamedTuple

if TYPE_CHECKING:
    from majordomus import context, freshness, read, search, sharing, write
else:
    context = OnFirstUse("majordomus.context")
    freshness = OnFirstUse("majordomus.freshness")
    read = OnFirstUse("majordomus.read")
    search = OnFirstUse("majordomus.search")
    sharing = OnFirstUse("majordomus.sharing")
    write = OnFirstUse("majordomus.write")


class Grammar(NamedTuple):
    """A command's plain form: its one optional argument and its options taking a text or
    nothing, each spelling named by the parameter it sets (as typer declares them: a test
    keeps the two equal). An option taking a number is left out: typer reads it."""

    argument: str | None
    valued: Mapping[str, str]
    flags: Mapping[str, str]


_TASK = {"--task": "task", "-t": "task"}
_JSON = {"--json": "as_json"}
GRAMMARS = {
    "checkpoint": Grammar(
        "text",
        {**_TASK, "--session": "session_name", "--file": "file", "-F": "file"},
        {**_JSON, "--allow-secret": "allow_secret"},
    ),
    "handover": Grammar(
        None,
        {
            **_TASK,
            "--objective": "objective",
            "-o": "objective",
            "--state": "state",
            "-s": "state",
            "--next": "next_action",
            "-n": "next_action",
            "--session": "session_name",
            "--file": "file",
            "-F": "file",
        },
        {**_JSON, "--allow-secret": "allow_secret"},
    ),
    "resume": Grammar(None, {**_TASK, "--session": "session_name"}, {**_JSON, "--peek": "peek"}),
    "history": Grammar("rev", _TASK, {**_JSON, "--all": "include_all", "--graph": "graph"}),
    "show": Grammar("rev", {}, {**_JSON, "--markdown": "markdown"}),
    "check": Grammar(None, _TASK, {**_JSON, "--all": "all_tasks"}),
    "fetch": Grammar("remote", {}, _JSON),
    "context": Grammar(None, _TASK, _JSON),
    "grep": Grammar(
        "pattern",
        _TASK,
        {
            **_JSON,
            "--all": "include_all",
            "--ignore-case": "ignore_case",
            "-i": "ignore_case",
            "--fixed-strings": "fixed",
            "-F": "fixed",
            "--extended-regexp": "extended",
            "-E": "extended",
            "--trusted": "trusted",
        },
    ),
}
_GLOBALS = frozenset({"-C", "--profile"})  # before the command, each with its value
# The module of each command of GRAMMARS: its `<command>_command` runs it.
MODULES: Mapping[str, ModuleType] = {
    "checkpoint": write,
    "handover": write,
    "resume": write,
    "history": read,
    "show": read,
    "check": freshness,
    "fetch": sharing,
    "context": context,
    "grep": search,
}


class PlainCommand(NamedTuple):
    """A command line written the plain way, as `plain` reads it."""

    command: str
    directories: tuple[str, ...]  # -C, in order
    profile: str | None
    params: dict[str, str | bool]  # the command's parameters given, by name


def plain(argv: Sequence[str]) -> PlainCommand | None:
    """`argv` when it is one of the commands of GRAMMARS written the plain way, read as
    typer reads it: the global options (`-C PATH`, `--profile NAME`) before the command,
    then its argument and its own options in any order, each option spelt in full and
    given once (`-C` as often as wanted), each option's value and the argument a token of
    its own that does not start with `-` (a value may be `-` itself: stdin). Anything else
    (help, `--`, an unknown, abbreviated, joined or repeated option, a second argument, a
    number) is None: typer reads it, and answers or refuses it with its own words."""
    directories: tuple[str, ...] = ()
    profile: str | None = None
    tokens = iter(argv)
    for token in tokens:
        grammar = GRAMMARS.get(token)
        if grammar is not None:
            command = token
            break
        value = next(tokens, None)
        repeated = token == "--profile" and profile is not None
        if token not in _GLOBALS or not _is_value(value) or repeated:
            return None
        assert value is not None
        if token == "-C":
            directories = (*directories, value)
        else:
            profile = value
    else:
        return None
    params: dict[str, str | bool] = {}
    for token in tokens:
        name = grammar.valued.get(token)
        if name is not None:
            value = next(tokens, None)
            if name in params or not _is_value(value):
                return None
            assert value is not None
            params[name] = value
        elif token in grammar.flags:
            if grammar.flags[token] in params:
                return None
            params[grammar.flags[token]] = True
        elif grammar.argument is None or grammar.argument in params or not _is_text(token):
            return None
        else:
            params[grammar.argument] = token
    return PlainCommand(command, directories, profile, params)


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


def dispatch(found: PlainCommand, invocation: Invocation) -> int:
    """The command `found` names, run with what it was given: its exit code."""
    body: Callable[..., int] = getattr(MODULES[found.command], f"{found.command}_command")
    return int(body(invocation.located(found.directories, found.profile), **found.params))
