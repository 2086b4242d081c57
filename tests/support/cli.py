"""majordomus in-process (`__main__.run`, the fast path) or as a real process.

A real process starts in its own session (a terminal's foreground job of its own: a
signal the test sends to the group reaches it and its children, never the test run)
with SIGINT at its default: a suite run as a background job (`trap '' INT; make test`,
`make test &`) has SIGINT ignored, every child would inherit that, and Python leaves
an ignored SIGINT ignored.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

MAJORDOMUS = [sys.executable, "-m", "majordomus"]


@dataclasses.dataclass(frozen=True)
class Result:
    """What a command did: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str


def run_cli(
    cwd: Path,
    environ: Mapping[str, str],
    *argv: str,
    stdin: bytes = b"",
    now: Callable[[], datetime.datetime] | datetime.datetime | None = None,
    sleep: Callable[[float], None] | None = None,
    tty: bool = False,
) -> Result:
    """majordomus in-process in `cwd`; the real clock and real sleeps unless given."""
    # Imported here: the entry module readies majordomus' Ctrl-C handler as it is imported,
    # held for a `main` to answer, and pytest's own process (conftest imports this module,
    # and runs no command) must keep its Ctrl-C. (`run` starts each command with nothing
    # held.)
    from majordomus.__main__ import run

    out, err = io.StringIO(), io.StringIO()
    if isinstance(now, datetime.datetime):
        now = _fixed(now)
    code = run(
        ["-C", str(cwd), *argv],
        environ=dict(environ),
        stdin=io.BytesIO(stdin),
        stdout=out,
        stderr=err,
        now=now,
        sleep=sleep if sleep is not None else time.sleep,
        is_tty=tty,
    )
    return Result(code, out.getvalue(), err.getvalue())


def _fixed(when: datetime.datetime) -> Callable[[], datetime.datetime]:
    return lambda: when


def _own_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(
    argv: Sequence[str | bytes],
    cwd: Path | None,
    environ: Mapping[str, str] | Mapping[bytes, bytes],
    stdin: int | None = subprocess.DEVNULL,
    stdout: int | None = subprocess.PIPE,
    stderr: int | None = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    """Any program as a real process in its own session, SIGINT at its default."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=environ,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=_own_job,  # noqa: PLW1509 (the tests start no threads)
    )


def start_text(
    argv: Sequence[str], cwd: Path | None, environ: Mapping[str, str], stdin: int | None = None
) -> subprocess.Popen[str]:
    """`start`, with stdout and stderr read as text."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(environ),
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_own_job,  # noqa: PLW1509 (the tests start no threads)
    )


def spawn(
    cwd: Path | bytes,
    environ: Mapping[str, str] | Mapping[bytes, bytes],
    *argv: str | bytes,
    stdin: bool = False,
) -> subprocess.Popen[bytes]:
    """majordomus as a real process: `python -m majordomus -C cwd argv…`."""
    return start(
        [*MAJORDOMUS, "-C", cwd if isinstance(cwd, bytes) else str(cwd), *argv],
        None,
        environ,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
    )


@dataclasses.dataclass(frozen=True)
class Finished:
    code: int
    out: bytes
    err: bytes
    max_rss_kib: int
    seconds: float


def wait_measured(proc: subprocess.Popen[bytes], started: float) -> Finished:
    """Reap a process that has already closed its pipes, with its peak memory (Linux, KiB)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    return Finished(proc.returncode, out, err, usage.ru_maxrss, time.monotonic() - started)
