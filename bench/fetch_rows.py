"""The fetch rows: a clone behind its remote by 1,000 records, `majordomus fetch origin`
against the git-only way to the same notes ref (`bench/run.py --only fetch`).

The remote is a bare mirror (a local path) of a cached repository. Untimed, once: the
clone is made while the remote is at the cached state and its tracking ref records
that fetch; then the remote gains new commits on main and a notes commit holding
exactly 1,000 new records on them, drawn from the corpus generator (task,
checkpoint, handover and resume records in the note format of the specification,
a foreign note now and then). Two clones: one that wrote nothing since it last
fetched (the fetch fast-forwards) and one that wrote records of its own (a real
union merge). Each has read its records with majordomus (its caches are warm).

Every timed run starts from a byte-identical copy of that clone, made untimed: a
fetch into a clone that already holds the objects would transfer nothing. The
majordomus side runs `majordomus fetch origin`; the git side the same fetch
majordomus runs (refspec and flags from majordomus/remote.py: only the notes ref,
no branches, tags or filters), then `git notes merge -s union` of the tracking ref.
After the last run of each side, the clone's records (every note read back with git
plumbing and parsed with tomllib) must be exactly the remote's plus the clone's own.
"""

from __future__ import annotations

import dataclasses
import datetime
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from corpus import PlannedNote, Record, Shape, commit_time, plan, render_note
from probe import Outcome, run_chain
from repo_cache import RECORD_KINDS, Fixture, _cat_blobs, _get_marks, fast_import, run_git
from report import results_table
from suite import Command, Row, Series, Setup, Target, git, mj, replace_section

Log = Callable[[str], None]
NEW_RECORDS = 1_000
LOCAL_RECORDS = 10  # the diverged clone's own records, on commits spread over its history
FETCH = Target(limit=1.5)
NOTES_REF = "refs/notes/majordomus"
TRACKING = "refs/notes/remotes/origin/majordomus"
# What majordomus/remote.py fetches: the notes ref (a glob, forced) into the tracking ref.
REFSPEC = f"+{NOTES_REF}*:{TRACKING}*"
FETCH_FLAGS = ("--no-tags", "--quiet", "--prune", "--no-filter")
# Where the incoming records come from: a shape of its own, so its seed (and record ids)
# differ from every cached repository's.
INCOMING = Shape(commits=10_010, notes=1_001, tasks=20, handover_distance=2_000)
EQUAL = "on both sides the clone holds exactly the remote's records plus its own"
BEGIN = "<!-- fetch rows: begin -->"
END = "<!-- fetch rows: end -->"

RecordMap = dict[str, frozenset[str]]  # annotated commit -> record ids in its note


@dataclasses.dataclass(frozen=True, slots=True)
class FetchSetup:
    """The remote after it moved, and the two clones as they were before it did."""

    remote: Path
    templates: Mapping[str, Path]  # mode -> the clone every run starts from
    local: Mapping[str, RecordMap]  # mode -> records the clone has that the remote lacks
    new_commits: int
    new_notes: int
    seconds: float  # to prepare all of it


def _git(repo: Path, env: Mapping[str, str], *args: str) -> str:
    return run_git(args, env, repo)


def incoming_notes() -> tuple[PlannedNote, ...]:
    """The corpus generator's first notes holding exactly NEW_RECORDS records."""
    notes: list[PlannedNote] = []
    total = 0
    for note in plan(INCOMING).notes:
        if total + len(note.records) <= NEW_RECORDS:
            notes.append(note)
            total += len(note.records)
        if total == NEW_RECORDS:
            return tuple(notes)
    raise RuntimeError(f"the generator gave {total} records, not {NEW_RECORDS}")


def prepare(fixture: Fixture, workdir: Path, setup: Setup, log: Log) -> FetchSetup:
    started = time.monotonic()
    env = setup.env
    workdir.mkdir(parents=True)
    remote = workdir / "remote.git"
    _git(workdir, env, "clone", "-q", "--mirror", str(fixture.path), str(remote))
    _git(remote, env, "config", "gc.auto", "0")
    behind = workdir / "behind"
    _git(workdir, env, "clone", "-q", str(remote), str(behind))
    for ref in (NOTES_REF, TRACKING):
        _git(behind, env, "update-ref", ref, fixture.notes_commit)
    _git(behind, env, "config", "gc.auto", "0")
    _git(behind, env, "commit-graph", "write", "--reachable")
    diverged = workdir / "diverged"
    _copy(behind, diverged)
    own = _write_local(diverged, env, fixture.expectation.task)
    templates = {"fast-forward": behind, "both sides wrote": diverged}
    task = fixture.expectation.task
    for template in templates.values():  # a clone in use: majordomus has read its records
        for read in ("history", "check", "history", "check"):
            warmed = run_chain(
                (mj(setup, template, read, "--task", task, "--json"),),
                env,
                template,
                frozenset({0, 1}),
            )
            if warmed.exit_code not in (0, 1):
                log(f"majordomus {read} in {template} failed: {warmed.stderr.strip()[-200:]}")
    log(f"the remote gains {NEW_RECORDS:,} records on new commits")
    notes = incoming_notes()
    commits = notes[-1].index + 1
    _advance(remote, env, fixture, notes, commits)
    return FetchSetup(
        remote=remote,
        templates=templates,
        local={"fast-forward": {}, "both sides wrote": own},
        new_commits=commits,
        new_notes=len(notes),
        seconds=time.monotonic() - started,
    )


