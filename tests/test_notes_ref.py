"""The notes ref: readable by git, laid out as git lays it out, written all or nothing."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import pygit2
import pytest

from majordomus import notestree
from majordomus.notes import parse_note
from majordomus.notetoml import MissingObjectError
from majordomus.repository import NOTES_REF
from majordomus.tasks import open_jobs
from tests.support import forks
from tests.support.contracts import store_problems
from tests.support.env import AUTHOR
from tests.support.forks import MAJORDOMUS_MAIN, Job
from tests.support.git import lock_files
from tests.support.locks import AgedLock
from tests.support.notes import stored_records
from tests.support.repo import Repo


def note_paths(repo: Repo) -> list[str]:
    out = repo.git("ls-tree", "-r", "--name-only", NOTES_REF)
    return out.split()


def test_git_shows_the_records(repo: Repo) -> None:
    task = repo.task()
    assert repo.run("checkpoint", 'quote " and backslash \\ survive').code == 0
    shown = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    document = tomllib.loads(shown)
    assert [t["id"] for t in document["task"]] == [task]
    assert document["task"][0]["title"] == "queue drops acks under load"
    assert document["checkpoint"][0]["body"] == 'quote " and backslash \\ survive'
    assert document["checkpoint"][0]["author"] == AUTHOR
    assert document["checkpoint"][0]["head"] == repo.head()
    log = repo.git("log", "--notes=majordomus", "-1", "--format=%N")
    assert log.startswith("[[task]]\nv = 1\n")
    message = repo.git("log", "-1", "--format=%s", NOTES_REF).strip()
    assert message == f"majordomus: checkpoint {task} on {repo.head()[:7]}"


def test_appending_keeps_every_record_and_unknown_data(repo: Repo) -> None:
    foreign = '[[checkpoint]]\nfrom_the_future = { x = [1, 2] }\n\n[[flag]]\nlabel = "keep me"\n'
    repo.git("notes", "--ref=majordomus", "add", "-m", foreign, "HEAD")
    repo.task()
    repo.run("checkpoint", "one")
    text = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    assert text.startswith(foreign)
    note = parse_note(text.encode())
    assert [e.kind for e in note.entries] == ["checkpoint", "checkpoint", "flag", "task"]
    assert [r.kind for r in note.records] == ["checkpoint", "task"]


def test_git_and_majordomus_share_the_ref_whatever_the_fan_out(repo: Repo) -> None:
    # Enough notes that git fans the tree out, written by git itself.
    commits = [repo.commit(f"c{i}") for i in range(120)]
    for commit in commits[:110]:
        repo.git("notes", "--ref=majordomus", "add", "-m", "[[x]]\nn = 1", commit)
    assert any("/" in path for path in note_paths(repo)), "git should have fanned out"
    task = repo.task()  # on the last commit, which git left without a note
    # majordomus writes onto commits that already carry git's notes, and onto new ones.
    for commit in commits[100:115]:
        repo.git("checkout", "-q", "--detach", commit)
        assert repo.run("checkpoint", "--task", task, f"on {commit[:7]}").code == 0
    paths = note_paths(repo)
    names = [p.replace("/", "") for p in paths]
    assert len(names) == len(set(names)), "two notes for one commit"
    assert all(len(p.split("/")[0]) == 2 for p in paths), paths
    # git reads every note majordomus wrote, and writes after it without duplicates.
    for commit in commits[100:115]:
        text = repo.git("notes", "--ref=majordomus", "show", commit)
        assert f'body = "on {commit[:7]}"' in text
    repo.git("notes", "--ref=majordomus", "append", "-m", "[[y]]\nn = 2", commits[105])
    listed = repo.git("notes", "--ref=majordomus", "list").split("\n")
    annotated = [line.split()[1] for line in listed if line]
    assert len(annotated) == len(set(annotated)) == 116


def test_flat_tree_fans_out_like_git(tmp_path: Path, repo: Repo) -> None:
    # Same notes written by git in one ref and by majordomus in another: same layout.
    commits = [repo.commit(f"c{i}") for i in range(150)]
    for commit in commits:
        repo.git("notes", "--ref=gitmade", "add", "-m", "[[x]]\nn = 1", commit)
    jobs = open_jobs(str(repo.path), repo.environ)
    blob = jobs.repository.repo.create_blob(b"[[x]]\nn = 1\n")
    tree: pygit2.Tree | None = None
    for commit in commits:
        written = jobs.repository.repo[notestree.insert(jobs.repository.repo, tree, commit, blob)]
        assert isinstance(written, pygit2.Tree)
        tree = written
    assert tree is not None
    ours = sorted(repo.git("ls-tree", "-r", "--name-only", str(tree.id)).split())
    theirs = sorted(repo.git("ls-tree", "-r", "--name-only", "refs/notes/gitmade").split())
    assert ours == theirs


WRITERS = 24  # every one contends for the ref (make soak runs larger rounds)


def test_concurrent_writers_lose_nothing(repo: Repo) -> None:
    task = repo.task()
    # A generous retry budget: on a loaded machine many process start-ups take long.
    budget = {"MAJORDOMUS_WRITE_TIMEOUT": "120"}
    # `python -m majordomus checkpoint`, each a process of its own, all started at once
    # (forked from one Python, tests/support/forks.py: no start-up of their own to stagger them)
    writers = [
        Job(MAJORDOMUS_MAIN, ["-C", str(repo.path), "checkpoint", "--task", task, f"writer {i}"],
            {**repo.environ, **budget})
        for i in range(WRITERS)
    ]  # fmt: skip
    results = [(done.returncode, done.stderr) for done in forks.run_all(writers)]
    assert [code for code, _ in results] == [0] * WRITERS, [e for _, e in results if e]
    note = parse_note(repo.git("notes", "--ref=majordomus", "show", "HEAD").encode())
    bodies = sorted(r.text("body") for r in note.records if r.kind == "checkpoint")
    assert bodies == sorted(f"writer {i}" for i in range(WRITERS))
    stored = [str(r.table.get("body")) for r in stored_records(repo.path, repo.environ)]
    assert sorted(b for b in stored if b.startswith("writer ")) == bodies
    assert repo.git("fsck", "--no-progress", "--no-dangling", check=False) == ""


@pytest.mark.parametrize("point", ["start-up", "before-write", "after-write"])
def test_a_writer_killed_at_each_point_leaves_the_old_or_the_new_ref(
    repo: Repo, point: str
) -> None:
    """SIGKILL where the write is risky, reached by a named pause point (never by guessing
    at timing): the ref is the old one, or the new one holding the whole record."""
    task = repo.task()
    before = repo.notes_ref()
    body = f"killed at {point}"
    proc = repo.spawn(
        "checkpoint", "--task", task, body, environ={"MAJORDOMUS_TEST_PAUSE_AT": point}
    )
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline() == f"majordomus: paused at {point}\n".encode()
    finally:
        proc.kill()
        proc.communicate()
    after = repo.notes_ref()
    bodies = [r.table.get("body") for r in stored_records(repo.path, repo.environ)]
    if point == "after-write":
        assert after != before and bodies.count(body) == 1
    else:
        assert after == before and body not in bodies
    assert store_problems(repo.path, repo.environ) == []
    assert lock_files(repo.path, repo.environ) == []
    assert repo.run("checkpoint", "--task", task, "after the kill").code == 0


def test_a_stale_lock_is_reported_with_path_and_age(repo: Repo) -> None:
    task = repo.task()
    before = repo.notes_ref()
    aged = AgedLock.make(repo.path / ".git" / "refs" / "notes" / "majordomus.lock", 120)
    lock = aged.path
    result = repo.run(
        "checkpoint", "--task", task, "blocked", environ={"MAJORDOMUS_WRITE_TIMEOUT": "0.05"}
    )
    assert result.code == 3
    assert result.err.startswith(f"majordomus: {NOTES_REF} stayed locked for 0.05 s (")
    assert aged.shown(result.err).endswith(
        f"attempts): {lock} is 120 s old; if no git or majordomus process is running, "
        f"remove it (rm '{lock}') and try again; nothing was recorded.\n"
    )
    assert lock.exists(), "a lock is never removed behind the user's back"
    assert repo.notes_ref() == before
    doctor = repo.run("doctor")
    assert doctor.code == 1
    assert f"FAIL  lock      {lock} is 120 s old;" in aged.shown(doctor.out)


def test_a_notes_ref_that_is_not_a_commit_is_never_overwritten(repo: Repo) -> None:
    task = repo.task()
    blob = repo.git("hash-object", "-w", "--stdin", input="not a commit").strip()
    repo.git("update-ref", NOTES_REF, blob)
    result = repo.run("checkpoint", "--task", task, "x")
    assert result.code == 3
    assert result.err == (
        f"majordomus: {NOTES_REF} points at {blob[:12]}, which is not a commit; majordomus "
        "will not overwrite it: inspect it with git cat-file -t, then repair or move it.\n"
    )
    assert repo.notes_ref() == blob
    for argv in (("show", "--json"), ("history", "--json")):
        assert (repo.run(*argv).code, repo.run(*argv).err) == (3, result.err)


def test_a_note_that_is_not_toml_takes_records_after_its_bytes(repo: Repo) -> None:
    task = repo.task()
    repo.commit("next")
    repo.git("notes", "--ref=majordomus", "add", "-m", "free text, not TOML", "HEAD")
    result = repo.run("checkpoint", "--task", task, "x")
    assert result.code == 0, result.err
    text = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    assert text.startswith("free text, not TOML\n\n[[checkpoint]]\n")


def test_a_note_that_cannot_be_read_is_never_overwritten(repo: Repo) -> None:
    task = repo.task()
    repo.commit("next")
    path = repo.path.parent / "deep.toml"
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    repo.git("notes", "--ref=majordomus", "add", "-F", str(path), "HEAD")
    before = repo.notes_ref()
    result = repo.run("checkpoint", "--task", task, "x")
    assert result.code == 3
    head = repo.head()[:12]
    assert result.err == (
        f"majordomus: the note on {head} cannot be read (note is nested too deeply to parse); "
        "majordomus will not overwrite it: inspect it with "
        f"git notes --ref=majordomus show {head}.\n"
    )
    assert repo.notes_ref() == before


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_notes_that_changed_between_two_trees_are_what_git_diff_tree_lists(
    repo: Repo, seed: int
) -> None:
    """Two notes trees, flat or fanned out (git's layout, as `insert` writes it), sharing
    some notes, differing in others (added, removed, rewritten): the comparison that opens
    only differing subtrees names exactly the notes `git diff-tree -r` names."""
    rng = random.Random(seed)
    jobs = open_jobs(str(repo.path), repo.environ)
    blobs = [jobs.repository.repo.create_blob(f"[[x]]\nn = {i}\n".encode()) for i in range(4)]
    objects = [f"{rng.getrandbits(160):040x}" for _ in range(400)]

    def tree_of(notes: dict[str, pygit2.Oid]) -> pygit2.Tree:
        tree: pygit2.Tree | None = None
        for annotated, blob in notes.items():
            written = jobs.repository.repo[
                notestree.insert(jobs.repository.repo, tree, annotated, blob)
            ]
            assert isinstance(written, pygit2.Tree)
            tree = written
        assert tree is not None
        return tree

    empty = jobs.repository.repo[jobs.repository.repo.TreeBuilder().write()]
    assert isinstance(empty, pygit2.Tree)
    for size_a, size_b in ((30, 300), (300, 300), (300, 30), (20, 25)):
        a = {o: rng.choice(blobs) for o in rng.sample(objects, size_a)}
        b = {o: blob for o, blob in a.items() if rng.random() < 0.8}
        b.update((o, rng.choice(blobs)) for o in rng.sample(objects, max(0, size_b - len(b))))
        old, new = tree_of(a), tree_of(b)
        listed = repo.git("diff-tree", "-r", "--name-only", str(old.id), str(new.id)).split()
        expected = {path.replace("/", "") for path in listed}
        assert notestree.changed(jobs.repository.repo, old, new) == expected
        assert notestree.changed(jobs.repository.repo, new, old) == expected
        assert notestree.changed(jobs.repository.repo, old, old) == set()
        assert notestree.changed(jobs.repository.repo, None, new) == set(b)
        assert notestree.changed(jobs.repository.repo, new, empty) == set(
            b
        )  # an empty tree is not None


def test_the_notes_that_changed_skip_what_is_not_a_note_and_a_change_of_mode_alone(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries a notes walk reads as no note (a file with another name, a folder that is not
    two hex digits, a fan-out past 40 digits) name no commit: NAMELESS says that one
    changed (a read counts them); a note that became a symlink changed, a note whose mode
    alone changed (executable) did not; only the subtrees that differ are opened, and a
    missing one is named."""
    note = repo.git("hash-object", "-w", "--stdin", input="[[x]]\nn = 1\n").strip()
    other = repo.git("hash-object", "-w", "--stdin", input="[[x]]\nn = 2\n").strip()

    def mktree(lines: list[str], *flags: str) -> str:
        return repo.git("mktree", *flags, input="".join(line + "\n" for line in lines)).strip()

    a1, a2, a3 = "ab" + "1" * 38, "ab" + "2" * 38, "cd" + "3" * 38
    a4 = "ab" + "7" * 38
    deep = mktree([f"100644 blob {other}\t{'4' * 38}"])  # ab/<38>: too deep to be a note
    fanned_old = mktree(
        [
            f"100644 blob {note}\t{a1[2:]}",
            f"100644 blob {note}\t{a2[2:]}",
            f"100644 blob {note}\t{a4[2:]}",
        ]
    )
    fanned_new = mktree(
        [
            f"100755 blob {note}\t{a1[2:]}",
            f"100644 blob {other}\t{a2[2:]}",
            f"120000 blob {note}\t{a4[2:]}",
            f"040000 tree {deep}\tee",
        ]
    )
    junk = mktree([f"100644 blob {other}\t{a3}"])
    odd = mktree([f"100644 blob {other}\t{'6' * 39}"])  # a/<39>: 40 digits, not a fan-out
    old_id = mktree(
        [
            f"040000 tree {fanned_old}\tab",
            f"100644 blob {note}\tREADME",
            f"100644 blob {note}\t{a3}",
        ]
    )
    new_id = mktree(
        [
            f"040000 tree {fanned_new}\tab",
            f"100644 blob {other}\tREADME",
            f"040000 tree {junk}\tzz",
            f"040000 tree {odd}\ta",
            f"100644 blob {other}\t{'ef' * 20}",
        ]
    )
    jobs = open_jobs(str(repo.path), repo.environ)
    old, new = (jobs.repository.repo[pygit2.Oid(hex=tree)] for tree in (old_id, new_id))
    assert isinstance(old, pygit2.Tree) and isinstance(new, pygit2.Tree)
    expected = {a2, a3, a4, "ef" * 20, notestree.NAMELESS}
    opened: list[str] = []
    tree = notestree.tree

    def counted(repo: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Tree:
        opened.append(str(oid))
        return tree(repo, oid)

    monkeypatch.setattr(notestree, "tree", counted)
    assert notestree.changed(jobs.repository.repo, old, new) == expected
    assert sorted(opened) == sorted([fanned_old, fanned_new, deep])  # not `zz`, `a`: no fan-out
    missing = mktree([f"040000 tree {'5' * 40}\tab"], "--missing")
    jobs = open_jobs(str(repo.path), repo.environ)
    with pytest.raises(MissingObjectError):
        notestree.changed(jobs.repository.repo, old, jobs.repository.repo[pygit2.Oid(hex=missing)])  # type: ignore[arg-type]


def test_a_write_asks_git_for_the_identity_early_and_waits_for_it_when_refused(
    repo: Repo,
) -> None:
    """The identity is asked of git while libgit2 loads; a write refused before the record
    is built (no current task) waits for that git, leaving no process unwaited."""
    import gc
    import warnings

    gc.collect()  # what earlier tests left is not this write's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        refused = repo.run("checkpoint", "no task yet")
        gc.collect()
    assert refused.code == 2 and "no current task" in refused.err
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    repo.task()
    assert repo.run("checkpoint", "with a task").code == 0
    author = tomllib.loads(repo.git("notes", "--ref=majordomus", "show", "HEAD"))
    assert author["checkpoint"][0]["author"] == AUTHOR
