"""The cached benchmark repositories: built once with git fast-import, cloned for each run.

A cached repository is never written to after it is built; every run works on
local clones (objects hard-linked) so writes and commit-graph changes stay there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from corpus import (
    GENERATOR_VERSION,
    Expectation,
    Plan,
    PlannedNote,
    Shape,
    commit_time,
    plan,
    render_note,
)

Log = Callable[[str], None]

MANIFEST = "manifest.json"
FILES_PER_DIR = 20
DIRS = 10
GET_MARK_BATCH = 512  # answers (41 bytes each) stay well inside a pipe buffer
DEFAULT_GRAPH = "generation v2 (git's default)"
GRAPH_VARIANTS: Mapping[str, int | None] = {  # name -> commitGraph.generationVersion
    "none": None,
    "generation v1": 1,
    DEFAULT_GRAPH: 2,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Fixture:
    """A built repository and the facts about it the benchmark relies on."""

    path: Path
    shape: Shape
    head: str
    notes_commit: str
    handover_commit: str
    expectation: Expectation
    build_seconds: float


def cache_root(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "majordomus-bench"


def ensure_fixture(
    shape: Shape, root: Path, env: Mapping[str, str], log: Log, *, rebuild: bool = False
) -> Fixture:
    """The cached repository for `shape`, built first when missing, stale or asked to."""
    target = root / shape.key
    _prune_stale(root, log)
    if rebuild and target.exists():
        shutil.rmtree(target)
    if not (target / MANIFEST).is_file():
        _build(shape, target, env, log)
    fixture = _load(target, shape)
    _verify(fixture, env)
    return fixture


def _prune_stale(root: Path, log: Log) -> None:
    """Remove repositories an older generator built: they can never be used again."""
    current = f"g{GENERATOR_VERSION}-"
    for path in root.glob("g*-c*"):
        if path.is_dir() and not path.name.startswith(current) and ".building-" not in path.name:
            log(f"removing {path} (built by an older generator)")
            shutil.rmtree(path, ignore_errors=True)


def run_git(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> str:
    """git in `cwd`, its stdout; RuntimeError with git's own words when it fails."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=dict(env), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout


