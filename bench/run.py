"""Benchmark majordomus against git on large repositories (`make bench`).

Builds (once, cached) repositories of 10,000, 100,000 and 1,000,000 commits
carrying majordomus notes, times each majordomus command against the git-only
way to the same answer, then `fetch` of 1,000 new records from a remote against
git's fetch and notes merge, prints Markdown tables and writes docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from adoption import adopt_row
from corpus import shape_for
from drawing_rows import drawing_rows
from drawing_rows import section as drawing_section
from drawing_rows import write_section as write_drawing_section
from fetch_rows import fetch_rows
from fetch_rows import section as fetch_section
from fetch_rows import write_section as write_fetch_section
from graph_rows import GraphFixture, graph_rows, merge_heavy, section, write_section
from grep_rows import grep_rows
from grep_rows import section as grep_section
from grep_rows import write_section as write_grep_section
from mcp_rows import mcp_rows, prepared
from mcp_rows import section as mcp_section
from mcp_rows import write_section as write_mcp_section
from repo_cache import (
    GRAPH_VARIANTS,
    Fixture,
    cache_root,
    ensure_fixture,
    graph_chunks,
    scratch_clone,
    set_commit_graph,
)
from report import (
    SizeResult,
    describe_machine,
    document,
    majordomus_source,
    package_files,
    size_section,
)
from signing_rows import section as signing_section
from signing_rows import signing_rows
from signing_rows import write_section as write_signing_section
from suite import (
    Row,
    Setup,
    Targets,
    checkpoint_after_git_rows,
    checkpoint_row,
    cold_rows,
    fresh_clone_rows,
    hook_rows,
    kinds_text,
    reads,
    rev_list_answer,
    targets_for,
    task_records_in_git,
    warm_rows,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small smoke run: 10k commits, 3 runs")
    parser.add_argument("--sizes", help="commit counts, comma-separated (10k,100k,1m)")
    parser.add_argument(
        "--no-1m",
        dest="no_1m",
        action="store_true",
        help="leave the 1,000,000-commit repository out of the default sizes (it takes the "
        "longest by far)",
    )
    parser.add_argument("--runs", type=int, help="measured runs per command (default 10)")
    parser.add_argument("--warmup", type=int, help="warm-up rounds per comparison (default 2)")
    parser.add_argument("--cold-runs", type=int, help="write-then-read cycles (default 5)")
    parser.add_argument("--output", type=Path, help="Markdown report (default docs/benchmarks.md)")
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached repositories")
    parser.add_argument(
        "--only",
        choices=["graph", "fetch", "signing", "mcp", "drawing", "grep"],
        help="run only these rows (graph: branch switch, fresh clone, merge-heavy history; "
        "fetch: 1,000 new records from a remote; signing: signed records' reads and write; "
        "mcp: the MCP server's start-up; drawing: history --graph for every task; grep: a "
        "search of every record, warm and in a fresh clone)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="graph rows: also time this console script (an older majordomus) in the same run",
    )
    parser.add_argument(
        "--majordomus",
        type=Path,
        default=Path(sys.executable).parent / "majordomus",
        help="the console script to measure (default: the one beside this Python)",
    )
    return parser.parse_args(argv)


def parse_sizes(text: str) -> list[int]:
    sizes = []
    for item in text.split(","):
        word = item.strip().lower()
        scale = {"k": 1_000, "m": 1_000_000}.get(word[-1:], 1)
        sizes.append(int(word.rstrip("km")) * scale)
    return sorted(set(sizes))


def default_sizes(args: argparse.Namespace) -> str:
    if args.quick:
        return "10k"
    return "10k,100k" if args.no_1m else "10k,100k,1m"


def hermetic_env(home: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """Only what the commands need: no user or system git config, a fixed identity."""
    for name in ("home", "config", "cache"):
        (home / name).mkdir(parents=True, exist_ok=True)
    return {
        "PATH": environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home / "home"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Bench Runner",
        "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "Bench Runner",
        "GIT_COMMITTER_EMAIL": "bench@example.com",
        "GIT_EDITOR": "false",
        "GIT_TERMINAL_PROMPT": "0",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "NO_COLOR": "1",
    }


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure_size(fixture: Fixture, setup: Setup, workdir: Path) -> SizeResult:
    """Every comparison against one cached repository, on scratch clones of it."""
    expect = fixture.expectation
    targets = targets_for(fixture.shape.commits)
    workdir.mkdir(parents=True)
    read = scratch_clone(fixture, workdir / "read", setup.env)
    in_git = task_records_in_git(read, setup.env, expect.task)
    plan = reads(setup, read, expect, fixture.handover_commit, in_git)
    log("warm reads")
    warm = warm_rows(setup, read, plan, target=targets.warm)
    resume = next(row for row in warm if row.name == "resume --peek")
    log("hook claude, as an agent starts it")
    hooks = hook_rows(setup, read, expect, workdir / "hook-input", targets.hook)
    graph_rows, chunks = _graph_variants(fixture, setup, workdir / "graph")
    write = scratch_clone(fixture, workdir / "write", setup.env)
    elsewhere = scratch_clone(fixture, workdir / "git-write", setup.env)
    log("checkpoint writes")
    written = checkpoint_row(setup, write, elsewhere, expect, fixture.head, targets.write)
    log("checkpoint writes after a git write")
    foreign = checkpoint_after_git_rows(setup, write, expect, fixture.head, targets)
    log("cold reads (a checkpoint, then one read)")
    cold = cold_rows(
        setup,
        write,
        reads(setup, write, expect, fixture.handover_commit),
        expect,
        fixture.head,
        targets.cold,
    )
    log("the first reads in a fresh clone")
    fresh = _fresh_rows(fixture, setup, workdir / "fresh", in_git, targets)
    log("adopt after squash and rebase merges")
    adopted = adopt_row(setup, scratch_clone(fixture, workdir / "adopt", setup.env))
    rows = (*warm, *hooks, written, *foreign, *cold, *fresh, adopted)
    return SizeResult(
        fixture=fixture,
        rows=tuple(_memory_limit(row, targets.memory_mib) for row in rows),
        graph_rows=graph_rows,
        graph_chunks=chunks,
        git_answer=rev_list_answer(resume.baseline, expect),
        substitutions=_substitutions(setup, workdir),
        task_kinds=kinds_text(in_git),
    )


def _fresh_rows(
    fixture: Fixture, setup: Setup, fresh: Path, in_git: Mapping[str, str], targets: Targets
) -> list[Row]:
    def reclone() -> None:
        shutil.rmtree(fresh, ignore_errors=True)
        scratch_clone(fixture, fresh, setup.env)

    plan = reads(setup, fresh, fixture.expectation, fixture.handover_commit, in_git)
    return fresh_clone_rows(setup, fresh, reclone, plan, targets.fresh)


def _memory_limit(row: Row, memory_mib: float) -> Row:
    return dataclasses.replace(row, target=dataclasses.replace(row.target, memory_mib=memory_mib))


def _graph_variants(
    fixture: Fixture, setup: Setup, clone: Path
) -> tuple[dict[str, tuple[Row, ...]], dict[str, tuple[str, ...]]]:
    """Does the commit-graph (and its generation version) change the figures?"""
    repo = scratch_clone(fixture, clone, setup.env)
    quick = dataclasses.replace(setup, warmup=1, runs=max(3, setup.runs // 2))
    plan = reads(quick, repo, fixture.expectation, fixture.handover_commit)
    rows: dict[str, tuple[Row, ...]] = {}
    chunks: dict[str, tuple[str, ...]] = {}
    for variant, generation in GRAPH_VARIANTS.items():
        log(f"commit-graph: {variant}")
        set_commit_graph(repo, generation, setup.env)
        chunks[variant] = graph_chunks(repo)
        rows[variant] = tuple(warm_rows(quick, repo, plan, mode=variant))
    return rows, chunks


def _substitutions(setup: Setup, workdir: Path) -> dict[str, str]:
    names = {str(workdir / name): "REPO" for name in ("read", "write", "graph", "adopt", "fresh")}
    names[str(workdir / "hook-input")] = "INPUT"
    for path, short in ((setup.majordomus, "majordomus"), (setup.python, "python")):
        try:
            names[str(path)] = str(path.relative_to(REPO_ROOT))
        except ValueError:
            names[str(path)] = short
    return names


def make_setup(args: argparse.Namespace, env: Mapping[str, str]) -> Setup:
    quick = bool(args.quick)
    return Setup(
        majordomus=args.majordomus,
        python=Path(sys.executable),
        env=env,
        warmup=args.warmup if args.warmup is not None else (1 if quick else 2),
        runs=args.runs or (3 if quick else 10),
        cold_runs=args.cold_runs or (2 if quick else 5),
    )


def warn_about(setup: Setup) -> None:
    if not setup.majordomus.exists():
        log(f"{setup.majordomus} does not exist: majordomus rows will show the failure")
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    if load > cores / 2:
        log(f"load average is {load:.2f} on {cores} cores: other work will distort the figures")


GRAPH_COMMITS = 100_000


def run_graph_rows(
    args: argparse.Namespace, setup: Setup, root: Path, workdir: Path, arguments: Sequence[str]
) -> str:
    """The graph rows on the linear and the merge-heavy repository; returns their section."""
    commits = min(parse_sizes(args.sizes)) if args.sizes else GRAPH_COMMITS
    linear = ensure_fixture(shape_for(commits), root, setup.env, log, rebuild=args.rebuild)
    fixtures = [
        GraphFixture("linear", linear.path, linear.notes_commit, linear.expectation.task),
        merge_heavy(root, commits, setup.env, log),
    ]
    results = []
    for fixture in fixtures:
        rows = graph_rows(setup, fixture, workdir / f"graph-{fixture.name}", args.before, log)
        results.append((fixture, rows))
    command = " ".join([".venv/bin/python bench/run.py", *arguments])
    text = section(results, setup, command, args.before)
    for name in ("read", "fresh"):
        for fixture in fixtures:
            text = text.replace(str(workdir / f"graph-{fixture.name}" / name), "REPO")
    return text


def main_graph(args: argparse.Namespace, arguments: Sequence[str]) -> int:
    def rows(setup: Setup, root: Path, workdir: Path) -> str:
        if args.runs is None:
            setup = dataclasses.replace(setup, runs=3, warmup=1)
        return run_graph_rows(args, setup, root, workdir, arguments)

    return _section(args, rows, write_section, "graph")


def _section(
    args: argparse.Namespace,
    rows: Callable[[Setup, Path, Path], str],
    write: Callable[[Path, str], None],
    name: str,
) -> int:
    """One section of the report alone: measured in a scratch folder, printed, written into
    the report (unless --no-write)."""
    started = time.monotonic()
    root = cache_root(os.environ)
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    try:
        setup = make_setup(args, hermetic_env(workdir / "env", os.environ))
        warn_about(setup)
        text = rows(setup, root, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(text, flush=True)
    output = args.output or REPO_ROOT / "docs" / "benchmarks.md"
    if not args.no_write:
        write(output, text)
        log(f"wrote the {name} section of {output}")
    log(f"done in {time.monotonic() - started:.0f} s")
    return 0


FETCH_COMMITS = 100_000


def fetch_base(sizes: Sequence[int]) -> int:
    """The repository the fetch rows start from: 100,000 commits, or the largest run below."""
    below = [size for size in sizes if size <= FETCH_COMMITS]
    return max(below) if below else FETCH_COMMITS


def run_fetch_rows(
    args: argparse.Namespace,
    setup: Setup,
    root: Path,
    workdir: Path,
    commits: int,
    arguments: Sequence[str],
) -> str:
    """The fetch rows against the cached repository of `commits`; returns their section."""
    rebuild = bool(args.rebuild) and args.only == "fetch"  # else the sizes rebuilt it
    fixture = ensure_fixture(shape_for(commits), root, setup.env, log, rebuild=rebuild)
    log(f"fetch of 1,000 new records, from {commits:,} commits")
    where = workdir / "fetch"
    prepared, rows = fetch_rows(fixture, setup, where, log)
    for row in rows:
        print(f"{row.name} | {row.mode} | {row.majordomus.median_ms:.0f} ms | "
              f"{row.baseline.median_ms:.0f} ms | {row.verdict}", file=sys.stderr)  # fmt: skip
    names = {str(where / "run"): "REPO", **_substitutions(setup, workdir)}
    command = " ".join([".venv/bin/python bench/run.py", *arguments])
    return fetch_section(fixture, prepared, rows, setup, command, names)


def main_fetch(args: argparse.Namespace, arguments: Sequence[str]) -> int:
    def rows(setup: Setup, root: Path, workdir: Path) -> str:
        commits = fetch_base(parse_sizes(args.sizes)) if args.sizes else FETCH_COMMITS
        return run_fetch_rows(args, setup, root, workdir, commits, arguments)

    return _section(args, rows, write_fetch_section, "fetch")


SIGNING_COMMITS = 100_000


def run_signing_rows(
    args: argparse.Namespace, setup: Setup, root: Path, workdir: Path, arguments: Sequence[str]
) -> str:
    """The signing rows on the repository of 100,000 commits; returns their section."""
    fixture = ensure_fixture(shape_for(SIGNING_COMMITS), root, setup.env, log)
    rows = signing_rows(setup, fixture, workdir / "signing", log)
    for row in rows:
        print(f"{row.name} | {row.majordomus.median_ms:.0f} ms | "
              f"{row.baseline.median_ms:.0f} ms | {row.verdict}", file=sys.stderr)  # fmt: skip
    command = " ".join([".venv/bin/python bench/run.py", *arguments])
    text = signing_section(rows, fixture, command)
    return text.replace(str(workdir / "signing"), "SCRATCH")


def main_signing(args: argparse.Namespace, arguments: Sequence[str]) -> int:
    def rows(setup: Setup, root: Path, workdir: Path) -> str:
        return run_signing_rows(args, setup, root, workdir, arguments)

    return _section(args, rows, write_signing_section, "signing")


GREP_COMMITS = 100_000


def run_grep_rows(
    args: argparse.Namespace, setup: Setup, root: Path, workdir: Path, arguments: Sequence[str]
) -> str:
    """The grep rows on the repository of 100,000 commits; returns their section."""
    fixture = ensure_fixture(shape_for(GREP_COMMITS), root, setup.env, log)
    rows = grep_rows(setup, fixture, workdir / "grep", log)
    for row in rows:
        print(f"{row.name} | {row.mode} | {row.majordomus.median_ms:.0f} ms | "
              f"{row.baseline.median_ms:.0f} ms | {row.verdict}", file=sys.stderr)  # fmt: skip
    command = " ".join([".venv/bin/python bench/run.py", *arguments])
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    text = grep_section(rows, fixture, command, load)
    for path, name in ((workdir / "grep", "SCRATCH"), (setup.majordomus, "majordomus")):
        text = text.replace(str(path), name)
    return text


def main_grep(args: argparse.Namespace, arguments: Sequence[str]) -> int:
    def rows(setup: Setup, root: Path, workdir: Path) -> str:
        return run_grep_rows(args, setup, root, workdir, arguments)

    return _section(args, rows, write_grep_section, "grep")


MCP_COMMITS = 100_000


def run_mcp_rows(setup: Setup, root: Path, workdir: Path, arguments: Sequence[str]) -> str:
    """The MCP server's start-up, on the repository of 100,000 commits; returns its section."""
    fixture = ensure_fixture(shape_for(MCP_COMMITS), root, setup.env, log)
    rows = mcp_rows(setup, prepared(setup, fixture, workdir / "mcp", log), log)
    for name, series in (("SDK first", rows.sdk_first), ("as shipped", rows.shipped)):
        for field in ("sdk", "server", "context"):
            log(f"mcp {name} {field}: {series.median_ms(field):.0f} ms ({series.spread_ms(field)})")
    command = " ".join([".venv/bin/python bench/run.py", *arguments])
    return mcp_section(rows, fixture, command)


