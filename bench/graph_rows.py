"""The graph rows: `history` of every task right after a branch switch, the first `history`
in a fresh clone, and warm `history --task`, on the linear repository and on a merge-heavy
one, each against `git log --notes=majordomus` in the same run (`bench/run.py --only graph`).

The merge-heavy repository: in every block of ten commits, three sit on a side branch
forked from the block's first main commit and dated two days earlier (an older-dated
branch), and the block's last commit merges it into main; the notes of the standard data
set land on every kind of commit, side-branch commits included. Every label `history`
prints for a sample of handovers is checked against git's own (`rev-list --left-right
--count`, `merge-base`), and the records it lists against `git rev-list` reachability.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from corpus import GENERATOR_VERSION, commit_time, plan, shape_for
from probe import Outcome, run_chain
from repo_cache import _get_marks, _write_notes_commit, fast_import, run_git
from suite import WARM, Command, Row, Series, Setup, Target, git_log, replace_section

Log = Callable[[str], None]
EVERY_FRESH = Target(limit=3.0)  # issue 29: the first history of every task in a fresh clone
SIDE_AGE = datetime.timedelta(days=2)
BLOCK = 10
SWITCH = Target(limit=1.0)
SHOW = Target(limit=1.5)
SAMPLE = 25  # handover labels checked against git per answer


@dataclasses.dataclass(frozen=True, slots=True)
class GraphFixture:
    name: str
    path: Path
    notes_commit: str
    task: str


def merge_heavy(root: Path, commits: int, env: Mapping[str, str], log: Log) -> GraphFixture:
    """The cached merge-heavy repository, built once."""
    shape = shape_for(commits)
    target = root / f"g{GENERATOR_VERSION}-merges-c{commits}-n{shape.notes}"
    manifest = target / "manifest.json"
    if not manifest.is_file():
        started = time.monotonic()
        building = target.with_name(target.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        repo = building / "repo"
        repo.mkdir(parents=True)
        run_git(["init", "-q", "-b", "main", str(repo)], env, building)
        log(f"building a merge-heavy history of {commits:,} commits in {building}")
        data = plan(shape)
        with fast_import(repo, env) as (stream, answers):
            for index in range(commits):
                stream.write(_commit(index))
            shas = _get_marks(stream, answers, [note.index for note in data.notes])
            _write_notes_commit(stream, data.notes, shas, commits)
        run_git(["commit-graph", "write", "--reachable"], env, repo)
        run_git(["reset", "-q", "--hard", "main"], env, repo)
        seconds = round(time.monotonic() - started, 1)
        facts = {
            "notes_commit": run_git(["rev-parse", "refs/notes/majordomus"], env, repo).strip(),
            "task": data.expectation.task,
            "build_seconds": seconds,
        }
        (building / "manifest.json").write_text(json.dumps(facts) + "\n", encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        building.rename(target)
        log(f"built in {seconds} s")
    facts = json.loads(manifest.read_text(encoding="utf-8"))
    return GraphFixture("merge-heavy", target / "repo", facts["notes_commit"], facts["task"])


def _commit(index: int) -> bytes:
    """Commit `index` of the merge-heavy history (marks are index + 1)."""
    block, place = divmod(index, BLOCK)
    when = commit_time(index)
    parents: list[int] = []
    if place in (6, 7, 8):  # the side branch: older-dated, forked from the block's start
        ref = b"refs/heads/side"
        when -= SIDE_AGE
        parents = [block * BLOCK if place == 6 else index - 1]
    else:
        ref = b"refs/heads/main"
        if index:
            parents = [block * BLOCK + 5 if place == 9 else index - 1]
        if place == 9:
            parents.append(index - 1)  # the side branch's tip
    who = b"Ada Lovelace <ada@example.com> %d +0000" % int(when.timestamp())
    path = b"src/mod%02d.py" % (index % 50)
    body = b"REVISION = %d\n" % index
    message = b"Change %d" % index
    out = [b"commit %s\nmark :%d\nauthor %s\ncommitter %s\n" % (ref, index + 1, who, who)]
    out.append(b"data %d\n%s\n" % (len(message), message))
    if parents:
        out.append(b"from :%d\n" % (parents[0] + 1))
        out.extend(b"merge :%d\n" % (p + 1) for p in parents[1:])
    out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path, len(body), body))
    return b"".join(out)


def clone(fixture: GraphFixture, dest: Path, env: Mapping[str, str]) -> Path:
    """A local clone with the records, as a fresh clone after `majordomus fetch` has them."""
    shutil.rmtree(dest, ignore_errors=True)
    run_git(["clone", "-q", str(fixture.path), str(dest)], env, dest.parent)
    run_git(["update-ref", "refs/notes/majordomus", fixture.notes_commit], env, dest)
    run_git(["config", "gc.auto", "0"], env, dest)
    return dest


# ---- rows ---------------------------------------------------------------------------------


def graph_rows(
    setup: Setup,
    fixture: GraphFixture,
    workdir: Path,
    before: Path | None,
    log: Log,
) -> list[tuple[Row, Series | None]]:
    """The three graph comparisons on one repository: each row, and the same majordomus
    command run by the `before` program (None when not asked for)."""
    workdir.mkdir(parents=True, exist_ok=True)
    repo = clone(fixture, workdir / "read", setup.env)
    rows: list[tuple[Row, Series | None]] = []
    # A branch off far back: git's log walks half the history, majordomus' cost should
    # follow (a branch off main~30 is near the tip, where both walk almost everything).
    far = int(run_git(["rev-list", "--first-parent", "--count", "main"], setup.env, repo)) // 2
    for back in (30, far):
        log(f"{fixture.name}: history after a branch switch off main~{back}")
        rows.append(_switch_row(setup, repo, before, back))
    log(f"{fixture.name}: first history in a fresh clone")
    rows.append(_fresh_row(setup, fixture, workdir, before))
    log(f"{fixture.name}: show --json in a fresh clone")
    rows.append(_show_row(setup, fixture, workdir, before))
    log(f"{fixture.name}: history --task, warm")
    # The older program keeps its caches in another format: a clone of its own, so
    # neither side throws the other's away between warm runs.
    other = clone(fixture, workdir / "read-before", setup.env) if before else repo
    rows.append(_warm_row(setup, repo, other, fixture.task, before))
    log(f"{fixture.name}: one walk, pygit2 against git rev-list")
    rows.append((_walk_row(setup, repo), None))
    return rows


PYGIT2_WALK = """
import sys, pygit2
repo = pygit2.Repository(sys.argv[1])
n = 0
for commit in repo.walk(repo.head.target, pygit2.enums.SortMode.TOPOLOGICAL):
    n += len(commit.parent_ids) + 1
