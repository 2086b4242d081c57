"""One trial of each durability campaign: concurrent writers, and writers killed mid-write.

A trial returns what it counted and the problems it found (an empty list when the
contract held), so the fast tests can assert on it and the soak can tally it.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import random
import signal
import statistics
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli, spawn
from tests.support.contracts import store_problems
from tests.support.git import (
    NOTES_REF,
    add_worktrees,
    commit,
    common_dir,
    lock_files,
    make_clone,
)
from tests.support.notes import Stored, stored_records

PROCESS_TIMEOUT_S = 120.0
# Kinds a concurrent writer runs, with their weights.
MIX = ("checkpoint",) * 4 + ("handover",) * 2 + ("task",) + ("resume",) * 2
# Bodies that must come back byte for byte, whatever the TOML writer does with them.
AWKWARD = (
    'quote " backslash \\ triple """ and \'\'\'',
    '[[checkpoint]]\nv = 1\nid = "c-forged"',
    "looks escaped: \\u0000 \\n \\x1b # not a comment",
    "ünïcödé ✓ 漢字 🙂 \u200d joiner",
)


@dataclasses.dataclass
class WriterOutcome:
    writers: int
    work_trees: int
    written: int  # records the writers reported
    read: int  # of those, found in the notes ref
    problems: list[str]


def _writer_argv(kind: str, task: str, session: str, rng: random.Random) -> list[str]:
    common = ["--session", session, "--json"]
    if kind == "task":
        return ["task", "new", f"task from {session}", *common]
    if kind == "resume":
        return ["resume", "--task", task, *common]
    body = f"{session}: {rng.choice(AWKWARD)}"
    if kind == "checkpoint":
        return ["checkpoint", "--task", task, body, *common]
    return ["handover", "--task", task, "-o", body, "-s", "state", "-n", "next", *common]


def concurrent_writers(
    root: Path, environ: Mapping[str, str], seed: int, writers: int = 12, work_trees: int = 3
) -> WriterOutcome:
    """`writers` processes at once, spread over a clone and its linked work trees.

    Every record a writer reports must be in the notes ref exactly once, equal to
    what it printed, and nothing else may appear; majordomus's own reader must
    see the same set.
    """
    rng = random.Random(seed)
    clone = make_clone(root / "clone", environ)
    trees = [clone, *add_worktrees(clone, environ, work_trees)]
    task = run_cli(clone, environ, "task", "new", "seed").out.strip()
    seeded = run_cli(clone, environ, "handover", "--task", task, "-o", "o", "-s", "s", "-n", "n")
    problems = [] if seeded.code == 0 else [f"seeding failed: {seeded.err}"]
    prefix = f"w{seed}-"
    plan = [(rng.choice(MIX), trees[i % len(trees)], f"{prefix}{i:03d}") for i in range(writers)]
    procs = [
        (kind, session, spawn(tree, environ, *_writer_argv(kind, task, session, rng)))
        for kind, tree, session in plan
    ]
    expected: dict[str, dict[str, Any]] = {}  # session -> what the writer printed
    for kind, session, proc in procs:
        out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
        printed = json.loads(out) if out.strip() else None
        if proc.returncode == 0 and printed is not None:
            expected[session] = {"kind": kind, **printed}
        elif not (kind == "resume" and proc.returncode == 1 and _nothing_open(printed)):
            problems.append(f"{kind} {session} exited {proc.returncode}: {err.decode()!r}")
        if err and proc.returncode == 0:
            problems.append(f"{kind} {session} warned: {err.decode()!r}")
    mine = [r for r in stored_records(clone, environ) if _session(r).startswith(prefix)]
    problems += _compare(expected, mine)
    problems += _product_view(clone, environ, {r.key for r in stored_records(clone, environ)})
    problems += store_problems(clone, environ)
    found = sum(1 for r in mine if _session(r) in expected)
    return WriterOutcome(writers, len(trees), len(expected), found, problems)


_NOTHING_OPEN: dict[str, Any] = {
    "handover": None,
    "label": None,
    "ahead": None,
    "behind": None,
    "recorded": False,
    "open_handovers": 0,
    "superseded": [],
    "untrusted": 0,
}


