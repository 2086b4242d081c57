"""doctor: each finding with what to do; exit 0 healthy, 1 not."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.env import AUTHOR, Clock, doctor_signing_lines
from tests.support.git import lose_object
from tests.support.repo import Repo, clone, seeded


def test_a_fresh_clone_needs_init_and_then_is_healthy(repo: Repo) -> None:
    repo.task()
    before = repo.run("doctor")
    assert before.code == 1
    assert before.out == (
        "ok    profile   default (interval 1200s, checkpoint_max 400, handover_max 800)\n"
        f"ok    identity  {AUTHOR}\n"
        "FAIL  config    notes.rewriteRef does not include refs/notes/majordomus: records "
        "will not follow amended or rebased commits (run majordomus init)\n"
        "ok    locks     no lock files\n"
        + doctor_signing_lines(1)
        + "ok    notes     1 notes, 1 records, 0 invalid\n"
    )
    assert repo.run("init").code == 0
    after = repo.run("doctor", "--json")
    assert after.code == 0
    assert json.loads(after.out)["findings"][2] == {
        "topic": "config",
        "healthy": True,
        "status": "ok",
        "detail": "records follow amended and rebased commits",
    }


def test_rewrite_turned_off_and_a_remote_without_records_refspec(repo: Repo) -> None:
    repo.run("init")
    repo.git("config", "notes.rewrite.rebase", "false")
    repo.git("remote", "add", "upstream", "https://example.invalid/repo.git")
    result = repo.run("doctor")
    assert result.code == 1
    config = [line for line in result.out.splitlines() if " config " in line]
    assert config == [
        "FAIL  config    notes.rewrite.rebase is false: records will not follow git rebase "
        "(git config --unset notes.rewrite.rebase)",
        "ok    config    plain git fetch does not bring upstream's records (majordomus fetch "
        "upstream does; majordomus init --remote upstream makes git fetch do it too)",
    ]


def test_a_note_with_a_hand_edit_whose_object_is_lost_since_is_a_finding(repo: Repo) -> None:
    """doctor names what is wrong rather than stopping on it: a note someone appended a line
    to by hand (an invalid part doctor looks into) whose object is lost after the read
    cache summarised it is one more finding (exit 1), never exit 3 or a traceback."""
    repo.task()
    repo.commit("work")
    assert repo.run("checkpoint", "before the hand edit").code == 0
    repo.git("notes", "--ref=majordomus", "append", "-m", "a line by hand", "HEAD")
    first = repo.run("doctor")
    assert first.code == 1 and "not TOML (written by hand?)" in first.out
    lost = repo.git("notes", "--ref=majordomus", "list", "HEAD").strip()
    lose_object(repo.path, repo.environ, lost)
    result = repo.run("doctor")
    assert (result.code, result.err) == (1, "")
    assert f"note object {lost[:12]} is missing from this clone" in result.out
    assert "Traceback" not in result.out


def test_a_ci_clone_without_identity_or_init_is_healthy_for_reading(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    # What docs/ci.md describes: a fresh clone, no git identity, no init, records fetched.
    remote, writer = seeded(tmp_path, environ, clock)
    writer.task()
    assert writer.run("push").code == 0
    ci_environ = {
        k: v for k, v in environ.items() if not k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))
    }
    ci_environ["EMAIL"] = ""
    ci = clone(str(remote), tmp_path / "ci", ci_environ, clock)
    ci.git("config", "user.useConfigOnly", "true")
    assert ci.run("fetch").code == 0
    result = ci.run("doctor")
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines(keepends=True)
    assert lines[1].startswith(
        "note  identity  none, which reading records does not need; to write them: git has "
        "no identity to sign records with ("  # git's own words follow: which part is missing
    )
    assert lines[1].endswith(
        'run git config --global user.name "Your Name" and '
        "git config --global user.email you@example.com.\n"
    )
    assert "".join(lines[:1] + lines[2:]) == (
        "ok    profile   default (interval 1200s, checkpoint_max 400, handover_max 800)\n"
        "note  config    not needed for reading; to write records: notes.rewriteRef does not "
        "include refs/notes/majordomus: records will not follow amended or rebased commits "
        "(run majordomus init)\n"
        "ok    config    plain git fetch does not bring origin's records (majordomus fetch "
        "origin does; majordomus init --remote origin makes git fetch do it too)\n"
        "ok    locks     no lock files\n"
        + doctor_signing_lines(1)
        + "ok    notes     1 notes, 1 records, 0 invalid\n"
    )
    found = json.loads(ci.run("doctor", "--json").out)
    assert found["healthy"] is True
    assert [(f["topic"], f["status"]) for f in found["findings"][:3]] == [
        ("profile", "ok"),
        ("identity", "note"),
        ("config", "note"),
    ]