print(n)
"""


def _walk_row(setup: Setup, repo: Path) -> Row:
    """What one walk of the whole history with parents costs: pygit2's walker (as a
    process, import included) against the `git rev-list --parents` majordomus runs."""
    commands = [
        Command("pygit2 walk", ((str(setup.python), "-c", PYGIT2_WALK, str(repo)),)),
        Command(
            "git rev-list --parents", (("git", "-C", str(repo), "rev-list", "--parents", "HEAD"),)
        ),
    ]
    series = _interleave(commands, setup, repo, lambda: None, warmup=setup.warmup)
    return Row("walk with parents", "pygit2 vs git", series[0], series[1], Target(limit=1.0))


def _programs(setup: Setup, before: Path | None) -> list[Path]:
    return [setup.majordomus] if before is None else [setup.majordomus, before]


def _switch_row(
    setup: Setup, repo: Path, before: Path | None, back: int
) -> tuple[Row, Series | None]:
    """Each run first makes a new commit on a new branch off main~BACK (untimed), then
    times one read: nothing any earlier run kept is about that commit."""
    serial = [0]

    def switch() -> None:
        serial[0] += 1
        run_git(["checkout", "-q", "-B", f"fix{serial[0]}", f"main~{back}"], setup.env, repo)
        message = f"fix {serial[0]}"
        run_git(["commit", "-q", "--allow-empty", "-m", message], setup.env, repo)

    programs = _programs(setup, before)
    commands = [
        *(Command("history", ((str(p), "-C", str(repo), "history", "--json"),)) for p in programs),
        Command("git log", (git_log(repo),)),
    ]
    series = _interleave(commands, setup, repo, switch, warmup=0)
    answer = series[0].failure or check_history(repo, commands[0], setup.env)
    run_git(["checkout", "-q", "main"], setup.env, repo)
    mode = f"after a branch switch off main~{back}"
    row = Row("history (every task)", mode, series[0], series[-1], SWITCH)
    return dataclasses.replace(row, answer=answer), series[1] if before else None


def _fresh_row(
    setup: Setup, fixture: GraphFixture, workdir: Path, before: Path | None
) -> tuple[Row, Series | None]:
    """Each run reads in a clone made just before (untimed): no cache of any kind."""
    fresh = workdir / "fresh"

    def reclone() -> None:
        clone(fixture, fresh, setup.env)

    programs = _programs(setup, before)
    commands = [
        *(Command("history", ((str(p), "-C", str(fresh), "history", "--json"),)) for p in programs),
        Command("git log", (git_log(fresh),)),
    ]
    series = _interleave(commands, setup, workdir, reclone, warmup=0)
    answer = series[0].failure or check_history(fresh, commands[0], setup.env)
    row = Row("history (every task)", "first, fresh clone", series[0], series[-1], EVERY_FRESH)
    return dataclasses.replace(row, answer=answer), series[1] if before else None


def _show_row(
    setup: Setup, fixture: GraphFixture, workdir: Path, before: Path | None
) -> tuple[Row, Series | None]:
    """What CI runs: `show --json` (HEAD) in a clone made just before (untimed), against the
    floor any Python CLI on pygit2 pays (`python -c 'import pygit2'`) in the same clone."""
    fresh = workdir / "fresh"

    def reclone() -> None:
        clone(fixture, fresh, setup.env)

    programs = _programs(setup, before)
    commands = [
        *(Command("show", ((str(p), "-C", str(fresh), "show", "--json"),)) for p in programs),
        Command("import pygit2", ((str(setup.python), "-c", "import pygit2"),)),
    ]
    series = _interleave(commands, setup, workdir, reclone, warmup=0)
    answer = series[0].failure or check_show(fresh, commands[0], setup.env)
    row = Row("show --json", "fresh clone", series[0], series[-1], SHOW)
    return dataclasses.replace(row, answer=answer), series[1] if before else None


def check_show(repo: Path, command: Command, env: Mapping[str, str]) -> str:
    """The records `show --json` lists are those of `git notes show HEAD`, in its order."""
    done = subprocess.run(command.argvs[0], env=dict(env), capture_output=True, check=False)
    try:
        listed = [r["id"] for r in json.loads(done.stdout)["records"]]
    except (ValueError, KeyError):
        return "output is not the JSON of show"
    note = subprocess.run(
        ["git", "notes", "--ref=majordomus", "show", "HEAD"],
        cwd=repo,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    document = tomllib.loads(note) if note else {}
    expected = [t["id"] for tables in document.values() for t in tables]
    return "" if listed == expected else f"show lists {listed}, git notes show holds {expected}"


def _warm_row(
    setup: Setup, repo: Path, other: Path, task: str, before: Path | None
) -> tuple[Row, Series | None]:
    args = ("history", "--task", task, "--json")
    commands = [Command("history --task", ((str(setup.majordomus), "-C", str(repo), *args),))]
    if before is not None:
        commands.append(Command("history --task", ((str(before), "-C", str(other), *args),)))
    commands.append(Command("git log", (git_log(repo),)))
    series = _interleave(commands, setup, repo, lambda: None, warmup=setup.warmup)
    answer = series[0].failure or check_history(repo, commands[0], setup.env)
    row = Row("history --task", "warm", series[0], series[-1], WARM)
    return dataclasses.replace(row, answer=answer), series[1] if before else None


def _interleave(
    commands: Sequence[Command], setup: Setup, cwd: Path, prepare: Callable[[], None], warmup: int
) -> list[Series]:
    kept: list[list[Outcome]] = [[] for _ in commands]
    for round_no in range(warmup + setup.runs):
        for command, outcomes in zip(commands, kept, strict=True):
            prepare()
            outcome = run_chain(command.argvs, setup.env, cwd, command.ok)
            if round_no >= warmup:
                outcomes.append(outcome)
    return [Series(c, tuple(o)) for c, o in zip(commands, kept, strict=True)]


def check_history(repo: Path, command: Command, env: Mapping[str, str]) -> str:
    """The answer, read again untimed with its whole output (the timed runs keep at most
    a few MiB), against git's own: every listed record's commit is reachable from HEAD
    (`git rev-list`), and a sample of handover labels equal git's counts and merge-base."""
    done = subprocess.run(command.argvs[0], env=dict(env), capture_output=True, check=False)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        return "output is not JSON"
    head = run_git(["rev-parse", "HEAD"], env, repo).strip()
    order = {c: i for i, c in enumerate(run_git(["rev-list", "HEAD"], env, repo).split())}
    records = document["records"]
    if any(r["commit"] not in order for r in records):
        return "a listed record is not on a commit reachable from HEAD"
    handovers = [r for r in records if r["kind"] == "handover"]
    step = max(1, len(handovers) // SAMPLE)
    for record in handovers[::step]:
        expected = git_label(repo, record["commit"], head, env)
        got = (record.get("label"), record.get("ahead"), record.get("behind"))
        if got != expected:
            return f"label of {record['commit'][:12]}: {got}, git says {expected}"
    return ""


def git_label(
    repo: Path, handover: str, head: str, env: Mapping[str, str]
) -> tuple[str, int | None, int | None]:
    if handover == head:
        return ("current", 0, 0)
    counts = run_git(["rev-list", "--left-right", "--count", f"{head}...{handover}"], env, repo)
    ahead, behind = map(int, counts.split())
    if behind == 0:
        return ("advanced", ahead, 0)
    if ahead == 0:
        return ("behind", 0, behind)
    base = subprocess.run(
        ["git", "merge-base", head, handover],
        cwd=repo,
        env=dict(env),
        capture_output=True,
        check=False,
    )
    return ("diverged" if base.returncode == 0 else "unrelated", ahead, behind)


# ---- report -------------------------------------------------------------------------------

BEGIN = "<!-- graph rows: begin -->"
END = "<!-- graph rows: end -->"


def section(
    results: Sequence[tuple[GraphFixture, Sequence[tuple[Row, Series | None]]]],
    setup: Setup,
    command: str,
    before: Path | None,
) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        "## History questions: branch switches, fresh clones, merge-heavy history",
        "",
        f"Generated by `{command}` on {when} (medians of {setup.runs} runs; the warm row "
        f"after {setup.warmup} warm-up round(s)). Each row is timed against "
        "`git log --notes=majordomus --format='%H %N'` in the same run, interleaved. "
        "*after a branch switch off main~K*: before each run, untimed, `git checkout -B fixN "
        "main~K && git commit --allow-empty` (a commit nothing has seen), then `history "
        "--json` (every task); K is 30 (near the tip: both sides walk nearly everything) "
        "and half the first-parent history (git's log walks half as much). *first, fresh "
        "clone*: before each run a new local clone with the records and nothing else. "
        "*show --json, fresh clone*: the same fresh clone, `show "
        "--json` (HEAD, what CI reads) timed against `python -c 'import pygit2'` (the "
        "baseline column for that row), its records checked against `git notes show HEAD`. "
        "Answers checked against git's own: every listed "
        "record's commit in `git rev-list HEAD`, and a sample of handover labels equal to "
        "`git rev-list --left-right --count` and `git merge-base`. The *walk with "
        "parents* rows compare the two ways to make the one walk: pygit2's walker in a "
        "Python process (majordomus column) against `git rev-list --parents HEAD` (git "
        "column), which majordomus uses.",
        "",
    ]
    if before is not None:
        lines += [
            f"*before*: the same majordomus command run by `{before.name}` (the program "
            "given with --before: an older majordomus), interleaved in the same run.",
            "",
        ]
    head = (
        "| repository | command | run | majordomus | baseline | ratio | CPU ratio | target "
        "| answer |"
    )
    rule = "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |"
    if before is not None:
        head = head.replace("| majordomus |", "| before | majordomus |")
        rule = "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    lines += [head, rule]
    for fixture, rows in results:
        for row, old in rows:
            ratio = f"{row.ratio:.2f}" if row.ratio is not None else "—"
            cpu = f"{row.cpu_ratio:.2f}" if row.cpu_ratio is not None else "—"
            answer = row.majordomus.failure or row.answer or "checked"
            cells = [fixture.name, row.name, row.mode]
            if before is not None:
                if old is None:
                    old_ms = "—"
                else:
                    old_ms = f"{old.median_ms:,.0f} ms" if not old.failure else "failed"
                cells.append(old_ms)
            cells += [
                f"{row.majordomus.median_ms:,.0f} ms",
                f"{row.baseline.median_ms:,.0f} ms",
                ratio,
                cpu,
                f"≤ {row.target.limit:g}",
                answer,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", END]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    """Replace the graph section of the report (or add it at the end)."""
    replace_section(path, text, BEGIN, END)
