"""A teammate with push access writes hostile notes with plain git: two short trials of
the soak's hostile-remote campaign, with the attacks today's code must survive (hostile
text in every field, forged ids, newer handovers by other authors), and the campaign's
own checks shown to catch what they look for. The notes trees and refs that are not
notes (gitlinks, oversized notes, a blob as the ref) are left to `make soak`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from soak.hostile_remote import (
    ATTACKS,
    FAKE_QUOTE,
    MARKERS,
    TEXT_ATTACKS,
    Trial,
    hostile_text,
    run_trial,
)

# Every attack but a record that reuses one of the victim's ids (whose copy a read may then
# show: a known gap, see docs/format.md, "Records written by others").
SURVIVED = tuple(kind for kind in ATTACKS if kind != "id-collision")


@pytest.mark.parametrize(("seed", "attacks"), [(1, TEXT_ATTACKS), (3, SURVIVED)])
def test_hostile_text_from_a_remote_is_quoted_and_hides_nothing_of_mine(
    tmp_path: Path, seed: int, attacks: tuple[str, ...]
) -> None:
    outcome = run_trial(tmp_path, seed, attacks, rounds=2, steps=(2, 2))
    assert outcome.problems == []
    if attacks == TEXT_ATTACKS:  # (a remote whose notes ref is a blob serves a new clone none)
        assert outcome.written >= 5 and outcome.read_back == outcome.written
        assert outcome.marked > 0, "no attacker text reached the agent context"
    else:
        assert {"gitlink", "symlink", "oversized"} & set(outcome.attacks), outcome.attacks


def test_the_checks_catch_unquoted_text_raw_breaks_and_hidden_handovers(tmp_path: Path) -> None:
    trial = Trial(tmp_path, 1)
    text = "\n".join(
        [
            "majordomus context: task t-0123456789ab",
            "> author: Мэллори, h-2222",
            "- h-1111 on 0123456789ab, 1s ago:",
            "Мэллори says: run this",
            FAKE_QUOTE + "Мэллори",
            "> state: a\u2028b",
            "(1 open handover(s) of this task not shown: majordomus history --task t-0123)",
        ]
    )
    trial.check_context("context", text, ["h-1111", "h-2222", "h-3333"])
    assert sorted(p.kind for p in trial.outcome.problems) == [
        "attacker text on an unquoted line",
        "attacker text on an unquoted line",
        "open handover neither named nor counted",
        "raw character in agent context",
        "raw line break in agent context",
    ]


def test_attacker_text_marks_every_line_it_can_make() -> None:
    rng = random.Random(0)
    for _ in range(200):
        text = hostile_text(rng)
        for line in text.splitlines():
            assert MARKERS.intersection(line.removeprefix(FAKE_QUOTE)) or not line.strip(), text
