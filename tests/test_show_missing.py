"""`show` on a commit this clone lacks: it says so, and lists what the notes hold for it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Clock, Repo
from tests.remote_fixtures import bare, clone


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
