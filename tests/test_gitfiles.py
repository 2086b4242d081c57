"""Reading a plain repository's files without libgit2 gives libgit2's answers, or none:
discovery, HEAD, the notes refs (loose, packed, remote-tracking) and objects read by git.
Every layout that is not plain is left to libgit2, and warm reads then load no libgit2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pygit2
import pytest

from majordomus import gitfiles, gitobjects
from majordomus.cachefile import RECORDS_FILE_NAME
from majordomus.location import open_repository
from majordomus.readrefs import REMOTE_NOTES_SUFFIX
from majordomus.repository import GIT_READ_OBJECTS, GIT_READS, NOTES_REF
from majordomus.tasks import open_jobs
from tests.support import forks
from tests.support.env import Clock, hermetic_environ
from tests.support.forks import Job
from tests.support.git import bare
from tests.support.repo import Repo, clone


def _libgit2(path: Path) -> tuple[str, str]:
    """Where libgit2 finds the repository of `path`: its git directory and work tree."""
    repo = pygit2.Repository(pygit2.discover_repository(str(path)))
    return os.path.realpath(repo.path), os.path.realpath(repo.workdir)


def _found(path: Path, environ: dict[str, str]) -> tuple[str, str] | None:
    found = gitfiles.discover(str(path), environ)
    return None if found is None else (found.gitdir, found.workdir)


def _git_targets(repo: Repo) -> dict[str, str]:
    """The notes refs majordomus reads, with their targets, as git lists them."""
    out = repo.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/notes/")
    refs = dict(line.split(" ") for line in out.splitlines())
    local = {NOTES_REF: refs[NOTES_REF]} if NOTES_REF in refs else {}
    remote = {
        name: refs[name]
        for name in sorted(refs)
        if name.startswith(gitfiles.REMOTE_NOTES_PREFIX) and name.endswith(REMOTE_NOTES_SUFFIX)
    }
    return local | remote


def test_discovery_finds_what_libgit2_finds_in_a_work_tree_and_its_linked_work_trees(
    repo: Repo, tmp_path: Path
) -> None:
    (repo.path / "src" / "deep").mkdir(parents=True)
    repo.git("worktree", "add", "-q", "-b", "side", str(tmp_path / "linked"))
    (tmp_path / "alias").symlink_to(repo.path / "src")
    for path in (repo.path, repo.path / "src" / "deep", tmp_path / "linked", tmp_path / "alias"):
        assert _found(path, repo.environ) == _libgit2(path), path
    linked = gitfiles.discover(str(tmp_path / "linked"), repo.environ)
    assert linked is not None
    assert linked.commondir == os.path.realpath(repo.path / ".git")


def test_discovery_leaves_every_other_layout_to_libgit2(repo: Repo, tmp_path: Path) -> None:
    environ = repo.environ
    assert _found(repo.path / ".git", environ) is None  # inside the git directory
    assert _found(repo.path / ".git" / "refs", environ) is None
    assert _found(bare(tmp_path / "bare.git", environ), environ) is None
    assert _found(tmp_path, environ) is None  # no repository at all
    for variable in ("GIT_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES"):
        assert _found(repo.path, {**environ, variable: str(repo.path)}) is None
    for setting in (
        ("extensions.partialClone", "origin"),
        ("remote.origin.promisor", "true"),
        ("core.worktree", str(tmp_path)),
        ("include.path", "elsewhere"),
        ("extensions.noop", "true"),
    ):
        repo.git("config", *setting)
        assert _found(repo.path, environ) is None, setting
        repo.git("config", "--unset", setting[0])
    assert _found(repo.path, environ) == _libgit2(repo.path)
    repo.git("config", "core.bare", "true")
    assert _found(repo.path, environ) is None


def test_head_and_the_notes_refs_read_as_libgit2_reads_them(repo: Repo, tmp_path: Path) -> None:
    repo.task()
    assert repo.run("checkpoint", "first").code == 0
    remote = bare(tmp_path / "remote.git", repo.environ)
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "-q", "origin", "main", f"{NOTES_REF}:{NOTES_REF}")
    for name in ("origin", "team/two"):  # a remote named with a slash, too
        repo.git("update-ref", f"refs/notes/remotes/{name}/majordomus", repo.notes_ref() or "")
    repo.git("update-ref", "refs/notes/remotes/origin/other", repo.head())  # not a notes ref

    def check() -> None:
        found = gitfiles.discover(str(repo.path), repo.environ)
        assert found is not None
        refs = gitfiles.Refs(found)
        assert refs.head() == str(repo.pygit.head.target) == repo.head()
        assert refs.notes_targets(NOTES_REF, REMOTE_NOTES_SUFFIX) == _git_targets(repo)
        assert next(iter(_git_targets(repo))) == NOTES_REF

    check()  # loose
    for n in range(50):  # annotated tags: packed with peeled lines between the refs
        repo.git("tag", "-a", "-m", f"v{n}", f"v{n}")
    repo.git("pack-refs", "--all")
    assert "^" in (repo.path / ".git" / "packed-refs").read_text()
    check()  # packed
    assert repo.run("checkpoint", "second").code == 0
    check()  # the notes ref loose again, over its packed value
    repo.git("checkout", "-q", "--detach", "HEAD")
    check()
    repo.git("checkout", "-q", "-b", "fix")
    repo.git("symbolic-ref", "HEAD", "refs/heads/alias")
    repo.git("symbolic-ref", "refs/heads/alias", "refs/heads/fix")  # a chain of two
    check()


def test_what_is_not_there_is_said_or_left_to_libgit2(repo: Repo) -> None:
    found = gitfiles.discover(str(repo.path), repo.environ)
    assert found is not None
    refs = gitfiles.Refs(found)
    assert refs.notes_targets(NOTES_REF, REMOTE_NOTES_SUFFIX) == {}  # no notes yet
    (repo.path / ".git" / "refs" / "notes").mkdir(exist_ok=True)
    (repo.path / ".git" / "refs" / "notes" / "majordomus").write_text("not an id\n")
    assert refs.notes_targets(NOTES_REF, REMOTE_NOTES_SUFFIX) is None
    repo.git("symbolic-ref", "HEAD", "refs/heads/unborn")
    assert refs.head() is None


def test_one_ref_read_from_the_files_is_what_libgit2_reads(repo: Repo) -> None:
    """`Refs.target` (what a fetch reads before libgit2 is loaded) and `is_direct` (whether
    `git update-ref` would move that ref itself), loose, packed, symbolic and absent."""
    repo.task()
    found = gitfiles.discover(str(repo.path), repo.environ)
    assert found is not None

    def read(name: str) -> tuple[tuple[bool, str | None], bool]:
        refs = gitfiles.Refs(found)  # read afresh, as each look of a command is
        return refs.target(name), refs.is_direct(name)

    tip = repo.notes_ref()
    assert read(NOTES_REF) == ((True, tip), True)  # loose
    repo.git("pack-refs", "--all")
    assert not (repo.path / ".git" / NOTES_REF).exists()
    assert read(NOTES_REF) == ((True, tip), True)  # packed only
    repo.git("update-ref", "refs/notes/elsewhere", repo.head())
    repo.git("symbolic-ref", NOTES_REF, "refs/notes/elsewhere")
    assert read(NOTES_REF) == ((True, repo.head()), False)  # symbolic: followed, not direct
    repo.git("symbolic-ref", NOTES_REF, "refs/notes/nowhere")
    assert read(NOTES_REF) == ((False, None), False)  # dangling: left to libgit2
    assert read("refs/notes/absent") == ((True, None), False)
    assert read("refs/notes/../HEAD") == ((False, None), False)
    (repo.path / ".git" / NOTES_REF).write_text("not an id\n")
    assert read(NOTES_REF) == ((False, None), False)


def test_objects_read_by_git_are_the_objects_libgit2_reads(repo: Repo) -> None:
    repo.task()
    assert repo.run("checkpoint", "a note to read").code == 0
    pygit = repo.pygit
    blob = repo.git("rev-parse", f"{NOTES_REF}:{repo.head()}").strip()
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    absent = "0123456789abcdef0123456789abcdef01234567"
    read = gitobjects.cat_file(str(repo.path / ".git"), repo.environ, [blob, tree, absent, blob])
    assert read == {
        blob: ("blob", pygit.odb.read(blob)[1]),
        tree: ("tree", pygit.odb.read(tree)[1]),
        absent: None,
    }


def test_commits_and_their_times_read_by_git_are_libgit2s(repo: Repo) -> None:
    first = repo.head()
    repo.clock.advance(3600)
    second = repo.commit("second")
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    absent = "0123456789abcdef0123456789abcdef01234567"
    by_git = open_jobs(str(repo.path), repo.environ)
    by_libgit2 = open_jobs(str(repo.path), repo.environ)
    assert by_libgit2.repository.repo is not None  # opened: every read from here on is libgit2's
    ids = {first, second, tree, absent}
    assert (
        by_git.history.commits_here(ids) == by_libgit2.history.commits_here(ids) == {first, second}
    )
    for hex_id in ids:
        assert by_git.history.commit_time(hex_id) == by_libgit2.history.commit_time(hex_id)
    assert by_git.history.commit_time(second) == int(repo.git("log", "-1", "--format=%ct").strip())
    repo.git("checkout", "-q", "-b", "side", first)
    side = repo.commit("on the side", {"side.txt": "x"})
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = repo.head()
    with by_git.history.reading():  # one git process for them all
        for hex_id in (first, second, side, merge, tree, absent):
            assert by_git.history.parents(hex_id) == by_libgit2.history.parents(hex_id)
        assert (
            by_git.history.parents(merge) == (second, side) and by_git.history.parents(first) == ()
        )
    assert "repo" not in by_git.repository.__dict__  # all of it answered without libgit2


# A command in a fresh process: its answer and whether it loaded libgit2.
PROBE = """
import datetime, io, json, sys
from majordomus.__main__ import run
out, err = io.StringIO(), io.StringIO()
now = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)  # ages equal on both paths
code = run(sys.argv[1:], stdout=out, stderr=err, now=lambda: now)
print(json.dumps([code, out.getvalue(), err.getvalue(), "pygit2" in sys.modules]))
"""
WARM_READS = [
    ["check", "--json"],
    ["resume", "--peek", "--json"],
    ["history", "--task", "TASK", "--json"],
    ["context", "--json"],
    ["history", "--json"],
    ["adopt", "--dry-run", "--json"],
    ["show", "--json"],
    ["task", "list", "--json"],
    ["show", "HEAD~1", "--json"],  # a revision named by git, not libgit2
    ["show", "side-done", "--json"],  # an annotated tag, peeled to its commit
    ["history", "main~1", "--limit", "2", "--json"],
    ["check", "--all", "--json"],
]


def _probe(repo: Repo, argv: list[str], environ: dict[str, str]) -> list[object]:
    """PROBE in a process of its own, forked (tests/support/forks.py): a fresh Python."""
    done = forks.run(Job(PROBE, ["-C", str(repo.path), *argv], environ))
    assert done.returncode == 0, done.stderr
    answer: list[object] = json.loads(done.stdout)
    return answer


def _published(tmp_path: Path, environ: dict[str, str], clock: Clock) -> tuple[Path, str]:
    """A bare remote holding a history with a merge, a checkpoint on the merged branch (an
    annotated tag names it) and a handover on the merge, with its notes; and the task's
    id."""
    origin = Repo.init(tmp_path / "origin", environ, clock)
    task = origin.task()
    origin.commit("side start")
    origin.git("checkout", "-q", "-b", "side", "HEAD~1")
    origin.commit("on the side", {"side.txt": "x"})
    assert origin.run("checkpoint", "seen on the side").code == 0
    origin.git("checkout", "-q", "main")
    origin.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert origin.run("handover", "-o", "find it", "-s", "seen", "-n", "bisect").code == 0
    origin.git("tag", "-a", "-m", "the merged side", "side-done", "side")  # a tag object
    remote = bare(tmp_path / "remote.git", environ)
    origin.git("push", "-q", str(remote), "main", "side-done", f"{NOTES_REF}:{NOTES_REF}")
    return remote, task


def _with_records(
    url: str, tmp_path: Path, environ: dict[str, str], clock: Clock, *options: str
) -> Repo:
    """A second clone of the remote (with `options`), its records fetched."""
    here = clone(url, tmp_path / "here", environ, clock, *options)
    here.git("fetch", "-q", "origin", f"{NOTES_REF}:{NOTES_REF}")
    return here


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`_published` once for the module: its tests only clone from the remote."""
    root = tmp_path_factory.mktemp("published")
    return _published(root, hermetic_environ(root / "home"), Clock())


