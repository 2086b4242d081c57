"""The help reads well and teaches: every command's help has examples that run as shown
(each run here in a scratch repository), its metavars are all upper case, and the
top-level examples stay one per line."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import typer

from majordomus import cli, remote
from tests.support.cli import MAJORDOMUS, run_cli
from tests.support.env import Clock, hermetic_environ
from tests.support.git import bare
from tests.support.repo import Repo


def test_top_level_examples_are_kept_as_lines(repo: Repo) -> None:
    out = repo.run("--help").out
    assert (
        "\n"
        "  Examples:\n"
        "\n"
        "    majordomus init            # once per clone: records travel with git push/fetch\n"
        '    majordomus task new "queue drops acks under load"\n'
        '    majordomus checkpoint "reproduced with 50 concurrent enqueues"\n'
        "    majordomus handover --objective ... --state ... --next ...\n"
        "    majordomus push            # publish the records (git push does it after init)\n"
        "    majordomus fetch           # in the next session, or another clone\n"
        "    majordomus resume          # pick up the open handover\n"
        "    majordomus history         # the record, newest first\n"
        "    majordomus adopt           # after a squash or rebase merge on the host\n"
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


# ---- every command's help teaches -------------------------------------------------------


def help_paths() -> list[tuple[str, ...]]:
    """The top level, each group and each command: every help there is."""
    paths: list[tuple[str, ...]] = [()]
    for name, command in typer.main.get_command(cli.app).commands.items():  # type: ignore[attr-defined]
        paths.append((name,))
        paths.extend((name, child) for child in getattr(command, "commands", {}))
    return paths


def examples(help_text: str) -> list[str]:
    """The command lines of a help's Examples block, as the user types them."""
    lines = help_text.splitlines()
    assert "  Examples:" in lines, "no Examples block"
    found: list[str] = []
    for line in lines[lines.index("  Examples:") + 1 :]:
        text = line.strip().removeprefix("$ ")
        if not text and not found:
            continue
        if not text.startswith("majordomus "):
            break
        found.append(text)
    return found


@dataclasses.dataclass(frozen=True)
class Scratch:
    """A set-up clone with a merge, a second branch, a task with a checkpoint and an open
    handover, pushed to a bare remote (origin, the upstream of main): each help's
    examples run in a copy of it."""

    root: Path
    environ: dict[str, str]
    clock: Clock
    work: Repo
    task: str

    def copy(self, name: str) -> Repo:
        path = self.root / "copies" / name
        shutil.copytree(self.work.path, path, symlinks=True)
        return Repo(path, self.environ, self.clock)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Scratch:
    root = tmp_path_factory.mktemp("examples")
    (root / "home").mkdir()
    environ = hermetic_environ(root / "home")
    clock = Clock()
    work = Repo.init(root / "work", environ, clock)
    work.git("checkout", "-q", "-b", "topic")
    work.commit("topic work", {"topic.txt": "topic\n"})
    work.git("checkout", "-q", "main")
    work.commit("main work", {"main.txt": "main\n"})
    work.git("merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    remote_path = bare(root / "remote.git", environ)
    work.git("remote", "add", "origin", str(remote_path))
    work.git("push", "-q", "-u", "origin", "main", "topic")
    assert work.run("init").code == 0  # a clone set up (doctor is healthy)
    task = work.task()
    assert work.run("checkpoint", "reproduced with 50 concurrent enqueues").code == 0
    handover = ("handover", "-o", "stop dropped acks", "-s", "race in ack()", "-n", "a lock")
    assert work.run(*handover).code == 0
    return Scratch(root, environ, clock, work, task)


def run_example(scratch: Scratch, repo: Repo, line: str) -> tuple[int, str]:
    """`line` run in `repo` as the user would (TASK: the scratch task's id); its exit code
    and stderr. `mcp` serves until its input ends: a real process with no input."""
    argv = [scratch.task if word == "TASK" else word for word in shlex.split(line, True)]
    assert argv[0] == "majordomus", line
    if argv[1] == "mcp":
        done = subprocess.run(
            [*MAJORDOMUS, *argv[1:]],
            cwd=repo.path,
            env=scratch.environ,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.returncode, done.stderr
    # The clock moves as watch sleeps: `--seconds` ends.
    clock = scratch.clock
    result = run_cli(repo.path, scratch.environ, *argv[1:], now=clock, sleep=clock.advance)
    return result.code, result.err


@pytest.mark.parametrize("path", help_paths(), ids=lambda p: " ".join(p) or "majordomus")
def test_every_help_has_examples_that_run_as_shown(scratch: Scratch, path: tuple[str, ...]) -> None:
    result = scratch.work.run(*path, "--help")
    assert result.code == 0, result.err
    lines = examples(result.out)
    limit = 10 if not path else 3  # the top level walks through a whole session
    assert 1 <= len(lines) <= limit, lines
    if path:  # a group's examples run its commands
        assert all(line.startswith(f"majordomus {' '.join(path)}") for line in lines), lines
    repo = scratch.copy("-".join(path) or "top")
    for line in lines:
        code, err = run_example(scratch, repo, line)
        assert code == 0, (line, err)


UPPER = re.compile(r"[A-Z][A-Z_]*")
OPTION = re.compile(r"  ((?:-[\w-]+, )*-[\w-]+)( \S+)?")


@pytest.mark.parametrize("path", help_paths(), ids=lambda p: " ".join(p) or "majordomus")
def test_metavars_are_upper_case_everywhere(scratch: Scratch, path: tuple[str, ...]) -> None:
    out = scratch.work.run(*path, "--help").out
    usage = out.splitlines()[0].removeprefix(f"Usage: {' '.join(['majordomus', *path])} ")
    for word in usage.split():
        assert UPPER.fullmatch(word.strip("[]{}.")), (path, usage)
    section = None
    for line in out.splitlines():
        if line and not line.startswith(" "):
            section = line
        elif section == "Arguments:" and re.match(r"  \S", line):
            assert UPPER.fullmatch(line.split()[0]), (path, line)
        elif section == "Options:" and (found := OPTION.match(line)):
            metavar = (found.group(2) or " ").strip()
            assert not metavar or UPPER.fullmatch(metavar), (path, line)
    assert "Usage:" in out and (not path or "Options:" in out)


def test_the_task_group_says_what_a_task_is(repo: Repo) -> None:
    assert "Create, list and pick tasks: the investigations that records belong to." in (
        _help(repo, "task")
    )
