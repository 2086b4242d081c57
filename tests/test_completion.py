"""Shell completion: the script `majordomus completion SHELL` prints is loaded in a real
bash, zsh and fish, and Tab (the script's function, called as the shell calls it)
completes commands, options, task ids and REVs; a teammate's note offers nothing that is
not a plain word; the answers come through the protocol the script speaks."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.attacks import hostile, record, table, write_note
from tests.support.env import Clock, hermetic_environ
from tests.support.git import NOTES_REF, bare
from tests.support.repo import Repo, clone

FORGED = "t-5ca1ab1e5ca1\n\x1b[31mevil"  # not a task id: no record of it is read


@dataclasses.dataclass(frozen=True)
class World:
    """A clone with a merge, two branches and a tag, its own task and a teammate's (brought
    by `majordomus fetch` from a bare remote), and a hostile note added with plain git."""

    environ: dict[str, str]
    repo: Repo
    own: str
    teammate: str
    notes_before: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("completion")
    (root / "home").mkdir()
    environ = hermetic_environ(root / "home")
    # The console script the completion scripts run, first on PATH.
    environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
    clock = Clock()
    remote = bare(root / "remote.git", environ)
    teammate = clone(str(remote), root / "teammate", environ, clock)
    teammate.commit("initial")
    teammate_task = teammate.task("a teammate's task")
    teammate.git("push", "-q", "origin", "main", NOTES_REF)
    repo = clone(str(remote), root / "repo", environ, clock)
    repo.git("checkout", "-q", "-b", "topic")
    repo.commit("topic work", {"topic.txt": "topic\n"})
    repo.git("checkout", "-q", "main")
    repo.commit("main work", {"main.txt": "main\n"})
    repo.git("merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    repo.git("tag", "v1.0")
    assert repo.run("fetch").code == 0
    own = repo.task()
    head = repo.head()
    at = clock.now
    forged = record("task", "t-x", FORGED, head, at, title=hostile("forged"))
    hidden = table("task", {"v": 1, "id": "t-5ca1ab1e5ca1", "task": "t-5ca1ab1e5ca1"})
    write_note(repo, "HEAD~1", forged + hidden + '[[task]]\nid = "\x1b]8;;x\x07"\n')
    return World(environ, repo, own, teammate_task, repo.git("rev-parse", NOTES_REF))


def shell(name: str) -> str:
    """The shell's path; its test is skipped where it is missing, except in CI."""
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (CI installs it: .ci/run)")
        pytest.skip(f"{name} is not installed")
    return found


