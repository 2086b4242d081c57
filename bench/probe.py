"""Run one command (or a chain of them) and measure wall time and peak memory.

Peak memory is the command's maximum resident set size as GNU time reports it.
A child's own rusage cannot be used from here: Linux carries the parent's
high-water mark into the child at exec, so every child of this Python process
would report at least this process's peak.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

GNU_TIME = Path("/usr/bin/time")
TIMEOUT_S = 300.0  # a command that hangs is killed and reported, not waited for
KEEP_STDOUT = 4 << 20  # larger outputs (git log) are measured, not kept


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One measured run: wall seconds, peak RSS in KiB, exit code, what it printed, and the
    CPU seconds (user + system) of its whole process tree."""

    seconds: float
    peak_kib: int
    exit_code: int
    stdout: bytes  # empty when the output was larger than KEEP_STDOUT
    stderr: str
    cpu_s: float = 0.0


def memory_source() -> str:
    if GNU_TIME.is_file():
        return f"`{GNU_TIME} -f %M`"
    return "wait4() (an upper bound: it includes the harness's own peak)"


def run(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, timeout_s: float = TIMEOUT_S
) -> Outcome:
    """Run argv to completion; output goes to files so no pipe can stall it."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile() as rss,
    ):
        wrapped = list(argv)
        if GNU_TIME.is_file():
            wrapped = [str(GNU_TIME), "-f", "%M", "-o", rss.name, *argv]
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(
                wrapped,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # so a timeout can kill the whole process group
            )
        except OSError as error:
            return Outcome(0.0, 0, 127, b"", f"cannot run {wrapped[0]}: {error.strerror}")
        exit_code, seconds, own_peak, cpu_s = _wait(proc, started, timeout_s)
        if exit_code == -signal.SIGKILL:
            err.seek(0, os.SEEK_END)
            err.write(f"\nkilled after {timeout_s:g} s".encode())
        return Outcome(
            seconds=seconds,
            peak_kib=_reported_peak(Path(rss.name)) if GNU_TIME.is_file() else own_peak,
            exit_code=exit_code,
            stdout=_whole_or_nothing(_read(out, KEEP_STDOUT + 1)),
            stderr=_read(err, 1 << 20).decode("utf-8", "replace"),
            cpu_s=cpu_s,
        )


def _whole_or_nothing(data: bytes) -> bytes:
    return b"" if len(data) > KEEP_STDOUT else data


def _wait(
    proc: subprocess.Popen[bytes], started: float, timeout_s: float
) -> tuple[int, float, int, float]:
    """Exit code, wall seconds, peak RSS and CPU seconds. wait4's usage of a child counts
    every descendant it waited for (GNU time waits for the command, the command for its
    git processes and forked helpers): the CPU of the whole process tree."""
    timer = threading.Timer(timeout_s, _kill_group, (proc.pid,))
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, seconds, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def _reported_peak(path: Path) -> int:
    """The last line GNU time wrote (earlier lines say how the command exited)."""
    lines = path.read_text(encoding="utf-8", errors="replace").split()
    return int(lines[-1]) if lines and lines[-1].isdigit() else 0


def _read(handle: BinaryIO, limit: int) -> bytes:
    """At most `limit` bytes from the start of the file."""
    handle.seek(0)
    return handle.read(limit)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it finished just as the timer fired
        os.killpg(pid, signal.SIGKILL)


def run_chain(
    argvs: Sequence[Sequence[str]], env: Mapping[str, str], cwd: Path, ok: frozenset[int]
) -> Outcome:
    """Run commands one after another as one answer: times add up, memory is the largest."""
    outcomes: list[Outcome] = []
    for argv in argvs:
        outcome = run(argv, env, cwd)
        outcomes.append(outcome)
        if outcome.exit_code not in ok:
            break
    last = outcomes[-1]
    return Outcome(
        seconds=sum(o.seconds for o in outcomes),
        peak_kib=max(o.peak_kib for o in outcomes),
        exit_code=last.exit_code,
        stdout=last.stdout,
        stderr=last.stderr,
        cpu_s=sum(o.cpu_s for o in outcomes),
    )
