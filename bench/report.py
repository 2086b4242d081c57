"""The benchmark report: the machine it ran on and the results, as Markdown."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from probe import memory_source
from repo_cache import DEFAULT_GRAPH, Fixture
from suite import (
    LARGE,
    MEMORY_LIMIT_MIB,
    Command,
    Row,
    Series,
    Setup,
    Target,
    failure_text,
    targets_for,
)

STDERR_CHARS = 160
FAILURE_LINES = 12  # the end of a traceback says what went wrong


@dataclasses.dataclass(frozen=True, slots=True)
class SizeResult:
    """Everything measured against one repository size."""

    fixture: Fixture
    rows: tuple[Row, ...]
    graph_rows: Mapping[str, tuple[Row, ...]]  # commit-graph variant -> rows
    graph_chunks: Mapping[str, tuple[str, ...]]
    git_answer: str
    substitutions: Mapping[str, str]  # scratch paths -> the names the report uses
    task_kinds: str = ""  # the benchmark task's records by kind, as git plumbing reads them


@dataclasses.dataclass(frozen=True, slots=True)
class Machine:
    cpu: str
    cores: str
    memory: str
    kernel: str
    python: str
    git: str
    pygit2: str
    majordomus: str
    source: str
    load: str


def _output(argv: Sequence[str], env: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(
            list(argv), env=dict(env), capture_output=True, text=True, check=False
        )
    except OSError as error:
        return f"unavailable ({error.strerror})"
    text = (done.stdout or done.stderr).strip()
    return text if done.returncode == 0 else f"unavailable (exit {done.returncode}: {text})"


def _cpuinfo(key: str, path: Path = Path("/proc/cpuinfo")) -> str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return "unknown"
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return "unknown"


def _memory_total() -> str:
    total = _cpuinfo("MemTotal", Path("/proc/meminfo")).split()
    if len(total) == 2 and total[0].isdigit():
        return f"{int(total[0]) / 1024 / 1024:.1f} GiB"
    return "unknown"


def majordomus_source(setup: Setup) -> str:
    """Which majordomus is measured: its commit, uncommitted changes, a hash of its files."""
    where = "import majordomus, os; print(os.path.dirname(majordomus.__file__))"
    package = Path(_output([str(setup.python), "-c", where], setup.env))
    files = sorted(package.rglob("*.py")) if package.is_dir() else []
    if not files:
        return "package not importable"
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    commit = _output(["git", "-C", str(package), "rev-parse", "--short", "HEAD"], setup.env)
    status = _output(["git", "-C", str(package), "status", "--porcelain", "--", "."], setup.env)
    changed = " with uncommitted changes" if status else ""
    return f"commit {commit}{changed}; package files sha256 {digest.hexdigest()[:12]}"


def describe_machine(setup: Setup) -> Machine:
    versions = "import pygit2; print(pygit2.__version__, '(libgit2', pygit2.LIBGIT2_VERSION + ')')"
    return Machine(
        cpu=_cpuinfo("model name"),
        cores=_output(["nproc"], setup.env),
        memory=_memory_total(),
        kernel=f"{platform.system()} {platform.release()}",
        python=_output(
            [str(setup.python), "-c", "import sys; print(sys.version.split()[0])"], setup.env
        ),
        git=_output(["git", "--version"], setup.env),
        pygit2=_output([str(setup.python), "-c", versions], setup.env),
        majordomus=_output([str(setup.majordomus), "--version"], setup.env),
        source=majordomus_source(setup),
        load=" ".join(f"{value:.2f}" for value in os.getloadavg()),
    )


def _ms(series: Series) -> str:
    return "—" if series.failure else f"{series.median_ms:,.0f} ms"


def _ratio(row: Row) -> str:
    return "—" if row.ratio is None else f"{row.ratio:.2f}"


def _cpu_ratio(row: Row) -> str:
    return "—" if row.cpu_ratio is None else f"{row.cpu_ratio:.2f}"


def _target(target: Target, mode: str) -> str:
    text = f"≤ {target.limit:.1f}"
    if target.aim is not None:
        text += f" (aim ≤ {target.aim:.1f})"
    if "git write + floor" in mode:
        return f"{text} x (git write + floor)"
    return f"{text} x floor" if mode.startswith("write") else text


def _cell(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > STDERR_CHARS:
        flat = flat[: STDERR_CHARS - 1] + "…"
    return flat.replace("|", "\\|")


def _verdict(row: Row) -> str:
    failure = row.majordomus.failure
    if failure:
        return f"FAILED: {_cell(failure)}"
    if row.answer:
        return f"{row.verdict}: {_cell(row.answer)}"
    return row.verdict


def _memory(row: Row) -> str:
    ours = "—" if row.majordomus.failure else f"{row.majordomus.peak_mib:.0f}"
    return f"{ours} / {row.baseline.peak_mib:.0f}"


def results_table(rows: Sequence[Row]) -> str:
    lines = [
        "| command | run | majordomus | git-only | ratio | CPU ratio | target | verdict "
        "| peak MiB (mj / git) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for row in rows:
        baseline = f"{_ms(row.baseline)} ({row.baseline.command.name})"
        lines.append(
            f"| {row.name} | {row.mode} | {_ms(row.majordomus)} | {baseline} | {_ratio(row)} "
            f"| {_cpu_ratio(row)} | {_target(row.target, row.mode)} | {_verdict(row)} "
            f"| {_memory(row)} |"
        )
        if row.reference is not None:
            ref = row.reference
            lines.append(
                f"| ↳ for the record | write | | {_ms(ref)} ({ref.command.name}) | | | | "
                f"| — / {ref.peak_mib:.0f} |"
            )
    return "\n".join(lines)


def _summary(rows: Sequence[Row]) -> str:
    met = [row for row in rows if row.verdict.startswith("met") and "," not in row.verdict]
    failed = sum(1 for row in rows if row.majordomus.failure)
    text = f"Targets met: {len(met)} of {len(rows)}"
    return text + (f"; {failed} command(s) failed." if failed else ".")


def _graph_heading(result: SizeResult) -> str:
    runs = next((len(rows[0].majordomus.outcomes) for rows in result.graph_rows.values()), 0)
    return (
        f"Commit-graph variants (warm, medians of {runs} runs after one warm-up; one clone, "
        "its graph file replaced between variants):"
    )


def graph_table(result: SizeResult) -> str:
    lines = [
        "| commit-graph | file chunks | command | majordomus | git-only | ratio |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for variant, rows in result.graph_rows.items():
        chunks = " ".join(result.graph_chunks.get(variant, ())) or "no file"
        for row in rows:
            ours = (
                f"FAILED: {_cell(row.majordomus.failure)}"
                if row.majordomus.failure
                else _ms(row.majordomus)
            )
            lines.append(
                f"| {variant} | {chunks} | {row.name} | {ours} | {_ms(row.baseline)} "
                f"| {_ratio(row)} |"
            )
    return "\n".join(lines)


def graph_finding(result: SizeResult) -> str:
    """How much each variant costs next to git's default graph, majordomus and git alike."""
    default = {row.name: row for row in result.graph_rows.get(DEFAULT_GRAPH, ())}
    sentences = []
    for variant, rows in result.graph_rows.items():
        if variant == DEFAULT_GRAPH:
            continue
        factors = [_factors(row, default.get(row.name)) for row in rows]
        shown = "; ".join(f"{row.name} {text}" for row, text in zip(rows, factors, strict=True))
        sentences.append(f"- {variant}, time relative to {DEFAULT_GRAPH}: {shown}.")
    return "\n".join(sentences)


