"""The top-level help reads well: its examples stay one per line."""

from __future__ import annotations

import json

import pytest
import typer

from majordomus import cli, remote
from tests.support.repo import Repo


def test_top_level_examples_are_kept_as_lines(repo: Repo) -> None:
    out = repo.run("--help").out
    assert (
        "\n"
        '    majordomus task new "queue drops acks under load"\n'
        '    majordomus checkpoint "reproduced with 50 concurrent enqueues"\n'
        "    majordomus handover --objective ... --state ... --next ...\n"
        "    majordomus resume          # in the next session\n"
        "    majordomus history         # the record, newest first\n"
        "    majordomus agent install claude   # agent sessions start with the handover\n"
        "\n"
    ) in out


def test_hook_help_goes_to_the_full_command_line(repo: Repo) -> None:
    result = repo.run("hook", "claude", "--help")
    assert result.code == 0 and result.out.startswith(
        "Usage: majordomus hook [OPTIONS] {AGENT} [EVENT]"
    )


def test_a_command_parsed_alone_answers_as_the_whole_app_does(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` hands typer only the command named on the line; help, refusals and answers
    are the same as when typer builds every command."""
    repo.task()
    repo.run("checkpoint", "one")
    names = sorted(cli._command_names())
    # Built alone: typer is given the one command (and a group its own commands).
    assert list(cli.command_for(["-C", ".", "show", "--json"]).commands) == ["show"]
    assert list(cli.command_for(["task", "list"]).commands) == ["task"]
    assert len(cli.command_for(["--version"]).commands) == len(names)
    lines: list[tuple[str, ...]] = []
    for name in names:
        lines += [(name, "--help"), (name, "--no-such-flag"), ("-C", ".", name, "-h")]
    lines += [
        ("--profile", "default", "check", "--json"),
        ("--profile=default", "history", "--json"),
        ("-C.", "show", "--json"),
        ("task", "list", "--json"),
        ("task", "nosuch"),
        ("nosuch",),
        ("--version",),
        ("-C",),
        (),
    ]
    alone = [repo.run(*line) for line in lines]
    monkeypatch.setattr(cli, "command_for", lambda argv: typer.main.get_command(cli.app))
    whole = [repo.run(*line) for line in lines]
    for line, one, every in zip(lines, alone, whole, strict=True):
        assert (one.code, one.out, one.err) == (every.code, every.out, every.err), line
    assert len(names) >= 19 and all(r.out or r.err for r in alone)


def _help(repo: Repo, *argv: str) -> str:
    result = repo.run(*argv, "--help")
    assert result.code == 0, result.err
    return " ".join(result.out.split())  # as one line, whatever the wrapping


def test_the_numbers_help_states_are_the_ones_the_commands_use(repo: Repo) -> None:
    # The hook's budget lives with the push code (which loads git), not with the help.
    assert f"MAJORDOMUS_HOOK_TIMEOUT seconds ({remote.HOOK_TIMEOUT_S:g})" in _help(repo, "push")
    profile = json.loads(repo.run("profile", "--json").out)
    assert f"checkpoint_max ({profile['checkpoint_max']} characters by default)" in _help(
        repo, "checkpoint"
    )
    assert "Budget in characters (200..100000; default 4000)." in _help(repo, "context")
    repo.task()
    for budget, code in (("199", 2), ("200", 0), ("100000", 0), ("100001", 2)):
        assert repo.run("context", "--max-chars", budget).code == code, budget
    for n in range(12):  # about 5,000 characters of checkpoints: the budget decides
        repo.run("checkpoint", f"{n} " + "y" * 390)
    default = repo.run("context").out
    assert default == repo.run("context", "--max-chars", "4000").out
    assert default not in (
        repo.run("context", "--max-chars", budget).out for budget in ("3500", "4500")
    )
