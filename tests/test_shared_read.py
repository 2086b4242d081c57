"""A first read of many notes parses them in forked processes (`helperparse`): what it
answers is what one process answers, for every note of the corpus (hand edits, notes
that are not TOML, invalid records, notes on trees and blobs), in a clone with merges
and another branch checked out; a helper that dies, or a fork the system refuses, costs
speed, never an answer. The process that forks them parses nothing itself: it only
gathers (so the pack index the helpers map is never in it beside what it gathers).

Each read runs in a process of its own (a test worker runs threads, and majordomus
never forks a process that does), from a copy of the repository without caches.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from majordomus.cachefile import FILES as CACHE_FILES
from majordomus.cachefile import READ_FILE_NAME, RECORDS_FILE_NAME, VIEWS_FOLDER_NAME
from majordomus.documentcache import DocumentCache
from majordomus.readcache import ReadCache
from tests.support.corpus import corpus
from tests.support.env import hermetic_environ
from tests.support.forks import Done, Job
from tests.support.forks import run as run_forked
from tests.support.git import git, make_clone
from tests.support.hostile_notes import case_of, plant

# Run in the child Python: the threshold lowered so that the corpus is "many notes", four
# CPUs whatever the machine has, each fork counted; `dying` helpers exit at once.
SCRIPT = """
import os, sys
import majordomus.helperparse as helperparse
from majordomus.__main__ import run
mode, argv = sys.argv[1], sys.argv[2:]
forks = []
parses = []  # the notes this process parsed (a helper's count stays in the helper)
import majordomus.blobs as blobs
parse_note = blobs.parse_note
blobs.parse_note = lambda data: parses.append(1) or parse_note(data)
if mode == "one":
    helperparse.SHARED_READ_MIN = 10**9
else:
    helperparse.SHARED_READ_MIN = 4
    os.sched_getaffinity = lambda pid: {0, 1, 2, 3}
    fork = os.fork
    def counted():
        pid = fork()
        if pid:
            forks.append(pid)
        return pid
    os.fork = counted
    if mode == "dying":
        helperparse.parse_share = lambda *args: os._exit(1)
    if mode == "refused":  # a limit on processes: fork fails
        def refused():
            raise BlockingIOError(11, "Resource temporarily unavailable")
        os.fork = refused