def run(world: World, argv: list[str], **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=world.repo.path,
        env={**world.environ, **environ},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def answered(world: World, shell_name: str, line: str) -> list[str]:
    """What majordomus answers the script of `shell_name` for `line` (the cursor at its end),
    through the protocol the scripts speak: one value a line."""
    words = line.split()
    if line.endswith(" "):
        words.append("")
    cword = {"COMP_CWORD": str(len(words) - 1)}
    if shell_name == "fish":
        cword = {"COMP_CWORD": words[-1]}
    done = run(
        world,
        ["majordomus"],
        _MAJORDOMUS_COMPLETE=f"{shell_name}_complete",
        COMP_WORDS=line,
        **cword,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    if shell_name == "zsh":  # type, value and description: three lines each
        return [value for kind, value in zip(lines[::3], lines[1::3], strict=True) if kind]
    return [entry.split(",", 1)[1].split("\t")[0] for entry in lines]


# ---- bash --------------------------------------------------------------------------------


BASH_TAB = """\
eval "$(majordomus completion bash)"  # as its --help says
complete -p majordomus
tab() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=()
    _majordomus_completion majordomus "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s|' "${COMPREPLY[@]}"; echo
}
tab majordomus che
tab majordomus history --task ""
tab majordomus show ""
tab majordomus task use t-
tab majordomus agent install --scope p
tab majordomus -C ../teammate history --task ""
tab majordomus completion ""
tab majordomus push ""
tab majordomus init --remote o
tab majordomus hook gemini ""
tab majordomus hook c
"""


def test_bash_completes_commands_options_tasks_and_revs(world: World) -> None:
    done = run(world, [shell("bash"), "--norc", "--noprofile", "-c", BASH_TAB])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "complete -o nosort -F _majordomus_completion majordomus"
    tasks = "|".join(sorted([world.own, world.teammate])) + "|"
    assert lines[1:] == [
        "checkpoint|check|",
        tasks,
        "HEAD|main|topic|origin/HEAD|origin/main|v1.0|",
        tasks,
        "project|",
        f"{world.teammate}|",
        "bash|zsh|fish|",
        "origin|",
        "origin|",
        "SessionStart|BeforeAgent|AfterAgent|",
        "claude|codex|",
    ]
    assert world.repo.git("rev-parse", NOTES_REF) == world.notes_before


def test_bash_completes_options_with_their_names(world: World) -> None:
    done = run(
        world,
        [
            shell("bash"),
            "--norc",
            "-c",
            BASH_TAB.split("tab majordomus che", maxsplit=1)[0] + "tab majordomus check --\n",
        ],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "--all|--task|--json|--help|"


# ---- zsh ---------------------------------------------------------------------------------

# compinit, the script sourced as a user's ~/.zshrc does; then the completion function called
# with the words as zsh gives them, its answers caught where zsh's own completion would
# take them (_describe and compadd, which run only inside a completion widget).
ZSH_TAB = """\
autoload -U compinit && compinit -u -D
eval "$(majordomus completion zsh)"  # as its --help says
print -r -- "registered: $_comps[majordomus]"
_describe() { print -rl -- "${(@P)3}" }
compadd() { print -rl -- "${(@P)${@[-1]}}" }
tab() { words=("$@"); CURRENT=$#; _majordomus_completion; print -- "--" }
tab majordomus che
tab majordomus show ''
tab majordomus history --task ''
"""


def test_zsh_loads_the_script_and_completes(world: World) -> None:
    done = run(world, [shell("zsh"), "-f", "-c", ZSH_TAB])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    blocks = done.stdout.split("--\n")
    assert blocks[0].startswith("registered: _majordomus_completion\n")
    assert blocks[0].splitlines()[1:] == [
        "checkpoint:Record what is true right now on HEAD, for...",
        "check:Age of the last checkpoint against the...",
    ]
    assert blocks[1].splitlines() == ["HEAD", "main", "topic", "origin/HEAD", "origin/main", "v1.0"]
    assert blocks[2].splitlines() == sorted([world.own, world.teammate])
    assert answered(world, "zsh", "majordomus che") == ["checkpoint", "check"]


# ---- fish --------------------------------------------------------------------------------


def test_fish_completes_from_the_sourced_script(world: World) -> None:
    script = (
        "majordomus completion fish | source\n"
        'complete -C "majordomus che"\n'
        "echo ==\n"
        'complete -C "majordomus show m"\n'
        "echo ==\n"
        'complete -C "majordomus check --task "\n'
    )
    done = run(world, [shell("fish"), "--no-config", "-c", script])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    blocks = [block.splitlines() for block in done.stdout.split("==\n")]
    assert blocks[0] == [  # fish sorts them
        "check\tAge of the last checkpoint against the...",
        "checkpoint\tRecord what is true right now on HEAD, for...",
    ]
    assert blocks[1] == ["main"]
    assert sorted(blocks[2]) == sorted([world.own, world.teammate])  # fish's order: natural
    assert answered(world, "fish", "majordomus che") == ["checkpoint", "check"]


def test_a_file_or_a_directory_is_the_shells_to_complete(world: World) -> None:
    """`-F` and `-C` are answered with the kind of value, which the script hands to the
    shell's own completion: fish lists the files."""
    for shell_name, kind, line in (
        ("bash", "file", "majordomus checkpoint -F ma"),
        ("zsh", "dir", "majordomus -C "),
        ("bash", "file", "majordomus handover --file "),
    ):
        words = line.split() + ([""] if line.endswith(" ") else [])
        done = run(
            world,
            ["majordomus"],
            _MAJORDOMUS_COMPLETE=f"{shell_name}_complete",
            COMP_WORDS=line,
            COMP_CWORD=str(len(words) - 1),
        )
        expected = f"{kind},{words[-1]}\n" if shell_name == "bash" else f"{kind}\n{words[-1]}\n_\n"
        assert (done.returncode, done.stdout, done.stderr) == (0, expected, ""), line
    script = 'majordomus completion fish | source; complete -C "majordomus checkpoint -F ma"'
    done = run(world, [shell("fish"), "--no-config", "-c", script])
    assert (done.stdout, done.stderr) == ("main.txt\n", "")


# ---- the protocol and the command --------------------------------------------------------


def test_nothing_offered_is_anything_but_a_plain_word(world: World) -> None:
    """A forged id, escapes and line breaks in a teammate's note: none reaches the shell;
    outside a repository a REV or a task completes to nothing, without a word on stderr."""
    for shell_name, line in (
        ("bash", "majordomus history --task "),
        ("bash", "majordomus show "),
        ("zsh", "majordomus task use "),
        ("fish", "majordomus check -t "),
    ):
        offered = answered(world, shell_name, line)
        assert offered and all(value.isascii() and value.isprintable() for value in offered)
        assert not any("evil" in value or "5ca1ab1e" in value for value in offered), offered
    # What the line holds is read, not run: --version is no candidate, --help no help.
    assert answered(world, "bash", "majordomus --version ") == answered(
        world, "bash", "majordomus "
    )
    assert answered(world, "bash", "majordomus --help che") == ["checkpoint", "check"]
    outside = dataclasses.replace(world, repo=Repo(world.repo.path.parent, world.environ, Clock()))
    assert answered(outside, "bash", "majordomus show ") == []
    assert answered(outside, "bash", "majordomus history --task ") == []
    assert answered(outside, "bash", "majordomus ch")[:2] == ["checkpoint", "check"]


def test_the_completion_command_refuses_an_unknown_shell(world: World) -> None:
    for argv, code in ((["completion", "sh"], 2), (["completion"], 2), (["completion", "fish"], 0)):
        result = world.repo.run(*argv)
        assert result.code == code, result
    refused = world.repo.run("completion", "tcsh\x1b[2J")
    assert refused.err == (
        "majordomus: no completion for 'tcsh\\x1b[2J': the shells are bash, zsh and fish.\n"
    )
    assert refused.out == ""
    wrong = run(world, ["majordomus"], _MAJORDOMUS_COMPLETE="bash_source")
    assert (wrong.returncode, wrong.stdout) == (2, "")
    assert wrong.stderr.count("\n") == 1
    assert world.repo.git("rev-parse", NOTES_REF) == world.notes_before


def test_a_start_loads_no_completion_machinery(world: World) -> None:
    """Only a completion loads it: not `--version`, not a command typer reads."""
    probe = (
        "import io, sys\n"
        "from majordomus.__main__ import run\n"
        "for argv in (['--version'], ['task', 'list'], ['doctor', '--json']):\n"
        "    run(argv, stdout=io.StringIO(), stderr=io.StringIO())\n"
        "print('majordomus.completion' in sys.modules)\n"
    )
    done = run(world, [sys.executable, "-c", probe])
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")
