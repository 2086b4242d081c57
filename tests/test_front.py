"""The commands a session and CI run most, written the plain way, are read without typer
(`front.plain`) as typer reads them: the grammar of each is typer's own, every command
line read plainly gives the values typer gives, and the same answer and records; every
other command line is left to typer, which answers it."""

from __future__ import annotations

import datetime
import functools
import inspect
import io
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus import cli, front
from majordomus.invocation import Invocation, Terminal
from tests.support.env import START, Clock, hermetic_environ
from tests.support.git import bare, git
from tests.support.notes import stored_records
from tests.support.repo import Repo, clone


def _body(name: str) -> Any:
    """The command function that runs the command `name` (its verb module's)."""
    return getattr(front.MODULES[name], f"{name}_command")


def _declared(name: str) -> front.Grammar:
    """The plain grammar of a command as typer declares it: its one argument, and its
    options taking a text or nothing (a number is typer's to read)."""
    group = cli.command_for([name])
    command = group.commands[name]
    argument = None
    valued: dict[str, str] = {}
    flags: dict[str, str] = {}
    for param in command.params:
        if param.param_type_name == "argument":
            assert argument is None and not param.required, name
            argument = param.name
        elif param.is_flag:
            flags.update((spelling, param.name) for spelling in param.opts)
        elif type(param.type).__name__ == "StringParamType":
            valued.update((spelling, param.name) for spelling in param.opts)
    return front.Grammar(argument, valued, flags)


@pytest.mark.parametrize("name", sorted(front.GRAMMARS))
def test_each_plain_grammar_is_what_typer_declares(name: str) -> None:
    assert front.GRAMMARS[name] == _declared(name)


@pytest.mark.parametrize("name", sorted(front.GRAMMARS))
def test_typer_s_command_and_its_body_take_the_same_parameters(name: str) -> None:
    """typer's command hands the body what it read by name (`setupcli.run_with`)."""

    def taken(function: Any, first: str) -> list[tuple[str, Any]]:
        params = list(inspect.signature(function).parameters.values())
        assert params[0].name == first
        return [(param.name, param.default) for param in params[1:]]

    declared = [i.callback for i in cli.app.registered_commands if cli._name_of(i) == name]
    assert len(declared) == 1
    assert taken(declared[0], "ctx") == taken(_body(name), "invocation")


def test_a_number_an_option_without_its_value_and_no_command_are_typer_s_to_read() -> None:
    assert front.plain(["history", "--limit", "3"]) is None
    assert front.plain(["history", "-n", "3"]) is None
    assert front.plain(["history", "--task"]) is None
    assert front.plain(["-C"]) is None
    assert front.plain(["-C", "sub"]) is None
    assert front.plain([]) is None


_GLOBALS = [
    ["-C", "sub"], ["-C", ".."], ["-C", "-"], ["--profile", "ci"], ["--profile", "-"],
    ["--profile", ""],
]  # fmt: skip
_VALUES = ["t-0123", "0123", "night shift", "-", "body.txt", "", "ünïcode", "HEAD~1"]
# Tokens a plain command line never holds: typer reads (and answers, or refuses) them.
_ODD = [
    ["--"], ["-h"], ["--help"], ["--version"], ["--task=t-0123"], ["-t0123"], ["-Csub"],
    ["--profile=ci"], ["--jso"], ["--json=yes"], ["-x"], ["-5 ms"], ["--session", "--json"],
    ["-F", "-F"], ["\udcff"], ["--limit", "2"], ["-n", "2"],
]  # fmt: skip


@functools.cache
def _defaults() -> dict[str, dict[str, Any]]:
    """Each plain command's parameters left out, as its command function declares them."""
    return {
        name: {
            key: param.default for key, param in inspect.signature(_body(name)).parameters.items()
        }
        for name in front.GRAMMARS
    }


