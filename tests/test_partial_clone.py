"""Partial clones (`--filter=blob:none`, `--filter=tree:0`): every read answers what a full
clone answers, note objects arrive in one batch, and a missing object is never remembered."""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from majordomus.cachefile import READ_FILE_NAME as CACHE_FILE_NAME
from majordomus.cachefile import RECORDS_FILE_NAME, VIEWS_FILE_NAME, VIEWS_FOLDER_NAME
from tests.support.env import Clock, hermetic_environ
from tests.support.git import git, lose_object
from tests.support.repo import Repo, clone, git_push, seeded, writer_of

NOTES = "refs/notes/majordomus"
TRACKING = "refs/notes/remotes/origin/majordomus"
FILTERS = ["blob:none", "tree:0"]


def ok(repo: Repo, *argv: str) -> str:
    result = repo.run(*argv)
    assert (result.code, result.err) == (0, ""), result.err
    return result.out


class Template(NamedTuple):
    root: Path
    now: datetime.datetime
    answers: tuple[object, ...]  # what a full clone answers, fetched


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """Built once: a remote that serves filters, with commits and notes, all pushed."""
    root = tmp_path_factory.mktemp("published")
    (root / "home").mkdir()
    environ, clock = hermetic_environ(root / "home"), Clock()
    remote, alice = seeded(root, environ, clock)
    git(remote, environ, "config", "uploadpack.allowFilter", "true")
    alice.task("queue drops acks")
    for i in range(5):
        alice.commit(f"step {i}", {"step.txt": f"{i}\n"})
        clock.advance(60)
        ok(alice, "checkpoint", f"step {i} reproduced")
    ok(alice, "handover", "--objective", "fix it", "--state", "found", "--next", "patch")
    alice.git("push", "-q", "--no-verify", "origin", "main")
    ok(alice, "push")
    full = clone(str(remote), root / "full", environ, clock)
    ok(full, "fetch")
    return Template(root, clock.now, answers(full))


def published(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template
) -> tuple[Path, Repo]:
    """A copy of the template's remote and of the clone that published to it."""
    remote = tmp_path / "remote.git"
    shutil.copytree(template.root / "remote.git", remote, symlinks=True)
    shutil.copytree(template.root / "a", tmp_path / "a", symlinks=True)
    alice = Repo(tmp_path / "a", environ, clock)
    alice.git("remote", "set-url", "origin", str(remote))
    clock.now = template.now
    return remote, alice


def partial(remote: Path, path: Path, repo: Repo, flt: str) -> Repo:
    # file:// so that the filter is honoured (a plain path clones locally, whole).
    return clone(f"file://{remote}", path, repo.environ, repo.clock, f"--filter={flt}")


def after_git_fetch(
    tmp_path: Path,
    environ: dict[str, str],
    clock: Clock,
    template: Template,
    flt: str,
    *config: tuple[str, str],
) -> tuple[Path, Repo, Repo]:
    """Alice's published records, and Bob's partial clone, configured with `config` and by
    `majordomus init`, after a plain `git fetch` brought the notes commit, not its objects."""
    remote, alice = published(tmp_path, environ, clock, template)
    bob = partial(remote, tmp_path / "bob", alice, flt)
    for key, value in config:
        bob.git("config", key, value)
    ok(bob, "init")
    bob.git("fetch", "-q")
    return remote, alice, bob


def missing(repo: Repo, ref: str) -> list[str]:
    """Objects under the notes tree of `ref` this clone lacks, as git itself lists them."""
    tree = repo.git("rev-parse", f"{ref}^{{tree}}").strip()
    out = repo.git("rev-list", "--objects", "--missing=print", tree)
    return [line[1:] for line in out.splitlines() if line.startswith("?")]


def answers(repo: Repo) -> tuple[object, ...]:
    """What the read commands answer, for comparison with a full clone."""

    def read(*argv: str) -> object:
        result = repo.run(*argv, "--json")
        assert (result.code, result.err) == (0, ""), result.err
        return json.loads(result.out)

    return read("history", "--all"), read("task", "list"), read("show")


