"""`show` on a commit this clone lacks: it says so, and lists what the notes hold for it."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2

from tests.support.env import EMAIL, NAME, Clock
from tests.support.git import NOTES_REF, bare
from tests.support.repo import Repo, clone


def alice_and_bob(tmp_path: Path, environ: dict[str, str]) -> tuple[Repo, Repo, str, str]:
    """Alice records on a commit she never pushes, then publishes the records; Bob fetches."""
    clock = Clock()
    remote = bare(tmp_path / "remote.git", environ)
    alice = clone(str(remote), tmp_path / "alice", environ, clock)
    alice.commit("initial")
    alice.git("push", "-q", "origin", "main")
    alice.task()
    alice.git("checkout", "-q", "-b", "local-only")
    unpushed = alice.commit("never pushed")
    result = alice.run("checkpoint", "on a commit only Alice has", "--json")
    record_id: str = json.loads(result.out)["record"]["id"]
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    return alice, bob, unpushed, record_id


def test_show_lists_the_notes_of_a_commit_this_clone_lacks(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    alice, bob, unpushed, record_id = alice_and_bob(tmp_path, environ)
    assert bob.pygit.get(unpushed) is None  # the commit is not in this clone
    listed = json.loads(bob.run("history", "--all", "--json").out)["records"]
    assert [(r["id"], r["commit"]) for r in listed if r["kind"] == "checkpoint"] == [
        (record_id, unpushed)
    ]
    for name in (unpushed[:12], unpushed, unpushed[:7].upper()):
        result = bob.run("show", name)
        assert result.code == 0, result.err
        assert result.err == (
            f"majordomus: warning: {unpushed[:12]} names no commit in this clone; "
            "listing what the notes hold for it (fetch the commit to see it in history).\n"
        )
        assert result.out == alice.run("show", unpushed).out
    doc = json.loads(bob.run("show", unpushed[:12], "--json").out)
    assert doc == {**json.loads(alice.run("show", unpushed, "--json").out), "missing": True}
    assert "missing" not in json.loads(alice.run("show", unpushed, "--json").out)
    markdown = bob.run("show", unpushed[:12], "--markdown")
    assert markdown.code == 0 and record_id in markdown.out


def test_an_unknown_id_with_no_notes_is_still_refused(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    _, bob, unpushed, _ = alice_and_bob(tmp_path, environ)
    unknown = "0123456789ab" if not unpushed.startswith("0123") else "fedcba987654"
    result = bob.run("show", unknown)
    assert (result.code, result.out) == (3, "")
    assert result.err == (
        f"majordomus: cannot find a commit named '{unknown}'; give a branch, tag or commit id.\n"
    )
    assert bob.run("show", "no-such-branch").code == 3


def two_commits_sharing_a_prefix(repo: Repo, digits: int) -> tuple[str, str]:
    """Two commits (on no branch) whose ids share their first `digits` hex digits."""
    pygit = repo.pygit
    head = pygit.head.target
    tree = pygit[head].peel(pygit2.Tree).id
    signature = pygit2.Signature(NAME, EMAIL, int(repo.clock.now.timestamp()), 0)
    seen: dict[str, str] = {}
    for n in range(16**digits):  # a pair comes long before: the birthday bound
        oid = str(pygit.create_commit(None, signature, signature, f"try {n}", tree, [head]))
        other = seen.setdefault(oid[:digits], oid)
        if other != oid:
            return other, oid
    raise AssertionError("no two commits share a prefix")


def test_an_abbreviated_id_of_two_absent_commits_is_refused_naming_both(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    source = Repo.init(tmp_path / "source", environ, clock)
    source.task()
    first, second = two_commits_sharing_a_prefix(source, 5)
    for commit in (first, second):
        source.git("checkout", "-q", "--detach", commit)
        assert source.run("checkpoint", f"on {commit[:12]}").code == 0
    # A clone of the notes alone: the commits they are attached to are not in it.
    lacking = Repo.init(tmp_path / "lacking", environ, clock)
    lacking.git("fetch", "-q", str(source.path), f"{NOTES_REF}:{NOTES_REF}")
    assert lacking.pygit.get(first) is None and lacking.pygit.get(second) is None
    prefix = first[:5]
    result = lacking.run("show", prefix)
    low, high = sorted((first, second))
    assert (result.code, result.out, result.err) == (
        3,
        "",
        f"majordomus: '{prefix}' is ambiguous: notes are attached to {low[:12]}, "
        f"{high[:12]}; give more digits.\n",
    )
    # Enough digits to tell them apart: the one commit's notes, said to be missing here.
    unique = next(n for n in range(6, 41) if first[:n] != second[:n])
    shown = lacking.run("show", first[:unique], "--json")
    assert shown.code == 0, shown.err
    doc = json.loads(shown.out)
    assert (doc["commit"], doc["missing"]) == (first, True)
    assert [r["body"] for r in doc["records"] if r["kind"] == "checkpoint"] == [f"on {first[:12]}"]
