"""A remote that accepts the connection and never answers, or a real smart-HTTP server
stopped with SIGSTOP mid-session: fetch, push and sync give up after
`majordomus.remoteTimeout` seconds of silence, exit 4, and change nothing here."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import smarthttp
from tests.support.cli import Result
from tests.support.env import Clock
from tests.support.git import bare, git
from tests.support.repo import Repo, clone, history_ids

SERVER_LIFETIME_S = 20.0  # the mute server stops by itself, whatever the test does


@contextlib.contextmanager
def mute_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte
    (what a server stopped with SIGSTOP, or a black-holing proxy, looks like)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()
    deadline = time.monotonic() + SERVER_LIFETIME_S

    def serve() -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError, OSError):
                connection, _ = listener.accept()
                held.append(connection)  # read nothing, answer nothing

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


@pytest.fixture
def worked(repo: Repo) -> Repo:
    repo.task()
    assert repo.run("checkpoint", "reproduced under load").code == 0
    repo.git("config", "majordomus.remoteTimeout", "1")
    return repo


@pytest.mark.parametrize("scheme", ["git", "http"])
@pytest.mark.parametrize("verb", ["fetch", "push", "sync"])
def test_a_remote_that_never_answers_is_given_up_on(worked: Repo, scheme: str, verb: str) -> None:
    with mute_server() as port:
        url = f"{scheme}://127.0.0.1:{port}/team.git"
        worked.git("remote", "add", "stuck", url)
        refs_before = worked.git("for-each-ref")
        started = time.monotonic()
        result = worked.run(verb, "stuck")
        took = time.monotonic() - started
    assert result.code == 4, result.err
    assert result.out == "" and result.err.count("\n") == 1, result.err
    assert result.err.startswith("majordomus: "), result.err
    assert "Traceback" not in result.err
    assert url in result.err or "stuck" in result.err, result.err
    assert took < 10, took  # one second of silence, not for ever
    assert worked.git("for-each-ref") == refs_before  # nothing local changed


def test_the_silence_is_named_with_the_setting_that_changes_it(worked: Repo) -> None:
    with mute_server() as port:
        result = worked.run("fetch", f"git://127.0.0.1:{port}/team.git")
    assert result.code == 4
    assert result.err == (
        f"majordomus: git://127.0.0.1:{port}/team.git sent nothing for 1 s, so git fetch was "
        "stopped and nothing here changed (git config majordomus.remoteTimeout SECONDS waits "
        "longer; 0 waits for ever).\n"
    )


def test_a_remote_that_answers_is_not_hurried(worked: Repo, tmp_path: object) -> None:
    # The same one-second setting against a remote that answers: every verb succeeds.
    remote = worked.path.parent / "team.git"
    worked.git("init", "-q", "--bare", str(remote))
    worked.git("remote", "add", "team", str(remote))
    for verb in ("push", "fetch", "sync"):
        result = worked.run(verb, "team", "--json")
        assert result.code == 0, result.err
        json.loads(result.out)


@pytest.mark.parametrize("value", ["soon", "-1", "1.5", "99999999999999999999"])
def test_a_bad_setting_is_refused_before_any_git_runs(worked: Repo, value: str) -> None:
    worked.git("config", "majordomus.remoteTimeout", value)
    result = worked.run("fetch", "/nonexistent/remote.git")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert result.err.startswith(
        f"majordomus: git config majordomus.remoteTimeout is {value!r}: give seconds (30), "
    )


def test_zero_waits_for_ever_and_a_real_remote_still_answers(worked: Repo) -> None:
    remote = worked.path.parent / "team.git"
    worked.git("init", "-q", "--bare", str(remote))
    worked.git("config", "majordomus.remoteTimeout", "0")
    assert worked.run("push", str(remote)).code == 0


@pytest.mark.parametrize("verb", ["fetch", "push"])
def test_where_the_kernel_does_not_count_reads_git_is_asked_to_talk(
    worked: Repo, verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Off Linux the watch sees only git's output: git runs with --progress, and a remote
    # that answers still does its work; one that never answers is still given up on.
    from majordomus import gitprocess

    monkeypatch.setattr(gitprocess, "_watches_reads", lambda: False)
    team = worked.path.parent / "team.git"
    worked.git("init", "-q", "--bare", str(team))
    assert worked.run("push", str(team)).code == 0
    trace = worked.path.parent / "trace"
    assert worked.run(verb, str(team), environ={"GIT_TRACE": str(trace)}).code == 0
    asked = [line for line in trace.read_text().splitlines() if f" {verb} " in line]
    assert asked and all("--progress" in line for line in asked if "built-in: git" in line)
    assert any("built-in: git" in line and "--progress" in line for line in asked), asked
    with mute_server() as port:
        result = worked.run(verb, f"git://127.0.0.1:{port}/team.git")
    assert result.code == 4 and "sent nothing for 1 s" in result.err, result.err


# ---- a real smart-HTTP server stopped mid-session --------------------------------------


@pytest.fixture
def team(worked: Repo, environ: dict[str, str], clock: Clock) -> Path:
    """A bare repository served over HTTP below `team.parent`, holding a teammate's
    records that `worked` has not fetched (so a fetch asks for objects)."""
    remote = bare(worked.path.parent / "served" / "team.git", environ)
    teammate = clone(str(remote), worked.path.parent / "teammate", environ, clock)
    teammate.commit("initial")
    teammate.git("push", "-q", "origin", "main")
    teammate.task("flaky under load")
    assert teammate.run("checkpoint", "seen twice in fifty runs").code == 0
    assert teammate.run("push").code == 0
    return remote


def _refs(repo: Repo) -> str:
    return repo.git("for-each-ref")


def _given_up(result: Result, served: smarthttp.Served) -> None:
    assert result.code == 4, result.err
    assert result.out == "" and result.err.count("\n") == 1, result.err
    assert result.err.startswith("majordomus: team sent nothing for 1 s, so git "), result.err
    assert "Traceback" not in result.err
    assert served.stopped()  # the server was stopped, not merely slow


@pytest.mark.parametrize("stop", ["upload", "answer"])
def test_fetch_from_a_server_stopped_mid_session_gives_up(
    worked: Repo, team: Path, stop: str
) -> None:
    # "upload": the refs were listed, then the server stopped when asked for objects;
    # "answer": it stopped after the first bytes of its answer.
    before = _refs(worked)
    with smarthttp.serving(team.parent, stop=stop) as served:
        url = f"{served.url}/team.git"
        worked.git("remote", "add", "team", url)
        started = time.monotonic()
        result = worked.run("fetch", "team")
        took = time.monotonic() - started
        _given_up(result, served)
    assert took < 10, took
    assert _refs(worked) == before  # no notes ref, no remote-tracking ref moved


def test_push_to_a_server_stopped_mid_session_gives_up(
    worked: Repo, team: Path, environ: dict[str, str]
) -> None:
    # The teammate's records fetched first (from the folder), so the push sends at once.
    worked.git("remote", "add", "team", str(team))
    assert worked.run("fetch", "team").code == 0
    before, remote_before = _refs(worked), git(team, environ, "for-each-ref")
    with smarthttp.serving(team.parent, stop="receive") as served:
        worked.git("remote", "set-url", "team", f"{served.url}/team.git")
        result = worked.run("push", "team")
        _given_up(result, served)
    assert _refs(worked) == before
    assert git(team, environ, "for-each-ref") == remote_before


def test_sync_keeps_what_it_fetched_when_the_server_stops_during_the_push(
    worked: Repo, team: Path, environ: dict[str, str]
) -> None:
    mine = worked.notes_ref()
    remote_before = git(team, environ, "for-each-ref")
    with smarthttp.serving(team.parent, stop="receive") as served:
        worked.git("remote", "add", "team", f"{served.url}/team.git")
        result = worked.run("sync", "team")
        _given_up(result, served)
    # The fetch finished before the server stopped: both clones' records are here, the
    # notes ref moved forward by that merge only, and the remote holds what it held.
    assert len(history_ids(worked)) == 4  # two tasks, two checkpoints
    merged = worked.notes_ref()
    assert merged is not None and mine is not None
    assert worked.git("merge-base", "--is-ancestor", mine, merged, check=False) == ""
    assert git(team, environ, "for-each-ref") == remote_before


def test_the_served_remote_answers_when_not_stopped(worked: Repo, team: Path) -> None:
    # The same server, never stopped: every verb works through it with a 1 s timeout.
    with smarthttp.serving(team.parent) as served:
        worked.git("remote", "add", "team", f"{served.url}/team.git")
        for verb in ("fetch", "push", "sync"):
            result = worked.run(verb, "team")
            assert result.code == 0, (verb, result.err)
    assert len(history_ids(worked)) == 4
