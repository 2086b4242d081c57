"""doctor names a shallow or partial clone and what it limits: informational, never unhealthy."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.env import Clock
from tests.support.repo import Repo, clone, seeded


def served(tmp_path: Path, environ: dict[str, str], clock: Clock) -> tuple[str, Repo]:
    """A remote that serves filtered clones, with three commits and a record on each."""
    remote, first = seeded(tmp_path, environ, clock)
    first.git("-C", str(remote), "config", "uploadpack.allowFilter", "true")
    task = first.task()
    for n in range(3):
        first.commit(f"step {n}", {f"step{n}.txt": f"{n}\n"})
        assert first.run("checkpoint", "--task", task, f"step {n} done").code == 0
    first.git("push", "-q", "origin", "main")
    assert first.run("push").code == 0
    return f"file://{remote}", first


def clone_findings(repo: Repo) -> tuple[list[str], list[dict[str, object]]]:
    text = repo.run("doctor")
    as_json = repo.run("doctor", "--json")
    assert "Traceback" not in text.err + as_json.err
    lines = [line for line in text.out.splitlines() if line[6:15].rstrip() == "clone"]
    findings = [f for f in json.loads(as_json.out)["findings"] if f["topic"] == "clone"]
    return lines, findings


def missing_note_objects(repo: Repo) -> int:
    """What git itself says the notes ref lacks (it never fetches while answering this)."""
    out = repo.git("rev-list", "--objects", "--no-walk", "--missing=print", "refs/notes/majordomus")
    return sum(line.startswith("?") for line in out.splitlines())


def test_a_full_clone_says_nothing_about_its_shape(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    url, _ = served(tmp_path, environ, clock)
    full = clone(url, tmp_path / "full", environ, clock)
    assert full.run("init").code == 0
    assert clone_findings(full) == ([], [])
    assert full.run("doctor").code == 0


def test_a_shallow_clone_is_named_with_what_it_limits(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    url, _ = served(tmp_path, environ, clock)
    ci = clone(url, tmp_path / "ci", environ, clock, "--depth", "2")
    assert ci.run("init").code == 0
    assert ci.run("fetch").code == 0
    boundary = (ci.path / ".git" / "shallow").read_text().split()
    assert len(boundary) == 1
    detail = (
        "shallow clone (history cut at 1 commit listed in .git/shallow): a label that depends "
        "on history past the cut is unknown, never guessed, and records on commits past it "
        "are not reachable from here; git fetch --unshallow gives exact answers"
    )
    assert clone_findings(ci) == (
        [f"ok    clone     {detail}"],
        [{"topic": "clone", "healthy": True, "status": "ok", "detail": detail}],
    )
    # Informational: the clone is healthy.
    assert ci.run("doctor").code == 0
    ci.git("fetch", "-q", "--unshallow")
    assert clone_findings(ci) == ([], [])


def test_a_blobless_clone_is_named_with_the_note_objects_it_lacks(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    url, _ = served(tmp_path, environ, clock)
    ci = clone(url, tmp_path / "ci", environ, clock, "--filter=blob:none")
    assert ci.run("init").code == 0
    lines, findings = clone_findings(ci)
    detail = (
        "partial clone of origin (filter blob:none): objects the filter left out, note "
        "objects included, are not here until fetched; majordomus fetch origin brings every "
        "note object in one batch"
    )
    assert (lines, findings) == (
        [f"ok    clone     {detail}"],
        [{"topic": "clone", "healthy": True, "status": "ok", "detail": detail}],
    )
    # The notes fetched by plain git, through the filter: their blobs stay on the remote.
    ci.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    missing = missing_note_objects(ci)
    assert missing > 0
    as_json = ci.run("doctor", "--json")  # counts them before its read fetches them
    findings = [f for f in json.loads(as_json.out)["findings"] if f["topic"] == "clone"]
    detail = (
        "partial clone of origin (filter blob:none): objects the filter left out, note "
        f"objects included, are not here until fetched; {missing} note objects are not here "
        "yet; majordomus fetch origin brings every note object in one batch"
    )
    assert findings == [{"topic": "clone", "healthy": True, "status": "ok", "detail": detail}]
    assert missing_note_objects(ci) == 0  # the read brought them, in one batch


def test_a_treeless_clone_is_named_too(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    url, _ = served(tmp_path, environ, clock)
    ci = clone(url, tmp_path / "ci", environ, clock, "--filter=tree:0", "--depth", "1")
    assert ci.run("init").code == 0
    lines, _ = clone_findings(ci)
    assert [line.split(" (")[0] for line in lines] == [
        "ok    clone     shallow clone",
        "ok    clone     partial clone of origin",
    ]
    assert "(filter tree:0)" in lines[1]
    assert ci.run("doctor").code == 0
