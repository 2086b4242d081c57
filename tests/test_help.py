"""The top-level help reads well: its examples stay one per line."""

from __future__ import annotations

from tests.conftest import Repo


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