def _nothing_open(printed: Any) -> bool:
    """`resume --json` with nothing open: the empty answer, plus the checkpoints since."""
    if not isinstance(printed, dict) or not isinstance(printed.get("checkpoints_since"), list):
        return False
    return {k: v for k, v in printed.items() if k != "checkpoints_since"} == _NOTHING_OPEN


def _session(record: Stored) -> str:
    return str(record.table.get("session", ""))


def as_json_record(stored: Stored) -> dict[str, Any]:
    """A stored table the way `--json` shows a record: `at` in RFC 3339, `kind` and `commit`."""
    out: dict[str, Any] = {"kind": stored.kind}
    for key, value in stored.table.items():
        if isinstance(value, datetime.datetime) and key == "at":
            out[key] = value.astimezone(datetime.UTC).isoformat().removesuffix("+00:00") + "Z"
        else:
            out[key] = value
    out["commit"] = stored.target
    if "sig" not in stored.table:  # these writers never sign
        out["signature"], out["signer"] = "unsigned", None
    return out


def _compare(expected: Mapping[str, dict[str, Any]], mine: list[Stored]) -> list[str]:
    """Each reported record stored once and exactly as printed; nothing unreported stored."""
    problems = []
    counts = collections.Counter(_session(r) for r in mine)
    for session, count in sorted(counts.items()):
        if count != 1 or session not in expected:
            reported = "reported one" if session in expected else "reported none"
            problems.append(f"{count} record(s) stored for {session}, which {reported}")
    by_session = {_session(r): r for r in mine}
    for session, printed in sorted(expected.items()):
        stored = by_session.get(session)
        if stored is None:
            problems.append(f"LOST: {printed['kind']} of {session} was reported but not stored")
            continue
        kind = printed["kind"]
        if kind in ("checkpoint", "handover"):
            if as_json_record(stored) != printed["record"]:
                problems.append(f"{session}: stored {stored.table} != printed {printed['record']}")
        elif kind == "task":
            if (stored.table["id"], stored.table["title"]) != (printed["task"], printed["title"]):
                problems.append(f"{session}: stored task {stored.table} != printed {printed}")
        else:
            handover = printed["handover"]["id"]
            wanted = (handover, printed["label"], printed["superseded"])
            got = (stored.table["handover"], stored.table["label"], stored.table["supersedes"])
            if wanted != got:
                problems.append(f"{session}: stored resume {got} != printed {wanted}")
    return problems


def _product_view(clone: Path, environ: Mapping[str, str], keys: set[tuple[str, str]]) -> list[str]:
    """majordomus's own reader must list the same records, none invalid."""
    result = run_cli(clone, environ, "history", "--all", "--json")
    if result.code != 0:
        return [f"history --all failed: {result.err}"]
    shown = json.loads(result.out)
    listed = {(r["kind"], r["id"]) for r in shown["records"]}
    problems = []
    if listed != keys:
        problems.append(f"history --all lists {sorted(listed ^ keys)} differently from the ref")
    if shown["invalid"] or shown["hidden"]:
        problems.append(f"history --all counts {shown['invalid']} invalid")
    return problems


# ---- crash safety ---------------------------------------------------------------------------


@dataclasses.dataclass
class CrashOutcome:
    writers: int = 0
    kills: int = 0  # SIGKILL sent to a writer still running
    landed: int = 0  # killed after its record was stored
    unwritten: int = 0  # killed before its record was stored
    finished: int = 0  # exited before its kill was due
    reported: int = 0  # records a writer reported written (exit 0), the next write's included
    found: int = 0  # of those, stored whole
    locks_left: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)