def _read_by_typer(argv: Sequence[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """What typer hands the command for `argv`; None when it runs none of GRAMMARS."""
    seen: list[dict[str, Any]] = []

    def recorder(name: str) -> Any:
        def record(invocation: Invocation, **params: Any) -> int:
            given = {k: v for k, v in params.items() if v != defaults[name][k]}
            seen.append({"command": name, "cwd": invocation.cwd, "profile": invocation.profile})
            seen[-1]["params"] = given
            return 0

        return record

    defaults = _defaults()  # of the commands themselves, before they are replaced
    for name in front.GRAMMARS:
        module = sys.modules[_body(name).__module__]
        monkeypatch.setattr(module, f"{name}_command", recorder(name))
    err = io.StringIO()
    terminal = Terminal(io.BytesIO(), io.StringIO(), err, is_tty=False, colour=False)
    invocation = Invocation(terminal, {}, lambda: START, lambda _: None)
    code = cli.dispatch(cli.command_for(argv), argv, invocation)
    assert code == 0 or not seen, (argv, code, err.getvalue())
    return seen[0] if seen else None


def _read_plainly(argv: Sequence[str]) -> dict[str, Any] | None:
    found = front.plain(argv)
    if found is None:
        return None
    cwd = "."
    for path in found.directories:
        cwd = os.path.join(cwd, path)
    params = dict(found.params)  # only what was given: a text, or a flag given (True)
    return {"command": found.command, "cwd": cwd, "profile": found.profile, "params": params}


@st.composite
def command_lines(draw: st.DrawFn) -> tuple[list[str], bool]:
    """A command line, and whether it is written the plain way (then it must be read so)."""
    name = draw(st.sampled_from(sorted(front.GRAMMARS)))
    grammar = front.GRAMMARS[name]
    parts = [[*g] for g in draw(st.lists(st.sampled_from(_GLOBALS), max_size=3))]
    plain = sum(part[0] == "--profile" for part in parts) <= 1
    own: list[list[str]] = []
    used: set[str] = set()
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["valued", "flag", "argument", "odd"]))
        if kind == "valued" and grammar.valued:
            spelling = draw(st.sampled_from(sorted(grammar.valued)))
            own.append([spelling, draw(st.sampled_from(_VALUES))])
            field = grammar.valued[spelling]
        elif kind == "flag":
            spelling = draw(st.sampled_from(sorted(grammar.flags)))
            own.append([spelling])
            field = grammar.flags[spelling]
        elif kind == "argument":
            own.append([draw(st.sampled_from([v for v in _VALUES if not v.startswith("-")]))])
            field = str(grammar.argument)
            plain = plain and grammar.argument is not None
        else:
            odd = [o for o in _ODD if o[0] not in grammar.valued and o[0] not in grammar.flags]
            own.append(draw(st.sampled_from(odd)))  # (`-n 2` is handover's --next)
            field, plain = "odd", False
        plain = plain and field not in used
        used.add(field)
    argv = [*(t for part in parts for t in part), name, *(t for part in own for t in part)]
    return argv, plain


@settings(max_examples=400, deadline=None)
@given(command_lines())
def test_every_command_line_read_plainly_is_read_so_by_typer(line: tuple[list[str], bool]) -> None:
    argv, written_plainly = line
    plain = _read_plainly(argv)
    with pytest.MonkeyPatch.context() as monkeypatch:
        by_typer = _read_by_typer(argv, monkeypatch)
    if plain is not None:
        assert plain == by_typer, argv
    assert (plain is not None) == written_plainly, argv


def _same_clone(
    path: Path, environ: dict[str, str], clock: Clock, remote: Path
) -> tuple[Repo, str]:
    """One of two clones made alike: a task, checkpoints and a handover, a commit after."""
    repo = clone(str(remote), path, environ, clock)
    repo.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/remotes/origin/majordomus")
    (path / "sub").mkdir()
    (path / "body.txt").write_text("from a file\n")
    task = repo.task()
    for n in range(3):
        repo.commit(f"work {n}")
        clock.advance(60)
        assert repo.run("checkpoint", f"step {n}").code == 0
    assert repo.run("handover", "-o", "find it", "-s", "half", "-n", "bisect").code == 0
    repo.commit("after")
    return repo, task


def _as_stored(repo: Repo, task: str) -> list[str]:
    """Every record as git and tomllib read it, its random ids left out."""
    shown = []
    for stored in stored_records(repo.path, repo.environ):
        table = {
            **stored.table,
            "id": "ID",
            "task": "TASK" if stored.table["task"] == task else "?",
        }
        for key in ("handover", "supersedes"):
            if key in table:
                table[key] = "ID"
        shown.append(json.dumps([stored.target, stored.kind, table], default=str, sort_keys=True))
    return sorted(shown)


_IDS = re.compile(r"\b([chrt])-[0-9a-f]{12,16}\b")


def _alike(text: str, notes: str, path: Path) -> str:
    """Output with what differs between the two clones named alike: record and task ids,
    the notes commit (its tree holds those ids), the clone's own path."""
    text = text.replace(notes, "NOTES").replace(notes[:12], "NOTES")
    return _IDS.sub(r"\1-ID", text).replace(str(path), "REPO")


