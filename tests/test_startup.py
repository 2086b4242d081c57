"""What a command imports: `--version` and `--help` start without git (pygit2) or the notes
code; reads start without the write path; `show` in a fresh clone loads what it needs only."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import MAJORDOMUS
from tests.support.repo import Repo, clone

PROBE = """
import io, sys
from majordomus.__main__ import run
code = run(sys.argv[1:], stdout=io.StringIO(), stderr=io.StringIO())
verbs = ("majordomus.tasks", "majordomus.freshness", "majordomus.write")
heavy = sorted(m for m in ("pygit2", *verbs) if m in sys.modules)
print(code, " ".join(heavy))
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["checkpoint", "--help"]])
def test_version_and_help_load_neither_git_nor_the_notes_code(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True
    )
    assert done.stdout == "0 \n"


def test_a_command_loads_what_it_needs_on_first_use(repo: Repo) -> None:
    def probe(*argv: str) -> str:
        command = [sys.executable, "-c", PROBE, *argv]
        return subprocess.run(
            command, capture_output=True, text=True, check=True, env=repo.environ
        ).stdout

    # Saying that a directory does not exist needs no libgit2; a write does.
    assert probe("-C", "/nonexistent-majordomus-dir", "check") == (
        "3 majordomus.freshness majordomus.tasks\n"
    )
    repo.task()
    assert probe("-C", str(repo.path), "checkpoint", "seen") == (
        "0 majordomus.tasks majordomus.write pygit2\n"
    )


# What `show --json` (what CI runs) loads: every module of ours it imports, and every
# module from outside beyond what `import pygit2` loads anyway (top-level names, C
# accelerators left out): typer is not among them. A change here costs or saves start-up
# time on every CI run: each entry says why it is paid for. (`__main__`, the entry that
# holds `run`, is what every command starts from: the probe imports it for `run`.)
OURS_FOR_SHOW = {
    "__init__", "__main__", "blobs", "cachefile", "chains", "commitnotes", "divergence",
    "documentcache", "errors", "front", "gitfiles", "gitobjects", "graph", "helperparse",
    "history", "index", "interrupt", "invocation", "jsontext", "listings", "location",
    "noteforms", "notes", "notesread", "notestree", "notetoml", "objectids",
    "partialclone", "plaintext", "profile", "read", "readcache", "readrefs", "records",
    "remote", "render", "repository", "summaries", "tally", "tasks", "tuples", "values",
    "viewparts", "views",
}  # fmt: skip
OTHERS_FOR_SHOW = {
    "datetime",  # records: when a record was written
    "fcntl",  # subprocess
    "gc",  # __main__: the cyclic collector off for a command's short life
    "json",  # the --json answer
    "locale",  # subprocess: the encoding of git's output
    "signal",  # interrupt: Ctrl-C and SIGTERM answered in one line
    "subprocess",  # git itself, for what libgit2 is not loaded for
}
SHOW_PROBE = """
import io, sys
def loaded():
    return sorted({m.partition(".")[0] for m in sys.modules if not m.startswith("_")})
if sys.argv[1] == "floor":
    import pygit2
    print(repr(loaded()))
    raise SystemExit(0)
from majordomus.__main__ import run
out, err = io.StringIO(), io.StringIO()
code = run(sys.argv[1:], stdout=out, stderr=err)
ours = sorted(m.partition(".")[2] or "__init__" for m in sys.modules if m.startswith("majordomus"))
print(repr({"code": code, "out": out.getvalue(), "err": err.getvalue(), "loaded": loaded(),
            "ours": ours}))
"""


