"""A blob, a tree or an annotated tag pushed by plain git as the remote's notes ref: after a
plain `git fetch` the remote-tracking notes ref points at it. Every command of the victim's,
writes included, keeps working and warns once; doctor reports it; `majordomus fetch` of
that remote exits 4 and changes nothing; once the remote is repaired, all is as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import Result
from tests.support.env import Clock
from tests.support.git import NOTES_REF
from tests.support.notes import ref_ids
from tests.support.repo import git_push
from tests.support.trees import (
    TRACKING_REF,
    Scene,
    blob,
    ids,
    ok,
    scene,
    session_start,
    third_clone,
)

READS = [
    ("history", "--all", "--json"),
    ("history", "--json"),
    ("show", "--json"),
    ("check", "--json"),
    ("task", "list", "--json"),
    ("resume", "--peek", "--json"),
    ("context", "--json"),
    ("history",),
    ("context",),
]


def _attack(s: Scene, what: str) -> str:
    """The attacker's object, pushed by plain git as the remote's notes ref."""
    if what == "blob":
        target = blob(s.attacker, "not a commit\n")
    elif what == "tree":
        target = s.attacker.git("rev-parse", f"{NOTES_REF}^{{tree}}").strip()
    else:  # an annotated tag of the notes commit itself
        s.attacker.git("tag", "-a", "-m", "records", "notes-tag", NOTES_REF)
        target = s.attacker.git("rev-parse", "notes-tag").strip()
    s.attacker.git("push", "-q", "-f", "origin", f"{target}:{NOTES_REF}")
    return target


def warning(target: str) -> str:
    return (
        f"majordomus: warning: {TRACKING_REF} points at {target[:12]}, which is not a commit, "
        f"so its records are left out; remove it with git update-ref -d {TRACKING_REF}, then "
        "run majordomus fetch.\n"
    )


def refused(target: str) -> str:
    return (
        f"majordomus: origin's {NOTES_REF} points at {target[:12]}, which is not a commit, so "
        "its records cannot be read; nothing here was changed (ask whoever published it to "
        f"repair {NOTES_REF} on origin).\n"
    )


@pytest.mark.parametrize("what", ["blob", "tree", "annotated tag"])
def test_every_command_keeps_working_after_a_plain_git_fetch(
    tmp_path: Path, environ: dict[str, str], clock: Clock, what: str
) -> None:
    s = scene(tmp_path, environ, clock)
    target = _attack(s, what)
    s.victim.git("fetch", "-q", "origin")
    assert s.victim.git("rev-parse", TRACKING_REF).strip() == target
    answers = []
    for argv in READS:
        result = s.victim.run(*argv)
        assert result.code == 0 and result.err == warning(target), (argv, result.err)
        if "--json" in argv:
            json.loads(result.out)
        answers.append(Result(result.code, result.out, ""))
    assert s.mine <= ids(s.victim)
    written = s.victim.run("checkpoint", "still writing")
    assert (written.code, written.err) == (0, warning(target))
    context, err = session_start(s.victim)  # the hook's stdout stays one JSON answer
    assert err == "" and s.unpushed in context and "still writing" in context
    doctor = s.victim.run("doctor", "--json")
    assert (doctor.code, doctor.err) == (1, warning(target))
    details = [f["detail"] for f in json.loads(doctor.out)["findings"] if not f["healthy"]]
    assert details == [warning(target)[len("majordomus: warning: ") : -2]]
    # The reads answer as they do once the ref is gone (the checkpoint written meanwhile
    # aside: the answers are compared from here on).
    answers = [Result(0, s.victim.run(*argv).out, "") for argv in READS]
    s.victim.run("doctor", "--drop-cache")  # and as a fresh read does, every cache dropped
    assert [s.victim.run(*argv) for argv in READS] == [
        Result(0, answer.out, warning(target)) for answer in answers
    ]
    local = s.victim.notes_ref()
    s.victim.git("update-ref", "-d", TRACKING_REF)
    assert [s.victim.run(*argv) for argv in READS] == answers
    s.victim.git("update-ref", TRACKING_REF, target)
    # fetch, push and sync of that remote: exit 4, one sentence, nothing here changed.
    for argv in (("fetch",), ("push",), ("sync",)):
        result = s.victim.run(*argv)
        assert (result.code, result.out, result.err) == (4, "", refused(target)), argv
    assert s.victim.notes_ref() == local
    assert s.victim.git("rev-parse", TRACKING_REF).strip() == target
    # A plain git push: the pre-push hook warns and never fails the push.
    s.victim.commit("more work")
    code, err = git_push(s.victim, "-q", "origin", "HEAD:main")
    assert code == 0 and "Traceback" not in err and err.count("\n") == 1, err


def test_fetch_changes_nothing_and_the_repaired_remote_is_read_again(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    s = scene(tmp_path, environ, clock)
    tracked = s.victim.git("rev-parse", TRACKING_REF).strip()
    good = s.attacker.notes_ref()
    assert good is not None
    target = _attack(s, "blob")
    before = s.victim.git("for-each-ref")
    result = s.victim.run("fetch")
    assert (result.code, result.out, result.err) == (4, "", refused(target))
    assert s.victim.git("for-each-ref") == before  # the tracking ref back where it was
    assert s.victim.git("rev-parse", TRACKING_REF).strip() == tracked
    assert s.victim.run("history", "--json").err == ""  # no warning: nothing was changed
    by_url = s.victim.run("fetch", str(s.remote))
    assert (by_url.code, by_url.out) == (4, "")
    assert s.victim.git("for-each-ref") == before  # no private ref left behind
    # Repaired (the notes commit pushed back): fetch, push and a third clone see everything.
    s.attacker.git("push", "-q", "-f", "origin", f"{good}:{NOTES_REF}")
    ok(s.victim, "fetch")
    assert ok(s.victim, "push") == "published records to origin\n"
    assert s.mine <= ref_ids(s.remote)
    assert s.mine <= ids(third_clone(s, tmp_path, clock))
