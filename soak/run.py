"""The long reliability campaign (`make soak`): many trials, counted, and reported.

Runs the checks of tests/reliability at scale: concurrent writers across linked
work trees, writers killed with SIGKILL at random instants, property tests of
the record union and the note format, every hostile note in its own repository
through every read command, a hostile teammate who pushes notes, trees and refs
with plain git (soak/hostile_remote.py), hostile command-line input, and the
parser fuzzers.
Prints a Markdown table and writes docs/reliability.md. Exit 1 when any trial
found a problem (the report then lists each one).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from soak import hostile_remote
from soak.teams import Tally, run_round
from tests.reliability import test_hostile_input as hostile_input
from tests.support import properties, strategies
from tests.support.cli import run_cli, spawn
from tests.support.contracts import strict_json, terminal_problems
from tests.support.env import Clock, hermetic_environ, isolate_pygit2
from tests.support.git import make_clone
from tests.support.hostile_notes import ALLOWED, READS, Case, cases, plant, plant_remote_refs
from tests.support.notes import note_blobs
from tests.support.notes_merge import NotesRepo, both_sides
from tests.support.repo import Repo
from tests.support.trials import concurrent_writers, crash_round, write_instants

REPO_ROOT = Path(__file__).resolve().parent.parent

DEFAULT_TRIALS = 300


@dataclasses.dataclass
class Row:
    """One line of the report: a campaign and what it counted."""

    campaign: str
    trials: int = 0
    processes: int = 0  # writers or commands run as real processes
    kills: int = 0
    inputs: int = 0  # generated or hostile inputs tried
    written: int | None = None
    read: int | None = None
    seconds: float = 0.0
    failures: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)


class Campaign:
    def __init__(self, root: Path, seed: int, trials: int) -> None:
        self.root = root
        self.seed = seed
        self.trials = trials
        self.scale = trials / DEFAULT_TRIALS
        self.rng = random.Random(seed)
        self._count = 0

    def scaled(self, base: int, least: int = 1) -> int:
        return max(least, round(base * self.scale))

    def fresh(self, name: str) -> tuple[Path, dict[str, str]]:
        """A new folder with its own hermetic home."""
        self._count += 1
        path = self.root / f"{self._count:04d}-{name}"
        (path / "home").mkdir(parents=True)
        return path, hermetic_environ(path / "home")


def timed(row: Row, body: Callable[[Row], None]) -> Row:
    started = time.monotonic()
    try:
        body(row)
    except Exception:  # a crash of the campaign itself is a failure to report, not to hide
        row.failures.append(traceback.format_exc())
    row.seconds = time.monotonic() - started
    print(f"  {row.campaign}: {len(row.failures)} failures, {row.seconds:.0f} s", flush=True)
    return row


# ---- concurrent writers ----------------------------------------------------------------------


def concurrency(c: Campaign, writers: int, work_trees: int) -> Row:
    def body(row: Row) -> None:
        row.written = row.read = 0
        for trial in range(c.scaled(20)):
            path, environ = c.fresh("writers")
            trial_seed = c.rng.randrange(1 << 32)
            outcome = concurrent_writers(path, environ, trial_seed, writers, work_trees)
            row.trials += 1
            row.processes += outcome.writers
            row.written += outcome.written
            row.read += outcome.read
            row.failures += [f"trial {trial} (seed {trial_seed}): {p}" for p in outcome.problems]
        row.notes.append(
            f"{writers} writers per trial, spread over a clone and {work_trees} linked work "
            "trees; mixed kinds (checkpoint, handover, task new, resume), started together"
        )

    return timed(Row(f"concurrent writers ({work_trees + 1} work trees)"), body)


# ---- teams -------------------------------------------------------------------------------------


def teams(c: Campaign, clones: int = 3, steps: int = 40) -> Row:
    def body(row: Row) -> None:
        tally = Tally()
        for _ in range(c.scaled(10)):
            path, _ = c.fresh("team")
            run_round(path, c.rng.randrange(1 << 32), tally, clones, steps)
        row.trials = tally.rounds
        row.processes = tally.processes
        row.inputs = tally.operations
        row.written = tally.written
        row.read = tally.read_back // max(1, clones)
        row.failures += tally.failures
        done = ", ".join(f"{op} {n}" for op, n in sorted(tally.counts.items()))
        row.notes += [
            f"{clones} clones of one bare host per round, {steps} random operations each round "
            f"({tally.operations} in all: {done}), then every clone syncs twice",
            "invariants: each clone's `history --all` and `task list` at its HEAD through its "
            "caches equal a fresh read of it, right after every graft, spike and gc and at "
            "the end (replacements still in force); every record "
            "written is in every clone after the final sync (read "
            "with git's plumbing); `history --all` and `show` in every clone and in fresh "
            "blob:none and tree:0 clones equal a fresh full clone's; a fresh shallow clone "
            "lists the same records with the full clone's labels or `unknown`; no traceback",
            f"{tally.fresh_reads} reads in fresh full, partial and shallow clones",
        ]

    return timed(
        Row(f"teams ({clones} clones, squash, gc, prune, grafts, spikes, hand edits)"), body
    )


# ---- crash safety ------------------------------------------------------------------------------


@dataclasses.dataclass
class KillMode:
    """How one kind of crash round draws its kill instants."""

    name: str
    writers: int
    window: tuple[float, float] = (0.0, 0.3)
    rounds: int = 0
    kills: int = 0
    landed: int = 0  # killed after its record was stored (whole)
    unwritten: int = 0  # killed before: nothing of it stored
    finished: int = 0  # exited before its kill was due


def kill_modes(c: Campaign) -> list[KillMode]:
    """Kill windows measured on this machine: anywhere in the process's life, and around
    the instant the notes ref moves (building the note, the trees, the commit, the CAS)."""
    path, environ = c.fresh("calibrate")
    clone = make_clone(path / "clone", environ)
    run_cli(clone, environ, "task", "new", "calibrate")
    modes = []
    for writers in (1, 3):
        samples = [write_instants(clone, environ, writers) for _ in range(3)]
        moved = statistics.median(sample[0] for sample in samples)
        ended = statistics.median(sample[1] for sample in samples)
        who = "one writer" if writers == 1 else f"{writers} writers at once"
        modes.append(KillMode(f"{who}, killed anywhere", writers, (0.0, 1.1 * ended)))
        around = (max(0.0, moved - 0.06), moved + 0.02)
        modes.append(KillMode(f"{who}, killed around the write", writers, around))
    return modes


def crash(c: Campaign) -> Row:
    modes = kill_modes(c)

    def body(row: Row) -> None:
        locks = 0
        row.written = row.read = 0
        clone: Path | None = None
        environ: dict[str, str] = {}
        for trial in range(c.trials):
            if trial % 100 == 0:  # a fresh clone now and then keeps fsck quick
                path, environ = c.fresh("crash")
                clone = make_clone(path / "clone", environ)
                run_cli(clone, environ, "task", "new", "crash")
            assert clone is not None
            mode = modes[trial % len(modes)]
            outcome = crash_round(clone, environ, c.rng, f"k{trial}", mode.writers, mode.window)
            mode.rounds += 1
            mode.kills += outcome.kills
            mode.landed += outcome.landed
            mode.unwritten += outcome.unwritten
            mode.finished += outcome.finished
            row.trials += 1
            row.processes += outcome.writers
            row.kills += outcome.kills
            locks += outcome.locks_left
            row.written += outcome.reported
            row.read += outcome.found
            row.failures += [f"trial {trial}: {problem}" for problem in outcome.problems]
        row.notes.append(
            "kill instants, per round kind (ms after the writers start; measured here: "
            "when the notes ref moves, and when the processes exit):"
        )
        row.notes += [
            f"  {mode.name}, {mode.window[0] * 1000:.0f}-{mode.window[1] * 1000:.0f} ms: "
            f"{mode.rounds} rounds, {mode.kills} killed ({mode.landed} after storing their "
            f"record whole, {mode.unwritten} before storing any of it), {mode.finished} "
            "finished first"
            for mode in modes
        ]
        row.notes += [
            f"lock files left behind by a kill: {locks} (each must be reported by the next "
            "write with its path and age, and not be deleted by it)",
            "after every round: the ref points at a commit, notes history is linear, "
            "`git fsck --full --strict` is clean, every note parses with only valid records, "
            "git and majordomus list the same notes, nothing stored before is lost or "
            "changed, every record that appeared is one a writer made, whole, and the next "
            "write succeeds",
        ]

    return timed(Row("crash safety (SIGKILL mid-write)"), body)


# ---- properties and fuzzers --------------------------------------------------------------------


def hypothesis_run(
    c: Campaign, budget: int, strategy: st.SearchStrategy[Any], check: Callable[..., None]
) -> int:
    """Run `check` on `budget` generated examples; returns how many were tried."""
    tried = [0]

    @hypothesis_seed(c.seed)
    @settings(
        max_examples=budget,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(strategy)
    def run(value: Any) -> None:
        tried[0] += 1
        if type(value) is tuple:  # several arguments (st.tuples), not a NamedTuple value
            check(*value)
        else:
            check(value)

    run()
    return tried[0]


def merges(c: Campaign) -> Row:
    path, environ = c.fresh("merge")
    notes_repo = NotesRepo(Repo.init(path / "repo", environ, Clock()))

    def store_merge(ours: bytes, theirs: bytes) -> None:
        properties.check_store_merge(ours, theirs, notes_repo.merge(ours, theirs))

    checks: list[tuple[str, int, st.SearchStrategy[Any], Callable[..., None]]] = [
        (
            "union laws (commutative as a set of records, associative, idempotent, "
            "nothing dropped)",
            1500,
            strategies.note_families(),
            properties.check_union_laws,
        ),
        (
            "union when ids clash, across kinds too (every kind and id kept once)",
            1000,
            st.lists(strategies.notes(), max_size=4),
            properties.check_union_keeps_every_id,
        ),
        (
            "note serialise, parse: the same note, then the same bytes",
            1500,
            strategies.notes(),
            properties.check_note_round_trip,
        ),
        (
            "record of arbitrary storable text: exact round trip; appending keeps the old "
            "text byte for byte",
            1500,
            st.tuples(strategies.records(), strategies.notes()),
            properties.check_record_round_trip,
        ),
        (
            "two notes concatenated (git's union merge) read as their union",
            1000,
            st.tuples(strategies.notes(), strategies.notes()),
            properties.check_concatenation,
        ),
        (
            "fetch-merge of two notes on one commit, through the store: every valid record "
            "of both sides kept, an unreadable side kept whole",
            1000,
            st.tuples(both_sides, both_sides),
            store_merge,
        ),
    ]
    return _property_row(c, "merges and round trips (hypothesis)", checks)


def fuzzers(c: Campaign) -> list[Row]:
    return [
        _property_row(
            c,
            "fuzz: notes.parse_note",
            [
                (
                    "only NoteError escapes; what parses renders with nothing unsafe, as strict "
                    "JSON, and survives a merge's rewrite",
                    8000,
                    strategies.raw_notes,
                    properties.read_note,
                )
            ],
        ),
        _property_row(
            c,
            "fuzz: profile.parse_config",
            [
                (
                    "only RefusedError escapes, from parsing or resolving a profile",
                    5000,
                    strategies.raw_profiles,
                    properties.read_profile,
                )
            ],
        ),
        _property_row(
            c,
            "fuzz: handover -F parser",
            [
                (
                    "only RefusedError escapes",
                    3000,
                    strategies.raw_notes,
                    properties.read_handover_file,
                )
            ],
        ),
    ]


def _property_row(
    c: Campaign,
    name: str,
    checks: Sequence[tuple[str, int, st.SearchStrategy[Any], Callable[..., None]]],
) -> Row:
    def body(row: Row) -> None:
        for label, budget, strategy, check in checks:
            try:
                tried = hypothesis_run(c, c.scaled(budget, 10), strategy, check)
            except Exception:
                row.failures.append(f"{label}:\n{traceback.format_exc()}")
                continue
            row.trials += 1
            row.inputs += tried
            row.notes.append(f"{label}: {tried} examples")

    return timed(Row(name), body)


# ---- hostile notes -----------------------------------------------------------------------------


def hostile_notes(c: Campaign) -> Row:
    def body(row: Row) -> None:
        path, environ = c.fresh("hostile-probe")
        probe = make_clone(path / "clone", environ)
        corpus = cases(run_cli(probe, environ, "task", "new", "probe").out.strip())
        rounds = c.scaled(3)
        for _ in range(rounds):
            for index in range(len(corpus)):
                problems = _hostile_case(c, index, row)
                row.trials += 1
                row.failures += [f"{corpus[index].name}: {p}" for p in problems]
            row.failures += [f"every case at once: {p}" for p in _hostile_all(c, row)]
            row.trials += 1
        row.notes += [
            f"{len(corpus)} hostile notes, each alone in its own repository and then all "
            f"together, {rounds} times: {', '.join(case.name for case in corpus)}; and "
            "a remote-tracking notes ref with escapes",
            "each through history, history --all, show, check, check --all, task list, "
            "resume --peek and doctor, in text and --json (in-process; JSON parsed strictly), "
            "and history --all and task list as real processes (bytes checked): exit codes as "
            "documented, no traceback, no ESC, C0/C1 control or bidi character out, and the "
            "invalid and hidden counts exact; then a checkpoint on the same commit, which must "
            "append (the old bytes kept) or refuse (exit 3, the note untouched)",
        ]

    return timed(Row("hostile notes"), body)


def _reads(path: Path, environ: dict[str, str], row: Row) -> list[str]:
    problems = []
    for argv in READS:
        for extra in ([], ["--json"]):
            result = run_cli(path, environ, *argv, *extra)
            row.inputs += 1
            if result.code not in ALLOWED[argv[0]] or "Traceback" in result.err:
                problems.append(
                    f"{' '.join(argv + tuple(extra))} exited {result.code}: {result.err[-500:]!r}"
                )
            unsafe = terminal_problems(result.out) + terminal_problems(result.err)
            if unsafe:
                problems.append(f"{' '.join(argv + tuple(extra))} printed {unsafe[:3]}")
            if extra and result.code in ALLOWED[argv[0]]:
                try:
                    strict_json(result.out)
                except ValueError as error:
                    problems.append(f"{' '.join(argv)} --json is not JSON: {error}")
    for argv in (("history", "--all"), ("task", "list")):
        out, err = spawn(path, environ, *argv).communicate(timeout=120)
        row.processes += 1
        if terminal_problems(out) or terminal_problems(err):
            problems.append(f"{' '.join(argv)} as a process sent unsafe bytes")
    return problems


def _hostile_case(c: Campaign, index: int, row: Row) -> list[str]:
    path, environ = c.fresh("hostile")
    clone = make_clone(path / "clone", environ)
    task = run_cli(clone, environ, "task", "new", "under attack").out.strip()
    run_cli(clone, environ, "handover", "-o", "o", "-s", "s", "-n", "n")
    case: Case = cases(task)[index]
    planted = plant(clone, environ, [case])[0]
    problems = _reads(clone, environ, row)
    shown = json.loads(run_cli(clone, environ, "history", "--all", "--json").out)
    hidden = json.loads(run_cli(clone, environ, "history", "--json").out)["hidden"]
    if (shown["invalid"], hidden) != (case.invalid, case.hidden):
        problems.append(
            f"counted invalid {shown['invalid']}, hidden {hidden}; "
            f"expected {case.invalid}, {case.hidden}"
        )
    missing = set(case.listed) - {record["id"] for record in shown["records"]}
    if missing:
        problems.append(f"records no longer listed: {sorted(missing)!r}")
    if case.on in ("commit", "gitlink"):
        before = note_blobs(clone, environ).get(planted.target)
        result = run_cli(clone, environ, "checkpoint", "on top")
        after = note_blobs(clone, environ).get(planted.target)
        expected = 0 if case.writable else 3
        if result.code != expected or "Traceback" in result.err:
            problems.append(f"a write on it exited {result.code}: {result.err!r}")
        kept = (
            after == before
            if not case.writable
            else (after or b"").startswith((before or b"").rstrip(b"\n"))
        )
        if not kept:
            problems.append("a write changed what the note held")
    return problems


def _hostile_all(c: Campaign, row: Row) -> list[str]:
    path, environ = c.fresh("hostile-all")
    clone = make_clone(path / "clone", environ)
    task = run_cli(clone, environ, "task", "new", "under attack").out.strip()
    run_cli(clone, environ, "handover", "-o", "o", "-s", "s", "-n", "n")
    corpus = cases(task)
    plant(clone, environ, corpus)
    invalid = plant_remote_refs(clone, environ, task) + sum(case.invalid for case in corpus)
    problems = _reads(clone, environ, row)
    shown = json.loads(run_cli(clone, environ, "history", "--json").out)
    if shown["invalid"] != invalid:
        problems.append(f"counted {shown['invalid']} invalid, expected {invalid}")
    return problems


# ---- a hostile remote -------------------------------------------------------------------------


def hostile_remote_row(c: Campaign) -> Row:
    def body(row: Row) -> None:
        tally = hostile_remote.Tally()
        for _ in range(c.scaled(8)):
            path, _ = c.fresh("hostile-remote")
            tally.add(hostile_remote.run_trial(path, c.rng.randrange(1 << 32)))
        row.trials = tally.trials
        row.processes = tally.processes
        row.inputs = tally.attacks
        row.written = tally.written
        row.read = tally.read_back
        row.failures += tally.failures()
        affected = len({seed for found in tally.by_kind.values() for seed, _ in found})
        row.notes += [
            f"{tally.trials} trials, {tally.steps} victim steps, {tally.attacks} hostile pushes, "
            f"{tally.contexts} agent contexts checked ({tally.marked} holding attacker text); "
            f"{tally.problems} problems in {affected} trials, {len(tally.by_kind)} kinds "
            "(each failure line below is one kind, with a seed that replays a trial showing it: "
            "`python -m soak.hostile_remote SEED`)",
            "each trial: a bare remote; a victim clone (`majordomus init`, a task, checkpoints "
            "and a handover, one checkpoint on a commit never pushed); an attacker's clone that "
            "writes with plain git only, in 3 rounds of 1-3 attacks each: "
            + ", ".join(hostile_remote.ATTACKS)
            + "; attacker text in every field (title, author, session, bodies, handover fields, "
            "ids, task ids, unknown keys): Cyrillic and Greek letters with line breaks (LF, CR, "
            "VT, FF, U+001C-1E, NEL, U+2028/9), zero-width, word-joiner, BOM, soft-hyphen, tag "
            "and private-use characters, C0/C1 controls and ANSI sequences, bidi overrides",
            "between rounds the victim runs 3-5 random steps as real processes (plain `git "
            "fetch`, `git push` with the pre-push hook, `majordomus fetch`, `push`, `sync`, "
            "`checkpoint`, `handover`, `history --json`, `show --json`, `context`, `resume "
            "--peek --json`, `doctor --json`, a commit, and `hook claude|codex|gemini` with a "
            "SessionStart on stdin); each trial ends with a `sync`, then the victim's context and "
            "a hook",
            "after every step: no traceback and an exit code among the documented ones and the "
            "ones that command may give; each of the victim's records listed by `history --all "
            "--json` with its own words and found by an independent reader (git plumbing, "
            "tomllib) in its notes ref; in `context` and every hook's additionalContext, each "
            "line holding attacker letters starts with `> `, `splitlines() == split('\\n')`, "
            "every other open handover named by id or counted; a hook's stdout one JSON object "
            "with the context in it; no raw control, bidi, zero-width, tag or private-use "
            "character in any output; after each push or sync, the remote holds every record "
            "of the victim's and a fresh clone that fetches lists them all",
        ]

    return timed(Row("hostile remote (a teammate who pushes hostile notes, trees and refs)"), body)


# ---- hostile input -----------------------------------------------------------------------------


def hostile_cli(c: Campaign) -> Row:
    def body(row: Row) -> None:
        clock = Clock()

        def repo() -> Repo:
            path, environ = c.fresh("input")
            return Repo.init(path / "repo", environ, clock)

        def attempt(
            label: str, check: Callable[..., object], *args: Any, inputs: int, processes: int = 0
        ) -> None:
            try:
                check(*args)
            except Exception:
                row.failures.append(f"{label}:\n{traceback.format_exc()}")
            row.trials += 1
            row.inputs += inputs
            row.processes += processes

        attempt(
            "verbatim round trip",
            hostile_input.test_toml_syntax_in_a_body_round_trips_verbatim,
            repo(),
            inputs=len(hostile_input.VERBATIM),
        )
        attempt(
            "refused text",
            hostile_input.test_controls_and_empty_text_are_refused_and_not_echoed,
            repo(),
            inputs=len(hostile_input.REFUSED),
        )
        attempt(
            "handover, title and session verbatim",
            hostile_input.test_handover_title_and_session_round_trip_verbatim,
            repo(),
            inputs=3,
        )
        attempt("non-UTF-8 input", hostile_input.test_non_utf8_input_is_refused, repo(), inputs=5)
        attempt(
            "non-UTF-8 argv",
            hostile_input.test_undecodable_argv_from_a_real_process_is_refused,
            repo(),
            inputs=1,
            processes=1,
        )
        floods = c.scaled(5)
        for _ in range(floods):
            attempt(
                "50 MB on stdin",
                hostile_input.test_a_50_mb_stdin_is_refused_without_reading_it,
                repo(),
                inputs=3,
                processes=3,
            )
        attempt(
            "profile files",
            hostile_input.test_hostile_profile_files_are_refused_with_their_path,
            repo(),
            inputs=(len(hostile_input.PROFILES) + 3) * 3,
        )
        target = repo()
        attempt(
            "remote names",
            hostile_input.test_hostile_remote_names_never_reach_a_shell,
            target,
            target.path.parent,
            inputs=12 * 4,
        )
        round_trips = c.scaled(300, 10)
        target = repo()
        test = hostile_input.test_any_text_is_stored_exactly_or_refused_whole
        inner = test.hypothesis.inner_test  # type: ignore[attr-defined]
        attempt(
            "any text, stored exactly or refused whole",
            hypothesis_run,
            c,
            round_trips,
            st.text(st.characters(exclude_categories=["Cs"]), max_size=60),
            lambda text: inner(repo=target, text=text),
            inputs=round_trips,
        )
        row.notes += [
            f"{len(hostile_input.VERBATIM)} bodies made of TOML syntax, stored and read back "
            f"byte for byte; {len(hostile_input.REFUSED)} with controls, bidi or no text, "
            "refused with nothing recorded; non-UTF-8 stdin, argv and environment refused",
            f"{floods * 2} floods of 50 MB on stdin (checkpoint and handover -F -), each refused "
            "unread: peak memory within 16 MiB of a 1 MiB refusal",
            f"{len(hostile_input.PROFILES) + 3} hostile profile files (a FIFO, /dev/zero and a "
            "directory among them), each refused with its path by checkpoint and profile, and "
            "reported by doctor",
            "12 remote names that try to reach a shell or git's options, through fetch, push, "
            "init --remote and the pre-push hook: no command ever ran, nothing was created",
            f"{round_trips} generated texts through checkpoint: stored exactly as normalised, "
            "or refused with the ref unchanged",
        ]

    return timed(Row("hostile command-line input"), body)


# ---- the report --------------------------------------------------------------------------------


def _cell(value: int | None) -> str:
    return "-" if value is None or value == 0 else f"{value:,}"


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| campaign | trials | processes | SIGKILLs | inputs tried | records written "
        "| records read back | failures | time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row.campaign} | {row.trials:,} | {_cell(row.processes)} | {_cell(row.kills)} "
            f"| {_cell(row.inputs)} | {_cell(row.written)} | {_cell(row.read)} "
            f"| {len(row.failures)} | {row.seconds:.0f} s |"
        )
    return "\n".join(lines)


def machine() -> str:
    git_version = subprocess.run(
        ["git", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    bindings = importlib.metadata.version("pygit2")
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {git_version}, pygit2 {bindings} "
        f"(libgit2 {pygit2.LIBGIT2_VERSION})"
    )


def document(rows: Sequence[Row], command: str, seed: int, seconds: float) -> str:
    failures = sum(len(row.failures) for row in rows)
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    parts = [
        "# Reliability",
        "",
        "majordomus holds the only copy of what a session learned. This page is the record "
        "of a campaign that tries to make it lose or mangle a record, or let a note written "
        "by someone else hurt whoever reads it: many trials, counted. Every trial ends with "
        "its invariants checked; a failure is any trial where one did not hold.",
        "",
        f"Run on {date}, {machine()}; {seconds / 60:.1f} minutes in all.",
        "",
        table(rows),
        "",
        "*processes*: majordomus run as real processes (writers, commands checked byte by "
        "byte); *SIGKILLs*: writers killed while still running; *inputs tried*: generated "
        "examples and hostile inputs, each through the check it names below; *records "
        "written*: records a writer reported written (exit 0); *read back*: of those, the "
        "ones found in the notes ref afterwards, exactly as reported.",
        "",
        f"**Failures: {failures}.** Reproduce with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"(`make soak` runs it with a fresh seed; this run's seed was {seed}. The seed fixes "
        "every generated input, plan and kill delay; where a kill lands still depends on the "
        f"machine's timing. `--trials N` scales every campaign: {DEFAULT_TRIALS} is the "
        "default.) The fast versions of the same checks run with `make test`, from "
        "`tests/reliability/`.",
        "",
        "## What each campaign checks",
        "",
    ]
    for row in rows:
        parts.append(f"### {row.campaign}")
        parts.append("")
        parts += [
            f"  - {note.strip()}" if note.startswith("  ") else f"- {note}" for note in row.notes
        ]
        parts.append("")
    if failures:
        parts += ["## Failures", ""]
        for row in rows:
            for failure in row.failures:
                parts += [
                    f"- {row.campaign}:",
                    "",
                    "  ```",
                    *("  " + line for line in failure.splitlines()),
                    "  ```",
                    "",
                ]
    return "\n".join(parts).rstrip() + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m soak.run", description=__doc__)
    parser.add_argument(
        "--trials",
        type=int,
        default=DEFAULT_TRIALS,
        help=f"crash-safety trials ({DEFAULT_TRIALS}); every other campaign scales with it",
    )
    parser.add_argument("--seed", type=int, help="random seed (default: a fresh one, printed)")
    parser.add_argument("--writers", type=int, default=16, help="writers per concurrency trial")
    parser.add_argument("--work-trees", type=int, default=3, help="linked work trees (3)")
    parser.add_argument(
        "--output", type=Path, default=REPO_ROOT / "docs" / "reliability.md", help="the report"
    )
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    parser.add_argument(
        "--only",
        choices=["teams", "hostile-remote"],
        help="run one campaign (implies --no-write)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    command = (
        f".venv/bin/python -m soak.run --trials {args.trials} --seed {seed}"
        + (f" --writers {args.writers}" if args.writers != 16 else "")
        + (f" --work-trees {args.work_trees}" if args.work_trees != 3 else "")
        + (f" --only {args.only}" if args.only else "")
    )
    print(f"soak: {command}", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="majordomus-soak-") as tmp:
        root = Path(tmp)
        isolate_pygit2(root / "no-config")
        os.chdir(root)  # anything a hostile input manages to create lands here, not in the repo
        try:
            c = Campaign(root, seed, args.trials)
            campaigns: dict[str, Callable[[], list[Row]]] = {
                "teams": lambda: [teams(c)],
                "hostile-remote": lambda: [hostile_remote_row(c)],
            }
            rows = (
                campaigns[args.only]()
                if args.only
                else [
                    teams(c),
                    concurrency(c, args.writers, args.work_trees),
                    crash(c),
                    merges(c),
                    hostile_notes(c),
                    hostile_remote_row(c),
                    hostile_cli(c),
                    *fuzzers(c),
                ]
            )
        finally:
            os.chdir(REPO_ROOT)
    seconds = time.monotonic() - started
    report = document(rows, command, seed, seconds)
    print()
    print(table(rows))
    if args.only:  # no report is written: what the campaign counted is printed instead
        for row in rows:
            print("\n".join([f"\n{row.campaign}:", *(f"- {note}" for note in row.notes)]))
    failures = sum(len(row.failures) for row in rows)
    print(f"\nfailures: {failures}")
    if failures:
        for row in rows:
            for failure in row.failures:
                print(f"\n{row.campaign}: {failure}", file=sys.stderr)
    if not (args.no_write or args.only):
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report, encoding="utf-8")
        print(f"wrote {args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
