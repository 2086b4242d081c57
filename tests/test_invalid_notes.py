"""Foreign and invalid notes: skipped, counted, listed by doctor; their text never raw."""

from __future__ import annotations

import json

from tests.support.env import AUTHOR
from tests.support.repo import Repo


def foreign_checkpoint(repo: Repo, task: str, body_toml: str, record_id: str = "c-f0") -> str:
    return (
        f'[[checkpoint]]\nv = 1\nid = "{record_id}"\ntask = "{task}"\nhead = "{repo.head()}"\n'
        f'at = 2026-11-30T03:30:00Z\nauthor = "{AUTHOR}"\nbody = {body_toml}\n'
    )


def test_invalid_notes_are_skipped_and_counted(repo: Repo) -> None:
    task = repo.task()
    first = repo.head()
    for text in ("plain text note", "[[checkpoint]]\nv = 1\n"):
        repo.commit("c")
        repo.git("notes", "--ref=majordomus", "add", "-m", text, "HEAD")
    repo.commit("big")
    big = repo.path.parent / "big.toml"
    big.write_text("# " + "x" * (1024 * 1024) + "\n")
    repo.git("notes", "--ref=majordomus", "add", "-F", str(big), "HEAD")
    history = json.loads(repo.run("history", "--json").out)
    assert history["invalid"] == 3
    assert [r["kind"] for r in history["records"]] == ["task"]
    shown = json.loads(repo.run("show", "--json", "HEAD~1").out)
    assert (shown["records"], shown["invalid"]) == ([], 1)
    assert repo.run("check").code == 0
    assert repo.run("history").out == (
        f"2026-11-30T03:00:00Z  task {task}  on {first[:12]}\n"
        f"    by {AUTHOR}\n"
        "    queue drops acks under load\n"
        "(3 invalid notes or records skipped; majordomus doctor lists them)\n"
    )
    doctor = repo.run("doctor")
    assert doctor.code == 1
    lines = [line for line in doctor.out.splitlines() if line.startswith("FAIL")]
    head, parent, grandparent = (
        repo.git("rev-parse", r).strip()[:12] for r in ("HEAD", "HEAD~1", "HEAD~2")
    )
    blob = repo.git("hash-object", str(big)).strip()[:12]
    assert sorted(lines) == sorted(
        [
            f"FAIL  invalid   note on {grandparent}: 1 part that is not TOML (written by hand?) "
            f"skipped (see git notes --ref=majordomus show {grandparent})",
            f"FAIL  invalid   note on {head} in refs/notes/majordomus: note blob {blob} is "
            "1048579 bytes, over the 1 MiB limit; not parsed",
            f"FAIL  invalid   note on {parent}: 1 invalid record(s) skipped "
            f"(see git notes --ref=majordomus show {parent})",
            "FAIL  notes     4 notes, 1 records, 3 invalid",
            "FAIL  config    notes.rewriteRef does not include refs/notes/majordomus: records "
            "will not follow amended or rebased commits (run majordomus init)",
        ]
    )
    assert task


def test_text_from_notes_is_escaped_in_text_and_json(repo: Repo) -> None:
    task = repo.task()
    hostile = '"\\u001b]8;;http://evil\\u0007click\\u001b]8;;\\u0007 \\u009b31m \\u202egnp.exe"'
    repo.git(
        "notes", "--ref=majordomus", "append", "-m", foreign_checkpoint(repo, task, hostile), "HEAD"
    )
    text = repo.run("show").out
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
    assert "\\x1b]8;;http://evil\\x07click\\x1b]8;;\\x07 \\x9b31m \\u202egnp.exe" in text
    raw = repo.run("history", "--json").out
    assert "\x1b" not in raw and "\x9b" not in raw and "\u202e" not in raw
    body = json.loads(raw)["records"][0]["body"]
    assert body == "\x1b]8;;http://evil\x07click\x1b]8;;\x07 \x9b31m \u202egnp.exe"  # lossless
    repo.clock.advance(1800)  # to 03:30, when the foreign checkpoint is dated
    check = repo.run("check", "--json").out
    assert "\x1b" not in check and json.loads(check)["last_checkpoint"]["id"] == "c-f0"


def test_duplicate_ids_are_listed_once(repo: Repo) -> None:
    task = repo.task()
    note = foreign_checkpoint(repo, task, '"same"', "c-dup")
    repo.git("notes", "--ref=majordomus", "append", "-m", note + "\n" + note, "HEAD")
    history = json.loads(repo.run("history", "--json").out)
    assert [r["id"] for r in history["records"]] == ["c-dup", task]