def _copy(source: Path, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["cp", "-a", str(source), str(dest)], check=True)


def _write_local(repo: Path, env: Mapping[str, str], task: str) -> RecordMap:
    """LOCAL_RECORDS checkpoints appended with git, each on its own commit."""
    commits = _git(repo, env, "rev-list", "--first-parent", "HEAD").split()
    step = len(commits) // LOCAL_RECORDS
    own: RecordMap = {}
    for n in range(LOCAL_RECORDS):
        commit = commits[n * step]
        record_id = f"c-0000local{n:06x}"
        fields = (
            ("v", 1),
            ("id", record_id),
            ("task", task),
            ("at", datetime.datetime(2026, 1, 5, 12, n, tzinfo=datetime.UTC)),
            ("author", "Bench Runner <bench@example.com>"),
            ("body", "written in this clone since it last fetched"),
        )
        text = render_note([Record("checkpoint", fields)], commit)
        _git(repo, env, "notes", "--ref=majordomus", "append", "-m", text, commit)
        own[commit] = frozenset({record_id})
    return own


def _advance(
    remote: Path,
    env: Mapping[str, str],
    fixture: Fixture,
    notes: Sequence[PlannedNote],
    commits: int,
) -> None:
    """New commits on main and one notes commit on top of the cached one, in one stream."""
    base = fixture.shape.commits
    who = b"Ada Lovelace <ada@example.com> %d +0000" % int(commit_time(base + commits).timestamp())
    message = b"Notes added by 'majordomus'"
    with fast_import(remote, env) as (stream, answers):
        for index in range(commits):
            _new_commit(stream, index, base, fixture.head if index == 0 else None)
        shas = _get_marks(stream, answers, [note.index for note in notes])
        stream.write(b"commit %s\ncommitter %s\n" % (NOTES_REF.encode(), who))
        stream.write(b"data %d\n%s\n" % (len(message), message))
        stream.write(b"from %s\n" % fixture.notes_commit.encode())
        for note in notes:
            text = render_note(note.records, shas[note.index], note.foreign).encode()
            stream.write(b"N inline :%d\ndata %d\n%s\n" % (note.index + 1, len(text), text))


def _new_commit(stream: IO[bytes], index: int, base: int, parent: str | None) -> None:
    when = int(commit_time(base + index).timestamp())
    who = b"Grace Hopper <grace@example.com> %d +0000" % when
    path = b"src/incoming/mod%02d.py" % (index % 20)
    message = b"Incoming change %d" % index
    body = b"REVISION = %d\n" % index
    stream.write(b"commit refs/heads/main\nmark :%d\n" % (index + 1))
    stream.write(b"author %s\ncommitter %s\n" % (who, who))
    stream.write(b"data %d\n%s\n" % (len(message), message))
    stream.write(b"from %s\n" % (parent.encode() if parent else b":%d" % index))
    stream.write(b"M 100644 inline %s\ndata %d\n%s\n" % (path, len(body), body))


# ---- the records a ref holds, read with git plumbing ----------------------------------------


def records(repo: Path, env: Mapping[str, str], ref: str) -> RecordMap:
    """Every note under `ref`: its commit and the ids of the records it holds."""
    listed = [line.split() for line in _git(repo, env, "notes", f"--ref={ref}", "list").split()]
    pairs = [(listed[i][0], listed[i + 1][0]) for i in range(0, len(listed), 2)]
    texts = _cat_blobs([blob for blob, _ in pairs], repo, env)
    found: RecordMap = {}
    for (_, commit), text in zip(pairs, texts, strict=True):
        document = tomllib.loads(text)
        found[commit] = frozenset(
            str(table["id"])
            for kind in RECORD_KINDS
            if isinstance(value := document.get(kind), list)
            for table in value
            if isinstance(table, dict) and "id" in table
        )
    return found


def _union(first: RecordMap, second: RecordMap) -> RecordMap:
    joined = dict(first)
    for commit, ids in second.items():
        joined[commit] = joined.get(commit, frozenset()) | ids
    return joined


def difference(got: RecordMap, wanted: RecordMap) -> str:
    """ "" when equal, else one sentence on what differs."""
    missing = sum(len(ids - got.get(commit, frozenset())) for commit, ids in wanted.items())
    extra = sum(len(ids - wanted.get(commit, frozenset())) for commit, ids in got.items())
    if not missing and not extra:
        return ""
    return f"{missing} record(s) of the remote or the clone missing, {extra} unexpected"


