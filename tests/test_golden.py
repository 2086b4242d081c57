"""Every scenario's transcript equals its golden file in fixtures/golden/, whole.

After an intended change to what a command prints, `make golden` rewrites the
files; the diff is reviewed like code. The README's console examples are
checked against the same files: each `majordomus` command the README shows,
with the output it shows, must appear in a transcript exactly so.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from tests.support import (  # noqa: F401  (register the scenarios)
    golden_graph,
    golden_refusals,
    golden_scenarios,
)
from tests.support.corpus import GOLDEN
from tests.support.golden import SCENARIOS, golden_path, produce

README = Path(__file__).resolve().parent.parent / "README.md"


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


def readme_examples() -> list[tuple[str, str]]:
    blocks = re.findall(r"```console\n(.*?)```", README.read_text("utf-8"), flags=re.DOTALL)
    return [
        (command, output)
        for block in blocks
        for command, output in split_commands(block)
        if command.startswith("majordomus ")
    ]


def test_the_readme_shows_examples() -> None:
    assert len(readme_examples()) >= 6


@pytest.mark.parametrize(
    ("command", "output"), readme_examples(), ids=[c for c, _ in readme_examples()]
)
def test_readme_example_is_what_the_program_prints(command: str, output: str) -> None:
    printed = {
        shown
        for path in sorted(GOLDEN.glob("*.txt"))
        for line, shown in split_commands(path.read_text("utf-8"))
        if line == command
    }
    assert printed, f"no golden transcript runs `{command}`"
    assert output in printed, (
        f"the README shows output for `{command}` that the program no longer prints:\n"
        + "\n".join(_diff(output + "\n", shown + "\n", "README") for shown in sorted(printed))
    )
