"""The whole notes corpus (fixtures/notes/) through the public read path.

Every note is written byte for byte onto its own commit (or tree, or blob) of a
real repository with git's own plumbing; `show --json` on that commit must list
exactly the records the manifest states, count exactly its invalid parts, and
the text output must show escaped what the note holds raw. `history --all` over
the whole corpus lists each record once and counts every invalid part.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.support.cli import run_cli
from tests.support.contracts import strict_json, terminal_problems
from tests.support.corpus import NOTES, CorpusNote, corpus, corpus_files
from tests.support.env import hermetic_environ
from tests.support.git import git, make_clone
from tests.support.hostile_notes import Planted, case_of, plant

CORPUS = corpus()


class Shown(NamedTuple):
    code: int
    records: list[str]  # "kind id"
    invalid: int
    text: str


class Planting(NamedTuple):
    path: Path
    environ: dict[str, str]
    planted: dict[str, Planted]  # by file
    shown: dict[str, Shown]  # by file, for notes on commits


@pytest.fixture(scope="module")
def planting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planting]:
    root = tmp_path_factory.mktemp("corpus")
    (root / "home").mkdir()
    environ = hermetic_environ(root / "home")
    clone = make_clone(root / "clone", environ)
    planted = plant(clone, environ, [case_of(note) for note in CORPUS])
    by_file = {note.file: p for note, p in zip(CORPUS, planted, strict=True)}
    shown = {}
    for note in CORPUS:
        if note.on not in ("commit", "gitlink", "symlink"):
            continue
        target = by_file[note.file].target
        result = run_cli(clone, environ, "show", target, "--json")
        document: dict[str, Any] = {"records": [], "invalid": -1}
        if result.code == 0:
            document = strict_json(result.out)
        records = [f"{r['kind']} {r['id']}" for r in document["records"]]
        text = run_cli(clone, environ, "show", target).out
        shown[note.file] = Shown(result.code, records, document["invalid"], text)
    yield Planting(clone, environ, by_file, shown)


def _params() -> list[object]:
    return [
        pytest.param(
            note,
            id=note.name,
            marks=[pytest.mark.xfail(strict=True, reason=note.known_failure)]
            if note.known_failure
            else [],
        )
        for note in CORPUS
    ]


def test_the_manifest_names_every_file_once() -> None:
    assert sorted(note.file for note in CORPUS) == corpus_files()
    assert (NOTES / "manifest.toml").is_file()


@pytest.mark.parametrize("note", _params())
def test_each_note_reads_as_its_manifest_says(planting: Planting, note: CorpusNote) -> None:
    if note.on in ("tree", "blob"):
        # Not on a commit: `show` cannot name it; history --all lists it (below).
        listed = _history(planting, "--all")
        assert set(note.records) <= {f"{r['kind']} {r['id']}" for r in listed["records"]}
        return
    shown = planting.shown[note.file]
    assert (shown.code, shown.records, shown.invalid) == (0, list(note.records), note.invalid)
    assert terminal_problems(shown.text) == []
    for text in note.escaped:
        assert text in shown.text, (text, shown.text)


def _history(planting: Planting, *extra: str) -> dict[str, Any]:
    result = run_cli(planting.path, planting.environ, "history", "--json", *extra)
    assert result.code == 0, result.err
    document = strict_json(result.out)
    assert isinstance(document, dict)
    return document


def test_history_reads_the_whole_corpus_once(planting: Planting) -> None:
    every = _history(planting, "--all")
    reachable = _history(planting)
    listed = [f"{r['kind']} {r['id']}" for r in every["records"]]
    assert len(listed) == len(set(listed)), "a record listed twice"
    assert set(listed) == {record for note in CORPUS for record in note.records}
    assert every["invalid"] == reachable["invalid"] == sum(note.invalid for note in CORPUS)
    assert reachable["hidden"] == sum(note.hidden for note in CORPUS)


def test_git_made_notes_are_what_git_makes_today(tmp_path: Path) -> None:
    """The git-written notes of the corpus are still byte for byte what git writes."""
    (tmp_path / "home").mkdir()
    env = {**hermetic_environ(tmp_path / "home"), "GIT_EDITOR": "true"}
    clone = make_clone(tmp_path / "clone", env)

    def notes(*args: str, ref: str = "majordomus", environ: dict[str, str] = env) -> str:
        return git(clone, environ, "notes", f"--ref={ref}", *args)

    def on_head() -> bytes:
        return notes("show", "HEAD").encode()

    checkpoint = NOTES / "valid/checkpoint.toml"
    notes("add", "-m", checkpoint.read_text(), "HEAD")
    assert on_head() == (NOTES / "foreign/git-notes-add-m.toml").read_bytes()
    notes("append", "-m", "looked at this again at 9: still flaky on CI, see build 412", "HEAD")
    assert on_head() == (NOTES / "foreign/git-notes-append-a-line.toml").read_bytes()

    # A squash under rewriteMode = concatenate joins the two notes with a blank line.
    every_kind = (NOTES / "valid/every-kind.toml").read_bytes()
    squashed = (NOTES / "foreign/rewrite-concatenate-squash.toml").read_bytes()
    assert squashed.startswith(every_kind + b"\n")
    second = tmp_path / "second.toml"
    second.write_bytes(squashed[len(every_kind) + 1 :])
    git(clone, env, "config", "notes.rewriteRef", "refs/notes/majordomus")
    git(clone, env, "config", "notes.rewriteMode", "concatenate")
    for message, note in (("three", NOTES / "valid/every-kind.toml"), ("four", second)):
        git(clone, env, "commit", "-q", "--allow-empty", "-m", message)
        notes("add", "-F", str(note), "HEAD")
    git(
        clone,
        {**env, "GIT_SEQUENCE_EDITOR": "sed -i 2s/^pick/squash/"},
        "rebase",
        "-q",
        "-i",
        "HEAD~2",
    )
    assert on_head() == squashed

    # `notes merge -s union` of a note with the same note plus one more record.
    git(clone, env, "commit", "-q", "--allow-empty", "-m", "five")
    notes("add", "-F", str(checkpoint), "HEAD")
    notes("add", "-F", str(checkpoint), "HEAD", ref="other")
    notes("append", "-F", str(second), "HEAD", ref="other")
    notes("merge", "-q", "-s", "union", "refs/notes/other")
    assert on_head() == (NOTES / "foreign/git-notes-merge-union.toml").read_bytes()
