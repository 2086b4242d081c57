"""A notes tree written by plain git with entries that are not notes: a gitlink, a symlink, a
tree where a note belongs, names that are not a commit id. fetch, push, sync, the pre-push
hook and the agent hooks of a victim's clone keep working, its records stay readable, and
what is not a note never reaches its notes ref, nor the remote through it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Clock
from tests.hostile_clones import (
    Scene,
    blob,
    git_push,
    ids,
    invalid,
    ok,
    publish_tree,
    scene,
    session_start,
    third_clone,
)
from tests.remote_fixtures import ref_ids

FORGED = "c-00000000000f0e1d"


def _forged(s: Scene) -> str:
    """A blob holding a checkpoint the victim never wrote."""
    task = sorted(i for i in s.pushed if i.startswith("t-"))[0]
    return blob(
        s.attacker,
        f'[[checkpoint]]\nv = 1\nid = "{FORGED}"\ntask = "{task}"\nhead = "{s.noted}"\n'
        'at = 2026-11-30T03:30:00Z\nauthor = "Mallory <m@example.com>"\nbody = "forged"\n',
    )


# name -> (the mktree lines, by path; how many notes a read of the remote's ref counts as
# invalid; the commits whose entries fetch leaves out)
Attack = Callable[[Scene], tuple[dict[str, str], int, list[str]]]
ABSENT = "1" * 40


def _gitlink_on_mine(s: Scene) -> tuple[dict[str, str], int, list[str]]:
    return {s.noted: f"160000 commit {s.noted}\t{s.noted}"}, 1, [s.noted]


def _gitlink_elsewhere(s: Scene) -> tuple[dict[str, str], int, list[str]]:
    return {ABSENT: f"160000 commit {'2' * 40}\t{ABSENT}"}, 1, [ABSENT]


def _symlink_on_mine(s: Scene) -> tuple[dict[str, str], int, list[str]]:
    return {s.noted: f"120000 blob {_forged(s)}\t{s.noted}"}, 0, [s.noted]


def _tree_on_mine(s: Scene) -> tuple[dict[str, str], int, list[str]]:
    inner = s.attacker.git("mktree", input=f"100644 blob {_forged(s)}\t{'3' * 38}\n").strip()
    return {s.noted: f"040000 tree {inner}\t{s.noted}"}, 0, []


def _names_of_no_commit(s: Scene) -> tuple[dict[str, str], int, list[str]]:
    forged = _forged(s)
    upper = s.noted.upper()
    lines = {name: f"100644 blob {forged}\t{name}" for name in ("not-a-commit", upper)}
    return lines, 0, []


ATTACKS: dict[str, Attack] = {
    "gitlink on my commit": _gitlink_on_mine,
    "gitlink on a commit not here": _gitlink_elsewhere,
    "symlink on my commit": _symlink_on_mine,
    "tree where my note is": _tree_on_mine,
    "names that are no commit id": _names_of_no_commit,
}


def _published(s: Scene, tmp_path: Path, clock: Clock) -> None:
    """The remote, and a clone made now, hold every record of the victim's, none forged."""
    held = ref_ids(s.remote)
    assert s.mine <= held and FORGED not in held
    third = third_clone(s, tmp_path, clock)
    assert s.mine <= ids(third) and FORGED not in ids(third)


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
def test_fetch_push_and_sync_keep_my_records(
    tmp_path: Path, environ: dict[str, str], clock: Clock, attack: Attack
) -> None:
    s = scene(tmp_path, environ, clock)
    lines, _, left_out = attack(s)
    publish_tree(s.attacker, lines)
    result = s.victim.run("fetch", "--json")
    assert (result.code, result.err) == (0, ""), result.err
    report = json.loads(result.out)
    assert [entry["commit"] for entry in report["left_out"]] == left_out
    assert s.mine <= ids(s.victim) and s.mine <= ref_ids(s.victim.path)
    assert FORGED not in ref_ids(s.victim.path)  # never taken into my notes ref
    context, err = session_start(s.victim)
    assert err == "" and s.unpushed in context
    assert ok(s.victim, "push") == "published records to origin\n"
    assert ok(s.victim, "sync") == (
        "origin: every record it has is already here\norigin already has every record\n"
    )
    assert ok(s.victim, "fetch") == "origin: every record it has is already here\n"
    _published(s, tmp_path, clock)


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
def test_a_plain_git_fetch_then_reads_hooks_and_git_push(
    tmp_path: Path, environ: dict[str, str], clock: Clock, attack: Attack
) -> None:
    s = scene(tmp_path, environ, clock)
    lines, counted, _ = attack(s)
    publish_tree(s.attacker, lines)
    s.victim.git("fetch", "-q", "origin")  # the remote-tracking notes ref, as init set it
    assert s.mine <= ids(s.victim) and FORGED not in ids(s.victim)  # what git reads, no more
    assert invalid(s.victim) == counted
    shown = s.victim.run("show", s.noted, "--json")
    assert shown.code == 0 and s.pushed <= {r["id"] for r in json.loads(shown.out)["records"]}
    context, err = session_start(s.victim)
    assert err == "" and s.unpushed in context
    s.victim.commit("more work")
    assert git_push(s.victim) == (0, "majordomus: published records to origin\n")
    _published(s, tmp_path, clock)
    assert invalid(s.victim) == 0  # what the remote-tracking ref holds now is what I pushed
    s.victim.run("doctor", "--drop-cache")
    assert s.mine <= ids(s.victim) and invalid(s.victim) == 0
