"""Forked helper processes that share out a long run of object ids: each starts from this
process as it is, works through its part and writes what it found to a pipe, which this
process reads helper by helper; an interrupted share leaves no helper behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import BinaryIO, NoReturn

from majordomus.objectids import run

SHARED_READ_MAX = 8  # processes


def in_helpers(
    ids: str,
    least: int,
    work: Callable[[list[str], int], None],
    take: Callable[[BinaryIO], None],
) -> None:
    """`ids` (object ids end to end) shared out in runs, one to each forked helper and at
    least `least` to each, on every CPU up to SHARED_READ_MAX: a helper calls `work` with
    its run and the file descriptor of its pipe, and exits; `take` is given each
    helper's pipe in turn, to read to its end. Nothing when only one CPU is there, when
    this process runs threads (forking one is unsafe), or where fork is not; a helper
    that cannot be had is left out: the caller does what no helper did."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    count = min(cpus, SHARED_READ_MAX, len(ids) // 40 // least)
    if count < 2 or not hasattr(os, "fork") or threading.active_count() > 1:
        return
    children: list[tuple[int, BinaryIO]] = []  # not yet waited for
    try:
        for k in range(count):
            try:
                reader, writer = os.pipe()
            except OSError:  # no file descriptors left: the caller parses the rest
                break
            try:
                pid = os.fork()
            except OSError:  # no process to be had (a limit): likewise
                os.close(reader)
                os.close(writer)
                break
            if pid == 0:  # pragma: no cover (the child's coverage is not collected)
                os.close(reader)
                _helper(work, run(ids, count, k), writer)
            os.close(writer)
            children.append((pid, os.fdopen(reader, "rb")))
        while children:
            pid, pipe = children[0]
            with pipe:
                take(pipe)
            os.waitpid(pid, 0)
            children.pop(0)
    finally:
        for pid, pipe in children:  # interrupted: the helpers are of no use any more
            pipe.close()
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _helper(work: Callable[[list[str], int], None], share: list[str], writer: int) -> NoReturn:
    """In a forked child: `work` done on its share, then the process ends (Ctrl-C and
    SIGTERM end it as they end any process: the parent's handlers are not its own)."""
    code = 1
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        work(share, writer)
        code = 0
    finally:
        os._exit(code)