def fetches_run(trace: Path) -> int:
    """How many `git fetch` processes a GIT_TRACE2_EVENT log saw start."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    return sum(1 for e in events if e.get("event") == "start" and "fetch" in e.get("argv", []))


@pytest.mark.parametrize("flt", FILTERS)
def test_fetch_brings_every_note_object(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    remote, alice = published(tmp_path, environ, clock, template)
    bob = partial(remote, tmp_path / "bob", alice, flt)
    out = ok(bob, "fetch")
    assert out == "origin: 7 new records (first fetch)\n"
    assert missing(bob, NOTES) == missing(bob, TRACKING) == []
    assert answers(bob) == template.answers


@pytest.mark.parametrize("flt", FILTERS)
def test_fetch_after_a_plain_git_fetch_brings_what_it_left_out(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    # The notes commit is already here: a --no-filter fetch alone would bring nothing.
    _remote, _alice, bob = after_git_fetch(tmp_path, environ, clock, template, flt)
    assert missing(bob, TRACKING) != []
    trace = tmp_path / "trace.json"
    result = bob.run("fetch", environ={"GIT_TRACE2_EVENT": str(trace)})
    assert (result.code, result.out, result.err) == (0, "origin: 7 new records (first fetch)\n", "")
    assert fetches_run(trace) == 2  # the notes ref, then every missing object at once
    assert missing(bob, NOTES) == missing(bob, TRACKING) == []


@pytest.mark.parametrize("flt", FILTERS)
def test_notes_from_plain_git_fetch_are_read_after_one_batch(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    _remote, _alice, bob = after_git_fetch(tmp_path, environ, clock, template, flt)
    assert missing(bob, TRACKING) != []
    trace = tmp_path / "trace.json"
    result = bob.run("history", "--all", "--json", environ={"GIT_TRACE2_EVENT": str(trace)})
    assert (result.code, result.err) == (0, "")
    assert fetches_run(trace) == 1
    assert missing(bob, TRACKING) == []
    assert answers(bob) == template.answers


@pytest.mark.parametrize("flt", FILTERS)
def test_a_read_that_cannot_fetch_exits_3_and_remembers_nothing(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    remote, alice, bob = after_git_fetch(tmp_path, environ, clock, template, flt)
    before = bob.git("for-each-ref", "refs/notes")
    away = remote.with_name("away.git")
    remote.rename(away)  # the promisor remote is unreachable
    task = json.loads(ok(alice, "task", "list", "--json"))["tasks"][0]["task"]
    reads = (["history"], ["task", "list"], ["show"], ["check", "--task", task])
    for argv in (*reads, ["checkpoint", "--task", task, "not recorded"]):
        result = bob.run(*argv)
        assert (result.code, result.out) == (3, ""), argv
        assert result.err.startswith("majordomus: "), result.err
        assert result.err.count("\n") == 1 and "Traceback" not in result.err
        assert result.err.endswith("then run majordomus fetch origin.\n"), result.err
    doctor = bob.run("doctor", "--json")
    assert doctor.code == 1
    found = json.loads(doctor.out)["findings"]
    (finding,) = [f for f in found if f["topic"] == "notes"]
    assert (finding["topic"], finding["healthy"]) == ("notes", False)
    assert [f["topic"] for f in found].count("clone") == 1  # the hint is still there
    assert finding["detail"].endswith("then run majordomus fetch origin")
    assert bob.git("for-each-ref", "refs/notes") == before
    away.rename(remote)
    ok(bob, "fetch")
    # No --drop-cache: nothing about the missing objects was remembered.
    assert answers(bob) == template.answers
    assert bob.run("doctor").code == 0


@pytest.mark.parametrize("flt", FILTERS)
def test_writes_and_the_pre_push_hook_in_a_partial_clone(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    _remote, alice, bob = after_git_fetch(tmp_path, environ, clock, template, flt)
    bob.commit("bob's fix", {"fix.txt": "fixed\n"})
    task = json.loads(ok(bob, "task", "list", "--json"))["tasks"][0]["task"]
    ok(bob, "checkpoint", "--task", task, "fixed on a partial clone")
    pushed = git_push(bob, "-q", "origin", "main")
    assert pushed == (0, "majordomus: published records to origin\n")
    ok(alice, "fetch")
    alice.git("pull", "-q", "--no-rebase", "origin", "main")
    ok(bob, "fetch")
    assert answers(bob) == answers(alice)


def test_a_missing_object_is_never_cached_as_invalid(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template
) -> None:
    _remote, alice, bob = after_git_fetch(tmp_path, environ, clock, template, "blob:none")
    # Not a promisor any more: the blobs are simply missing, and reads say so.
    bob.git("config", "remote.origin.promisor", "false")
    before = json.loads(ok(bob, "history", "--all", "--json"))
    assert (before["records"], before["invalid"]) == ([], 6)
    assert bob.run("doctor").code == 1
    task = json.loads(ok(alice, "task", "list", "--json"))["tasks"][0]["task"]
    assert bob.run("history", "--task", task).code == 2  # its record is not here yet
    bob.git("config", "remote.origin.promisor", "true")
    ids = missing(bob, TRACKING)
    bob.git("-c", "fetch.negotiationAlgorithm=noop", "fetch", "-q", "--no-filter", "origin", *ids)
    assert missing(bob, TRACKING) == []
    # No --drop-cache: the objects that arrived are read.
    assert answers(bob) == template.answers
    assert bob.run("doctor").code == 0
    expected = ok(alice, "history", "--task", task, "--json")
    assert ok(bob, "history", "--task", task, "--json") == expected


def test_a_server_that_serves_only_advertised_refs(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template
) -> None:
    # Protocol v0 without uploadpack.allowAnySHA1InWant refuses a request by object id.
    _remote, _alice, bob = after_git_fetch(
        tmp_path, environ, clock, template, "blob:none", ("protocol.version", "0")
    )
    ids = missing(bob, TRACKING)
    refused = subprocess.run(
        ["git", "fetch", "--no-filter", "origin", ids[0]],
        cwd=bob.path,
        env=bob.environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0
    assert f"Server does not allow request for unadvertised object {ids[0]}" in refused.stderr
    assert answers(bob) == template.answers
    assert missing(bob, TRACKING) == []


def test_fetch_from_another_remote_completes_from_the_promisor(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template
) -> None:
    remote, alice = published(tmp_path, environ, clock, template)
    upstream = tmp_path / "upstream.git"  # the code only, none of the notes' objects
    git(tmp_path, environ, "init", "-q", "--bare", "-b", "main", str(upstream))
    alice.git("push", "-q", "--no-verify", str(upstream), "main")
    bob = partial(remote, tmp_path / "bob", alice, "blob:none")
    ok(bob, "init")
    bob.git("fetch", "-q")
    bob.git("remote", "add", "upstream", f"file://{upstream}")
    assert missing(bob, TRACKING) != []
    assert ok(bob, "fetch", "upstream") == "upstream has no records yet\n"
    assert missing(bob, TRACKING) == []


@pytest.mark.parametrize("flt", FILTERS)
def test_show_reads_only_the_note_of_its_commit(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    """`show` answers from that commit's note alone: the other notes' objects, left out of
    this partial clone and unreachable now, are neither needed nor fetched."""
    remote, _alice, bob = after_git_fetch(tmp_path, environ, clock, template, flt)
    head = bob.git("rev-parse", "HEAD").strip()
    bob.git("notes", "--ref=remotes/origin/majordomus", "show", head)  # git fetches this one
    assert missing(bob, "refs/notes/remotes/origin/majordomus")  # the others stay out
    remote.rename(remote.with_name("away.git"))
    shown = bob.run("show", "--json")
    assert (shown.code, shown.err) == (0, ""), shown.err
    assert json.loads(shown.out) == template.answers[2]
    assert bob.run("history").code == 3  # every note is needed there: still refused


@pytest.mark.parametrize("flt", FILTERS)
def test_a_write_that_meets_a_missing_object_refuses_and_moves_nothing(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    # The notes of a partial clone made current by plain git, the promisor away: a write
    # that needs a note it cannot read stops in one sentence naming the fix, ref untouched
    # (it used to call the missing note unreadable and say to inspect it).
    from majordomus.errors import RepositoryError
    from majordomus.records import new_record
    from majordomus.tasks import open_jobs

    remote, _alice, bob = after_git_fetch(tmp_path, environ, clock, template, flt)
    bob.git("update-ref", NOTES, TRACKING)
    noted = bob.git("notes", "--ref=majordomus", "list").split()[1]
    assert missing(bob, NOTES) != []
    remote.rename(remote.with_name("away.git"))
    before = bob.notes_ref()
    jobs = open_jobs(str(bob.path), bob.environ)
    record = new_record(
        "checkpoint",
        record_id="c-0000000000000001",
        task="t-000000000001",
        head=noted,
        at=clock.now,
        author="Ada Lovelace <ada@example.com>",
        session=None,
        fields={"body": "on top"},
    )
    writes: dict[str, Callable[[], object]] = {
        "nothing was recorded": lambda: writer_of(jobs).append(
            noted, [record], "m", author=record.author
        ),
        "nothing was adopted": lambda: writer_of(jobs).append_many({noted: [record]}, "m"),
    }
    for undone, write in writes.items():
        with pytest.raises(RepositoryError) as refused:
            write()
        message = refused.value.message
        assert message.endswith(f"; {undone}: run majordomus fetch, then try again."), message
        assert "missing from this partial clone" in message
        assert bob.notes_ref() == before


@pytest.mark.parametrize("flt", FILTERS)
def test_views_kept_in_a_partial_clone_meet_a_plain_git_fetch(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template, flt: str
) -> None:
    """Bob's per-task views are cached; Alice writes and pushes; a plain `git fetch` brings
    the notes commit without its objects. The next per-task read cannot carry the views
    over (the objects that changed are not here): it fetches them in one batch, reads
    again, and answers as a read without caches does."""
    remote, alice = published(tmp_path, environ, clock, template)
    bob = partial(remote, tmp_path / "bob", alice, flt)
    ok(bob, "init")  # a plain git fetch brings the notes ref from now on
    ok(bob, "fetch")
    task = json.loads(ok(bob, "task", "list", "--json"))["tasks"][0]["task"]
    ok(bob, "history", "--task", task, "--json")  # the views of this state are kept
    alice.commit("alice's next step", {"next.txt": "n\n"})
    ok(alice, "checkpoint", "--task", task, "written after bob's read")
    ok(alice, "push")
    bob.git("fetch", "-q")
    assert missing(bob, TRACKING) != []
    trace = tmp_path / "trace.json"
    result = bob.run(
        "history", "--task", task, "--all", "--json", environ={"GIT_TRACE2_EVENT": str(trace)}
    )
    assert (result.code, result.err) == (0, "")
    assert fetches_run(trace) == 1
    bodies = [r.get("body") for r in json.loads(result.out)["records"]]
    assert "written after bob's read" in bodies
    bob.drop_caches()
    assert ok(bob, "history", "--task", task, "--all", "--json") == result.out


def test_a_note_object_lost_after_a_read_is_fetched_again_or_named(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template
) -> None:
    """The read caches keep what a note holds by its blob id. When that blob is gone later,
    a read that shows its records fetches it from the promisor remote and answers as
    before; a clone that cannot fetch it stops (exit 3, one sentence saying what to run,
    the notes ref untouched), never a traceback nor records shown blank; and after
    `doctor --drop-cache` it answers what a fresh read answers."""
    remote, alice = published(tmp_path, environ, clock, template)
    bob = partial(remote, tmp_path / "bob", alice, "blob:none")
    ok(bob, "fetch")
    assert answers(bob) == template.answers  # the read caches made
    text = ok(bob, "history", "--all")
    blob = bob.git("notes", "--ref=majordomus", "list", "HEAD").strip()
    lose_object(bob.path, environ, blob)
    assert not bob.pygit.odb.exists(blob)
    assert ok(bob, "history", "--all") == text
    assert answers(bob) == template.answers
    assert bob.pygit.odb.exists(blob)
    # The same loss where the promisor remote cannot be reached: it says so.
    lose_object(bob.path, environ, blob)
    bob.git("remote", "set-url", "origin", str(tmp_path / "gone.git"))
    ref = bob.notes_ref()
    result = bob.run("history", "--all")
    assert (result.code, result.out, result.err.count("\n")) == (3, "", 1)
    assert result.err.startswith(
        "majordomus: 1 note object(s) are missing from this partial clone and origin did "
        "not send them ("
    )
    assert result.err.endswith(
        "check that origin is reachable, then run majordomus fetch origin.\n"
    )
    # And where no remote can send it: not a promisor any more.
    bob.git("config", "remote.origin.promisor", "false")
    for argv in (("history", "--all"), ("history", "--all", "--json"), ("check", "--all")):
        result = bob.run(*argv)
        assert (result.code, result.out) == (3, ""), argv
        assert result.err == (
            f"majordomus: note object {blob[:12]} is missing from this clone, though an "
            f"earlier read found it; run majordomus doctor to see what else is missing, "
            f"then majordomus doctor --drop-cache to read every note afresh.\n"
        )
    assert bob.notes_ref() == ref
    assert bob.run("doctor", "--drop-cache").code == 1
    # A fresh read: every record but those of the lost note, which counts as invalid.
    fresh = json.loads(ok(bob, "history", "--all", "--json"))
    before = json.loads(json.dumps(template.answers[0]))["records"]
    lost = [r for r in before if r["commit"] == bob.head()]
    assert lost and fresh["invalid"] == 1
    assert fresh["records"] == [r for r in before if r not in lost]


def test_a_lost_object_of_a_commit_with_two_notes_is_fetched_again(
    tmp_path: Path, environ: dict[str, str], clock: Clock, template: Template
) -> None:
    """A commit with a note on the local ref and another on the remote-tracking ref (a plain
    `git fetch` brought a teammate's record on the same commit): the two are read as one.
    When the local one's object is lost after the caches summarised both, the read fetches
    it again and answers as before, never a traceback."""
    remote, alice = published(tmp_path, environ, clock, template)
    bob = partial(remote, tmp_path / "bob", alice, "blob:none")
    ok(bob, "init")
    ok(bob, "fetch")
    task = json.loads(ok(bob, "task", "list", "--json"))["tasks"][0]["task"]
    ok(bob, "checkpoint", "bob on the last commit", "--task", task)
    ok(bob, "push")
    ok(alice, "fetch")
    ok(alice, "checkpoint", "alice on the same commit", "--task", task)
    ok(alice, "push")
    bob.git("fetch", "-q")  # the tracking ref moves; the local one does not
    local = bob.git("notes", "--ref=majordomus", "list", "HEAD").strip()
    tracked = bob.git("notes", f"--ref={TRACKING.removeprefix('refs/notes/')}", "list", "HEAD")
    assert tracked.strip() not in ("", local)
    before = ok(bob, "history", "--all", "--json")
    assert "alice on the same commit" in before and "bob on the last commit" in before
    lose_object(bob.path, environ, local)
    # The views and the documents gone, the summaries kept: every note is read, the two
    # on HEAD as one, the lost one's summary at hand.
    git_dir = bob.path / ".git"
    for name in (VIEWS_FILE_NAME, RECORDS_FILE_NAME):
        (git_dir / name).unlink(missing_ok=True)
    shutil.rmtree(git_dir / VIEWS_FOLDER_NAME)
    assert (git_dir / CACHE_FILE_NAME).is_file()
    assert not bob.pygit.odb.exists(local)
    assert ok(bob, "history", "--all", "--json") == before
    assert bob.pygit.odb.exists(local)
    bob.drop_caches()
    assert ok(bob, "history", "--all", "--json") == before
