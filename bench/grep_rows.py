"""The grep rows (`bench/run.py --only grep`): `majordomus grep` over every record of the
repository of 100,000 commits and 10,000 notes, against git's way to search the same text:
`git log --notes=majordomus --format=%N | grep PATTERN`.

- warm: a word most notes hold (a third of the records match), a word none holds (exit 1
  on both sides), the common word with `-i`, and the common word as `--json`; the
  repository unchanged between runs.
- first, fresh clone: the common word in a local clone made just before (untimed), so no
  majordomus cache of any kind exists; git's pipeline then runs in the same clone.

Each answer is checked against the notes as git and `tomllib` read them: the records
whose searched fields have a line holding the word.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

from probe import Outcome, run_chain
from repo_cache import Fixture, scratch_clone
from report import results_table
from suite import Command, Row, Series, Setup, Target, answer_lines, interleave, mj, replace_section

Log = Callable[[str], None]
WARM = Target(limit=0.5)
FRESH = Target(limit=2.0)
COMMON = "reproduced"  # in about a third of the generated records
ABSENT = "zebra-crossing"  # in none
BEGIN = "<!-- grep rows: begin -->"
END = "<!-- grep rows: end -->"
SEARCHED = {
    "task": ("title", "session"),
    "checkpoint": ("body", "session"),
    "handover": ("objective", "state", "next", "session"),
    "resume": ("session",),
}
BOTH = frozenset({0, 1})  # grep's convention on both sides: 1 when nothing matched


def git_grep(repo: Path, pattern: str, *flags: str) -> tuple[str, ...]:
    """git's way to the same text searched: every note of the ref, through grep."""
    line = f"git -C {shlex.quote(str(repo))} log --notes=majordomus --format=%N | grep "
    return ("sh", "-c", line + shlex.join([*flags, "--", pattern]))


def records_in_git(repo: Path, env: dict[str, str]) -> list[dict[str, object]]:
    """Every record of the notes on commits reachable from HEAD, as git and tomllib read
    them (each with its kind)."""
    out = subprocess.run(
        ["git", "-C", str(repo), "log", "--notes=majordomus", "--format=%x00%N"],
        env=env,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    found: list[dict[str, object]] = []
    for text in out.split("\0"):
        if not text.strip():
            continue
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue
        for kind, tables in document.items():
            if kind in SEARCHED and isinstance(tables, list):
                found += [{**table, "kind": kind} for table in tables if isinstance(table, dict)]
    return found


def matching(records: list[dict[str, object]], pattern: str, flags: int = 0) -> set[str]:
    compiled = re.compile(pattern, flags)
    ids = set()
    for record in records:
        for key in SEARCHED[str(record["kind"])]:
            value = record.get(key)
            if isinstance(value, str) and any(map(compiled.search, value.split("\n"))):
                ids.add(str(record["id"]))
    return ids


def _text_ids(stdout: bytes) -> set[str]:
    lines = stdout.decode("utf-8", "replace").split("\n")
    return {line.split()[1] for line in lines if line and not line.startswith((" ", "("))}


def _check(stdout: bytes, want: set[str], as_json: bool) -> str:
    if as_json:
        try:
            got = {r["id"] for r in json.loads(stdout)["records"]}
        except (ValueError, KeyError, TypeError):
            return "output is not grep's JSON"
    else:
        got = _text_ids(stdout)
    if got == want:
        return ""
    return f"{len(got)} records listed, {len(want)} match in the notes as git reads them"


def warm_rows(setup: Setup, repo: Path, records: list[dict[str, object]], log: Log) -> list[Row]:
    cases = [
        (f"grep {COMMON}", (COMMON,), git_grep(repo, COMMON), matching(records, COMMON), False),
        (f"grep {ABSENT}", (ABSENT,), git_grep(repo, ABSENT), set(), False),
        (
            f"grep -i {COMMON.upper()}",
            ("-i", COMMON.upper()),
            git_grep(repo, COMMON.upper(), "-i"),
            matching(records, COMMON.upper(), re.IGNORECASE),
            False,
        ),
        (
            f"grep --json {COMMON}",
            ("--json", COMMON),
            git_grep(repo, COMMON),
            matching(records, COMMON),
            True,
        ),
    ]
    rows = []
    for name, argv, base, want, as_json in cases:
        log(f"warm: {name}")
        mine = Command(name, (mj(setup, repo, "grep", *argv),), BOTH)
        theirs = Command("git log --notes, piped to grep", (base,), BOTH)
        ours, git = interleave((mine, theirs), setup, repo)
        answer = "" if ours.failure else _check(ours.outcomes[-1].stdout, want, as_json)
        rows.append(Row(name, "warm", ours, git, WARM, answer=answer))
    return rows


def fresh_row(setup: Setup, fixture: Fixture, workdir: Path, want: set[str], log: Log) -> Row:
    """The first grep in a clone made just before: every note parsed, the caches made."""
    log(f"first grep in a fresh clone ({setup.cold_runs} clones)")
    fresh = workdir / "fresh"
    mine = Command(f"grep {COMMON}, fresh clone", (mj(setup, fresh, "grep", COMMON),), BOTH)
    theirs = Command("git log --notes, piped to grep", (git_grep(fresh, COMMON),), BOTH)
    ours: list[Outcome] = []
    base: list[Outcome] = []
    for _ in range(setup.cold_runs):
        shutil.rmtree(fresh, ignore_errors=True)
        scratch_clone(fixture, fresh, setup.env)
        ours.append(run_chain(mine.argvs, setup.env, fresh, mine.ok))
        base.append(run_chain(theirs.argvs, setup.env, fresh, theirs.ok))
    series = Series(mine, tuple(ours))
    answer = "" if series.failure else _check(ours[-1].stdout, want, False)
    return Row(
        f"grep {COMMON}", "first, fresh clone", series, Series(theirs, tuple(base)), FRESH,
        answer=answer,
    )  # fmt: skip


def grep_rows(setup: Setup, fixture: Fixture, workdir: Path, log: Log) -> list[Row]:
    workdir.mkdir(parents=True, exist_ok=True)
    repo = scratch_clone(fixture, workdir / "read", setup.env)
    records = records_in_git(repo, dict(setup.env))
    rows = warm_rows(setup, repo, records, log)
    rows.append(fresh_row(setup, fixture, workdir, matching(records, COMMON), log))
    return rows


def section(rows: list[Row], fixture: Fixture, command: str, load: str) -> str:
    answers = [f"- {row.name} ({row.mode}): {row.answer}" for row in rows if row.answer]
    shape = fixture.shape
    return "\n".join(
        [
            BEGIN,
            "## grep",
            "",
            f"Generated by `{command}`, on scratch clones of the repository of "
            f"{shape.commits:,} commits and {shape.notes:,} notes: `majordomus grep` over every "
            "record of every task against `git log --notes=majordomus --format=%N | grep "
            "PATTERN` (one `sh -c`, so the shell's start is git's to pay too). Targets: warm "
            "at most 0.5, the first grep in a fresh clone at most 2.0. Medians of "
            "interleaved runs; the fresh clone's of its clones.",
            "",
            f"Load average (1, 5, 15 min) at the end: {load}; other work shared the 2 CPUs, so "
            "absolute times are inflated and the ratios noisier than on an idle machine.",
            "",
            results_table(rows),
            "",
            *answer_lines(
                answers,
                "Answers checked: the records listed (by id) are those whose searched "
                "fields have a matching line in the notes as git and tomllib read them.",
            ),
            END,
        ]
    )


def write_section(path: Path, text: str) -> None:
    replace_section(path, text, BEGIN, END)
