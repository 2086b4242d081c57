"""Ctrl-C and SIGTERM: exit 130, one line saying whether the record was stored, no
traceback, and no process of majordomus' left running (the pre-push hook's included).

Every process runs in its own process group, as a terminal's foreground job does, with
SIGINT reset to its default (the suite may run as a background job, which ignores it).
The risky windows are reached deterministically: a named pause point
(MAJORDOMUS_TEST_PAUSE_AT) that says on stderr when it is reached, or a remote whose
pre-receive hook, or whose listening socket, stalls until the test lets it go.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

import pytest

from majordomus import front
from tests.support.cli import MAJORDOMUS, _own_job, start_text
from tests.support.env import Clock
from tests.support.git import git_daemon
from tests.support.repo import Repo, seeded

WAIT_S = 30.0  # an upper bound for things that happen at once; never a window to hit


def spawn(
    argv: list[str], cwd: Path, environ: Mapping[str, str], stdin: int = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    """A process in its own group (a terminal's foreground job), SIGINT at its default."""
    return start_text(argv, cwd, environ, stdin)


def majordomus(repo: Repo, *argv: str) -> list[str]:
    return [*MAJORDOMUS, "-C", str(repo.path), *argv]


def read_line(stream: IO[str] | None) -> str:
    assert stream is not None
    return stream.readline()


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(f"still running after the signal: {err}") from None
    return process.returncode, out, err


def live_members(pgid: int) -> list[int]:
    """Processes of the group that are still running (zombies are done)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(pgid: int) -> list[int]:
    deadline = time.monotonic() + WAIT_S
    while (alive := live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive


def kill_group(pgid: int) -> None:
    if pgid == os.getpgrp():
        return  # never the test's own group (a git daemon it started lives there)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def python_script(repo: Repo, source: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """A Python script run in the repository, in a session of its own with SIGINT at its
    default (a suite run as a background job has it ignored, and the script's own
    SIGINT would then never come), stdin empty."""
    return subprocess.run(
        [sys.executable, "-c", source, *argv],
        env=repo.environ,
        cwd=repo.path,
        input="",
        capture_output=True,
        text=True,
        check=False,
        start_new_session=True,
        preexec_fn=_own_job,  # (the tests start no threads)
        timeout=60,
    )


def checkpoints_on_head(repo: Repo) -> list[str]:
    """Checkpoint ids on HEAD, as git itself reads the note."""
    note = repo.git("notes", "--ref=majordomus", "show", "HEAD", check=False)
    lines = note.splitlines()
    return [
        line.split('"')[1]
        for i, line in enumerate(lines)
        if line.startswith("id = ") and "[[checkpoint]]" in lines[: i + 1][-3:]
    ]


# ---- a command interrupted at a named point ----------------------------------------------


def interrupt_at(
    repo: Repo, point: str, signum: int, *argv: str
) -> tuple[int, str, list[str], list[str]]:
    """Run majordomus until it pauses at `point`, send `signum` (SIGINT to the group, as
    Ctrl-C does; SIGTERM to the process, as kill does); (exit, stderr after the pause,
    checkpoints on HEAD before, after)."""
    before = checkpoints_on_head(repo)
    env = {**repo.environ, "MAJORDOMUS_TEST_PAUSE_AT": point}
    process = spawn(majordomus(repo, *argv), repo.path, env)
    try:
        assert read_line(process.stderr) == f"majordomus: paused at {point}\n"
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        code, _, err = finish(process)
    finally:
        kill_group(process.pid)
    return code, err, before, checkpoints_on_head(repo)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_interrupted_during_start_up(repo: Repo, signum: int) -> None:
    task = repo.task()
    code, err, before, after = interrupt_at(repo, "start-up", signum, "checkpoint", "-t", task, "x")
    assert (code, err, after) == (130, "majordomus: interrupted; nothing was stored.\n", before)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_interrupted_just_before_the_write(repo: Repo, signum: int) -> None:
    task = repo.task()
    code, err, before, after = interrupt_at(
        repo, "before-write", signum, "checkpoint", "-t", task, "x"
    )
    assert (code, err, after) == (
        130,
        "majordomus: interrupted; the checkpoint was not stored.\n",
        before,
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_interrupted_just_after_the_write(repo: Repo, signum: int) -> None:
    task = repo.task()
    code, err, before, after = interrupt_at(
        repo, "after-write", signum, "checkpoint", "-t", task, "x"
    )
    assert len(after) == len(before) + 1
    assert (code, err) == (
        130,
        f"majordomus: interrupted; the checkpoint {after[-1]} was stored.\n",
    )


def catches_sigterm(pid: int) -> bool:
    """Whether the process has installed its handler (Python alone leaves SIGTERM alone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # already gone: nothing left to wait for
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def test_interrupted_anywhere_the_answer_matches_the_notes(repo: Repo) -> None:
    """Signals at spread-out instants from the moment majordomus' handler is in place
    (imports, reading, writing, printing): wherever each lands, the outcome is true
    (exit 0 and stored, or 130 and one line saying whether it was stored)."""
    task = repo.task()
    seen = set()
    for delay in (0.0, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5):
        before = checkpoints_on_head(repo)
        process = spawn(majordomus(repo, "checkpoint", "-t", task, "x"), repo.path, repo.environ)
        try:
            deadline = time.monotonic() + WAIT_S
            while not catches_sigterm(process.pid) and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(delay)  # not a window to hit: every instant must give a true answer
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
            code, out, err = finish(process)
        finally:
            kill_group(process.pid)
        after = checkpoints_on_head(repo)
        stored = len(after) == len(before) + 1
        assert len(after) - len(before) in (0, 1)
        if code == 0:
            assert stored and err == "" and out, (delay, code, err)
            seen.add("done")
        elif stored:
            assert (code, err) == (
                130,
                f"majordomus: interrupted; the checkpoint {after[-1]} was stored.\n",
            ), delay
            seen.add("stored")
        else:
            assert code == 130, (delay, code, err)
            assert err in (
                "majordomus: interrupted; nothing was stored.\n",
                "majordomus: interrupted; the checkpoint was not stored.\n",
            ), delay
            seen.add("not stored")
    assert "not stored" in seen  # the early instants land before the write


# ---- push, fetch and the pre-push hook -----------------------------------------------------

STALLING_HOOK = """#!/bin/sh
# Stalls a push of the notes ref until the test lets it go (or it is killed).
notes=no
while read -r _old _new ref; do
    [ "$ref" = refs/notes/majordomus ] && notes=yes
done
[ "$notes" = no ] && exit 0
echo $$ > "{marker}.tmp" && mv "{marker}.tmp" "{marker}"
read -r _ < "{fifo}"
exit 1
"""


@contextlib.contextmanager
def stalling_remote(remote: Path, tmp_path: Path) -> Iterator[Path]:
    """The bare remote's pre-receive stalls a notes push; yields the file that receives
    the stalled hook's pid once it is stalled."""
    marker, fifo = tmp_path / "stalled-pid", tmp_path / "release"
    os.mkfifo(fifo)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(STALLING_HOOK.format(marker=marker, fifo=fifo))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    try:
        yield marker
    finally:
        if marker.exists() and _alive(marker):
            kill_group(os.getpgid(int(marker.read_text())))
        # Let a hook that is still waiting go (O_NONBLOCK: no reader, no wait).
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def _alive(marker: Path) -> bool:
    try:
        os.kill(int(marker.read_text()), 0)
    except (ProcessLookupError, ValueError):
        return False
    return True


def stalled_pid(marker: Path, process: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + WAIT_S
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the push never reached the remote"
        time.sleep(0.02)
    return int(marker.read_text())


def with_records(tmp_path: Path, environ: dict[str, str], clock: Clock) -> tuple[Path, Repo]:
    remote, a = seeded(tmp_path, environ, clock)
    a.task()
    a.commit("more work", {"work.txt": "1\n"})
    return remote, a


def remote_notes(remote: Path, environ: Mapping[str, str]) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(remote), "for-each-ref", "refs/notes"],
        env=dict(environ),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_ctrl_c_during_push(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    remote, a = with_records(tmp_path, environ, clock)
    with stalling_remote(remote, tmp_path) as marker:
        process = spawn(majordomus(a, "push"), a.path, a.environ)
        try:
            hook = stalled_pid(marker, process)
            os.killpg(process.pid, signal.SIGINT)
            code, out, err = finish(process)
            assert (code, out, err) == (130, "", "majordomus: interrupted; nothing was stored.\n")
            assert os.getpgid(hook) == process.pid  # git and the remote side: one job
            assert wait_until_gone(process.pid) == []
        finally:
            kill_group(process.pid)
    assert remote_notes(remote, environ) == ""


def test_sigterm_to_push_alone_ends_its_git_too(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = with_records(tmp_path, environ, clock)
    with git_daemon(remote.parent, environ) as base, stalling_remote(remote, tmp_path) as marker:
        process = spawn(majordomus(a, "push", f"{base}/{remote.name}"), a.path, a.environ)
        try:
            stalled_pid(marker, process)  # the server side runs in the daemon's group
            process.send_signal(signal.SIGTERM)  # kill PID: only majordomus gets it
            code, out, err = finish(process)
            assert (code, out, err) == (130, "", "majordomus: interrupted; nothing was stored.\n")
            assert wait_until_gone(process.pid) == []  # its git push too
        finally:
            kill_group(process.pid)
    assert remote_notes(remote, environ) == ""


def test_ctrl_c_during_fetch_from_a_remote_that_stalls(repo: Repo) -> None:
    repo.task()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        process = spawn(
            majordomus(repo, "fetch", f"git://127.0.0.1:{port}/remote.git"),
            repo.path,
            repo.environ,
        )
        try:
            server.settimeout(WAIT_S)
            connection, _ = server.accept()  # git is now waiting for an answer that never comes
            with connection:
                os.killpg(process.pid, signal.SIGINT)
                code, out, err = finish(process)
            assert (code, out, err) == (130, "", "majordomus: interrupted; nothing was stored.\n")
            assert wait_until_gone(process.pid) == []
        finally:
            kill_group(process.pid)


def hook_environ(environ: Mapping[str, str], **extra: str) -> dict[str, str]:
    """majordomus on PATH as this checkout has it, so the hook runs the code under test."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{environ['PATH']}"
    return {**environ, "PATH": path, **extra}


def test_ctrl_c_on_git_push_ends_the_hooks_notes_push(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = with_records(tmp_path, environ, clock)
    env = hook_environ(a.environ)
    assert a.run("init", environ=env).code == 0
    with stalling_remote(remote, tmp_path) as marker:
        process = spawn(["git", "push", "-q", "origin", "main"], a.path, env)
        try:
            hook = stalled_pid(marker, process)
            notes_push_group = os.getpgid(hook)
            assert notes_push_group != process.pid  # the hook's notes push is detached
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C on git push
            _, _, err = finish(process)
            assert wait_until_gone(notes_push_group) == []
            assert wait_until_gone(process.pid) == []
        finally:
            kill_group(process.pid)
    said = [line for line in err.splitlines() if line.startswith("majordomus:")]
    assert said == ["majordomus: interrupted; nothing was stored."]
    assert "Traceback" not in err
    assert remote_notes(remote, environ) == ""


def test_the_hook_timeout_bounds_the_notes_push(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = with_records(tmp_path, environ, clock)
    env = hook_environ(a.environ, MAJORDOMUS_HOOK_TIMEOUT="0.5")
    with stalling_remote(remote, tmp_path) as marker:
        process = spawn(majordomus(a, "push", "--hook", "origin"), a.path, env)
        try:
            notes_push_group = os.getpgid(stalled_pid(marker, process))
            code, out, err = finish(process)  # no signal: the budget alone ends it
            assert wait_until_gone(notes_push_group) == []
        finally:
            kill_group(process.pid)
    assert (code, out) == (0, "")
    assert err == (
        "majordomus: warning: records were not published (git push did not finish within "
        "0.5 s (MAJORDOMUS_HOOK_TIMEOUT sets the budget)); the push goes on.\n"
    )
    assert remote_notes(remote, environ) == ""


class _InterruptedRead(io.BytesIO):
    def read(self, size: int | None = -1) -> bytes:
        raise KeyboardInterrupt


@pytest.mark.parametrize("joined", [False, True], ids=["read plainly", "read by typer"])
def test_ctrl_c_in_process_is_not_a_silent_exit(repo: Repo, joined: bool) -> None:
    """Python's own KeyboardInterrupt (one raised where majordomus' handler is not in
    place), which typer turns into a bare Exit(130) (a joined `--task=` is typer's to
    read) and a plain checkpoint meets as it comes: still one line, still the truth."""
    from majordomus.__main__ import run  # (why here: tests/support/cli.py, run_cli)

    task = repo.task()
    before = checkpoints_on_head(repo)
    err = io.StringIO()
    options = [f"--task={task}"] if joined else ["--task", task]
    argv = ["-C", str(repo.path), "checkpoint", *options, "-F", "-"]
    assert (front.plain(argv) is None) == joined
    code = run(
        argv,
        environ=repo.environ,
        stdin=_InterruptedRead(),
        stdout=io.StringIO(),
        stderr=err,
        now=repo.clock,
    )
    assert (code, err.getvalue()) == (130, "majordomus: interrupted; nothing was stored.\n")
    assert checkpoints_on_head(repo) == before


def test_the_hook_timeout_bounds_it_under_git_push_too(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = with_records(tmp_path, environ, clock)
    env = hook_environ(a.environ, MAJORDOMUS_HOOK_TIMEOUT="0.5")
    assert a.run("init", environ=env).code == 0
    with stalling_remote(remote, tmp_path) as marker:
        process = spawn(["git", "push", "-q", "origin", "main"], a.path, env)
        try:
            notes_push_group = os.getpgid(stalled_pid(marker, process))
            code, _, err = finish(process)  # no signal: the budget alone ends it
            assert wait_until_gone(notes_push_group) == []
        finally:
            kill_group(process.pid)
    assert (code, err) == (
        0,
        "majordomus: warning: records were not published (git push did not finish within "
        "0.5 s (MAJORDOMUS_HOOK_TIMEOUT sets the budget)); the push goes on.\n",
    )
    assert remote_notes(remote, environ) == ""
    assert a.git("rev-parse", "main") == git_in_remote(remote, environ, "rev-parse", "main")


def git_in_remote(remote: Path, environ: Mapping[str, str], *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(remote), *args],
        env=dict(environ),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_watch_stops_on_ctrl_c_with_0_and_on_sigterm_with_130(repo: Repo) -> None:
    task = repo.task()
    for signum, expected in ((signal.SIGINT, (0, "")), (signal.SIGTERM, (130, TERM_LINE))):
        argv = majordomus(repo, "watch", "--every", "0.1", "--seconds", "60")
        process = spawn(argv, repo.path, repo.environ)
        try:
            assert read_line(process.stdout).startswith(f"{task}: no checkpoint; ")
            os.killpg(process.pid, signum)
            code, _, err = finish(process)
        finally:
            kill_group(process.pid)
        assert (code, err) == expected


TERM_LINE = "majordomus: interrupted; nothing was stored.\n"


_CUT_SHORT = """
import os, signal, sys
import majordomus.__main__ as entry

def run(argv):
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the handler raises here...
        signal.pause()
    except KeyboardInterrupt:
        pass  # ...and code cut short swallows it (as C code inside an import can),
    raise TypeError("expected a message argument")  # then fails in its own way

entry.run = run
sys.exit(entry.main())
"""


def test_an_error_left_behind_by_an_interruption_is_the_interruption(repo: Repo) -> None:
    # Seen once in a sweep: SIGINT during `import ssl` left a TypeError, printed as a
    # traceback with exit 1. An exception after a signal is the signal's: 130, one line.
    result = python_script(repo, _CUT_SHORT)
    assert (result.returncode, result.stdout, result.stderr) == (
        130,
        "",
        "majordomus: interrupted; nothing was stored.\n",
    )


_IN_A_CALLBACK = """
import signal, sys, time
from majordomus import interrupt

interrupt.install()
namespace = {}
where = "<frozen importlib._bootstrap>"
exec(compile("import sys; frame = sys._getframe()", where, "exec"), namespace)
# The deferred signal waits (blocked) until the handler's return is noted: however slow
# this process runs, the alarm cannot come between the two.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
returned = False
try:
    interrupt._handler(signal.SIGINT, namespace["frame"])  # as if inside import's lock callback
    returned = True
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
    time.sleep(5)
except interrupt.Interrupted as stop:
    if returned:
        print("not raised inside the callback")
    print(f"raised after it: {stop.signum}")
"""


def test_a_signal_inside_a_callback_is_raised_once_it_returns(repo: Repo) -> None:
    # Raised inside import's module-lock callback, the interruption was swallowed by Python
    # ("Exception ignored in: ... cb"), the command ran on and printed that on stderr.
    result = python_script(repo, _IN_A_CALLBACK)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "not raised inside the callback\nraised after it: 2\n",
        "",
    )


# As the console script runs: the entry module imported, then work of the script's own
# (a Ctrl-C lands there), then main().
_BEFORE_MAIN = """
import os, signal, sys
from majordomus.__main__ import main
os.kill(os.getpid(), signal.SIGINT)
print("the script went on", flush=True)
sys.exit(main())
"""


@pytest.mark.parametrize("hook", [False, True], ids=["command", "hook"])
def test_ctrl_c_before_main_runs_is_answered_by_main(repo: Repo, hook: bool) -> None:
    argv = ["hook", "claude"] if hook else ["check"]
    result = python_script(repo, _BEFORE_MAIN, *argv)
    expected = (0, "") if hook else (130, "majordomus: interrupted; nothing was stored.\n")
    assert (result.returncode, result.stdout, result.stderr) == (
        expected[0],
        "the script went on\n",
        expected[1],
    )