def _fresh_clone(repo: Repo, tmp_path: Path) -> Repo:
    """A clone of `repo` with its notes fetched and nothing else: what a CI job has."""
    fresh = clone(str(repo.path), tmp_path / "ci", repo.environ, repo.clock)
    fresh.git("fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    return fresh


def _git_dir_files(repo: Repo) -> set[str]:
    git_dir = repo.path / ".git"
    return {str(p.relative_to(git_dir)) for p in git_dir.rglob("*") if p.is_file()}


def _probe(*argv: str, environ: dict[str, str]) -> str:
    command = [sys.executable, "-c", SHOW_PROBE, *argv]
    return subprocess.run(command, capture_output=True, text=True, check=True, env=environ).stdout


def test_show_in_a_fresh_clone_loads_only_the_read_path_and_writes_no_cache(
    repo: Repo, tmp_path: Path
) -> None:
    repo.task()
    assert repo.run("checkpoint", "reproduced under 50 concurrent enqueues").code == 0
    fresh = _fresh_clone(repo, tmp_path)
    before = _git_dir_files(fresh)
    answer = ast.literal_eval(
        _probe("-C", str(fresh.path), "show", "--json", environ=fresh.environ)
    )
    floor = set(ast.literal_eval(_probe("floor", environ=fresh.environ)))

    shown = json.loads(answer["out"])
    expected = fresh.git("notes", "--ref=majordomus", "show", "HEAD")
    assert (answer["code"], answer["err"]) == (0, "")
    assert [r["id"] for r in shown["records"]] == re.findall(r'^id = "(.*)"$', expected, re.M)
    ours = set(answer["ours"])
    others = set(answer["loaded"]) - floor - {"majordomus"}
    assert (ours, others) == (OURS_FOR_SHOW, OTHERS_FOR_SHOW)
    assert _git_dir_files(fresh) == before


# Each read and its exit code here: `check` says stale (exit 1), because the records
# carry the fixture's clock and the probe runs on the real one.
READS = [
    (["check", "--json"], 1),
    (["resume", "--peek", "--json"], 0),
    (["history", "--json"], 0),
    (["context", "--json"], 0),
    (["show", "--markdown"], 0),
]


@pytest.mark.parametrize(("argv", "code"), READS, ids=[" ".join(argv) for argv, _ in READS])
def test_reads_start_without_the_write_path(repo: Repo, argv: list[str], code: int) -> None:
    repo.task()
    assert (
        repo.run("handover", "-o", "find the lost ack", "-s", "reproduced", "-n", "bisect").code
        == 0
    )
    answer = ast.literal_eval(_probe("-C", str(repo.path), *argv, environ=repo.environ))
    write_path = {"patches", "merge", "writer", "notesref", "fieldtext"} & set(answer["ours"])
    assert (answer["code"], answer["err"], write_path) == (code, "", set())


def test_text_answers_leave_the_json_module_unloaded(repo: Repo) -> None:
    """The json module (a millisecond to import) is loaded by answers in JSON only: a
    text answer escapes strings with the json module's C part alone."""
    repo.task()
    assert repo.run("checkpoint", 'seen with "quotes" and \u00e9').code == 0
    text = ast.literal_eval(_probe("-C", str(repo.path), "history", environ=repo.environ))
    as_json = ast.literal_eval(
        _probe("-C", str(repo.path), "history", "--json", environ=repo.environ)
    )
    assert text["code"] == as_json["code"] == 0 and "quotes" in text["out"]
    assert "json" not in text["loaded"] and "json" in as_json["loaded"]
    assert json.loads(as_json["out"])["records"][0]["body"] == 'seen with "quotes" and \u00e9'


def test_a_real_process_ends_once_its_answer_is_written(repo: Repo) -> None:
    """The console script leaves without the interpreter's teardown (`__main__._leave`):
    every byte written reaches the pipe, a negative answer keeps its exit code, and a
    reader that is gone before the answer comes (`| head`) gets exit 0 and no complaint,
    from the command typer reads and from the checkpoint read plainly alike."""
    task = repo.task()
    for n in range(40):
        assert repo.run("checkpoint", f"{n} " + "y" * 300).code == 0
    whole = repo.run("history", "--json")

    def real(*argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*MAJORDOMUS, *argv], cwd=repo.path, env=repo.environ, capture_output=True, check=False
        )

    done = real("history", "--json")
    assert (done.returncode, done.stdout.decode(), done.stderr) == (0, whole.out, b"")
    stale = real("check", "--task", task)  # the last checkpoint is days old on the real clock
    assert (stale.returncode, stale.stderr) == (1, b"")
    for argv in (["history"], ["checkpoint", "one more"]):
        process = subprocess.Popen(
            [*MAJORDOMUS, *argv],
            cwd=repo.path,
            env=repo.environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # no reader left: the first write finds the pipe closed
        assert (process.wait(), process.stderr.read()) == (0, b""), argv
    assert repo.run("history", "--json").out.count('"one more"') == 1


def test_a_profiled_process_ends_as_python_ends_it(repo: Repo, tmp_path: Path) -> None:
    """Under a profiler (or a tracer: coverage) the process exits as Python exits, so that
    what it gathered is written: `python -m cProfile -m majordomus` leaves its profile."""
    repo.task()
    for argv in (["--version"], ["checkpoint", "profiled"]):
        profile = tmp_path / f"{argv[0]}.prof"
        done = subprocess.run(
            [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "majordomus", *argv],
            cwd=repo.path,
            env=repo.environ,
            capture_output=True,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, b""), argv
        assert profile.stat().st_size > 0, argv
    assert "    profiled\nfirst checkpoint of this task\n" in done.stdout.decode()


LEFT_AT_ONCE = """
import sys, threading
threading.Thread(target=threading.Event().wait).start()  # never ends: Python would wait
sys.argv = ["majordomus", "--version"]
from majordomus.__main__ import script
script()
"""


def test_the_script_ends_the_process_once_it_has_answered(repo: Repo) -> None:
    """`script` ends the process itself, once the answer is flushed: Python's own exit
    (which would wait here for a thread that never ends) is not waited for."""
    done = subprocess.run(
        [sys.executable, "-c", LEFT_AT_ONCE],
        cwd=repo.path,
        env=repo.environ,
        capture_output=True,
        check=False,
        timeout=20,
    )
    assert (done.returncode, done.stdout.decode().startswith("majordomus "), done.stderr) == (
        0,
        True,
        b"",
    )


# Run as `majordomus` runs (`script`), with os._exit checked first: the writable files
# still open when the process ends. `script` ends it without the interpreter's teardown,
# which would have flushed and closed them: a buffered write left to it would be lost.
LEFT_OPEN = """
import gc, io, json, os, sys
report, *argv = sys.argv[1:]
ours = set()
for stream in (sys.stdout, sys.stderr):
    ours |= {id(stream), id(stream.buffer), id(stream.buffer.raw)}
real_exit = os._exit

def checked_exit(code):
    kinds = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom, io.FileIO)
    left = []
    for thing in gc.get_objects():
        if isinstance(thing, kinds) and id(thing) not in ours and not thing.closed:
            if thing.writable():
                left.append(f"{type(thing).__name__} {thing.name!r}")
    with open(report, "w") as file:
        json.dump(left, file)
    real_exit(code)

os._exit = checked_exit
sys.argv = ["majordomus", *argv]
from majordomus.__main__ import script
script()
"""


def test_no_command_leaves_a_file_open_for_the_process_end_to_close(
    repo: Repo, tmp_path: Path
) -> None:
    """Every command that writes (records, caches, settings, hooks, the current task, a
    merge of a teammate's records) has closed what it wrote when the process ends: a file
    still held then (by a module, or in a cycle, the collector being off) would lose what
    its buffer held. Two clones behind a bare remote, a merge in the history, a branch
    switch, caches dropped. (Fails when a cache file written is kept in a list.)"""
    from tests.support import forks
    from tests.support.repo import seeded

    remote, alice = seeded(tmp_path / "team", repo.environ, repo.clock)
    alice.commit("base")
    alice.git("checkout", "-q", "-b", "side")
    alice.commit("side work", {"side.txt": "x\n"})
    alice.git("checkout", "-q", "main")
    alice.commit("main work", {"main.txt": "y\n"})
    alice.git("merge", "-q", "--no-edit", "side")
    alice.git("push", "-q", "origin", "main")
    bob = clone(str(remote), tmp_path / "team" / "b", repo.environ, repo.clock)
    report = tmp_path / "left-open.json"

    def real(where: Repo, *argv: str, stdin: bytes = b"") -> forks.Done:
        job = forks.Job(LEFT_OPEN, [str(report), *argv], where.environ, where.path, stdin)
        done = forks.run(job)
        assert json.loads(report.read_text()) == [], (argv, done.stderr)
        return done

    session = json.dumps({"session_id": "s1", "cwd": str(bob.path)}).encode()
    steps: list[tuple[Repo, list[str], bytes, set[int]]] = [
        (alice, ["init"], b"", {0}),
        (alice, ["task", "new", "acks dropped under load"], b"", {0}),
        (alice, ["checkpoint", "reproduced with 50 enqueues"], b"", {0}),
        (alice, ["handover", "-o", "find the drop", "-s", "half", "-n", "bisect"], b"", {0}),
        (alice, ["push"], b"", {0}),
        (bob, ["init"], b"", {0}),
        (bob, ["fetch"], b"", {0}),
        (bob, ["history", "--json"], b"", {0}),
        (bob, ["resume"], b"", {0}),
        (bob, ["checkpoint", "seen on bob's clone too"], b"", {0}),
        (alice, ["checkpoint", "and again on alice's"], b"", {0}),
        (bob, ["sync"], b"", {0}),
        (alice, ["sync"], b"", {0}),
        (bob, ["fetch"], b"", {0}),
        (bob, ["check"], b"", {0}),
        (bob, ["show", "--json"], b"", {0}),
        (bob, ["context"], b"", {0}),
        (bob, ["agent", "install", "claude"], b"", {0}),
        (bob, ["hook", "claude"], session, {0}),
        (bob, ["adopt", "--dry-run"], b"", {0}),
        (bob, ["doctor", "--drop-cache"], b"", {0, 1}),
        (bob, ["history"], b"", {0}),
    ]
    for where, argv, stdin, codes in steps:
        if argv == ["history"]:
            bob.git("checkout", "-q", "-b", "elsewhere", "HEAD~1")
        done = real(where, *argv, stdin=stdin)
        assert done.returncode in codes, (argv, done.stderr)
    # Each clone holds every record of both, as git reads the notes.
    bodies = ("reproduced with 50 enqueues", "seen on bob's clone too", "and again on alice's")
    for clone_ in (alice, bob):
        note = clone_.git("notes", "--ref=majordomus", "show", "main")
        assert all(f'body = "{body}"' in note for body in bodies), note


def test_a_first_resume_peek_and_context_in_a_fresh_clone_leave_libgit2_unloaded(
    repo: Repo, tmp_path: Path
) -> None:
    """What a new agent runs first: the open handover's label is counted by git, and
    whether its commit is here is asked of git too (loading libgit2 for that alone cost
    more than the rest of the read)."""
    task = repo.task()
    assert repo.run("checkpoint", "reproduced under 50 concurrent enqueues").code == 0
    assert repo.run("handover", "--objective", "o", "--state", "s", "--next", "n").code == 0
    repo.commit("later work")
    fresh = _fresh_clone(repo, tmp_path)
    loads = {
        ("resume", "--peek", "--json"): "0 majordomus.tasks majordomus.write\n",
        ("context",): "0 majordomus.tasks\n",
    }
    for argv, loaded in loads.items():
        command = [sys.executable, "-c", PROBE, "-C", str(fresh.path), *argv, "--task", task]
        done = subprocess.run(
            command, capture_output=True, text=True, check=True, env=fresh.environ
        )
        assert done.stdout == loaded, argv


def test_the_reads_load_neither_dataclasses_nor_inspect(repo: Repo) -> None:
    """`dataclasses` imports `inspect` (and `ast`, `dis`, `tokenize` with it): about 5 ms
    that every command would pay. The reads of a session load none of them."""
    repo.task()
    assert repo.run("checkpoint", "reproduced under 50 concurrent enqueues").code == 0
    assert repo.run("history", "--json").code == 0  # the caches of this state are kept
    for argv in (("history", "--json"), ("check",), ("grep", "reproduced"), ("context",)):
        answer = ast.literal_eval(_probe("-C", str(repo.path), *argv, environ=repo.environ))
        assert answer["code"] in (0, 1), answer["err"]
        assert not {"dataclasses", "inspect", "ast", "dis"} & set(answer["loaded"]), argv


def test_a_warm_grep_loads_neither_subprocess_nor_shutil(repo: Repo) -> None:
    """`subprocess` (with `threading`, `selectors`, `locale`) and `shutil` (with `bz2`,
    `lzma`) cost a few milliseconds to import. A search its caches answer runs no git, so
    a warm `grep` loads none of them, in text or JSON; a command that runs git loads them
    then (`show` in a fresh clone, above)."""
    repo.task()
    assert repo.run("checkpoint", "reproduced under 50 concurrent enqueues").code == 0
    assert repo.run("history", "--json").code == 0  # the caches of this state are kept
    assert repo.run("grep", "--json", "reproduced").code == 0
    for argv in (("grep", "reproduced"), ("grep", "--json", "-i", "REPRODUCED")):
        answer = ast.literal_eval(_probe("-C", str(repo.path), *argv, environ=repo.environ))
        assert (answer["code"], answer["err"]) == (0, ""), argv
        assert "50 concurrent" in answer["out"], argv
        heavy = {"subprocess", "shutil", "bz2", "lzma", "threading"} & set(answer["loaded"])
        assert heavy == set(), argv
