"""Records are append-only across clones: a removal by hand stays in the clone that made it.

Record sets are compared with an independent reader: `git notes list` and
`git cat-file`, parsed with `tomllib`, never through majordomus.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

from tests.support.env import Clock
from tests.support.repo import Repo, clone, git_push, seeded

NOTES = "refs/notes/majordomus"


def git_ids(gitdir: Path, environ: dict[str, str], ref: str = NOTES) -> set[str]:
    """Every record id under `ref`, as git itself lists and prints the notes."""
    base = ["git", f"--git-dir={gitdir}"]
    listed = subprocess.run(
        [*base, "notes", f"--ref={ref}", "list"],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        return set()
    blobs = [line.split()[0] for line in listed.stdout.splitlines()]
    ids: set[str] = set()
    for blob in blobs:
        text = subprocess.run(
            [*base, "cat-file", "blob", blob], env=environ, capture_output=True, check=True
        ).stdout.decode()
        for tables in tomllib.loads(text).values():
            ids.update(table["id"] for table in tables if "id" in table)
    return ids


def ids_of(repo: Repo) -> set[str]:
    return git_ids(repo.path / ".git", repo.environ)


def record(repo: Repo, body: str) -> str:
    result = repo.run("checkpoint", body, "--json")
    assert result.code == 0, result.err
    record_id: str = json.loads(result.out)["record"]["id"]
    return record_id


def ok(repo: Repo, *argv: str) -> str:
    result = repo.run(*argv)
    assert (result.code, result.err) == (0, ""), result.err
    return result.out


def alice_publishes_unpushed(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> tuple[Path, Repo, set[str]]:
    """Alice records on a commit she never pushes, then publishes the notes."""
    remote, alice = seeded(tmp_path, environ, clock)
    alice.commit("work in progress", {"wip.txt": "wip\n"})
    mine = {alice.task("queue drops acks"), record(alice, "reproduced on the unpushed commit")}
    ok(alice, "push")
    assert git_ids(remote, environ) == mine
    return remote, alice, mine


def test_a_hand_prune_then_sync_never_deletes_on_the_remote(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, alice, mine = alice_publishes_unpushed(tmp_path, environ, clock)
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    ok(bob, "fetch")
    assert ids_of(bob) == mine
    bob.git("notes", "--ref=majordomus", "prune")
    assert ids_of(bob) == set()  # git dropped the notes on the commit Bob lacks
    ok(bob, "sync")
    assert git_ids(remote, environ) == mine
    assert ids_of(bob) == mine  # and the sync's fetch brought them back to Bob
    ok(alice, "fetch")
    assert ids_of(alice) == mine


def test_fetch_never_fast_forwards_over_a_deletion(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    # The deletion reaches the remote by a plain `git push` of the notes ref (no hook).
    remote, alice, mine = alice_publishes_unpushed(tmp_path, environ, clock)
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    bob.git("fetch", "-q", "origin", f"{NOTES}:{NOTES}")
    bob.git("notes", "--ref=majordomus", "prune")
    bob.git("push", "-q", "--no-verify", "origin", NOTES)
    assert git_ids(remote, environ) == set()
    out = ok(alice, "fetch")
    assert out == "origin: 0 new records (merged)\n"
    assert ids_of(alice) == mine
    pruned = alice.git("rev-parse", "refs/notes/remotes/origin/majordomus").strip()
    assert alice.git("rev-parse", f"{NOTES}^2").strip() == pruned
    ok(alice, "push")
    assert git_ids(remote, environ) == mine


def test_a_record_removed_by_hand_comes_back_with_the_next_fetch(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, _alice, mine = alice_publishes_unpushed(tmp_path, environ, clock)
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    ok(bob, "fetch")
    ok(bob, "task", "new", "flaky login")
    record(bob, "Bob's own, on main")
    ok(bob, "push")
    theirs = ids_of(bob) - mine
    assert len(theirs) == 2
    main = bob.head()
    # A note the remote has, removed by hand: the next fetch restores it.
    bob.git("notes", "--ref=majordomus", "remove", main)
    assert ids_of(bob) == mine
    out = ok(bob, "fetch")
    assert out == "origin: 2 new records (restored records removed here)\n"
    assert ids_of(bob) == mine | theirs
    # A record the remote never had, removed by hand: gone for good, in this clone only.
    bob.commit("later", {"later.txt": "later\n"})
    record(bob, "never published")
    bob.git("notes", "--ref=majordomus", "remove", bob.head())
    assert ok(bob, "fetch") == "origin: every record it has is already here\n"
    assert ids_of(bob) == mine | theirs
    assert git_ids(remote, environ) == mine | theirs


def test_a_hand_prune_or_remove_then_plain_git_push_through_the_hook(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, alice, mine = alice_publishes_unpushed(tmp_path, environ, clock)
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    ok(bob, "init")
    bob.git("fetch", "-q")
    ok(bob, "fetch")
    bob.git("notes", "--ref=majordomus", "prune")
    ok(bob, "task", "new", "flaky login")
    theirs = ids_of(bob)
    bob.commit("fix", {"fix.txt": "fixed\n"})
    assert git_push(bob, "-q", "origin", "main") == (0, "majordomus: published records to origin\n")
    assert git_ids(remote, environ) == mine | theirs
    # git notes remove of a published note, then a plain push: the remote keeps it.
    first = bob.git("rev-parse", "HEAD~1").strip()
    bob.git("notes", "--ref=majordomus", "remove", first)
    assert ids_of(bob) == mine
    bob.commit("more", {"more.txt": "more\n"})
    assert git_push(bob, "-q", "origin", "main")[0] == 0
    assert git_ids(remote, environ) == mine | theirs
    assert ids_of(bob) == mine | theirs
    ok(alice, "fetch")
    assert ids_of(alice) == mine | theirs


def test_a_push_by_url_after_a_hand_prune_keeps_the_remote_s_records(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    # No remote-tracking ref to check against: the lease refuses, the push fetches.
    remote, _alice, mine = alice_publishes_unpushed(tmp_path, environ, clock)
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    bob.git("remote", "remove", "origin")
    ok(bob, "fetch", str(remote))
    bob.git("notes", "--ref=majordomus", "prune")
    theirs = {bob.task("flaky login")}
    report = json.loads(ok(bob, "push", str(remote), "--json"))
    assert (report["outcome"], report["attempts"]) == ("pushed", 2)
    assert report["fetched"][0]["outcome"] == "restored"
    assert git_ids(remote, environ) == mine | theirs
    assert ids_of(bob) == mine | theirs


def test_pushes_in_a_row_need_no_fetch(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, alice, _ = alice_publishes_unpushed(tmp_path, environ, clock)
    tracking = alice.git("rev-parse", "refs/notes/remotes/origin/majordomus").strip()
    assert tracking == alice.notes_ref()
    record(alice, "one more")
    report = json.loads(ok(alice, "push", "--json"))
    assert (report["attempts"], report["fetched"]) == (1, [])
    assert ok(alice, "push") == "origin already has every record\n"


def test_a_note_rewritten_by_hand_without_a_record_never_deletes_it_elsewhere(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, alice = seeded(tmp_path, environ, clock)
    task = alice.task("queue drops acks")
    kept, dropped = record(alice, "kept"), record(alice, "dropped by hand")
    alice.git("push", "-q", "--no-verify", "origin", "main")
    ok(alice, "push")
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    ok(bob, "fetch")
    head = bob.head()
    text = bob.git("notes", "--ref=majordomus", "show", head)
    tables = text.split("\n\n")
    edited = "\n\n".join(t for t in tables if dropped not in t)
    bob.git("notes", "--ref=majordomus", "add", "-f", "-m", edited, head)
    assert ids_of(bob) == {task, kept}
    bob.git("push", "-q", "--no-verify", "origin", NOTES)  # around majordomus
    assert git_ids(remote, environ) == {task, kept}
    out = ok(alice, "fetch")
    assert out == "origin: 0 new records (merged, 1 note on both sides united)\n"
    assert ids_of(alice) == {task, kept, dropped}
    ok(alice, "push")
    assert git_ids(remote, environ) == {task, kept, dropped}
    assert ok(bob, "fetch") == "origin: 1 new record (fast-forward)\n"
    assert ids_of(bob) == {task, kept, dropped}


def test_a_prune_in_a_shallow_clone_never_deletes_on_the_remote(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, alice = seeded(tmp_path, environ, clock)
    mine = {alice.task("queue drops acks"), record(alice, "on the first commit")}
    alice.commit("second", {"second.txt": "2\n"})
    mine.add(record(alice, "on the second commit"))
    alice.git("push", "-q", "--no-verify", "origin", "main")
    ok(alice, "push")
    ci = clone(f"file://{remote}", tmp_path / "ci", environ, clock, "--depth", "1")
    ok(ci, "fetch")
    ci.git("notes", "--ref=majordomus", "prune")  # the first commit is past the boundary
    assert len(ids_of(ci)) == 1
    ok(ci, "sync")
    assert git_ids(remote, environ) == mine
    assert ids_of(ci) == mine


def test_a_push_after_the_remote_lost_its_notes_ref_publishes_everything(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    # The remote's notes ref deleted (or the remote recreated): the tracking ref still holds
    # the old value, and a push leased on it was refused as stale, twelve times, exit 4.
    remote, alice = seeded(tmp_path, environ, clock)
    alice.task("queue drops acks")
    mine = record(alice, "published once")
    ok(alice, "push")
    git_remote = ["git", "--git-dir", str(remote)]
    subprocess.run([*git_remote, "update-ref", "-d", "refs/notes/majordomus"], check=True)
    assert ok(alice, "push") != ""
    shown = subprocess.run(
        [*git_remote, "notes", "--ref=majordomus", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        shown.strip()
        and mine
        in subprocess.run(
            [*git_remote, "log", "--notes=majordomus", "--format=%N", "--all"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert len(alice.sleeps) == 1  # one lease on the stale value, then a fetch prunes it
