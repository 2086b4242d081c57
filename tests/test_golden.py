"""Every scenario's transcript equals its golden file in fixtures/golden/, whole.

After an intended change to what a command prints, `make golden` rewrites the
files; the diff is reviewed like code. The console examples of the README and of
docs/*.md are checked against the same files: each `majordomus` command a page
shows, with the output it shows, must appear in a transcript exactly so; and the
README's walkthrough, git commands included, is a run of the `walkthrough`
scenario, its steps in the same order.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from tests.support import golden_refusals, golden_scenarios  # noqa: F401  (register the scenarios)
from tests.support.corpus import GOLDEN
from tests.support.golden import SCENARIOS, golden_path, produce

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def _diff(expected: str, actual: str, name: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True),
        actual.splitlines(keepends=True),
        fromfile=f"fixtures/golden/{name} (expected)",
        tofile=f"{name} (what the program prints now)",
    )
    return "".join(lines)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_transcript_equals_its_golden_file(name: str) -> None:
    path = golden_path(name)
    expected = path.read_text("utf-8") if path.exists() else ""
    actual = produce(name)
    if actual != expected:
        pytest.fail(
            "the output changed; if that was intended, run `make golden` and review the diff:\n"
            + _diff(expected, actual, path.name),
            pytrace=False,
        )


def test_every_golden_file_has_its_scenario() -> None:
    assert sorted(p.name for p in GOLDEN.glob("*.txt")) == sorted(
        golden_path(name).name for name in SCENARIOS
    )


def split_commands(text: str) -> list[tuple[str, str]]:
    """(command line, what follows it) for each `$ ` line of a transcript or console block.

    A command line ends with its last line that does not end in a backslash.
    Transcript comment lines (`# ...`) end the output before them.
    """
    commands: list[tuple[str, str]] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith("$ "):
            continue
        command = [line[2:]]
        while command[-1].endswith("\\") and index < len(lines):
            command.append(lines[index])
            index += 1
        output = []
        while index < len(lines) and not lines[index].startswith(("$ ", "# ")):
            output.append(lines[index])
            index += 1
        commands.append(("\n".join(command), "\n".join(output).rstrip("\n")))
    return commands


def console_blocks(page: Path) -> list[str]:
    return re.findall(r"```console\n(.*?)```", page.read_text("utf-8"), flags=re.DOTALL)


def page_examples(page: Path) -> list[tuple[str, str]]:
    return [
        (command, output)
        for block in console_blocks(page)
        for command, output in split_commands(block)
        if command.startswith("majordomus ")
    ]


def examples() -> list[tuple[str, str, str]]:
    """(page, command line, output) for every `majordomus` example of every page."""
    return [
        (str(page.relative_to(ROOT)), command, output)
        for page in PAGES
        for command, output in page_examples(page)
    ]


def test_the_readme_shows_examples() -> None:
    assert len(page_examples(README)) >= 6


def test_the_readme_walks_through_two_clones_in_the_order_of_a_real_run() -> None:
    """Every step the README's walkthrough shows (git's too, each with exactly its
    output) is a step of the walkthrough transcript, in the same order; the
    transcript may hold more (a second clone's own `init`, the reads after it)."""
    shown = [step for block in console_blocks(README)[:2] for step in split_commands(block)]
    commands = [command for command, _ in shown]
    for needed in ("majordomus init", "majordomus push", "majordomus fetch", "majordomus resume"):
        assert needed in commands, f"the README's walkthrough does not show `{needed}`"
    assert any(c.startswith("majordomus history --task ") for c in commands)
    assert any(c.startswith("git clone ") for c in commands), "the walkthrough has one clone"
    ran = iter(split_commands(golden_path("walkthrough").read_text("utf-8")))
    for command, output in shown:
        assert any(step == (command, output) for step in ran), (
            f"`{command}` in the README's walkthrough, with the output shown there, is not "
            "the next such step of fixtures/golden/walkthrough.txt"
        )


@pytest.mark.parametrize(
    ("page", "command", "output"), examples(), ids=[f"{p}: {c}" for p, c, _ in examples()]
)
def test_example_is_what_the_program_prints(page: str, command: str, output: str) -> None:
    printed = {
        shown
        for path in sorted(GOLDEN.glob("*.txt"))
        for line, shown in split_commands(path.read_text("utf-8"))
        if line == command
    }
    assert printed, f"no golden transcript runs `{command}`"
    assert output in printed, (
        f"{page} shows output for `{command}` that the program no longer prints:\n"
        + "\n".join(_diff(output + "\n", shown + "\n", page) for shown in sorted(printed))
    )
