"""The first read of one task, which picks the task's notes by their bytes, on the clones a
team has: a clone behind a bare remote whose notes a plain `git fetch` brought to the
remote-tracking ref (and which wrote its own since), a shallow clone whose boundary cuts
the task's history, and a partial clone that lacks the note blobs. Each read that names a
task equals the same read after every note was read (`doctor --drop-cache`-fresh views),
with a teammate's hostile note among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.env import Clock
from tests.support.filtered import but_invalid, picked
from tests.support.git import bare, git
from tests.support.repo import Repo, clone

TRACKING = "refs/notes/remotes/origin/majordomus"
READS = [
    ("history", "--task", "{p}", "--json"),
    ("history", "--task", "{p}", "--all", "--json"),
    ("resume", "--peek", "--task", "{p}", "--json"),
    ("context", "--task", "{p}", "--json"),
    ("check", "--task", "{p}", "--json"),
]


def _hostile(task: str, head: str) -> str:
    """A teammate's note written with plain git: a record of `task` with a newline, an
    escape sequence and invisible characters in its fields, and one with a forged id."""
    return (
        f'[[checkpoint]]\nv = 1\nid = "c-00000000000000d1"\ntask = "{task}"\nhead = "{head}"\n'
        'at = 2026-11-01T03:20:00Z\nauthor = "Mallory <m@example.com>"\n'
        'body = "fine\\n\\u001b[2J\\u202egnp.exe\\u200b\\r\\nrun this"\n'
        f'[[checkpoint]]\nv = 1\nid = "c-FORGED"\ntask = "{task}"\nhead = "{head}"\n'
        'at = 2026-11-01T03:21:00Z\nauthor = "Mallory <m@example.com>"\nbody = "forged"\n'
    )


def _team(tmp_path: Path, environ: dict[str, str], clock: Clock) -> tuple[Path, Repo, str]:
    """A bare remote that serves filters, and the clone that pushed to it: two tasks with
    records on main, on a branch merged into it and on a branch that is not, and a hostile
    note; the task id returned is the one the reads name."""
    remote = bare(tmp_path / "remote.git", environ)
    git(remote, environ, "config", "uploadpack.allowFilter", "true")
    alice = clone(str(remote), tmp_path / "alice", environ, clock)
    alice.commit("initial")
    task = alice.task("queue drops acks")
    other = alice.task("flaky timeout")
    for n in range(3):
        alice.commit(f"main {n}", {"f": f"{n}\n"})
        clock.advance(60)
        assert alice.run("checkpoint", "--task", task, f"main {n}").code == 0
    alice.git("checkout", "-q", "-b", "side", "HEAD~1")
    alice.commit("side", {"g": "side\n"})
    clock.advance(60)
    assert alice.run("checkpoint", "--task", task, "on the side").code == 0
    assert alice.run("checkpoint", "--task", other, "other on the side").code == 0
    alice.git("checkout", "-q", "main")
    alice.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    alice.git("checkout", "-q", "-b", "unmerged")
    alice.commit("unmerged", {"h": "u\n"})
    clock.advance(60)
    assert alice.run("checkpoint", "--task", task, "off main").code == 0
    alice.git("checkout", "-q", "main")
    for n in range(3):
        alice.commit(f"later {n}", {"f": f"later {n}\n"})
        clock.advance(60)
        assert alice.run("checkpoint", "--task", other, f"other {n}").code == 0
    clock.advance(60)
    handover = ("handover", "--task", task, "-o", "find it", "-s", "half", "-n", "bisect")
    assert alice.run(*handover).code == 0
    head = alice.head()
    alice.git("notes", "--ref=majordomus", "append", "-m", _hostile(task, head), "HEAD~1")
    alice.commit("after the handover", {"f": "after\n"})
    alice.git("push", "-q", "origin", "main", "side", "unmerged", "refs/notes/majordomus")
    return remote, alice, task


def _compared(repo: Repo, task: str, filtered: bool = True) -> None:
    """Every read of READS, first with no views (by the filter, when `filtered`), then
    after a full read: the same answer, but for `invalid`, which a filtered session read
    counts among fewer notes."""
    prefix = task[:8]
    reads = [tuple(a.format(p=prefix) for a in argv) for argv in READS]
    first = []
    for argv in reads:
        repo.drop_caches()
        first.append(picked(repo, argv) if filtered else repo.run(*argv))
    repo.drop_caches()
    assert repo.run("history", "--all", "--json").code == 0  # every note read, the views kept
    for argv, early in zip(reads, first, strict=True):
        late = repo.run(*argv)
        assert (early.code, early.err) == (late.code, late.err), argv
        if late.code not in (0, 1):
            continue
        got, want = json.loads(early.out), json.loads(late.out)
        if argv[0] == "history":
            assert got["records"] == want["records"], argv
            assert (got["rev"], got["hidden"]) == (want["rev"], want["hidden"]), argv
            assert got["invalid"] <= want["invalid"]
        else:
            assert early.out == late.out or but_invalid(got, want), argv


def test_a_clone_behind_a_bare_remote_reads_its_fetched_task_as_a_full_read(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """The records a plain `git fetch` left on the remote-tracking ref, and the clone's
    own since, on another branch checked out: the first read of the task equals the full
    read, and lists both."""
    remote, alice, task = _team(tmp_path, environ, clock)
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    bob.git("fetch", "-q", "origin", f"+refs/notes/majordomus:{TRACKING}")
    assert bob.notes_ref() is None  # every record is on the tracking ref alone
    bob.git("checkout", "-q", "side")
    bob.commit("bob on the side", {"b": "b\n"})
    clock.advance(60)
    assert bob.run("checkpoint", "--task", task[:8], "bob's own").code == 0
    clock.advance(60)
    alice.commit("alice again", {"f": "again\n"})
    assert alice.run("checkpoint", "--task", task, "alice again").code == 0
    alice.git("push", "-q", "origin", "main", "refs/notes/majordomus")
    bob.git("fetch", "-q", "origin", "main", f"+refs/notes/majordomus:{TRACKING}")
    _compared(bob, task)
    bob.drop_caches()
    history = json.loads(picked(bob, ("history", "--task", task[:8], "--all", "--json")).out)
    bodies = {r.get("body") for r in history["records"]}
    assert {"bob's own", "alice again", "off main", "on the side"} <= bodies
    assert not any(r["id"] == "c-FORGED" for r in history["records"])
    bob.git("checkout", "-q", "main")
    _compared(bob, task)


@pytest.mark.parametrize("depth", ["2", "6"])
def test_a_shallow_clone_reads_its_task_as_a_full_read(
    tmp_path: Path, environ: dict[str, str], clock: Clock, depth: str
) -> None:
    """A boundary that cuts the task's history (records past it), whether it falls after
    the merge or before it: the first read of the task equals the full read."""
    remote, _alice, task = _team(tmp_path, environ, clock)
    ci = clone(f"file://{remote}", tmp_path / "ci", environ, clock, "--depth", depth)
    ci.git("fetch", "-q", "origin", "+refs/notes/majordomus:refs/notes/majordomus")
    assert (ci.path / ".git" / "shallow").is_file()
    _compared(ci, task)
    ci.drop_caches()
    history = json.loads(ci.run("history", "--task", task[:8], "--json").out)
    every = json.loads(ci.run("history", "--task", task[:8], "--all", "--json").out)
    assert len(history["records"]) < len(every["records"])  # some are past the boundary


def test_a_partial_clone_reads_its_task_as_a_full_read(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """No note blob is here until it is read: the first read of the task (which may not
    pick by bytes it does not have) equals the full read."""
    remote, _alice, task = _team(tmp_path, environ, clock)
    dev = clone(f"file://{remote}", tmp_path / "dev", environ, clock, "--filter=blob:none")
    dev.git("fetch", "-q", "origin", "+refs/notes/majordomus:refs/notes/majordomus")
    _compared(dev, task, filtered=False)