# ---- the rows -----------------------------------------------------------------------------


def fetch_rows(
    fixture: Fixture, setup: Setup, workdir: Path, log: Log
) -> tuple[FetchSetup, list[Row]]:
    prepared = prepare(fixture, workdir, setup, log)
    theirs = records(prepared.remote, setup.env, NOTES_REF)
    before = records(prepared.templates["fast-forward"], setup.env, NOTES_REF)
    new = sum(len(ids) for ids in theirs.values()) - sum(len(ids) for ids in before.values())
    if new != NEW_RECORDS:
        raise RuntimeError(f"the remote gained {new} records, not {NEW_RECORDS}")
    rows = []
    for mode, template in prepared.templates.items():
        log(f"fetch, {mode}")
        rows.append(_row(setup, workdir, mode, template, _union(theirs, prepared.local[mode])))
    return prepared, rows


def _row(setup: Setup, workdir: Path, mode: str, template: Path, wanted: RecordMap) -> Row:
    run_dir = workdir / "run"
    mine = Command("fetch", (mj(setup, run_dir, "fetch", "origin"),))
    theirs = Command(
        "git fetch + git notes merge -s union",
        (
            git(run_dir, "fetch", *FETCH_FLAGS, "--", "origin", REFSPEC),
            git(run_dir, "notes", "--ref=majordomus", "merge", "-q", "-s", "union", TRACKING),
        ),
    )
    kept: dict[str, list[Outcome]] = {"mine": [], "theirs": []}
    answers: dict[str, str] = {}
    for round_no in range(setup.warmup + setup.runs):
        for side, command in (("mine", mine), ("theirs", theirs)):
            _copy(template, run_dir)  # untimed: the clone as it was before the remote moved
            outcome = run_chain(command.argvs, setup.env, run_dir, command.ok)
            if round_no >= setup.warmup:
                kept[side].append(outcome)
            if round_no == setup.warmup + setup.runs - 1 and outcome.exit_code == 0:
                got = records(run_dir, setup.env, NOTES_REF)
                answers[side] = difference(got, wanted)
    shutil.rmtree(run_dir, ignore_errors=True)
    wrong = [f"{name}: {text}" for name, text in _named(answers) if text]
    return Row(
        "fetch",
        f"{NEW_RECORDS:,} new records, {mode}",
        Series(mine, tuple(kept["mine"])),
        Series(theirs, tuple(kept["theirs"])),
        FETCH,
        answer="; ".join(wrong),
    )


def _named(answers: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    names = {"mine": "majordomus", "theirs": "git"}
    for side, text in answers.items():
        yield names[side], text


# ---- the report ---------------------------------------------------------------------------


def section(
    fixture: Fixture,
    prepared: FetchSetup,
    rows: Sequence[Row],
    setup: Setup,
    command: str,
    substitutions: Mapping[str, str],
) -> str:
    """The fetch section of docs/benchmarks.md, between its markers."""
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    shape = fixture.shape
    answers = [f"- {row.mode}: {row.answer or EQUAL}" for row in rows if not row.majordomus.failure]
    lines = [
        BEGIN,
        f"## fetch: {NEW_RECORDS:,} new records from a remote",
        "",
        f"Generated by `{command}` on {when} (medians of {setup.runs} runs after "
        f"{setup.warmup} warm-up round(s), interleaved). The remote is a bare mirror (a "
        f"local path) of the {shape.commits:,}-commit repository ({shape.notes:,} notes); "
        f"since the clone last fetched it gained {prepared.new_commits:,} commits on main "
        f"and {prepared.new_notes:,} notes on them holding {NEW_RECORDS:,} records from the "
        "corpus generator. *fast-forward*: the clone wrote nothing since; *both sides "
        f"wrote*: it appended {LOCAL_RECORDS} records of its own (a real merge). Before "
        "every timed run, untimed, the clone is restored byte for byte to its state "
        "before the remote moved (majordomus caches warm from earlier reads), so each "
        "run transfers the same objects. The git side does the work majordomus does "
        "(majordomus/remote.py): the same `git fetch` of the notes ref alone (no "
        "branches or tags, on both sides) into the tracking ref, then `git notes merge -s "
        "union`. After the last run of each side the clone's records, read back with "
        "`git notes list` and `git cat-file --batch` and parsed, must be exactly the "
        f"remote's plus the clone's own. Preparing all of it took {prepared.seconds:.1f} s.",
        "",
        results_table(rows),
        "",
        "Answers checked against git's own:",
        "",
        "\n".join(answers),
        "",
        "```sh",
    ]
    seen: list[str] = []
    for row in rows:
        for series in (row.majordomus, row.baseline):
            text = f"# {series.command.name}\n{series.command.shell}"
            for old, new in substitutions.items():
                text = text.replace(old, new)
            if text not in seen:
                seen.append(text)
    lines += [*seen, "```", END]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    """Replace the fetch section of the report (or add it at the end)."""
    replace_section(path, text, BEGIN, END)
