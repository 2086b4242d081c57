"""Notes a person edited with git: every table that parses on its own is still read,
and writes append after the person's bytes, never over them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.env import AUTHOR, Clock
from tests.support.git import bare, git
from tests.support.repo import Repo, clone


def as_json(repo: Repo, *argv: str, code: int = 0) -> Any:
    result = repo.run(*argv, "--json")
    assert result.code == code, result.err
    return json.loads(result.out)


def checkpoint(repo: Repo, body: str) -> str:
    record_id: str = as_json(repo, "checkpoint", body)["record"]["id"]
    return record_id


def note_bytes(repo: Repo, rev: str = "HEAD") -> str:
    return repo.git("notes", "--ref=majordomus", "show", rev)


def shown(repo: Repo, rev: str = "HEAD") -> tuple[list[str], int]:
    result = as_json(repo, "show", rev)
    return [record["id"] for record in result["records"]], result["invalid"]


def test_a_line_appended_by_hand_hides_no_record(repo: Repo) -> None:
    task = repo.task()
    first = checkpoint(repo, "reproduced under load")
    repo.git("notes", "--ref=majordomus", "append", "-m", "a note from a person", "HEAD")
    assert note_bytes(repo).endswith('"\n\na note from a person\n')
    assert shown(repo) == ([task, first], 1)
    history = as_json(repo, "history")
    assert ([r["id"] for r in history["records"]], history["invalid"]) == ([first, task], 1)
    assert as_json(repo, "check")["last_checkpoint"]["id"] == first
    listed = as_json(repo, "task", "list")["tasks"]
    assert [(t["task"], t["title"]) for t in listed] == [(task, "queue drops acks under load")]
    assert repo.run("history").out.endswith(
        "(1 invalid notes or records skipped; majordomus doctor lists them)\n"
    )
    head = repo.head()[:12]
    doctor = [line for line in repo.run("doctor").out.splitlines() if "invalid " in line]
    assert doctor == [
        f"FAIL  invalid   note on {head}: 1 part that is not TOML (written by hand?) skipped "
        f"(see git notes --ref=majordomus show {head})"
    ]

    # The next write appends after the person's bytes, which stay byte for byte.
    before = note_bytes(repo)
    repo.clock.advance(60)
    second = checkpoint(repo, "the retry loop re-enters before the ack")
    after = note_bytes(repo)
    assert after.startswith(before + "\n[[checkpoint]]\n")
    assert shown(repo) == ([task, first, second], 1)
    assert as_json(repo, "check")["last_checkpoint"]["id"] == second
    assert as_json(repo, "doctor", "--drop-cache", code=1)
    assert shown(repo) == ([task, first, second], 1)  # afresh, the same


def test_an_edit_in_the_middle_costs_only_the_edited_record(repo: Repo) -> None:
    task = repo.task()
    ids = [checkpoint(repo, body) for body in ("first", "second", "third")]
    environ = {**repo.environ, "GIT_EDITOR": "sed -i -e 's/^body = \"second\"$/body = second?/'"}
    repo.environ = environ
    repo.git("notes", "--ref=majordomus", "edit", "HEAD")
    assert "body = second?\n" in note_bytes(repo)
    assert shown(repo) == ([task, ids[0], ids[2]], 1)
    history = as_json(repo, "history", "--task", task)
    assert [r["id"] for r in history["records"]] == [ids[2], ids[0], task]


def test_tables_with_text_between_them(repo: Repo) -> None:
    task = repo.task()
    ids = [checkpoint(repo, body) for body in ("first", "second")]
    text = note_bytes(repo)
    head, first, second = text.split("\n\n")
    mangled = (
        "notes from the meeting:\n"
        + head
        + "\n\nTODO: ask Bob\n\n"
        + first
        + "\nsee also the ticket\n\n"
        + second
        + "\n\n-- Ada\n"
    )
    path = repo.path.parent / "note.txt"
    path.write_text(mangled)
    repo.git("notes", "--ref=majordomus", "add", "-f", "-F", str(path), "HEAD")
    assert shown(repo) == ([task, *ids], 4)
    assert as_json(repo, "check")["last_checkpoint"]["id"] == ids[1]


def test_a_foreign_note_concatenated_by_a_squash(repo: Repo) -> None:
    repo.git("config", "notes.rewriteRef", "refs/notes/majordomus")
    task = repo.task()
    repo.commit("reviewed", {"a.txt": "a"})
    repo.git("notes", "--ref=majordomus", "add", "-m", "Reviewed-by: Bob", "HEAD")
    repo.commit("fix", {"b.txt": "b"})
    mine = checkpoint(repo, "the fix holds")
    environ = {
        **repo.environ,
        "GIT_SEQUENCE_EDITOR": "sed -i -e '2s/^pick/squash/'",
        "GIT_EDITOR": "true",
    }
    repo.environ = environ
    repo.git("rebase", "-q", "-i", "HEAD~2")
    assert note_bytes(repo).startswith("Reviewed-by: Bob\n\n[[checkpoint]]\n")
    assert shown(repo) == ([mine], 1)
    history = as_json(repo, "history")
    assert [r["id"] for r in history["records"]] == [mine, task]
    repo.clock.advance(5)
    again = checkpoint(repo, "still holds after the squash")
    assert note_bytes(repo).startswith("Reviewed-by: Bob\n\n[[checkpoint]]\n")
    assert shown(repo) == ([mine, again], 1)


def test_a_plain_key_named_like_a_kind_no_longer_blocks_writes(repo: Repo) -> None:
    task = repo.task()
    repo.commit("c")
    repo.git("notes", "--ref=majordomus", "add", "-m", 'checkpoint = "a plain key"', "HEAD")
    before = note_bytes(repo)
    mine = checkpoint(repo, "written anyway")
    assert note_bytes(repo).startswith(before)
    assert shown(repo) == ([mine], 1)
    assert task


def test_hand_edits_survive_merges_both_ways(tmp_path: Path, environ: dict[str, str]) -> None:
    clock = Clock()
    remote = bare(tmp_path / "remote.git", environ)
    alice = clone(str(remote), tmp_path / "alice", environ, clock)
    alice.commit("initial")
    alice.git("push", "-q", "origin", "main")
    task = alice.task()
    first = checkpoint(alice, "alice, first")
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    assert bob.run("task", "use", task).code == 0
    bob.git("notes", "--ref=majordomus", "append", "-m", "Bob was here", "HEAD")
    bobs = checkpoint(bob, "bob, on the same commit")
    alices = checkpoint(alice, "alice, second")
    assert alice.run("push").code == 0
    # Bob's side is partly readable, Alice's valid: merged on the partly readable bytes.
    before = note_bytes(bob)
    result = bob.run("sync")
    assert result.code == 0, result.err
    assert note_bytes(bob).startswith(before)
    everyone = sorted([task, first, bobs, alices])
    assert sorted(shown(bob)[0]) == everyone and shown(bob)[1] == 1
    # Alice takes Bob's note (a fast-forward), then both write again and merge once more.
    assert alice.run("fetch").code == 0
    assert sorted(shown(alice)[0]) == everyone and shown(alice)[1] == 1
    late = checkpoint(alice, "alice, late")
    assert alice.run("push").code == 0
    later = checkpoint(bob, "bob, later")
    assert bob.run("sync").code == 0
    text = note_bytes(bob)
    assert text.count("Bob was here") == 1
    ids, invalid = shown(bob)
    assert sorted(ids) == sorted([*everyone, late, later]) and invalid == 1
    assert (
        git(
            tmp_path,
            environ,
            "--git-dir",
            str(remote),
            "notes",
            "--ref=majordomus",
            "show",
            bob.head(),
        )
        == text
    )
    assert AUTHOR in text


def test_a_write_onto_a_note_of_many_records_parses_it_once_and_what_it_writes_once(
    repo: Repo, monkeypatch: Any
) -> None:
    """A session that checkpoints on one commit grows one note: each write reads that note
    once and parses it once as it is and once as written (not twice and four times), after
    a line a person appended with git too; the person's bytes stay, and every record reads
    back."""
    from majordomus import notes
    from majordomus.blobs import NoteBlobs

    repo.task()
    ids = [checkpoint(repo, f"step {n}") for n in range(30)]
    repo.git("notes", "--ref=majordomus", "append", "-m", "a line by hand", "HEAD")
    before = note_bytes(repo)
    parses: list[int] = []
    parse_note = notes.parse_note

    def counted(data: bytes) -> Any:
        if data.count(b"[[checkpoint]]") >= 30:
            parses.append(len(data))
        return parse_note(data)

    for module in ("notes", "blobs", "writer"):
        monkeypatch.setattr(f"majordomus.{module}.parse_note", counted)
    reads: list[int] = []
    data = NoteBlobs.data

    def read(self: NoteBlobs, blob_id: str) -> bytes:
        found = data(self, blob_id)
        if found.count(b"[[checkpoint]]") >= 30:
            reads.append(len(found))
        return found

    monkeypatch.setattr(NoteBlobs, "data", read)
    ids.append(checkpoint(repo, "one more"))
    assert len(parses) == 3  # the views carried over the hand edit; then the write's two
    # The views read the note before the edit and after it; the write reads it again (a
    # parse keeps no bytes) but takes the views' parse of it.
    assert len(reads) == 3 and len(set(reads)) == 2
    parses.clear()
    reads.clear()
    ids.append(checkpoint(repo, "and one more"))  # nothing read before: one read, two parses
    assert (len(reads), len(parses)) == (1, 2)
    assert note_bytes(repo).startswith(before.rstrip("\n"))
    listed = as_json(repo, "history")["records"]
    assert [r["id"] for r in listed if r["kind"] == "checkpoint"] == ids[::-1]
