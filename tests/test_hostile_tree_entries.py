"""A notes tree written by plain git with entries that are not notes: a gitlink, a symlink, a
tree where a note belongs, names that are not a commit id. fetch, push, sync, the pre-push
hook and the agent hooks of a victim's clone keep working, its records stay readable, and
what is not a note never reaches its notes ref, nor the remote through it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.env import Clock
from tests.support.notes import ref_ids
from tests.support.repo import git_push
from tests.support.trees import (
    Scene,
    blob,
    ids,
    invalid,
    ok,
    publish_tree,
    scene,
    session_start,
    third_clone,
)

FORGED = "c-00000000000f0e1d"


def _forged(s: Scene) -> str:
    """A blob holding a checkpoint the victim never wrote."""
    task = sorted(i for i in s.pushed if i.startswith("t-"))[0]
    return blob(
        s.attacker,
        f'[[checkpoint]]\nv = 1\nid = "{FORGED}"\ntask = "{task}"\nhead = "{s.noted}"\n'
        'at = 2026-11-30T03:30:00Z\nauthor = "Mallory <m@example.com>"\nbody = "forged"\n',
    )


class Planted(NamedTuple):
    lines: dict[str, str]  # the mktree lines, by path
    odd: list[tuple[str, str]]  # each entry that is no note: its path, what it is
    left_out: list[str]  # the commits whose entries fetch leaves out


Attack = Callable[[Scene], Planted]
ABSENT = "1" * 40
LINK, GITLINK = "a symbolic link, not a note", "a gitlink (a submodule commit), not a note"
TREE, NAME = "a tree where a note belongs", "a name that is no commit id"


def _gitlink_on_mine(s: Scene) -> Planted:
    return Planted(
        {s.noted: f"160000 commit {s.noted}\t{s.noted}"}, [(s.noted, GITLINK)], [s.noted]
    )


def _gitlink_elsewhere(s: Scene) -> Planted:
    return Planted({ABSENT: f"160000 commit {'2' * 40}\t{ABSENT}"}, [(ABSENT, GITLINK)], [ABSENT])


def _gitlink_to_records(s: Scene) -> Planted:
    """A gitlink that names a blob of records (sent under a name that is no commit id)."""
    forged = _forged(s)
    lines = {s.noted: f"160000 commit {forged}\t{s.noted}", "zz": f"100644 blob {forged}\tzz"}
    return Planted(lines, [(s.noted, GITLINK), ("zz", NAME)], [s.noted])


def _symlink_on_mine(s: Scene) -> Planted:
    return Planted({s.noted: f"120000 blob {_forged(s)}\t{s.noted}"}, [(s.noted, LINK)], [s.noted])


def _tree_on_mine(s: Scene) -> Planted:
    inner = s.attacker.git("mktree", input=f"100644 blob {_forged(s)}\t{'3' * 38}\n").strip()
    return Planted({s.noted: f"040000 tree {inner}\t{s.noted}"}, [(s.noted, TREE)], [])


def _names_of_no_commit(s: Scene) -> Planted:
    forged = _forged(s)
    upper = s.noted.upper()
    lines = {name: f"100644 blob {forged}\t{name}" for name in ("not-a-commit", upper)}
    return Planted(lines, [(upper, NAME), ("not-a-commit", NAME)], [])


ATTACKS: dict[str, Attack] = {
    "gitlink on my commit": _gitlink_on_mine,
    "gitlink on a commit not here": _gitlink_elsewhere,
    "gitlink to a blob of records": _gitlink_to_records,
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
    _answers(s)  # the caches of the state before the attack, for the reads after it to carry
    lines, odd, left_out = attack(s)
    publish_tree(s.attacker, lines)
    result = s.victim.run("fetch", "--json")
    assert (result.code, result.err) == (0, ""), result.err
    report = json.loads(result.out)
    assert [entry["commit"] for entry in report["left_out"]] == left_out
    _counted(s, odd)
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
    _answers(s)  # the caches of the state before the attack, for the reads after it to carry
    lines, odd, _ = attack(s)
    publish_tree(s.attacker, lines)
    s.victim.git("fetch", "-q", "origin")  # the remote-tracking notes ref, as init set it
    assert s.mine <= ids(s.victim) and FORGED not in ids(s.victim)  # what git reads, no more
    assert invalid(s.victim) == len(odd)
    _counted(s, odd)
    shown = s.victim.run("show", s.noted, "--json")
    assert shown.code == 0 and s.pushed <= {r["id"] for r in json.loads(shown.out)["records"]}
    context, err = session_start(s.victim)
    assert err == "" and s.unpushed in context
    s.victim.commit("more work")
    assert git_push(s.victim, "-q", "origin", "HEAD:main") == (
        0,
        "majordomus: published records to origin\n",
    )
    _published(s, tmp_path, clock)
    assert invalid(s.victim) == 0  # what the remote-tracking ref holds now is what I pushed
    s.victim.run("doctor", "--drop-cache")
    assert s.mine <= ids(s.victim) and invalid(s.victim) == 0


Answers = list[tuple[int, str]]  # each read's exit code and stdout
COUNTING_ALL = (
    ("history", "--json"),
    ("history", "--all", "--json"),
    ("doctor", "--json"),
)


def _answers(s: Scene) -> Answers:
    """The reads that count every entry that is no note: `show` of my noted commit, a
    history of every task, doctor; none with a traceback, none with a word of the forged
    record, every record of mine in the history."""
    found = []
    for argv in (("show", s.noted, "--json"), *COUNTING_ALL):
        result = s.victim.run(*argv)
        assert "Traceback" not in result.err and result.err == "", (argv, result.err)
        assert FORGED not in result.out and "Mallory" not in result.out, argv
        found.append((result.code, result.out))
    assert s.mine <= {record["id"] for record in json.loads(found[2][1])["records"]}
    return found


def _fresh_and_warm(s: Scene) -> Answers:
    """Each read afresh (every cache gone first), then through the caches it left, then
    after `doctor --drop-cache`: the same answers."""
    fresh: Answers = []
    for argv in (("show", s.noted, "--json"), *COUNTING_ALL):
        s.victim.drop_caches()
        result = s.victim.run(*argv)
        fresh.append((result.code, result.out))
    warm = _answers(s)
    assert warm == fresh
    assert s.victim.run("doctor", "--drop-cache").code == 1
    assert _answers(s) == warm
    return warm


def _counted(s: Scene, odd: list[tuple[str, str]]) -> None:
    """Every entry that is no note counts once in `show` of the commit its path names, in a
    history of every task and in doctor, which lists each; fresh, warm and after
    `doctor --drop-cache` alike."""
    shown, history, every, doctor = _fresh_and_warm(s)
    on_mine = sum(1 for path, _ in odd if path == s.noted)
    assert shown[0] == 0 and json.loads(shown[1])["invalid"] == on_mine
    assert history[0] == every[0] == 0
    assert json.loads(history[1])["invalid"] == json.loads(every[1])["invalid"] == len(odd)
    assert doctor[0] == 1
    findings = json.loads(doctor[1])["findings"]
    said = sorted(f["detail"] for f in findings if f["topic"] == "invalid")
    tracking = "refs/notes/remotes/origin/majordomus"
    assert said == sorted(
        f"{f'note on {path[:12]} in ' if re.fullmatch('[0-9a-f]{40}', path) else ''}"
        f"{tracking}: entry {path} is {what}; not read"
        for path, what in odd
    )
    assert [f["detail"] for f in findings if f["topic"] == "notes"][-1].endswith(
        f", {len(odd)} invalid"
    )