def main_mcp(args: argparse.Namespace, arguments: Sequence[str]) -> int:
    def rows(setup: Setup, root: Path, workdir: Path) -> str:
        return run_mcp_rows(setup, root, workdir, arguments)

    return _section(args, rows, write_mcp_section, "mcp")


def run_drawing_rows(setup: Setup, root: Path, workdir: Path, arguments: Sequence[str]) -> str:
    """The drawing row on the repository of 100,000 commits; returns its section."""
    fixture = ensure_fixture(shape_for(SIGNING_COMMITS), root, setup.env, log)
    merges = merge_heavy(root, SIGNING_COMMITS, setup.env, log)
    rows = drawing_rows(setup, fixture, merges, workdir / "drawing", log)
    for row in rows:
        print(f"{row.name} | {row.majordomus.median_ms:.0f} ms | "
              f"{row.baseline.median_ms:.0f} ms | {row.verdict}", file=sys.stderr)  # fmt: skip
    command = " ".join([".venv/bin/python bench/run.py", *arguments])
    text = drawing_section(rows, fixture, command)
    return text.replace(str(workdir / "drawing"), "SCRATCH")


def main_drawing(args: argparse.Namespace, arguments: Sequence[str]) -> int:
    def rows(setup: Setup, root: Path, workdir: Path) -> str:
        return run_drawing_rows(setup, root, workdir, arguments)

    return _section(args, rows, write_drawing_section, "drawing")


