"""A notes ref that does not point at a commit: the local one stops every command (exit 3,
naming the fix); a remote-tracking one is left out, with one warning line."""

from __future__ import annotations

import pytest

from tests.support.cli import Result
from tests.support.repo import Repo

NOTES_REF = "refs/notes/majordomus"
REMOTE_REF = "refs/notes/remotes/origin/majordomus"
COMMANDS = [
    ("history",),
    ("history", "--all"),
    ("show",),
    ("show", "--markdown"),
    ("check",),
    ("check", "--all"),
    ("task", "list"),
    ("task", "use", "0000"),
    ("task", "new", "another"),
    ("resume",),
    ("resume", "--peek"),
    ("checkpoint", "x"),
    ("handover", "-o", "o", "-s", "s", "-n", "n"),
    ("watch", "--count", "1"),
]


def local_sentence(target: str) -> str:
    return (
        f"majordomus: {NOTES_REF} points at {target[:12]}, which is not a commit; majordomus "
        "will not overwrite it: inspect it with git cat-file -t, then repair or move it.\n"
    )


def remote_warning(target: str) -> str:
    return (
        f"majordomus: warning: {REMOTE_REF} points at {target[:12]}, which is not a commit, so "
        f"its records are left out; remove it with git update-ref -d {REMOTE_REF}, then run "
        "majordomus fetch.\n"
    )


def broken(repo: Repo, ref: str, what: str) -> str:
    task = repo.task()
    assert repo.run("checkpoint", "before").code == 0
    repo.git("update-ref", "refs/notes/kept", NOTES_REF)
    if what == "blob":
        target = repo.git("hash-object", "-w", "--stdin", input="not a commit").strip()
    else:
        target = repo.git("rev-parse", "HEAD^{tree}").strip()
    repo.git("update-ref", ref, target)
    assert task
    return target


@pytest.mark.parametrize("what", ["blob", "tree"])
def test_every_command_exits_3_naming_the_fix(repo: Repo, what: str) -> None:
    target = broken(repo, NOTES_REF, what)
    for argv in COMMANDS:
        for extra in ([], ["--json"]) if argv[0] not in ("watch", "task") else ([],):
            if argv == ("show", "--markdown") and extra:
                continue
            result = repo.run(*argv, *extra)
            assert (result.code, result.out, result.err) == (3, "", local_sentence(target)), argv
    assert repo.git("rev-parse", NOTES_REF).strip() == target
    doctor = repo.run("doctor")
    assert doctor.code == 1
    assert f"FAIL  notes     {local_sentence(target)[12:-2]}" in doctor.out.splitlines()


def test_a_remote_tracking_ref_that_is_not_a_commit(repo: Repo) -> None:
    """Left out of every command, writes included, with one warning line; the reads answer
    as they do once the ref is removed."""
    target = broken(repo, REMOTE_REF, "blob")
    for argv in COMMANDS:
        result = repo.run(*argv)
        assert result.code != 3 and result.err.startswith(remote_warning(target)), argv
        assert "Traceback" not in result.err, argv
    assert repo.git("rev-parse", REMOTE_REF).strip() == target
    doctor = repo.run("doctor")
    assert (doctor.code, f"FAIL  notes     {remote_warning(target)[21:-2]}" in doctor.out) == (
        1,
        True,
    )
    assert doctor.err == remote_warning(target)
    reads = [argv for argv in COMMANDS if argv[0] in ("history", "show", "check")]
    answers = []
    for argv in reads:
        result = repo.run(*argv, *(["--json"] if argv[1:] != ("--markdown",) else []))
        assert result.err == remote_warning(target), argv
        answers.append(Result(result.code, result.out, ""))
    repo.git("update-ref", "-d", REMOTE_REF)
    for argv, answer in zip(reads, answers, strict=True):
        assert repo.run(*argv, *(["--json"] if argv[1:] != ("--markdown",) else [])) == answer
    assert repo.run("history").code == 0