code = run(argv)
sys.stdout.flush()
sys.stderr.write(f"parses={len(parses)}\\n")
sys.stderr.write(f"forks={len(forks)}\\n")
sys.exit(code)
"""


Planted = tuple[Path, dict[str, str]]


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    root = tmp_path_factory.mktemp("shared")
    (root / "home").mkdir()
    environ = hermetic_environ(root / "home")
    clone = make_clone(root / "clone", environ)
    git(clone, environ, "checkout", "-q", "-b", "side")
    plant(clone, environ, [case_of(note) for note in corpus()[::2]])
    git(clone, environ, "checkout", "-q", "main")
    plant(clone, environ, [case_of(note) for note in corpus()[1::2]])
    git(clone, environ, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    git(clone, environ, "checkout", "-q", "-b", "later", "HEAD~2")
    return clone, environ


def read(planted: Planted, copy: Path, mode: str, *argv: str) -> tuple[int, str, int]:
    """The exit code and output of a command in a copy of the clone, and how many forks."""
    clone, environ = planted
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(clone, copy)
    return _run(copy, environ, mode, *argv)


def _saved_newest_first(copy: Path, environ: dict[str, str], history: Any) -> bool:
    """Whether the document cache lies in the order of the dates of its notes' newest
    records, newest first (ties in any order), for the records a history of every record
    listed (`--all`: no note's newest record hidden, or listed as a copy elsewhere)."""
    at = DocumentCache(copy / ".git" / RECORDS_FILE_NAME)._file.at
    listed = git(copy, environ, "notes", "--ref=majordomus", "list").split()
    blob_of = dict(zip(listed[1::2], listed[::2], strict=True))
    newest: dict[str, datetime.datetime] = {}
    for record in history["records"]:  # newest first: a note's first record is its newest
        newest.setdefault(blob_of[record["commit"]], datetime.datetime.fromisoformat(record["at"]))
    dates = [newest[blob] for blob in sorted(newest, key=lambda blob: at[blob] >> 32)]
    return len(newest) > 10 and dates == sorted(dates, reverse=True)


def _child(copy: Path, environ: dict[str, str], mode: str, *argv: str) -> Done:
    """A command run by SCRIPT in a fresh Python (forked: tests/support/forks.py), in `mode`."""
    return run_forked(Job(SCRIPT, [mode, "-C", str(copy), *argv], environ))


def _run(copy: Path, environ: dict[str, str], mode: str, *argv: str) -> tuple[int, str, int]:
    result = _child(copy, environ, mode, *argv)
    assert "forks=" in result.stderr, result.stderr
    assert result.returncode in (0, 1), result.stderr
    forks = int(result.stderr.rsplit("forks=", 1)[1])
    return result.returncode, result.stdout, forks


@pytest.mark.parametrize(
    "argv",
    [("history", "--all", "--json"), ("history", "main", "--json"), ("doctor",)],
    ids=["history-all", "history-main", "doctor"],
)
def test_notes_parsed_in_forked_processes_read_as_one_process_reads_them(
    planted: Planted, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    code, alone, forks = read(planted, tmp_path / "one", "one", *argv)
    assert forks == 0
    assert (code == 0) == (argv[0] == "history")  # doctor: invalid notes are a fault
    assert json.loads(alone)["records"] if argv[0] == "history" else "invalid" in alone
    shared = read(planted, tmp_path / "shared", "shared", *argv)
    assert shared == (code, alone, 4)  # four helpers parsed the notes, this one gathered
    if "--all" in argv:  # the notes the helpers sent, saved newest first
        assert _saved_newest_first(tmp_path / "shared", planted[1], json.loads(alone))
    dying = read(planted, tmp_path / "dying", "dying", *argv)
    assert dying == (code, alone, 4)  # the shares of the helpers that died parsed here
    refused = read(planted, tmp_path / "refused", "refused", *argv)
    assert refused == (code, alone, 0)  # no helper to be had: every share parsed here


def test_a_partial_clone_read_in_forked_processes_fetches_once_and_answers_the_same(
    planted: Planted, tmp_path: Path
) -> None:
    """In a partial clone (`--filter=blob:none`) the note blobs are not there: the helpers
    find none, the read fetches them in one batch from the promisor remote and parses them
    again, shared as before; the answer is one process's. (The corpus without its gitlink
    entry: it names an object no remote sends, and a partial clone's read stops there.)"""
    _, environ = planted
    clone = make_clone(tmp_path / "clone", environ)
    git(clone, environ, "checkout", "-q", "-b", "side")
    plant(clone, environ, [case_of(note) for note in corpus() if note.on != "gitlink"])
    git(clone, environ, "checkout", "-q", "main")
    git(clone, environ, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    remote = tmp_path / "remote.git"
    git(tmp_path, environ, "clone", "-q", "--bare", str(clone), str(remote))
    git(remote, environ, "config", "uploadpack.allowFilter", "true")
    git(
        remote,
        environ,
        "update-ref",
        "refs/notes/majordomus",
        git(clone, environ, "rev-parse", "refs/notes/majordomus").strip(),
    )
    partial = tmp_path / "partial"
    git(tmp_path, environ, "clone", "-q", "--filter=blob:none", f"file://{remote}", str(partial))
    git(partial, environ, "fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    assert git(partial, environ, "config", "remote.origin.promisor").strip() == "true"
    argv = ("history", "--all", "--json")
    code, alone, forks = read((partial, environ), tmp_path / "one", "one", *argv)
    assert (code, forks) == (0, 0) and json.loads(alone)["records"]
    code, shared, forks = read((partial, environ), tmp_path / "shared", "shared", *argv)
    assert (code, shared) == (0, alone) and forks >= 4


def run_in(copy: Path, environ: dict[str, str], mode: str, *argv: str) -> tuple[str, int]:
    """The output of a command in a copy as it stands (its caches kept), and how many forks."""
    _, out, forks = _run(copy, environ, mode, *argv)
    return out, forks


def test_a_first_read_in_forked_processes_answers_each_task_as_every_later_read_does(
    planted: Planted, tmp_path: Path
) -> None:
    """A first `history --task` in a clone without caches reads every note in forked
    processes and answers from the views it wrote (its notes let go once they are
    written): the same answer as one process reading afresh, as the cached views give
    the next command, and as a fresh read after a note is edited by hand
    (`git notes append`) and after another branch, with the merge, is checked out."""
    clone, environ = planted
    every = json.loads(read(planted, tmp_path / "every", "one", "history", "--all", "--json")[1])
    named = {record["task"] for record in every["records"]}
    tasks = sorted(task for task in named if re.fullmatch(r"t-[0-9a-f]{12}", task))[:2]
    assert tasks
    copy = tmp_path / "copy"
    shutil.copytree(clone, copy)

    def fresh(*argv: str) -> str:
        """One process's answer in a copy of `copy` without caches."""
        shutil.rmtree(tmp_path / "fresh", ignore_errors=True)
        shutil.copytree(copy, tmp_path / "fresh")
        for cache in (tmp_path / "fresh" / ".git").glob("majordomus-*"):
            shutil.rmtree(cache) if cache.is_dir() else cache.unlink()
        return run_in(tmp_path / "fresh", environ, "one", *argv)[0]

    for number, task in enumerate(tasks):
        argv = ("history", "--task", task, "--all", "--json")
        expected = fresh(*argv)
        assert json.loads(expected)["records"]
        first, forks = run_in(copy, environ, "shared", *argv)
        assert (first, forks) == (expected, 4 if number == 0 else 0)  # read once, shared
        assert run_in(copy, environ, "shared", *argv) == (expected, 0)  # the cached views
    commit = git(copy, environ, "rev-parse", "HEAD~1").strip()
    appended = f'[[checkpoint]]\nv = 1\nid = "c-0000000000abcdef"\ntask = "{tasks[0]}"\n'
    appended += f'head = "{commit}"\nat = 2026-11-30T03:12:09Z\nauthor = "A <a@example.com>"\n'
    appended += 'body = "appended by hand"\n'
    git(copy, environ, "notes", "--ref=majordomus", "append", "-m", appended, commit)
    git(copy, environ, "checkout", "-q", "main")  # the branch with the merge
    for later in (("history", "--task", tasks[0], "--json"), ("history", "--all", "--json")):
        expected = fresh(*later)
        assert "appended by hand" in expected
        assert run_in(copy, environ, "shared", *later)[0] == expected


def test_the_records_a_first_read_in_forked_processes_shows_are_parsed_once(
    planted: Planted, tmp_path: Path
) -> None:
    """`history` of every task shows every record whole. The helpers that parse the notes
    for the read cache send each note's document too, for the document cache, so this
    process parses none of those notes a second time: forty more notes, on commits of
    another branch, cost it no parse. Its answer is one process's, and the next command's
    from the caches."""
    clone, environ = planted
    grown = tmp_path / "grown"
    shutil.copytree(clone, grown)
    base = git(grown, environ, "rev-parse", "main~1").strip()
    commits = _commits_on(grown, environ, "more", base, 40)
    notes = []
    for number, head in enumerate(commits):
        note = f'[[checkpoint]]\nv = 1\nid = "c-00000000beef{number:04x}"\n'
        note += f'task = "t-00000000beef"\nhead = "{head}"\n'
        note += f'at = 2026-11-30T03:{number:02d}:00Z\nauthor = "A <a@example.com>"\n'
        note += f'body = "observation {number}"\n'
        notes.append((head, note))
    _add_notes(grown, environ, notes)
    argv: tuple[str, ...] = ("history", "--all", "--json")

    def first(source: Path, mode: str) -> tuple[str, int]:
        copy = tmp_path / f"{source.name}-{mode}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy)
        return _parses(copy, environ, mode, *argv)

    alone, parsed_alone = first(grown, "one")
    assert len(json.loads(alone)["records"]) >= 40
    shared, parsed_shared = first(grown, "shared")
    _, parsed_before = first(clone, "shared")  # the same read without the forty notes
    assert shared == alone
    # Not one parse more for the forty notes (fewer in all: every note the helpers could
    # read as TOML now comes from the document cache, hostile ones too); one process
    # parses each of them itself.
    assert parsed_shared <= parsed_before
    assert parsed_alone >= parsed_shared + 40
    again, _ = _parses(tmp_path / "grown-shared", environ, "shared", *argv)
    assert again == alone
    # A task's records, named by a prefix of its id: the helpers keep the notes of the
    # tasks the name could be, and this process parses none of the forty again either.
    argv = ("history", "--task", "00000000be", "--all", "--json")
    alone, parsed_alone = first(grown, "one")
    assert len(json.loads(alone)["records"]) == 40
    shared, parsed_shared = first(grown, "shared")
    assert (shared, parsed_shared) == (alone, 0)
    assert parsed_alone >= 40


_COMMITTER = "committer A <a@example.com> 1764470000 +0000\n"


def _fast_import(repo: Path, environ: dict[str, str], stream: str, *options: str) -> None:
    command = ["git", "fast-import", "--quiet", *options]
    subprocess.run(command, cwd=repo, env=environ, input=stream.encode(), check=True)


def _commits_on(
    repo: Path, environ: dict[str, str], branch: str, base: str, many: int
) -> list[str]:
    """`many` empty commits on a new branch from `base`, made by one git fast-import."""
    stream = "".join(
        f"commit refs/heads/{branch}\nmark :{n + 1}\n{_COMMITTER}data 7\nmore {n:02d}\n"
        + (f"from {base}\n" if n == 0 else "")
        for n in range(many)
    )
    marks = repo / ".git" / "test-marks"
    _fast_import(repo, environ, stream, f"--export-marks={marks}")
    found = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    return [found[f":{n + 1}"] for n in range(many)]


def _add_notes(repo: Path, environ: dict[str, str], notes: list[tuple[str, str]]) -> None:
    """These notes added to refs/notes/majordomus in one commit of git fast-import (which
    fans the notes tree out as git notes does)."""
    added = "".join(
        f"N inline {commit}\ndata {len(text.encode())}\n{text}\n" for commit, text in notes
    )
    stream = (
        f"commit refs/notes/majordomus\n{_COMMITTER}data 6\nnotes\n"
        f"from refs/notes/majordomus^0\n{added}"
    )
    _fast_import(repo, environ, stream)


def _parses(copy: Path, environ: dict[str, str], mode: str, *argv: str) -> tuple[str, int]:
    """The output of a command in a copy as it stands, and how many notes this process
    (not a helper) parsed."""
    result = _child(copy, environ, mode, *argv)
    assert result.returncode == 0, result.stderr
    return result.stdout, int(result.stderr.split("parses=", 1)[1].split()[0])


def test_every_task_shown_after_one_tasks_first_read_is_parsed_by_helpers(
    planted: Planted, tmp_path: Path
) -> None:
    """A first `history --task` keeps whole only that task's notes; the next `history` of
    every task finds the others missing from the document cache, and forked helpers parse
    them (this process, already grown by the read, would map the pack index beside it).
    Its answer is one process's fresh answer, on a branch with a merge, and so is the
    answer after one more commit with a note appended by hand, and from the caches."""
    clone, environ = planted
    copy = tmp_path / "copy"
    shutil.copytree(clone, copy)
    git(copy, environ, "checkout", "-q", "main")
    _grown(copy, environ)
    every = ("history", "--all", "--json")
    alone = _fresh_copy(copy, tmp_path / "alone", environ)
    expected, parsed_alone = _parses(alone, environ, "one", *every)
    assert parsed_alone >= 40
    assert _run(copy, environ, "shared", "history", "--task", "t-00000000cafe", "--json")[2] == 4
    result = _child(copy, environ, "shared", *every)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    assert int(result.stderr.rsplit("forks=", 1)[1]) == 4  # the helpers parsed the rest
    assert int(result.stderr.split("parses=", 1)[1].split()[0]) <= 4  # none of the 30
    commit = git(copy, environ, "rev-parse", "HEAD").strip()
    note = '[[checkpoint]]\nv = 1\nid = "c-00000000feed0001"\ntask = "t-00000000beef"\n'
    note += f'head = "{commit}"\nat = 2026-11-30T04:00:00Z\nauthor = "A <a@example.com>"\n'
    note += 'body = "appended by hand"\n'
    git(copy, environ, "notes", "--ref=majordomus", "append", "-m", note, commit)
    later = _parses(_fresh_copy(copy, tmp_path / "later", environ), environ, "one", *every)[0]
    assert "appended by hand" in later
    assert run_in(copy, environ, "shared", *every) == (later, 0)
    assert run_in(copy, environ, "shared", *every) == (later, 0)  # from the caches


def test_every_task_shown_after_one_tasks_first_read_in_a_partial_clone(
    planted: Planted, tmp_path: Path
) -> None:
    """In a partial clone (`--filter=blob:none`) the first `history --task` fetches the
    note blobs in one batch; the next `history` of every task has the helpers parse the
    notes the document cache lacks from the blobs fetched, and answers as one process
    reading a partial copy afresh."""
    _, environ = planted
    source = make_clone(tmp_path / "source", environ)
    head = git(source, environ, "rev-parse", "HEAD").strip()
    first = '[[checkpoint]]\nv = 1\nid = "c-00000000feed0000"\ntask = "t-00000000cafe"\n'
    first += f'head = "{head}"\nat = 2026-11-30T02:00:00Z\nauthor = "A <a@example.com>"\n'
    first += 'body = "before the others"\n'
    git(source, environ, "notes", "--ref=majordomus", "add", "-m", first, head)
    git(source, environ, "commit", "-q", "--allow-empty", "-m", "second")
    _grown(source, environ)
    remote = tmp_path / "remote.git"
    git(tmp_path, environ, "clone", "-q", "--bare", str(source), str(remote))
    git(remote, environ, "config", "uploadpack.allowFilter", "true")
    notes = git(source, environ, "rev-parse", "refs/notes/majordomus").strip()
    git(remote, environ, "update-ref", "refs/notes/majordomus", notes)
    partial = tmp_path / "partial"
    git(tmp_path, environ, "clone", "-q", "--filter=blob:none", f"file://{remote}", str(partial))
    git(partial, environ, "fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    every = ("history", "--all", "--json")
    expected = _parses(_fresh_copy(partial, tmp_path / "alone", environ), environ, "one", *every)[0]
    assert len(json.loads(expected)["records"]) == 41
    # Helpers for the notes here, then again for those fetched: 8 forks.
    assert _run(partial, environ, "shared", "history", "--task", "t-00000000cafe", "--json")[2] >= 4
    assert run_in(partial, environ, "shared", *every) == (expected, 4)  # the helpers parsed
    assert run_in(partial, environ, "shared", *every) == (expected, 0)  # from the caches


def _grown(clone: Path, environ: dict[str, str]) -> None:
    """Forty notes of two tasks on forty commits of a branch `more` off main~1, added by
    one git fast-import, and the branch merged into main (checked out)."""
    base = git(clone, environ, "rev-parse", "main~1").strip()
    notes = []
    for number, head in enumerate(_commits_on(clone, environ, "more", base, 40)):
        task = "t-00000000beef" if number % 4 else "t-00000000cafe"
        note = f'[[checkpoint]]\nv = 1\nid = "c-00000000beef{number:04x}"\ntask = "{task}"\n'
        note += f'head = "{head}"\nat = 2026-11-30T03:{number:02d}:00Z\n'
        note += f'author = "A <a@example.com>"\nbody = "observation {number}"\n'
        notes.append((head, note))
    _add_notes(clone, environ, notes)
    git(clone, environ, "merge", "-q", "--no-ff", "-m", "merge more", "more")


def _fresh_copy(source: Path, copy: Path, environ: dict[str, str]) -> Path:
    """A copy of a clone without its caches."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    for name in CACHE_FILES:
        (copy / ".git" / name).unlink(missing_ok=True)
    shutil.rmtree(copy / ".git" / VIEWS_FOLDER_NAME, ignore_errors=True)
    return copy


@pytest.mark.parametrize(
    "argv",
    [("grep", "--all", "--json", "e"), ("grep", "-i", "-F", "E"), ("grep", "--all", "e")],
    ids=["json", "text-folded", "text-all"],
)
def test_a_first_search_in_forked_processes_answers_as_one_process_and_later_reads_do(
    planted: Planted, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """A first `grep` of every task in a clone without caches has the helpers that parse
    every note make what a search keeps of each record (its searched text, and its JSON
    text for `grep --json`) rather than each note's form for the document cache: its
    answer is one process's, every invalid note counted, and this process parses none of
    the notes the helpers sent. The next commands answer as one process does too: the
    search as JSON (after a search in text, from the notes of the records it shows, whose
    JSON texts the search cache keeps from then on), again, the search in text, and
    `history` of every task, whose notes the document cache then lacks."""
    clone, environ = planted
    one = tmp_path / "one"
    alone = read(planted, one, "one", *argv)
    assert alone[1]
    copy = tmp_path / "copy"
    shutil.copytree(clone, copy)
    first, parsed = _parses(copy, environ, "shared", *argv)
    assert first == alone[1]
    assert parsed == 0
    assert not (copy / ".git" / RECORDS_FILE_NAME).exists()  # no note's form was made
    # The read cache the helpers' entries made holds what a single process's holds.
    shared, single = (ReadCache(where / ".git" / READ_FILE_NAME) for where in (copy, one))
    assert shared.blobs
    assert (shared.trees, shared.odd, shared.blobs) == (single.trees, single.odd, single.blobs)
    as_json = [*argv[:1], "--json", *(arg for arg in argv[1:] if arg != "--json")]
    as_text = [arg for arg in argv if arg != "--json"]
    answer = json.loads(run_in(one, environ, "one", *as_json)[0])
    assert answer["records"] and answer["invalid"] > 0
    for later in (as_json, as_json, as_text, ("history", "--all", "--json")):
        expected = run_in(one, environ, "one", *later)[0]
        assert run_in(copy, environ, "shared", *later)[0] == expected
    # The JSON texts the first `grep --json` after a search in text found, kept: no more
    # notes parsed than where every text was kept from the start (signed records, and
    # those encoded whole, are parsed by every search that shows them).
    warm = _parses(one, environ, "one", *as_json)
    assert _parses(copy, environ, "shared", *as_json) == warm