SECTION = re.compile(r"<!-- ([a-z-]+) rows: begin -->.*?<!-- \1 rows: end -->\n?", re.S)


def kept_sections(output: Path, text: str) -> str:
    """The sections of the report only an `--only` run writes (the branch switch's): a
    whole run keeps them as they were rather than drop them."""
    old = output.read_text(encoding="utf-8") if output.is_file() else ""
    kept = [
        m.group(0) for m in SECTION.finditer(old) if f"<!-- {m.group(1)} rows: begin" not in text
    ]
    return "".join("\n" + section for section in kept)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(arguments)
    if args.only == "mcp":
        return main_mcp(args, arguments)
    if args.only == "graph":
        return main_graph(args, arguments)
    if args.only == "fetch":
        return main_fetch(args, arguments)
    if args.only == "signing":
        return main_signing(args, arguments)
    if args.only == "drawing":
        return main_drawing(args, arguments)
    if args.only == "grep":
        return main_grep(args, arguments)
    started = time.monotonic()
    sizes = parse_sizes(args.sizes or default_sizes(args))
    root = cache_root(os.environ)
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=root))  # same file system: hard links
    try:
        setup = make_setup(args, hermetic_env(workdir / "env", os.environ))
        warn_about(setup)
        machine = describe_machine(setup)
        results = []
        for commits in sizes:
            fixture = ensure_fixture(shape_for(commits), root, setup.env, log, rebuild=args.rebuild)
            log(f"measuring {commits:,} commits")
            results.append(measure_size(fixture, setup, workdir / f"c{commits}"))
            print(size_section(results[-1]) + "\n", flush=True)
        fetched = run_fetch_rows(args, setup, root, workdir, fetch_base(sizes), arguments)
        print(fetched + "\n", flush=True)
        signed = run_signing_rows(args, setup, root, workdir, arguments)
        print(signed + "\n", flush=True)
        grepped = run_grep_rows(args, setup, root, workdir, arguments)
        print(grepped + "\n", flush=True)
        served = run_mcp_rows(setup, root, workdir, arguments)
        print(served + "\n", flush=True)
        drawn = run_drawing_rows(setup, root, workdir, arguments)
        print(drawn + "\n", flush=True)
        source_at_end = majordomus_source(setup)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    if package_files(source_at_end) != package_files(machine.source):
        log("majordomus changed while the benchmark ran: the figures mix versions")
    text = document(machine, source_at_end, results, setup, arguments, elapsed, fetched)
    output = args.output or (None if args.quick else REPO_ROOT / "docs" / "benchmarks.md")
    if output is not None and not args.no_write:
        output.parent.mkdir(parents=True, exist_ok=True)
        kept = kept_sections(output, text)
        output.write_text(text + kept, encoding="utf-8")
        write_signing_section(output, signed)
        write_grep_section(output, grepped)
        write_mcp_section(output, served)
        write_drawing_section(output, drawn)
        log(f"wrote {output}")
    log(f"done in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
