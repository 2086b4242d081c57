"""What a command imports: `--version` and `--help` start without git (pygit2) or the notes code."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import io, sys
from majordomus.cli import run
code = run(sys.argv[1:], stdout=io.StringIO(), stderr=io.StringIO())
heavy = sorted(m for m in ("pygit2", "majordomus.ops", "majordomus.store") if m in sys.modules)
print(code, " ".join(heavy))
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["checkpoint", "--help"]])
def test_version_and_help_load_neither_git_nor_the_notes_code(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True
    )
    assert done.stdout == "0 \n"


def test_a_command_loads_what_it_needs_on_first_use() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "-C", "/nonexistent-majordomus-dir", "check"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "3 majordomus.ops majordomus.store pygit2\n"