def _factors(row: Row, default: Row | None) -> str:
    if default is None:
        return "—"
    mine = "—"
    if not (row.majordomus.failure or default.majordomus.failure):
        mine = f"{row.majordomus.median_ms / default.majordomus.median_ms:.2f}x"
    return f"majordomus {mine}, git {row.baseline.median_ms / default.baseline.median_ms:.2f}x"


def _substitute(text: str, substitutions: Mapping[str, str]) -> str:
    for old, new in substitutions.items():
        text = text.replace(old, new)
    return text


def commands_block(result: SizeResult) -> str:
    seen: list[str] = []
    for row in result.rows:
        for series in (row.majordomus, row.baseline, row.reference):
            if series is not None:
                line = _command_line(series.command, result.substitutions)
                if line not in seen:
                    seen.append(line)
    return "```sh\n" + "\n".join(seen) + "\n```"


def _command_line(command: Command, substitutions: Mapping[str, str]) -> str:
    return f"# {command.name}\n{_substitute(command.shell, substitutions)}"


def _answers(result: SizeResult) -> list[str]:
    lines = [
        f"- {row.name} ({row.mode}): {row.answer or _matches(row)}"
        for row in result.rows
        if row.mode in ("warm", "first, fresh clone") and not row.majordomus.failure
    ]
    lines.append(f"- git rev-list: {result.git_answer or 'matches the data set'}")
    return lines


def _matches(row: Row) -> str:
    if row.name == "history":
        return "matches the data set and the records git plumbing reads"
    return "matches the data set"


def _failures(result: SizeResult) -> list[str]:
    lines = []
    rows = [*result.rows, *(row for rows in result.graph_rows.values() for row in rows)]
    for row in rows:
        failed = row.majordomus.failures
        if failed:
            lines.append(
                f"- {row.name} ({row.mode}), {row.majordomus.failure}\n\n"
                f"  ```text\n  {_tail(failure_text(failed[-1]))}\n  ```"
            )
    return lines


