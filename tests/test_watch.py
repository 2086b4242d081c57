"""watch: a line per change off a terminal, a live line on one, other writers noticed."""

from __future__ import annotations

import io
import os
import pty
import select
import signal
import time

from tests.support.cli import MAJORDOMUS, start
from tests.support.repo import Repo


def watch_in_process(repo: Repo, *argv: str, tty: bool = False) -> tuple[int, str]:
    from majordomus.__main__ import run  # (why here: tests/support/cli.py, run_cli)

    out = io.StringIO()
    code = run(
        ["-C", str(repo.path), "watch", *argv],
        environ=repo.environ,
        stdout=out,
        stderr=io.StringIO(),
        now=repo.clock,
        sleep=repo.clock.advance,  # time passes only when watch sleeps
        is_tty=tty,
    )
    return code, out.getvalue()


def test_a_line_each_time_the_status_changes(repo: Repo) -> None:
    task = repo.task()
    code, out = watch_in_process(repo, "--every", "600", "--count", "4")
    assert code == 0
    assert out == (
        f"{task}: no checkpoint; task started 0s ago, interval 20m, fresh, no open handover\n"
        f"{task}: no checkpoint; task started 30m 00s ago, interval 20m, STALE, no open handover\n"
    )


def test_live_line_on_a_terminal(repo: Repo) -> None:
    task = repo.task()
    code, out = watch_in_process(repo, "--every", "60", "--count", "2", tty=True)
    assert code == 0
    line = (
        f"{task}: no checkpoint; task started {{}} ago, interval 20m, "
        "\x1b[32mfresh\x1b[0m, no open handover"
    )
    assert out == ("\r\x1b[2K" + line.format("0s") + "\r\x1b[2K" + line.format("1m 00s") + "\n")


def test_no_colour_when_asked(repo: Repo) -> None:
    from majordomus.__main__ import run

    repo.task()
    out = io.StringIO()
    run(
        ["-C", str(repo.path), "watch", "--count", "1"],
        environ={**repo.environ, "NO_COLOR": "1"},
        stdout=out,
        stderr=io.StringIO(),
        now=repo.clock,
        is_tty=True,
    )
    assert "\x1b[3" not in out.getvalue()


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_in_a_pseudo_terminal_it_notices_other_writers_and_stops_on_ctrl_c(repo: Repo) -> None:
    task = repo.task()
    leader, follower = pty.openpty()
    proc = start(
        [*MAJORDOMUS, "-C", str(repo.path), "watch", "--every", "0.2"],
        None,
        repo.environ,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    try:
        first = read_until(leader, b"no checkpoint", 20)
        assert b"\r\x1b[2K" + task.encode() + b": no checkpoint; task started" in first
        writer = repo.spawn("checkpoint", "--task", task, "written elsewhere")
        assert writer.wait(timeout=30) == 0
        later = read_until(leader, b"last checkpoint", 20)
        assert task.encode() + b": last checkpoint " in later
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)


def test_off_a_terminal_other_writers_show_as_new_lines(repo: Repo) -> None:
    task = repo.task()
    proc = start(
        [*MAJORDOMUS, "-C", str(repo.path), "watch", "--every", "0.1", "--seconds", "30"],
        None,
        repo.environ,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().decode()
    assert first.startswith(f"{task}: no checkpoint; task started ")
    assert repo.spawn("checkpoint", "--task", task, "elsewhere").wait(timeout=30) == 0
    second = proc.stdout.readline().decode()
    assert second.startswith(f"{task}: last checkpoint ")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0


def test_bad_every_is_refused(repo: Repo) -> None:
    repo.task()
    result = repo.run("watch", "--every", "0")
    assert (result.code, result.err) == (
        2,
        "majordomus: --every must be more than 0 seconds, not 0.\n",
    )


def test_a_dumb_terminal_gets_plain_lines(repo: Repo) -> None:
    from majordomus.__main__ import run

    task = repo.task()
    out = io.StringIO()
    code = run(
        ["-C", str(repo.path), "watch", "--every", "600", "--count", "4"],
        environ={**repo.environ, "TERM": "dumb"},
        stdout=out,
        stderr=io.StringIO(),
        now=repo.clock,
        sleep=repo.clock.advance,
        is_tty=True,
    )
    assert code == 0
    # No carriage return, no erase-line escape, no colour: a line each time it changes.
    assert out.getvalue() == (
        f"{task}: no checkpoint; task started 0s ago, interval 20m, fresh, no open handover\n"
        f"{task}: no checkpoint; task started 30m 00s ago, interval 20m, STALE, no open handover\n"
    )
