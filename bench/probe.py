"""Run one command (or a chain of them) and measure wall time and peak memory.

Peak memory comes from wait4(): the child's maximum resident set size, which
includes any processes it waited for (the git a CLI might spawn).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One measured run: wall seconds, peak RSS in KiB, exit code, and what it printed."""

    seconds: float
    peak_kib: int
    exit_code: int
    stdout: bytes
    stderr: str


def run(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Outcome:
    """Run argv to completion; stdout and stderr go to files so no pipe can stall it."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
        except OSError as error:
            return Outcome(0.0, 0, 127, b"", f"cannot run {argv[0]}: {error.strerror}")
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Outcome(
            seconds=seconds,
            peak_kib=usage.ru_maxrss,
            exit_code=proc.returncode,
            stdout=out.read(),
            stderr=err.read().decode("utf-8", "replace"),
        )


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
    )