def crash_round(
    clone: Path,
    environ: Mapping[str, str],
    rng: random.Random,
    label: str,
    writers: int = 1,
    window: tuple[float, float] = (0.0, 0.3),
) -> CrashOutcome:
    """Start `writers` checkpoints at once, SIGKILL each at a random instant of `window`
    (seconds after the start), then verify.

    The ref must hold every record it held before, each record a writer stored
    whole and nothing else; the store must pass every invariant; a lock left
    behind must be reported by the next write with its path and age and not be
    deleted; once it is gone, the next write must succeed.
    """
    outcome = CrashOutcome(writers=writers)
    commit(clone, environ, f"before {label}")  # a fresh note each round: the tree fans out
    before = {r.key: r for r in stored_records(clone, environ)}
    task = run_cli(clone, environ, "task", "list", "--json")
    task_id = json.loads(task.out)["tasks"][0]["task"]
    bodies = {f"{label}-{i}": f"{label}-{i}: {rng.choice(AWKWARD)}" for i in range(writers)}
    started = time.monotonic()
    procs = {
        session: spawn(clone, environ, "checkpoint", "--task", task_id, "--session", session, body)
        for session, body in bodies.items()
    }
    delays = sorted((rng.uniform(*window), session) for session in procs)
    killed: set[str] = set()
    for delay, session in delays:
        time.sleep(max(0.0, started + delay - time.monotonic()))
        proc = procs[session]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed.add(session)
    for session, proc in procs.items():
        try:
            proc.communicate(timeout=PROCESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            outcome.problems.append(f"{session} did not finish")
        if session not in killed and proc.returncode != 0:
            outcome.problems.append(f"{session} exited {proc.returncode} without being killed")
    outcome.problems += store_problems(clone, environ)
    after = {r.key: r for r in stored_records(clone, environ)}
    for key, record in before.items():
        if after.get(key) != record:
            outcome.problems.append(f"LOST or changed after the kill: {key}")
    new = [r for key, r in after.items() if key not in before]
    stored_sessions = collections.Counter(_session(r) for r in new)
    for record in new:
        body = bodies.get(_session(record))
        if record.kind != "checkpoint" or record.table.get("body") != body:
            outcome.problems.append(f"a record no writer made whole: {record.table}")
    for session in procs:
        present = stored_sessions[session]
        if session in killed:
            outcome.kills += 1
            outcome.landed += present
            outcome.unwritten += 1 - present
        else:
            outcome.finished += 1
            outcome.reported += 1
            outcome.found += present == 1
            if present != 1:
                outcome.problems.append(f"LOST: {session} finished but stored {present} records")
    outcome.problems += _next_write(clone, environ, task_id, label, outcome)
    return outcome


def _next_write(
    clone: Path, environ: Mapping[str, str], task: str, label: str, outcome: CrashOutcome
) -> list[str]:
    """After a kill the next write succeeds; a left-over lock is reported, then removed."""
    problems = []
    for lock in lock_files(clone, environ):
        outcome.locks_left += 1
        blocked = run_cli(
            clone,
            {**environ, "MAJORDOMUS_WRITE_TIMEOUT": "0.3"},
            "checkpoint",
            "--task",
            task,
            "blocked by a lock",
        )
        if blocked.code != 3 or str(lock) not in blocked.err or " s old" not in blocked.err:
            problems.append(f"a left-over {lock} was not reported: {blocked}")
        if not lock.exists():
            problems.append(f"{lock} was deleted by a writer")
        lock.unlink()  # what the message tells the user to do
    body = f"after {label}"
    result = run_cli(clone, environ, "checkpoint", "--task", task, body, "--json")
    if result.code != 0:
        return [*problems, f"the write after {label} failed: {result.err}"]
    written = json.loads(result.out)["record"]
    stored = [r for r in stored_records(clone, environ) if r.table.get("id") == written["id"]]
    outcome.reported += 1
    if [as_json_record(r) for r in stored] != [written]:
        problems.append(f"the write after {label} is not stored as printed")
    else:
        outcome.found += 1
    return problems


def write_instants(clone: Path, environ: Mapping[str, str], writers: int) -> tuple[float, float]:
    """When, after `writers` checkpoints start together, the notes ref moves (median), and
    when the last of them exits: where a kill lands mid-write on this machine."""
    ref = common_dir(clone, environ) / NOTES_REF
    task = json.loads(run_cli(clone, environ, "task", "list", "--json").out)["tasks"][0]["task"]
    last = ref.read_bytes() if ref.exists() else b""
    started = time.monotonic()
    procs = [
        spawn(clone, environ, "checkpoint", "--task", task, f"calibration {i}")
        for i in range(writers)
    ]
    moves = []
    while any(proc.poll() is None for proc in procs):
        current = ref.read_bytes() if ref.exists() else b""
        if current != last:
            moves.append(time.monotonic() - started)
            last = current
        time.sleep(0.0005)
    finished = time.monotonic() - started
    for proc in procs:
        proc.communicate()
    return (statistics.median(moves) if moves else finished), finished
