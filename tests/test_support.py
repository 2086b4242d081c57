"""The test support package itself: a real process started for a test is its own job with
SIGINT at its default, even when the suite runs with SIGINT ignored (a background job)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import start
from tests.support.env import hermetic_environ

WAITS_FOR_STDIN = [sys.executable, "-c", "import sys; sys.stdin.read()"]
# The same, once it says it runs (its own SIGINT handler in place): a signal sent before
# that could land while Python starts up, and the test would not test the job.
READY_THEN_WAITS = [
    sys.executable,
    "-c",
    "import sys; print('ready', flush=True); sys.stdin.read()",
]


def ignores_sigint(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    ignored = next(line for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)))


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    """What `trap '' INT; make test` (or `make test &`) gives the suite."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def finish(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.communicate()


@pytest.mark.usefixtures("sigint_ignored")
def test_a_started_process_has_sigint_at_its_default_in_its_own_session(
    tmp_path: Path,
) -> None:
    environ = hermetic_environ(tmp_path)
    plain = subprocess.Popen(WAITS_FOR_STDIN, env=environ, stdin=subprocess.PIPE)
    try:
        assert ignores_sigint(plain.pid)  # what every child would inherit without `start`
    finally:
        finish(plain)
    process = start(READY_THEN_WAITS, tmp_path, environ, stdin=subprocess.PIPE)
    try:
        assert not ignores_sigint(process.pid)
        assert os.getsid(process.pid) == process.pid != os.getsid(0)
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C to its job: it ends
        process.communicate(timeout=30)
        # Killed by SIGINT, or KeyboardInterrupt once Python's own handler is in place.
        assert process.returncode in (-signal.SIGINT, 1)
    finally:
        if process.poll() is None:
            finish(process)