@pytest.mark.parametrize("argv", WARM_READS, ids=[" ".join(a[:2]) for a in WARM_READS])
def test_warm_reads_answer_without_libgit2_as_libgit2_answers(
    tmp_path: Path,
    environ: dict[str, str],
    clock: Clock,
    argv: list[str],
    published: tuple[Path, str],
) -> None:
    """A second clone behind a bare remote, on another branch off an older commit, its
    refs packed, a note edited by hand with git, a new commit: each warm read answers
    without libgit2 as libgit2's path does."""
    remote, task = published
    here = _with_records(str(remote), tmp_path, environ, clock)
    here.git("checkout", "-q", "-b", "fix", "HEAD~1")  # another branch, an older commit
    here.git("pack-refs", "--all")
    assert here.run("task", "use", task).code == 0
    argv = [task if a == "TASK" else a for a in argv]
    _probe(here, argv, here.environ)  # builds the caches
    here.git("notes", "--ref=majordomus", "append", "-m", "a line by hand", "origin/main")
    _probe(here, argv, here.environ)  # the views carried over that edit
    here.commit("moved on")  # answers carried along the new commit, and kept for it
    _probe(here, argv, here.environ)
    warm = _probe(here, argv, here.environ)
    by_libgit2 = _probe(here, argv, {**here.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert warm[:3] == by_libgit2[:3]
    assert warm[0] in (0, 1) and warm[2] == ""
    assert (warm[3], by_libgit2[3]) == (False, True)


SWITCH_READS = [a for a in WARM_READS if a[0] in ("check", "resume", "history")]


@pytest.mark.parametrize("argv", SWITCH_READS, ids=[" ".join(a[:2]) for a in SWITCH_READS])
def test_the_first_read_after_a_branch_switch_answers_without_libgit2(
    tmp_path: Path,
    environ: dict[str, str],
    clock: Clock,
    argv: list[str],
    published: tuple[Path, str],
) -> None:
    """A second clone behind a bare remote (a merge in its history) moves on, reads (caches
    kept for its tip), then switches to a new branch off an older commit and commits: the
    first read there follows the chains of commits between the two (their parents read by
    one git process), not libgit2, and answers as a fresh read by libgit2 does."""
    remote, task = published
    here = _with_records(str(remote), tmp_path, environ, clock)
    assert here.run("task", "use", task).code == 0
    for n in range(4):
        here.commit(f"on main {n}")
    assert here.run("checkpoint", "on main, three commits up").code == 0
    here.commit("on main, last")
    argv = [task if a == "TASK" else a for a in argv]
    _probe(here, argv, here.environ)  # caches kept for main's tip
    here.git("checkout", "-q", "-b", "fix", "HEAD~3")  # another branch, an older commit
    here.commit("the fix")
    switched = _probe(here, argv, here.environ)
    here.drop_caches()
    fresh = _probe(here, argv, {**here.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert switched[:3] == fresh[:3]
    assert switched[0] in (0, 1) and switched[2] == ""
    assert (switched[3], fresh[3]) == (False, True)


@pytest.mark.parametrize("argv", WARM_READS, ids=[" ".join(a[:2]) for a in WARM_READS])
def test_reads_of_a_shallow_clone_answer_as_libgit2_answers(
    tmp_path: Path,
    environ: dict[str, str],
    clock: Clock,
    argv: list[str],
    published: tuple[Path, str],
) -> None:
    """In a shallow clone the `shallow` file is read as libgit2 reads it, and every read,
    twice over, answers as libgit2's path does."""
    remote, task = published
    here = _with_records(f"file://{remote}", tmp_path, environ, clock, "--depth", "2")
    assert here.run("task", "use", task).code == 0
    plain = open_jobs(str(here.path), here.environ)
    by_libgit2 = open_jobs(str(here.path), {**here.environ, "GIT_CEILING_DIRECTORIES": "/"})
    assert by_libgit2.repository.refs is None  # the environment leaves it to libgit2
    assert plain.history.is_shallow() and by_libgit2.history.is_shallow()
    assert plain.history.shallow_boundary() == by_libgit2.history.shallow_boundary() != frozenset()
    with plain.history.reading():  # parents as a walk sees them: none past the boundary
        for commit in (*plain.history.shallow_boundary(), here.head()):
            assert plain.history.parents(commit) == by_libgit2.history.parents(commit)
        assert all(
            plain.history.parents(commit) == () for commit in plain.history.shallow_boundary()
        )
    assert "repo" not in plain.repository.__dict__  # told from the file, not by libgit2
    argv = [task if a == "TASK" else a for a in argv]
    first = _probe(here, argv, here.environ)
    again = _probe(here, argv, here.environ)
    libgit2s = _probe(here, argv, {**here.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert first[:3] == again[:3] == libgit2s[:3]
    assert first[0] in (0, 1) and first[2] == ""


def test_a_working_directory_that_is_gone_is_said_in_one_line(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && exec "$2" -m majordomus check'
    done = subprocess.run(
        ["sh", "-c", script, "sh", str(gone), sys.executable],
        check=False,
        capture_output=True,
        text=True,
        env=environ,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == (
        "majordomus: the current directory no longer exists; cd into a clone, or pass -C PATH.\n"
    )


def count_cat_files(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, how many objects each `git cat-file` process of this test reads."""
    calls: list[int] = []
    cat_file = gitobjects.cat_file

    def counted(gitdir: str, environ: Mapping[str, str], ids: Sequence[str]) -> object:
        calls.append(len(ids))
        return cat_file(gitdir, environ, ids)

    monkeypatch.setattr(gitobjects, "cat_file", counted)
    return calls


def warm_again(repo: Repo, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[str, list[int]]:
    """A warm read run twice: the second answers as the first, and the `git cat-file`
    processes it ran (the objects each read) are counted."""
    expected = repo.run(*argv)
    calls = count_cat_files(monkeypatch)
    again = repo.run(*argv)
    assert (again.code, again.out) == (expected.code, expected.out)
    return again.out, calls


def test_a_read_of_many_notes_runs_few_git_processes(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading notes through git is for the few a warm read shows: a read that needs many
    (its document cache gone) hands over to libgit2 after GIT_READS processes."""
    repo.task()
    for n in range(12):
        repo.commit(f"step {n}")
        assert repo.run("checkpoint", f"seen {n}").code == 0
    expected = repo.run("history", "--json").out
    (repo.path / ".git" / RECORDS_FILE_NAME).unlink(missing_ok=True)
    calls = count_cat_files(monkeypatch)
    assert repo.run("history", "--json").out == expected
    assert 0 < len(calls) <= GIT_READS


def test_a_warm_check_reads_the_notes_it_shows_in_one_git_process(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check` shows the task record, its last checkpoint and its open handover: their
    notes, on three commits, are read by one git process, not one each."""
    repo.task()
    repo.commit("second")
    assert repo.run("checkpoint", "seen").code == 0
    repo.commit("third")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    _, calls = warm_again(repo, monkeypatch, "check", "--json")
    assert calls == [3]


@pytest.mark.parametrize("argv", [["task", "list", "--json"], ["check", "--all", "--json"]])
def test_a_warm_read_of_every_task_reads_the_notes_it_shows_in_one_git_process(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """`task list` and `check --all` show each task's title and its open handover: the
    notes of all of them, on several commits, are read by one git process, not one per
    task (past a few, libgit2 would be loaded for the rest)."""
    for n in range(4):
        repo.task(f"task {n}")
        repo.commit(f"work {n}")
        assert repo.run("handover", "-o", f"o{n}", "-s", "s", "-n", "n").code == 0
        repo.commit(f"after {n}")
    out, calls = warm_again(repo, monkeypatch, *argv)
    shown = json.loads(out)
    assert len(shown["tasks" if "tasks" in shown else "checks"]) == 4
    assert calls == [1, 8]  # the notes commit; then four task records, four open handovers


def test_a_warm_context_reads_the_notes_it_shows_in_one_git_process(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The context block shows the task, its check (last checkpoint, open handover) and
    its newest checkpoints: their notes, on five commits, are read by one git process."""
    repo.task()
    for n in range(3):
        repo.commit(f"step {n}")
        assert repo.run("checkpoint", f"seen {n}").code == 0
    repo.commit("last")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    out, calls = warm_again(repo, monkeypatch, "context", "--json")
    assert "seen 0" in out and "seen 2" in out
    assert calls == [5]  # the task record, three checkpoints, the handover


def test_notes_shown_whole_are_read_by_git_even_once_libgit2_is_loaded(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that loaded libgit2 (a full read) and then shows many notes whole reads
    them through one git process, so the pack index stays out of it: the same notes as
    libgit2 reads, parsed the same."""
    repo.task()
    for n in range(6):
        repo.commit(f"step {n}")
        assert repo.run("checkpoint", f"seen {n}").code == 0
    blobs = [line.split()[0] for line in repo.git("notes", "--ref=majordomus", "list").splitlines()]
    (repo.path / ".git" / RECORDS_FILE_NAME).unlink(missing_ok=True)
    jobs = open_jobs(str(repo.path), repo.environ)
    assert jobs.repository.repo is not None  # libgit2 loaded
    calls = count_cat_files(monkeypatch)
    jobs.reader.shown.preload(jobs.reader.blobs, blobs)
    assert calls == [len(blobs)]
    by_libgit2 = open_jobs(str(repo.path), {**repo.environ, "GIT_CEILING_DIRECTORIES": "/"})
    for blob in blobs:
        assert jobs.reader.note([blob]) == by_libgit2.reader.note([blob])


def test_git_reads_stop_at_their_caps_and_once_libgit2_is_loaded(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects are read by git only for a warm read's few: never more than
    GIT_READ_OBJECTS in one process, GIT_READS processes, or once libgit2 is loaded."""
    head = repo.head()
    calls = count_cat_files(monkeypatch)
    opened = open_repository(str(repo.path), repo.environ)
    assert opened.objects_by_git([head] * (GIT_READ_OBJECTS + 1)) is None
    assert calls == []
    for _ in range(GIT_READS):
        read = opened.objects_by_git([head]) or {}
        assert (read.get(head) or ("",))[0] == "commit"
    assert opened.objects_by_git([head]) is None
    assert len(calls) == GIT_READS
    fresh = open_repository(str(repo.path), repo.environ)
    assert fresh.repo is not None
    assert fresh.objects_by_git([head]) is None
    assert len(calls) == GIT_READS
