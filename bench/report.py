"""The benchmark report: the machine it ran on and the results, as Markdown."""

from __future__ import annotations

import dataclasses
import datetime
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from repo_cache import Fixture
from suite import MEMORY_LIMIT_MIB, Command, Row, Series, Setup, Target

STDERR_CHARS = 160


@dataclasses.dataclass(frozen=True, slots=True)
class SizeResult:
    """Everything measured against one repository size."""

    fixture: Fixture
    rows: tuple[Row, ...]
    graph_rows: Mapping[str, tuple[Row, ...]]  # commit-graph variant -> rows
    graph_chunks: Mapping[str, tuple[str, ...]]
    git_answer: str
    substitutions: Mapping[str, str]  # scratch paths -> the names the report uses


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
    )


def _ms(series: Series) -> str:
    return "—" if series.failure else f"{series.median_ms:,.0f} ms"


def _ratio(row: Row) -> str:
    return "—" if row.ratio is None else f"{row.ratio:.2f}"


def _target(target: Target, mode: str) -> str:
    text = f"≤ {target.limit:g}"
    if target.aim is not None:
        text += f" (aim ≤ {target.aim:g})"
    return f"{text} x floor" if mode == "write" else text


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
        "| command | run | majordomus | git-only | ratio | target | verdict "
        "| peak MiB (mj / git) |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for row in rows:
        baseline = f"{_ms(row.baseline)} ({row.baseline.command.name})"
        lines.append(
            f"| {row.name} | {row.mode} | {_ms(row.majordomus)} | {baseline} | {_ratio(row)} "
            f"| {_target(row.target, row.mode)} | {_verdict(row)} | {_memory(row)} |"
        )
        if row.reference is not None:
            ref = row.reference
            lines.append(
                f"| ↳ for the record | write | | {_ms(ref)} ({ref.command.name}) | | | "
                f"| — / {ref.peak_mib:.0f} |"
            )
    return "\n".join(lines)


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
        f"- {row.name} ({row.mode}): {row.answer or 'matches the data set'}"
        for row in result.rows
        if row.mode == "warm" and not row.majordomus.failure
    ]
    lines.append(f"- git rev-list: {result.git_answer or 'matches the data set'}")
    return lines


def _failures(result: SizeResult) -> list[str]:
    lines = []
    for row in result.rows:
        failure = row.majordomus.failure
        if failure:
            lines.append(f"- {row.name} ({row.mode}):\n\n  ```text\n  {_indent(failure)}\n  ```")
    return lines


def _indent(text: str) -> str:
    return "\n  ".join(text.strip().splitlines()[:12])


def size_section(result: SizeResult) -> str:
    fixture = result.fixture
    shape = fixture.shape
    expect = fixture.expectation
    parts = [
        f"## {shape.commits:,} commits, {shape.notes:,} notes",
        f"Benchmark task `{expect.task}` ({expect.task_records} records); its open handover "
        f"is on `{fixture.handover_commit}`, {shape.handover_distance:,} commits behind HEAD. "
        f"The cached repository took {fixture.build_seconds:.1f} s to build.",
        results_table(result.rows),
        "Commit-graph variants (warm; same clone, graph file replaced between variants):",
        graph_table(result),
        "Answers checked against the generated data (warm runs):",
        "\n".join(_answers(result)),
    ]
    failures = _failures(result)
    if failures:
        parts += ["majordomus failures (stderr of the first failing run):", "\n".join(failures)]
    parts += [
        "Commands, as run (`REPO` is a scratch clone of the cached repository):",
        commands_block(result),
    ]
    return "\n\n".join(parts)


def machine_section(machine: Machine) -> str:
    return "\n".join(
        [
            "## Machine",
            "",
            f"- CPU: {machine.cpu}; `nproc`: {machine.cores}",
            f"- Memory: {machine.memory}; {machine.kernel}",
            f"- Python {machine.python}; {machine.git}; pygit2 {machine.pygit2}",
            f"- majordomus: {machine.majordomus}",
        ]
    )


def document(
    machine: Machine,
    results: Sequence[SizeResult],
    setup: Setup,
    argv: Sequence[str],
    elapsed_s: float,
) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([".venv/bin/python bench/run.py", *argv])
    head = f"""# Benchmarks

Generated by `{command}` on {when}; the run took {elapsed_s:.0f} s.
`make bench` runs `.venv/bin/python bench/run.py`. Do not edit by hand: rerun it.

{machine_section(machine)}

## What is measured

Each majordomus command is timed against the git-only way to get the same answer
from the same repository. The runs are interleaved (majordomus, git, majordomus,
git, …) after {setup.warmup} warm-up round(s); figures are medians of {setup.runs}
runs, and *ratio* is majordomus' median over git's. Every command runs in a
hermetic environment (temporary `HOME`, `XDG_CONFIG_HOME` and `XDG_CACHE_HOME`,
`GIT_CONFIG_NOSYSTEM=1`, a fixed identity) on a scratch clone of the cached
repository, with stdout and stderr written to files. Peak memory is the
largest resident set size of the process and anything it waited for
(`wait4`), over all its runs.

- **warm**: the repository is unchanged between runs.
- **cold**: the first read after a new record is written: `majordomus
  checkpoint` then the read, against `git notes append` of a TOML record then
  the git read ({setup.cold_runs} cycles, only the read is timed).
- **write**: `majordomus checkpoint` against the floor any Python CLI using
  pygit2 pays, the same venv's `python -c "import pygit2"`; `git notes append`
  is shown for the record.

Targets: history, check and resume --peek at most 1.0 warm (aim 0.5) and 2.0
cold; checkpoint at most 2.0 x the floor (aim 1.3); peak memory under
{MEMORY_LIMIT_MIB:g} MiB for every command.

The data set: a linear history (one commit a minute, each changing one of 200
small files) and one note on every tenth commit on average, spread over 20
tasks: task records, checkpoints, handovers and the resume records that
resolve them, in the note format of the specification (`v = 1`, `at` in UTC,
increasing with commit order). It is built once with one `git fast-import`
stream (commits and the notes commit, fanned out as git does), validated
(every note read back through git and parsed with `tomllib`), given a
commit-graph (`git commit-graph write --reachable`), and cached under
`${{XDG_CACHE_HOME:-~/.cache}}/majordomus-bench/`, keyed by the generator version.
"""
    return head + "\n" + "\n\n".join(size_section(result) for result in results) + "\n"