def _tail(text: str) -> str:
    return "\n  ".join(text.strip().splitlines()[-FAILURE_LINES:])


def size_section(result: SizeResult) -> str:
    fixture = result.fixture
    shape = fixture.shape
    expect = fixture.expectation
    parts = [
        f"## {shape.commits:,} commits, {shape.notes:,} notes",
        f"Benchmark task `{expect.task}` ({expect.task_records:,} records"
        + (f": {result.task_kinds}, read back with git plumbing" if result.task_kinds else "")
        + "); its open handover "
        f"is on `{fixture.handover_commit}`, {shape.handover_distance:,} commits behind HEAD. "
        f"The cached repository took {fixture.build_seconds:.1f} s to build.",
        results_table(result.rows),
        _summary(result.rows),
        _graph_heading(result),
        graph_table(result),
        graph_finding(result),
        "Answers checked against the generated data (warm runs, and the fresh clone's):",
        "\n".join(_answers(result)),
    ]
    failures = _failures(result)
    if failures:
        parts += ["majordomus failures (the end of the last failing run's stderr):"]
        parts.append("\n".join(failures))
    parts += [
        "Commands, as run (`REPO` is a scratch clone of the cached repository):",
        commands_block(result),
    ]
    return "\n\n".join(parts)


def growth_section(results: Sequence[SizeResult]) -> str:
    """Each warm and write row, smallest repository against the largest."""
    if len(results) < 2:
        return ""
    small, large = results[0], results[-1]
    grow = large.fixture.shape.commits / small.fixture.shape.commits
    lines = [
        f"## How cost grows ({small.fixture.shape.commits:,} → "
        f"{large.fixture.shape.commits:,} commits, {grow:g}x the data)",
        "",
        "| command | run | majordomus | growth | git-only | growth |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for before, after in zip(small.rows, large.rows, strict=True):
        lines.append(
            f"| {after.name} | {after.mode} | {_ms(before.majordomus)} → {_ms(after.majordomus)} "
            f"| {_growth(before.majordomus, after.majordomus)} "
            f"| {_ms(before.baseline)} → {_ms(after.baseline)} "
            f"| {_growth(before.baseline, after.baseline)} |"
        )
    return "\n".join(lines)


def _growth(before: Series, after: Series) -> str:
    if before.failure or after.failure or not before.median_ms:
        return "—"
    return f"{after.median_ms / before.median_ms:.1f}x"


def package_files(source: str) -> str:
    """The hash of the package's files in a `majordomus_source` answer: what was measured.
    The commit may move under a run (a commit of the benchmark itself) and measure the same."""
    return source.rpartition("package files sha256 ")[2]


def _changed_warning(start: str, end: str) -> str:
    if package_files(start) == package_files(end):
        return ""
    return (
        f"\n**majordomus changed while this ran** (at the start: {start}; at the end: {end}): "
        "the figures mix versions.\n"
    )


def machine_section(machine: Machine) -> str:
    return "\n".join(
        [
            "## Machine",
            "",
            f"- CPU: {machine.cpu}; `nproc`: {machine.cores}",
            f"- Memory: {machine.memory}; {machine.kernel}",
            f"- Python {machine.python}; {machine.git}; pygit2 {machine.pygit2}",
            f"- majordomus: {machine.majordomus}; {machine.source}",
            f"- Load average (1, 5, 15 min) at the start: {machine.load}; at the end: "
            + " ".join(f"{value:.2f}" for value in os.getloadavg()),
            *_busy_note(machine),
        ]
    )


def _busy_note(machine: Machine) -> list[str]:
    """Say so when other work shared the CPUs: every figure then carries its noise."""
    cores = int(machine.cores) if machine.cores.isdigit() else os.cpu_count() or 1
    loads = [float(machine.load.split()[0]), os.getloadavg()[0]]
    if max(loads) <= cores / 2:
        return []
    return [
        "",
        f"Other work shared the {cores} CPUs during this run (load up to {max(loads):.1f}): "
        "interleaving spreads it over both sides, but absolute times are inflated and the "
        "ratios are noisier than on an idle machine.",
    ]


def document(
    machine: Machine,
    source_at_end: str,
    results: Sequence[SizeResult],
    setup: Setup,
    argv: Sequence[str],
    elapsed_s: float,
    fetched: str = "",
) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([".venv/bin/python bench/run.py", *argv])
    large = targets_for(LARGE)
    head = f"""# Benchmarks

Generated by `{command}` on {when}; the run took {elapsed_s:.0f} s.
`make bench` runs `.venv/bin/python bench/run.py` (every size, 1,000,000 commits
included, and the fetch rows; `--no-1m` leaves the largest size out, which takes
longer than all the rest together; `--only fetch` and `--only graph` rerun one
section). Do not edit by hand: rerun it.
{_changed_warning(machine.source, source_at_end)}
{machine_section(machine)}

## What is measured

Each majordomus command is timed against the git-only way to get the same answer
from the same repository. The runs are interleaved (majordomus, git, majordomus,
git, …) after {setup.warmup} warm-up round(s); figures are medians of {setup.runs}
runs, and *ratio* is majordomus' median over git's. *CPU ratio* is the same for
CPU time (user + system) of the whole process tree, from wait4(): every git
process and forked helper the command waited for counts. Where majordomus runs
work on an idle second core (the history walk started early, the forked note
parsers of a fresh read) its wall ratio is lower than its CPU ratio; on a busy
machine the CPU ratio is what it costs. A target is met when both ratios are within
it: the verdict judges the larger. Every command runs in a
hermetic environment (temporary `HOME`, `XDG_CONFIG_HOME` and `XDG_CACHE_HOME`,
`GIT_CONFIG_NOSYSTEM=1`, a fixed identity) on a scratch clone of the cached
repository (`gc.auto=0`, so no automatic gc lands inside a timing), with stdout
and stderr written to files. Peak memory is the largest resident set size over
all runs of a command, from {memory_source()}.

- **warm**: the repository is unchanged between runs.
- **cold**: the first read after a new record is written: `majordomus
  checkpoint` then the read, against `git notes append` of a TOML record then
  the git read ({setup.cold_runs} cycles, only the read is timed), in a clone
  where each read ran once before (untimed).
- **first, fresh clone**: what a new session or CI runs first, the task named:
  `history --task`, `resume --peek --task` and `context --task`, each in a local
  clone made just before (untimed; {setup.cold_runs} clones a read), so no
  majordomus cache of any kind exists: what an agent meets after `git clone`.
  `git log` (and, for the two that label the handover, the `rev-list --count`
  that gives its divergence) runs in the same clone right after. Target 1.5 at
  every size.
- **write**: consecutive `majordomus checkpoint`s, as in a working session,
  against the floor any Python CLI using pygit2 pays, the same venv's
  `python -c "import pygit2"`; `git notes append` (run in another clone, so it
  does not move this one's ref) is shown for the record.
- **write, after git**: the same, when another writer (`git notes append`)
  moved the ref just before: majordomus' cached per-task views then describe
  another state, and the write carries them over: it reads the notes that changed
  and rewrites the views of their tasks. Held once to
  the floor alone, once (*vs git write + floor*) to that same `git notes
  append`, timed, plus the floor: what the write costs git plus what any
  Python CLI using pygit2 pays to start.
- **adopt**: 50 records written by majordomus on five branches of ten commits,
  orphaned by three squash merges and two cherry-picked ("rebase and merge")
  landings after main moved on by 100 commits, the branches deleted;
  `adopt --dry-run` against the floor of the same proof: the venv's
  `python -c "import pygit2"`, then git's own patch ids of the commits compared
  (`rev-list | diff-tree --stdin | patch-id`); the one real `adopt`, which
  writes the copies, is shown for the record (target ≤ 2.0 x that floor).

Targets: history, check and resume --peek at most 1.0 warm (aim 0.5) and 2.0
cold; checkpoint at most 2.0 x the floor (aim 1.3), and after a git write at
most 2.0 x (that write + the floor); fetch at most 1.5; peak memory under
{MEMORY_LIMIT_MIB:g} MiB for every command. From {LARGE:,} commits on, the
targets of the issue that asked for that size: warm reads at most
{large.warm.limit:g} of git's time, the first read after a write at most
{large.cold.limit:g}, a checkpoint after a git write at most
{large.after_git.limit:g} x (that write + the floor), peak memory under
{large.memory_mib:g} MiB for every command. The smaller repositories show how
cost grows with history; there the fixed cost of starting Python and importing
majordomus dominates.

The data set: a linear history (one commit a minute, each changing one of 200
small files) and one note on every tenth commit on average, spread over 20
tasks: task records, checkpoints, handovers and the resume records that
resolve them, in the note format of the specification (`v = 1`, `at` in UTC,
increasing with commit order). It is built once with one `git fast-import`
stream (commits and the notes commit, fanned out as git does), validated
(every note read back through git and parsed with `tomllib`), given a
commit-graph (`git commit-graph write --reachable`), and cached under
`${{XDG_CACHE_HOME:-~/.cache}}/majordomus-bench/`, keyed by the generator version.
Each size's section says how long its build took. The benchmark task of each
size is the generator's first task; its records by kind are read back from the
notes with git plumbing, and `history --task` must list exactly those.
"""
    sections = [size_section(result) for result in reversed(results)]
    growth = growth_section(results)
    parts = [*sections, growth] if growth else sections
    return head + "\n" + "\n\n".join([*parts, fetched] if fetched else parts) + "\n"