@pytest.fixture(scope="module")
def made_alike(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, str], dict[str, tuple[Path, str]]]:
    """Two clones made alike behind one remote holding a teammate's record (built once;
    each test works on copies): their environment, and each one's path and task."""
    root = tmp_path_factory.mktemp("alike")
    (root / "home").mkdir()
    environ = hermetic_environ(root / "home")
    remote = bare(root / "remote.git", environ)
    seed = clone(str(remote), root / "seed", environ, Clock())
    seed.commit("initial")
    seed.task("a teammate's task")
    seed.git("push", "-q", "origin", "main", "refs/notes/majordomus")
    made = {}
    for name in ("plain", "typer"):
        repo, task = _same_clone(root / name, environ, Clock(), remote)
        made[name] = (repo.path, task)
    return environ, made


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["checkpoint", "reproduced under load"], 0),
        (["checkpoint", "--json", "seen"], 0),
        (["-C", "sub", "checkpoint", "from below", "--session", "night"], 0),
        (["checkpoint", "-F", "body.txt"], 0),
        (["checkpoint", "-F", "-"], 0),
        (["checkpoint", "-F", "missing.txt"], 2),
        (["checkpoint"], 2),
        (["checkpoint", "one", "-F", "body.txt"], 2),
        (["checkpoint", "x" * 2001], 2),
        (["checkpoint", "   "], 2),
        (["checkpoint", "--task", "ffff", "no such task"], 2),
        (["--profile", "nosuch", "checkpoint", "unknown profile"], 2),
        (["-C", "nowhere", "checkpoint", "no directory"], 3),
        (["checkpoint", "token ghp_0123456789abcdefghijABCDEFGHIJ012345 leaked"], 2),
        (["checkpoint", "--allow-secret", "ghp_0123456789abcdefghijABCDEFGHIJ012345"], 0),
        (["handover", "-o", "find it", "-s", "half", "-n", "bisect"], 0),
        (
            ["handover", "--json", "--objective", "o", "--state", "s", "--next", "n", "-t", "TASK"],
            0,
        ),
        (["handover", "--objective", "o", "--state", "s", "--next", "n", "--json"], 0),
        (["handover", "-F", "-"], 0),
        (["handover", "-o", "only one"], 2),
        (["handover", "-F", "-", "-o", "both"], 2),
        (["context"], 0),
        (["context", "--json", "--task", "TASK"], 0),
        (["context", "--task", "ffff"], 2),
        (["resume"], 0),
        (["resume", "--peek", "--json"], 0),
        (["resume", "--session", "morning", "--task", "ffff"], 2),
        (["history"], 0),
        (["history", "--json", "--all"], 0),
        (["history", "HEAD~2", "--task", "TASK"], 0),
        (["history", "nosuch"], 3),
        (["show"], 0),
        (["show", "HEAD~1", "--json"], 0),
        (["show", "--markdown", "HEAD~1"], 0),
        (["show", "--json", "--markdown"], 2),
        (["check"], 1),
        (["check", "--json", "--task", "TASK"], 1),
        (["fetch"], 0),
        (["fetch", "--json", "origin"], 0),
        (["fetch", "nosuch"], 4),
        (["grep", "step"], 0),
        (["grep", "--json", "-i", "STEP", "--all", "--task", "TASK"], 0),
        (["grep", "-F", "nothing like this"], 1),
        (["grep", "(unclosed"], 2),
    ],
    ids=lambda value: " ".join(value)[:40] if isinstance(value, list) else str(value),
)
def test_a_plain_command_line_answers_and_records_as_typer_s_reading_does(
    tmp_path: Path,
    made_alike: tuple[dict[str, str], dict[str, tuple[Path, str]]],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    code: int,
) -> None:
    environ, made = made_alike
    answers = []
    for name, (template, task) in made.items():
        shutil.copytree(template, tmp_path / name, symlinks=True)
        clock = Clock(START + datetime.timedelta(seconds=3 * 60 + 3600))
        repo = Repo(tmp_path / name, environ, clock)
        line = [task if token == "TASK" else token for token in argv]
        assert front.plain(line) is not None
        if name == "typer":
            monkeypatch.setattr(front, "plain", lambda argv: None)
        before = git(repo.path, environ, "for-each-ref")
        stdin = (
            b'objective = "o"\nstate = "s"\nnext = "n"\n' if "handover" in line else b"from stdin\n"
        )
        result = repo.run(*line, stdin=stdin)
        if result.code not in (0, 1):
            assert git(repo.path, environ, "for-each-ref") == before
        notes = repo.notes_ref() or "-"  # its id holds the random record ids
        seen = [_alike(text, notes, repo.path) for text in (result.out, result.err)]
        answers.append((result.code, *seen, _as_stored(repo, task)))
    plain, by_typer = answers
    assert plain == by_typer
    assert plain[0] == code, plain
