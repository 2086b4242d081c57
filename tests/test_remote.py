"""fetch, push and sync against real remotes: bare repositories and `git daemon` on 127.0.0.1."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from tests.support import forks
from tests.support.env import Clock
from tests.support.forks import MAJORDOMUS_MAIN, Job
from tests.support.git import git_daemon
from tests.support.notes import ref_ids
from tests.support.repo import Repo, clone, history_ids, seeded


def write(repo: Repo, title: str, body: str) -> set[str]:
    """A task and a checkpoint on HEAD; their ids."""
    task = repo.task(title)
    result = repo.run("checkpoint", body, "--json")
    assert result.code == 0, result.err
    return {task, json.loads(result.out)["record"]["id"]}


def run_ok(repo: Repo, *argv: str) -> str:
    result = repo.run(*argv)
    assert result.code == 0, result.err
    assert result.err == ""
    return result.out


ORDERS = {
    "push-push-fetch": [("a", "push"), ("b", "push"), ("a", "fetch")],
    "push-fetch-push-fetch": [("a", "push"), ("b", "fetch"), ("b", "push"), ("a", "fetch")],
    "sync-sync-fetch": [("b", "sync"), ("a", "sync"), ("b", "fetch")],
    "fetch-none-push-push-fetch": [("a", "fetch"), ("b", "push"), ("a", "push"), ("b", "fetch")],
    "fetch-fetch-sync-sync-sync": [
        ("a", "fetch"),
        ("b", "fetch"),
        ("a", "sync"),
        ("b", "sync"),
        ("a", "sync"),
    ],
}


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
def test_two_clones_in_any_order_end_with_every_record(
    tmp_path: Path, environ: dict[str, str], clock: Clock, order: list[tuple[str, str]]
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    # Both write on the shared commit (one note, two writers); a also on a commit
    # only it has (a note the other side lacks entirely).
    expected = write(a, "queue drops acks", "reproduced with 50 enqueues")
    expected |= write(b, "flaky login", "only with a cold cache")
    a.commit("local only")
    expected |= {json.loads(a.run("checkpoint", "on my commit", "--json").out)["record"]["id"]}
    for who, verb in order:
        run_ok({"a": a, "b": b}[who], verb)
    assert ref_ids(a.path) == expected
    assert ref_ids(b.path) == expected
    assert ref_ids(remote) == expected
    assert history_ids(a) == history_ids(b) == sorted(expected)


def test_second_pusher_whose_remote_moved_merges_and_succeeds(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    ids_a = write(a, "queue drops acks", "reproduced")
    ids_b = write(b, "flaky login", "cold cache")
    first = json.loads(run_ok(a, "push", "--json"))
    assert first == {
        "remote": "origin",
        "outcome": "pushed",
        "notes_commit": a.notes_ref(),
        "attempts": 1,
        "fetched": [],
    }
    before = b.notes_ref()
    second = json.loads(run_ok(b, "push", "--json"))
    merged = b.notes_ref()
    assert second == {
        "remote": "origin",
        "outcome": "pushed",
        "notes_commit": merged,
        "attempts": 2,
        "fetched": [
            {
                "remote": "origin",
                "remote_commit": a.notes_ref(),
                "outcome": "merged",
                "notes_commit": merged,
                "records_added": 2,
                "copies_added": 2,
                "notes_united": 1,
                "notes_raw": 0,
                "left_out": [],
            }
        ],
    }
    # A merge commit: ours first, theirs second, never a rewrite of either.
    assert b.git("rev-parse", f"{merged}^1", f"{merged}^2").split() == [before, a.notes_ref()]
    assert ref_ids(remote) == ids_a | ids_b
    assert run_ok(a, "fetch") == "origin: 2 new records (fast-forward)\n"
    assert run_ok(a, "fetch") == "origin: every record it has is already here\n"
    assert run_ok(a, "push") == "origin already has every record\n"


def test_text_output_of_push_after_the_remote_moved(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    write(a, "queue drops acks", "reproduced")
    write(b, "flaky login", "cold cache")
    assert run_ok(a, "push") == "published records to origin\n"
    assert run_ok(b, "push") == (
        "published records to origin (origin had moved: merged 2 new records from it, 2 attempts)\n"
    )
    assert run_ok(b, "sync") == (
        "origin: every record it has is already here\norigin already has every record\n"
    )


def _concurrent_pushes(clones: list[Repo]) -> tuple[list[dict[str, object]], float]:
    """`python -m majordomus push --json` in each clone, each a process of its own, all
    started at once (forked from one Python: tests/support/forks.py)."""
    start = time.monotonic()
    pushes = [
        Job(MAJORDOMUS_MAIN, ["-C", str(r.path), "push", "--json"], r.environ) for r in clones
    ]
    outputs = []
    for done in forks.run_all(pushes):
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        outputs.append(json.loads(done.stdout))
    return outputs, time.monotonic() - start


@pytest.mark.parametrize("transport", ["file", "git-daemon"])
def test_six_clones_pushing_at_once_lose_no_record(
    tmp_path: Path, environ: dict[str, str], clock: Clock, transport: str
) -> None:
    remote, first = seeded(tmp_path, environ, clock)
    daemon = git_daemon(tmp_path, environ) if transport == "git-daemon" else nullcontext("")
    with daemon as base:
        url = f"{base}/remote.git" if base else str(remote)
        clones = [clone(url, tmp_path / f"c{i}", environ, clock) for i in range(6)]
        expected: set[str] = set()
        for i, repo in enumerate(clones):
            expected |= write(repo, f"task {i}", f"checkpoint {i}")
            if i % 2:
                repo.commit(f"work of clone {i}")
                expected |= write(repo, f"task {i} on its own commit", "here")
        outputs, elapsed = _concurrent_pushes(clones)
        attempts = sorted(int(str(out["attempts"])) for out in outputs)
        # No clone has fetched another's records: all but the first to land
        # must have been rejected, merged and retried.
        assert attempts[0] == 1
        assert all(n >= 2 for n in attempts[1:]), attempts
        assert elapsed < 60
        assert ref_ids(remote) == expected
        assert run_ok(first, "fetch") == f"origin: {len(expected)} new records (first fetch)\n"
        assert history_ids(first) == sorted(expected)


def test_two_clones_over_git_daemon(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    remote, _ = seeded(tmp_path, environ, clock)
    with git_daemon(tmp_path, environ) as base:
        a = clone(f"{base}/remote.git", tmp_path / "da", environ, clock)
        b = clone(f"{base}/remote.git", tmp_path / "db", environ, clock)
        expected = write(a, "queue drops acks", "reproduced") | write(b, "login", "cold")
        assert run_ok(b, "fetch") == "origin has no records yet\n"
        run_ok(a, "push")
        assert json.loads(run_ok(b, "push", "--json"))["attempts"] == 2
        run_ok(a, "sync")
        assert ref_ids(a.path) == ref_ids(b.path) == ref_ids(remote) == expected


def test_reads_unite_the_local_and_remote_tracking_refs(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    run_ok(b, "init")
    theirs = write(a, "queue drops acks", "reproduced")
    run_ok(a, "push")
    b.git("fetch", "-q")  # a plain git fetch, nothing merged
    assert b.notes_ref() is None
    assert history_ids(b) == sorted(theirs)
    mine = write(b, "flaky login", "cold cache")
    assert history_ids(b) == sorted(theirs | mine)
    run_ok(b, "fetch")  # now the same records sit in both refs: still each once
    assert ref_ids(b.path) == theirs | mine
    assert history_ids(b) == sorted(theirs | mine)


def test_notes_merged_by_git_itself_read_back_each_record_once(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    shared = write(a, "queue drops acks", "reproduced")
    run_ok(a, "push")
    run_ok(b, "fetch")
    mine = write(b, "flaky login", "cold cache")
    theirs = {json.loads(a.run("checkpoint", "more", "--json").out)["record"]["id"]}
    run_ok(a, "push")
    b.git("fetch", "-q", "origin", "+refs/notes/majordomus:refs/notes/remotes/origin/majordomus")
    b.git(
        "notes",
        "--ref=majordomus",
        "merge",
        "-q",
        "-s",
        "union",
        "refs/notes/remotes/origin/majordomus",
    )
    note = b.git("notes", "--ref=majordomus", "show", "HEAD")
    # git's union repeats the records both sides had...
    assert note.count("[[task]]") == 3
    # ...and every reader lists each once.
    shown = json.loads(run_ok(b, "show", "--json"))
    assert sorted(r["id"] for r in shown["records"]) == sorted(shared | mine | theirs)
    assert shown["invalid"] == 0
    b.git("update-ref", "-d", "refs/notes/remotes/origin/majordomus")
    assert history_ids(b) == sorted(shared | mine | theirs)


def test_git_notes_merge_uses_union_after_init(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    run_ok(b, "init")
    theirs = write(a, "queue drops acks", "reproduced")
    run_ok(a, "push")
    mine = write(b, "flaky login", "cold cache")
    b.git("fetch", "-q")
    # No -s: the strategy init configured keeps the note valid TOML.
    b.git("notes", "--ref=majordomus", "merge", "-q", "refs/notes/remotes/origin/majordomus")
    b.git("update-ref", "-d", "refs/notes/remotes/origin/majordomus")
    shown = json.loads(run_ok(b, "show", "--json"))
    assert sorted(r["id"] for r in shown["records"]) == sorted(theirs | mine)
    assert shown["invalid"] == 0


# ---- refusals and failures ---------------------------------------------------------------------


def test_fetch_from_a_missing_remote_exits_4(repo: Repo) -> None:
    write(repo, "queue drops acks", "reproduced")
    before = repo.notes_ref()
    result = repo.run("fetch", "nowhere")
    assert (result.code, result.out) == (4, "")
    assert result.err == (
        "majordomus: cannot fetch records from nowhere: 'nowhere' does not appear to be a git "
        "repository; nothing was merged (check the remote with git fetch nowhere).\n"
    )
    assert repo.notes_ref() == before


def test_push_to_a_missing_default_remote_exits_4(repo: Repo) -> None:
    write(repo, "queue drops acks", "reproduced")
    before = repo.notes_ref()
    result = repo.run("push")
    assert (result.code, result.out) == (4, "")
    assert result.err == (
        "majordomus: cannot push records to origin: 'origin' does not appear to be a git "
        "repository; your records are intact in refs/notes/majordomus.\n"
    )
    assert repo.notes_ref() == before


@pytest.mark.parametrize("name", ["-uorigin", "--upload-pack=touch x", "a\nb", ""])
def test_a_remote_that_git_would_read_as_an_option_is_refused(repo: Repo, name: str) -> None:
    result = repo.run("push", "--", name)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"majordomus: {name!r} is not a remote name or URL; give one that git remote -v lists.\n"
    )


def test_nothing_to_publish_and_nothing_to_fetch(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, a = seeded(tmp_path, environ, clock)
    assert run_ok(a, "push") == "no records here to publish yet\n"
    assert json.loads(run_ok(a, "fetch", "--json")) == {
        "remote": "origin",
        "remote_commit": None,
        "outcome": "none",
        "notes_commit": None,
        "records_added": 0,
        "copies_added": 0,
        "notes_united": 0,
        "notes_raw": 0,
        "left_out": [],
    }
    assert a.notes_ref() is None


def test_a_remote_that_refuses_the_records_exits_4_at_once(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    hook = remote / "hooks" / "update"
    hook.write_text('#!/bin/sh\ncase "$1" in refs/notes/*) exit 1;; esac\nexit 0\n')
    hook.chmod(0o755)
    write(a, "queue drops acks", "reproduced")
    before = a.notes_ref()
    result = a.run("push")
    assert (result.code, result.out) == (4, "")
    assert result.err == (
        "majordomus: origin refused the records: [remote rejected] (hook declined); your records "
        "are intact in refs/notes/majordomus; ask the remote's owner to accept "
        "refs/notes/majordomus.\n"
    )
    assert a.notes_ref() == before
    assert a.sleeps == []


def test_push_gives_up_after_a_bounded_number_of_attempts(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    write(b, "flaky login", "cold cache")
    run_ok(b, "push")
    write(a, "queue drops acks", "reproduced")
    # A writer that never lets go of the remote's ref (and no waiting for it).
    (remote / "refs" / "notes" / "majordomus.lock").write_text("")
    a.git("--git-dir", str(remote), "config", "core.filesRefLockTimeout", "0")
    before = a.notes_ref()
    result = a.run("push")
    assert (result.code, result.out) == (4, "")
    assert result.err.startswith(
        "majordomus: origin kept moving: 12 pushes of the records were rejected ([remote rejected] "
    )
    assert result.err.endswith(
        "; your records are intact in refs/notes/majordomus; run majordomus push again.\n"
    )
    assert len(a.sleeps) == 11
    # Every retry fetched and merged first: the local ref holds both sides now.
    assert ref_ids(a.path) == ref_ids(b.path) | ref_ids(a.path)
    assert a.notes_ref() != before


def test_fetched_records_that_are_not_a_commit_are_refused(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, a = seeded(tmp_path, environ, clock)
    write(a, "queue drops acks", "reproduced")
    before = a.notes_ref()
    blob = a.git("hash-object", "-w", "--stdin", input="not a commit\n").strip()
    a.git("push", "-q", "origin", f"{blob}:refs/notes/majordomus")
    tracking = "refs/notes/remotes/origin/majordomus"
    assert a.git("rev-parse", "-q", "--verify", tracking, check=False) == ""
    result = a.run("fetch")
    assert (result.code, result.out) == (4, "")
    assert result.err == (
        f"majordomus: origin's refs/notes/majordomus points at {blob[:12]}, which is not a "
        "commit, so its records cannot be read; nothing here was changed (ask whoever "
        "published it to repair refs/notes/majordomus on origin).\n"
    )
    assert a.notes_ref() == before
    assert a.git("rev-parse", "-q", "--verify", tracking, check=False) == ""  # as it was


def test_fetch_and_push_by_url(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    theirs = write(a, "queue drops acks", "reproduced")
    run_ok(a, "push", str(remote))
    assert run_ok(b, "fetch", str(remote)) == f"{remote}: 2 new records (first fetch)\n"
    # A URL has no remote-tracking ref: nothing is left behind but the merge.
    assert b.git("for-each-ref", "--format=%(refname)").split() == [
        "refs/heads/main",
        "refs/notes/majordomus",
        "refs/remotes/origin/HEAD",
        "refs/remotes/origin/main",
    ]
    assert ref_ids(b.path) == theirs


def test_a_password_in_a_url_is_never_printed(repo: Repo) -> None:
    write(repo, "queue drops acks", "reproduced")
    result = repo.run("fetch", "https://ada:s3cret@127.0.0.1:9/records.git")
    assert (result.code, result.out) == (4, "")
    assert "s3cret" not in result.err
    assert result.err.startswith(
        "majordomus: cannot fetch records from https://***@127.0.0.1:9/records.git: "
    )
