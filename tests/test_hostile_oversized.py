"""A note over the 1 MiB read limit, pushed by plain git onto a commit that carries the
victim's records (or onto one that carries none): a merge never joins it to readable
records, fetch and doctor name it (commit and blob), and the victim's clone does not
publish it onwards, while push still succeeds at once and keeps every record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.env import Clock
from tests.support.git import NOTES_REF
from tests.support.notes import ref_ids
from tests.support.repo import Repo
from tests.support.trees import (
    TRACKING_REF,
    Scene,
    ids,
    invalid,
    ok,
    scene,
    session_start,
    third_clone,
)

BIG = "[[junk]]\nx = '" + "a" * (1 << 20) + "'\n"
HOW = {"appended": "append", "replaced": "add -f", "on a commit of its own": "add"}


def _attack(s: Scene, how: str) -> tuple[str, str]:
    """The attacker's oversized note, published by plain git: (its commit, its blob)."""
    big = s.attacker.path.parent / "big.toml"
    big.write_text(BIG)
    target = s.noted
    if how == "on a commit of its own":
        target = s.attacker.commit("mallory's work")
        s.attacker.git("push", "-q", "origin", "HEAD:main")
    s.attacker.git("notes", f"--ref={NOTES_REF}", *HOW[how].split(), "-F", str(big), target)
    s.attacker.git("push", "-q", "origin", f"{NOTES_REF}:{NOTES_REF}")
    return target, s.attacker.git("rev-parse", f"{NOTES_REF}:{target}").strip()


def _note_blob(repo: Repo, ref: str, commit: str) -> str:
    return repo.git("rev-parse", "-q", "--verify", f"{ref}:{commit}", check=False).strip()


def _size(repo: Repo, blob: str) -> int:
    return int(repo.git("cat-file", "-s", blob))


@pytest.mark.parametrize("how", HOW)
def test_fetch_keeps_my_note_and_names_the_oversized_one(
    tmp_path: Path, environ: dict[str, str], clock: Clock, how: str
) -> None:
    s = scene(tmp_path, environ, clock)
    mine_before = _note_blob(s.victim, NOTES_REF, s.noted)
    commit, big = _attack(s, how)
    size = _size(s.attacker, big)
    why = f"note blob {big[:12]} is {size} bytes, over the 1 MiB limit; not parsed"
    result = s.victim.run("fetch")
    assert (result.code, result.err) == (0, "")
    assert result.out.splitlines()[1:] == [
        f"origin's note on {commit[:12]} left out, not published from here: {why}"
    ]
    # My note stays mine, readable: the oversized one is only in the remote-tracking ref.
    assert _note_blob(s.victim, NOTES_REF, s.noted) == mine_before
    assert _note_blob(s.victim, NOTES_REF, commit) == (mine_before if commit == s.noted else "")
    assert _note_blob(s.victim, TRACKING_REF, commit) == big
    shown = json.loads(ok(s.victim, "show", s.noted, "--json"))
    assert s.pushed <= {record["id"] for record in shown["records"]}
    assert s.mine <= ids(s.victim) and invalid(s.victim) == 1
    assert s.victim.run("check").code == 0  # my task is found ("no task matches" before)
    cached = s.victim.run("history", "--all", "--json").out
    s.victim.run("doctor", "--drop-cache")
    assert s.victim.run("history", "--all", "--json").out == cached
    doctor = s.victim.run("doctor")
    assert f"FAIL  invalid   note on {commit[:12]} in {TRACKING_REF}: {why}" in doctor.out
    context, err = session_start(s.victim)
    assert err == "" and s.unpushed in context
    # Fetched again: nothing new, nothing said again.
    assert ok(s.victim, "fetch") == "origin: every record it has is already here\n"
    # The push keeps every record the remote has (the oversized note holds none that can be
    # read), at the first attempt, and leaves the oversized note out.
    pushed = json.loads(ok(s.victim, "push", "--json"))
    assert (pushed["outcome"], pushed["attempts"], pushed["fetched"]) == ("pushed", 1, [])
    remote_notes = s.victim.git("ls-tree", "-r", f"{TRACKING_REF}")
    assert big not in remote_notes
    assert s.victim.git("ls-remote", str(s.remote), NOTES_REF).split()[0] == s.victim.notes_ref()
    assert s.mine <= ref_ids(s.remote)
    third = third_clone(s, tmp_path, clock)
    assert s.mine <= ids(third) and invalid(third) == 0
    assert ok(s.victim, "sync") == (
        "origin: every record it has is already here\norigin already has every record\n"
    )


def test_a_first_fetch_leaves_the_oversized_note_out(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """A clone with no records of its own yet takes every other note of the remote's."""
    s = scene(tmp_path, environ, clock)
    ok(s.victim, "push")
    s.attacker.git("fetch", "-q", "origin", f"+{NOTES_REF}:{NOTES_REF}")
    commit, big = _attack(s, "on a commit of its own")
    third = third_clone(s, tmp_path, clock)
    assert _note_blob(third, NOTES_REF, commit) == ""
    assert _note_blob(third, NOTES_REF, s.noted) == _note_blob(s.victim, NOTES_REF, s.noted)
    assert s.mine <= ids(third) and invalid(third) == 1  # the tracking ref's, counted
    third.run("doctor", "--drop-cache")
    assert s.mine <= ids(third) and invalid(third) == 1
    assert ok(third, "fetch") == "origin: every record it has is already here\n"
    assert ok(third, "push") == "published records to origin\n"
    assert big not in third.git("ls-tree", "-r", TRACKING_REF)
    assert s.mine <= ref_ids(s.remote)
