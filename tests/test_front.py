"""A checkpoint written the plain way is read without typer (`front.plain_checkpoint`), as
typer reads it: the same values for every command line it takes, the same answer, the
same record; every other command line is left to typer, which answers it."""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus import cli, front
from majordomus.invocation import Invocation, Terminal
from tests.conftest import START, Clock, Repo
from tests.support.git import git
from tests.support.notes import stored_records

_GLOBALS = [["-C", "sub"], ["-C", ".."], ["-C", "-"], ["--profile", "ci"], ["--profile", "-"]]
_OPTIONS = [
    ["--task", "t-0123"],
    ["-t", "0123"],
    ["--session", "night shift"],
    ["--file", "-"],
    ["-F", "body.txt"],
    ["--json"],
    ["--allow-secret"],
    ["--task", ""],
]
_TEXTS = [["seen it"], ["checkpoint"], ["x" * 30], ["ünïcode"], [""]]
# Tokens a plain checkpoint never holds: typer reads (and answers, or refuses) them.
_ODD = [
    ["--"], ["-h"], ["--help"], ["--version"], ["--task=t-0123"], ["-t0123"], ["-Csub"],
    ["--profile=ci"], ["--jso"], ["--json=yes"], ["-x"], ["-"], ["-5 ms"], ["--task"],
    ["-C"], ["--session", "--json"], ["-F", "-F"], ["\udcff"],
]  # fmt: skip


def _read_by_typer(argv: Sequence[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """What typer hands the checkpoint command for `argv`; None when it runs none."""
    seen: list[dict[str, Any]] = []

    def record(invocation: Invocation, *values: Any) -> None:
        names = ("text", "file", "task", "session", "allow_secret", "as_json")
        read = dict(zip(names, values, strict=True))
        seen.append({"cwd": invocation.cwd, "profile": invocation.profile, **read})

    monkeypatch.setattr(cli, "run_checkpoint", record)
    err = io.StringIO()
    terminal = Terminal(io.BytesIO(), io.StringIO(), err, is_tty=False, colour=False)
    invocation = Invocation(terminal, {}, lambda: START, lambda _: None)
    code = cli.dispatch(cli.command_for(argv), argv, invocation)
    assert code == 0 or not seen, (argv, code, err.getvalue())
    return seen[0] if seen else None


def _read_plainly(argv: Sequence[str]) -> dict[str, Any] | None:
    plain = front.plain_checkpoint(argv)
    if plain is None:
        return None
    cwd = "."
    for path in plain.directories:
        cwd = os.path.join(cwd, path)
    values = plain._asdict()
    del values["directories"]
    return {"cwd": cwd, **values}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_GLOBALS), max_size=3),
    st.lists(st.sampled_from(_OPTIONS + _TEXTS + _ODD), max_size=5),
    st.booleans(),
)
def test_every_command_line_read_plainly_is_read_so_by_typer(
    globals_: list[list[str]], rest: list[list[str]], named: bool
) -> None:
    argv = [token for part in globals_ for token in part]
    argv += ["checkpoint"] if named else []
    argv += [token for part in rest for token in part]
    plain = _read_plainly(argv)
    with pytest.MonkeyPatch.context() as monkeypatch:
        by_typer = _read_by_typer(argv, monkeypatch)
    if plain is not None:
        assert plain == by_typer, argv
    well_formed = (
        named
        and sum(part in _TEXTS for part in rest) <= 1
        and all(part in _OPTIONS + _TEXTS for part in rest)
        and len({_field(part) for part in rest}) == len(rest)
        and sum(part[0] == "--profile" for part in globals_) <= 1
    )
    # The plain forms are all read plainly: the fast path is the usual one.
    if well_formed:
        assert plain is not None, argv


def _field(part: list[str]) -> str:
    if part in _TEXTS:
        return "text"
    return {"-t": "--task", "-F": "--file"}.get(part[0], part[0])


def _same_clone(path: Path, environ: dict[str, str], clock: Clock) -> tuple[Repo, str]:
    repo = Repo.init(path, environ, clock)
    (path / "sub").mkdir()
    (path / "body.txt").write_text("from a file\n")
    task = repo.task()
    return repo, task


def _as_stored(repo: Repo, task: str) -> list[str]:
    """Every record as git and tomllib read it, its random id and task id left out."""
    shown = []
    for stored in stored_records(repo.path, repo.environ):
        table = {
            **stored.table,
            "id": "ID",
            "task": "TASK" if stored.table["task"] == task else "?",
        }
        shown.append(json.dumps([stored.target, stored.kind, table], default=str, sort_keys=True))
    return sorted(shown)


_IDS = re.compile(r"\b([ct])-[0-9a-f]{12,16}\b")


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
    ],
    ids=lambda value: " ".join(value)[:40] if isinstance(value, list) else str(value),
)
def test_a_plain_checkpoint_answers_and_records_as_typer_does(
    tmp_path: Path,
    environ: dict[str, str],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    code: int,
) -> None:
    assert front.plain_checkpoint(argv) is not None
    answers = []
    for name in ("plain", "typer"):
        repo, task = _same_clone(tmp_path / name, environ, clock)
        if name == "typer":
            monkeypatch.setattr(front, "plain_checkpoint", lambda argv: None)
        before = git(repo.path, environ, "for-each-ref")
        result = repo.run(*argv, stdin=b"from stdin\n")
        if result.code != 0:
            assert git(repo.path, environ, "for-each-ref") == before
        answers.append(
            (
                result.code,
                _IDS.sub(r"\1-ID", result.out),
                result.err.replace(task, "TASK").replace(str(repo.path), "REPO"),
                _as_stored(repo, task),
            )
        )
    plain, by_typer = answers
    assert plain == by_typer
    assert plain[0] == code, plain
    assert len(plain[3]) == 1 + (code == 0), plain  # the task's record, and the checkpoint