def _build(shape: Shape, target: Path, env: Mapping[str, str], log: Log) -> None:
    started = time.monotonic()
    building = target.with_name(f"{target.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    repo = building / "repo"
    run_git(["init", "-q", "-b", "main", str(repo)], env, building)
    log(f"building {shape.commits:,} commits / {shape.notes:,} notes in {building}")
    data = plan(shape)
    shas = _fast_import(data, repo, env, log)
    log("writing the commit-graph")
    run_git(["commit-graph", "write", "--reachable"], env, repo)
    run_git(["reset", "-q", "--hard", "main"], env, repo)
    manifest = {
        "shape": dataclasses.asdict(shape),
        "head": run_git(["rev-parse", "main"], env, repo).strip(),
        "notes_commit": run_git(["rev-parse", "refs/notes/majordomus"], env, repo).strip(),
        "handover_commit": shas[shape.handover_index],
        "expectation": dataclasses.asdict(data.expectation),
        "build_seconds": round(time.monotonic() - started, 1),
    }
    _validate_notes(data, shas, repo, env, log)
    (building / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    log(f"built in {manifest['build_seconds']} s")


@contextlib.contextmanager
def fast_import(repo: Path, env: Mapping[str, str]) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """`git fast-import` in `repo`: the stream to write and where it answers (marks); the
    stream is ended and the import checked when the block ends."""
    proc = subprocess.Popen(
        ["git", "fast-import", "--quiet", "--done"],
        cwd=repo,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    yield proc.stdin, proc.stdout
    proc.stdin.write(b"done\n")
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError(f"git fast-import failed with exit code {proc.returncode}")


def _fast_import(data: Plan, repo: Path, env: Mapping[str, str], log: Log) -> dict[int, str]:
    """One fast-import stream: the commits, then one notes commit holding every note."""
    with fast_import(repo, env) as (stream, answers):
        _write_commits(stream, data.shape.commits, log)
        shas = _get_marks(stream, answers, [note.index for note in data.notes])
        log(f"writing {len(data.notes):,} notes")
        _write_notes_commit(stream, data.notes, shas, data.shape.commits)
    return shas


def _data(stream: IO[bytes], payload: bytes) -> None:
    stream.write(b"data %d\n%s\n" % (len(payload), payload))


def _identity(index: int) -> bytes:
    stamp = int(commit_time(index).timestamp())
    return b"Ada Lovelace <ada@example.com> %d +0000" % stamp


def _write_commits(stream: IO[bytes], commits: int, log: Log) -> None:
    for index in range(commits):
        if index and index % 20_000 == 0:
            log(f"  {index:,} commits streamed")
        directory, module = divmod(index * 7919 % (DIRS * FILES_PER_DIR), FILES_PER_DIR)
        path = b"src/pkg%d/mod%02d.py" % (directory, module)
        who = _identity(index)
        stream.write(
            b"commit refs/heads/main\nmark :%d\nauthor %s\ncommitter %s\n" % (index + 1, who, who)
        )
        _data(stream, b"Adjust %s (change %d)" % (path, index))
        if index:
            stream.write(b"from :%d\n" % index)
        stream.write(b"M 100644 inline %s\n" % path)
        _data(stream, b'"""Module %s."""\n\nREVISION = %d\n' % (path, index))


def _get_marks(stdin: IO[bytes], stdout: IO[bytes], indexes: Sequence[int]) -> dict[int, str]:
    """Ask fast-import for the commit ids of the noted commits (their notes quote them)."""
    shas: dict[int, str] = {}
    for start in range(0, len(indexes), GET_MARK_BATCH):
        batch = indexes[start : start + GET_MARK_BATCH]
        stdin.write(b"".join(b"get-mark :%d\n" % (index + 1) for index in batch))
        stdin.flush()
        for index in batch:
            shas[index] = stdout.readline().decode("ascii").strip()
    return shas


def _write_notes_commit(
    stream: IO[bytes], notes: Sequence[PlannedNote], shas: Mapping[int, str], commits: int
) -> None:
    who = _identity(commits)
    stream.write(b"commit refs/notes/majordomus\nauthor %s\ncommitter %s\n" % (who, who))
    _data(stream, b"Notes added by 'majordomus'")
    for note in notes:
        stream.write(b"N inline :%d\n" % (note.index + 1))
        _data(stream, render_note(note.records, shas[note.index], note.foreign).encode("utf-8"))


def _validate_notes(
    data: Plan, shas: Mapping[int, str], repo: Path, env: Mapping[str, str], log: Log
) -> None:
    """Read every note back through git and parse it: the data set must be spec-valid TOML."""
    log("validating the notes with git and tomllib")
    listed = run_git(["notes", "--ref=majordomus", "list"], env, repo).splitlines()
    if len(listed) != len(data.notes):
        raise RuntimeError(f"git lists {len(listed)} notes, expected {len(data.notes)}")
    blobs = {commit: blob for blob, commit in (line.split() for line in listed)}
    texts = _cat_blobs([blobs[shas[note.index]] for note in data.notes], repo, env)
    for note, text in zip(data.notes, texts, strict=True):
        _check_note(tomllib.loads(text), len(note.records), shas[note.index])
    top = run_git(["ls-tree", "--name-only", "refs/notes/majordomus"], env, repo).split()
    if any(len(name) != 2 for name in top):
        raise RuntimeError("the notes tree is not fanned out the way git writes it")


def _cat_blobs(blobs: Sequence[str], repo: Path, env: Mapping[str, str]) -> list[str]:
    done = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=repo,
        env=dict(env),
        input="".join(f"{blob}\n" for blob in blobs).encode("ascii"),
        capture_output=True,
        check=True,
    )
    texts: list[str] = []
    offset = 0
    for _ in blobs:
        header_end = done.stdout.index(b"\n", offset)
        size = int(done.stdout[offset:header_end].split()[2])
        texts.append(done.stdout[header_end + 1 : header_end + 1 + size].decode("utf-8"))
        offset = header_end + 1 + size + 1
    return texts


RECORD_KINDS = ("task", "checkpoint", "handover", "resume")


def _check_note(document: Mapping[str, object], records: int, head: str) -> None:
    # Tables of other kinds are the corpus's foreign notes, appended on purpose.
    tables = [
        table
        for kind in RECORD_KINDS
        if isinstance(value := document.get(kind), list)
        for table in value
    ]
    if len(tables) != records:
        raise RuntimeError(f"note on {head} holds {len(tables)} records, expected {records}")
    for table in tables:
        if not isinstance(table, dict) or table.get("head") != head or table.get("v") != 1:
            raise RuntimeError(f"note on {head} has a record with a wrong head or version")


def _load(target: Path, shape: Shape) -> Fixture:
    manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
    if manifest["shape"] != dataclasses.asdict(shape):
        raise RuntimeError(f"{target} was built for another shape; rerun with --rebuild")
    return Fixture(
        path=target / "repo",
        shape=shape,
        head=manifest["head"],
        notes_commit=manifest["notes_commit"],
        handover_commit=manifest["handover_commit"],
        expectation=Expectation(**manifest["expectation"]),
        build_seconds=float(manifest["build_seconds"]),
    )


def _verify(fixture: Fixture, env: Mapping[str, str]) -> None:
    """Cheap checks on every run that the cached repository is still what the manifest says."""
    repo = fixture.path
    if run_git(["rev-parse", "main", "refs/notes/majordomus"], env, repo).split() != [
        fixture.head,
        fixture.notes_commit,
    ]:
        raise RuntimeError(f"{repo} changed since it was built; rerun with --rebuild")
    note = run_git(["notes", "--ref=majordomus", "show", fixture.handover_commit], env, repo)
    handovers = tomllib.loads(note).get("handover", [])
    if not any(h.get("id") == fixture.expectation.open_handover for h in handovers):
        raise RuntimeError(f"{repo}: the open handover is not where the manifest says")
    shown = run_git(["log", "--notes=majordomus", "-1", fixture.handover_commit], env, repo)
    if "[[handover]]" not in shown:
        raise RuntimeError(f"{repo}: git log --notes=majordomus does not show the note")


def scratch_clone(fixture: Fixture, dest: Path, env: Mapping[str, str]) -> Path:
    """A local clone with the notes ref and commit-graph of the fixture, safe to write to."""
    run_git(["clone", "-q", str(fixture.path), str(dest)], env, dest.parent)
    run_git(["update-ref", "refs/notes/majordomus", fixture.notes_commit], env, dest)
    run_git(["remote", "remove", "origin"], env, dest)
    run_git(["config", "gc.auto", "0"], env, dest)
    graph = dest / ".git" / "objects" / "info" / "commit-graph"
    if not graph.is_file():
        run_git(["commit-graph", "write", "--reachable"], env, dest)
    return dest


def set_commit_graph(repo: Path, generation: int | None, env: Mapping[str, str]) -> None:
    """Replace the clone's commit-graph: none, or one written with a generation version."""
    info = repo / ".git" / "objects" / "info"
    (info / "commit-graph").unlink(missing_ok=True)
    shutil.rmtree(info / "commit-graphs", ignore_errors=True)
    if generation is not None:
        setting = f"commitGraph.generationVersion={generation}"
        run_git(["-c", setting, "commit-graph", "write", "--reachable"], env, repo)


def graph_chunks(repo: Path) -> tuple[str, ...]:
    """The chunk ids of the clone's commit-graph file (GDA2 marks generation version 2)."""
    path = repo / ".git" / "objects" / "info" / "commit-graph"
    if not path.is_file():
        return ()
    with path.open("rb") as handle:
        header = handle.read(8)
        count = header[6]
        table = handle.read(12 * count)
    return tuple(table[i * 12 : i * 12 + 4].decode("ascii") for i in range(count))
