"""One git process that talks to a remote: given up on when the remote sends nothing for
`majordomus.remoteTimeout` seconds or a time budget runs out, and never left running."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from majordomus.errors import RefusedError, RemoteError, RepositoryError

REMOTE_TIMEOUT_S = 30  # a remote that sends nothing this long is given up on
REMOTE_TIMEOUT_KEY = "majordomus.remoteTimeout"


def remote_timeout(raw: str | None) -> int | None:
    """The seconds a remote may send nothing, from `majordomus.remoteTimeout`; None: no limit."""
    if raw is None:
        return REMOTE_TIMEOUT_S
    text = raw.strip()
    if text == "0":
        return None
    from majordomus.profile import parse_duration

    try:
        return parse_duration(text, REMOTE_TIMEOUT_KEY)
    except RefusedError:
        raise RefusedError(
            f"git config {REMOTE_TIMEOUT_KEY} is {raw!r}: give seconds (30), a duration (2m) "
            "or 0 to wait for ever."
        ) from None


class Budget:
    """The seconds the gits of one command may take in all, counted from now."""

    def __init__(self, seconds: float, monotonic: Callable[[], float]) -> None:
        self.seconds = seconds
        self._monotonic = monotonic
        self._deadline = monotonic() + seconds

    def left(self) -> float:
        """The seconds left; refused once there are none."""
        left = self._deadline - self._monotonic()
        if left <= 0:
            raise RemoteError(
                f"gave up after {self.seconds:g} s of retries "
                "(MAJORDOMUS_HOOK_TIMEOUT sets the budget)"
            )
        return left


def run_git(
    gitdir: Path,
    args: Sequence[str],
    *,
    where: str,
    cwd: Path,
    env: Mapping[str, str],
    input: str | None,
    detached: bool,
    budget: Budget | None,
    silence_s: int | None,
    monotonic: Callable[[], float],
    meanwhile: Callable[[], object] | None,
) -> subprocess.CompletedProcess[str]:
    """git run against the remote shown as `where`, stopped past the `budget` or after
    `silence_s` seconds without a sign of life; `detached`: in a process group of its own."""
    timeout = None if budget is None else budget.left()
    # The watch below covers every transport and says what happened. HTTP also has
    # git's own low-speed limit, set later than the watch: a backstop only, since git's
    # words for a cut answer ("bad line length character") name no silence.
    silence = [] if silence_s is None else [
        "-c", "http.lowSpeedLimit=1", "-c", f"http.lowSpeedTime={2 * silence_s}"
    ]  # fmt: skip
    if silence_s is not None and not _watches_reads() and args[0] in ("fetch", "push"):
        args = (args[0], "--progress", *args[1:])  # git then talks while the remote sends
    command = ["git", f"--git-dir={gitdir}", *silence, *args]
    process = _start(command, cwd, env, input, detached)
    watch = _Watch(process, input, monotonic)
    try:
        if meanwhile is not None:
            meanwhile()
        quiet = watch.wait(timeout, silence_s)
    except BaseException:
        # Interrupted: no git of ours outlives the command (see _end).
        _end(process, group=detached)
        raise
    if quiet is not None:
        _kill(process, group=detached)
        process.wait()
        if quiet == "late" and budget is not None:
            raise RemoteError(
                f"git {args[0]} did not finish within {budget.seconds:g} s "
                "(MAJORDOMUS_HOOK_TIMEOUT sets the budget)"
            )
        raise RemoteError(
            f"{where} sent nothing for {silence_s} s, so git {args[0]} was stopped "
            f"and nothing here changed (git config {REMOTE_TIMEOUT_KEY} SECONDS waits longer; "
            "0 waits for ever)."
        )
    out, err = watch.output()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _start(
    command: list[str], cwd: Path, env: Mapping[str, str], input: str | None, detached: bool
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=detached,
        )
    except FileNotFoundError:
        raise RepositoryError("git is not installed or not on PATH; install git.") from None


# Where the kernel counts what a process reads and writes (Linux), a remote that is sending
# shows as git reading (from its socket, or from the ssh or HTTP helper's pipe); elsewhere
# git is asked for --progress, which costs a fetch some 30 ms, to show it talking.
@functools.cache
def _watches_reads() -> bool:
    return os.path.exists("/proc/self/io")  # asked once, when a remote is first talked to


class _Watch:
    """git's output, read as it comes, and when git last did anything: wrote output, or
    (where the kernel tells) read or wrote anything at all."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        input: str | None,
        monotonic: Callable[[], float],
    ) -> None:
        import threading

        self._process = process
        self._monotonic = monotonic
        self._last = monotonic()
        self._io: list[bytes] = []
        self._chunks: dict[int, list[bytes]] = {1: [], 2: []}
        self._threads = [
            threading.Thread(target=self._read, args=(stream, fd), daemon=True)
            for fd, stream in ((1, process.stdout), (2, process.stderr))
        ]
        if input is not None:
            self._threads.append(
                threading.Thread(target=self._feed, args=(input.encode(),), daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def _read(self, stream: IO[bytes] | None, fd: int) -> None:
        assert stream is not None
        while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]
            self._chunks[fd].append(chunk)
            self._last = self._monotonic()

    def _note_io(self, now: float) -> None:
        """git read or wrote since the last look: it is not waiting on a silent remote."""
        if not _watches_reads():
            return
        try:
            with open(f"/proc/{self._process.pid}/io", "rb") as stats:
                counts = stats.read(64).split(b"\n", 2)[:2]  # rchar, wchar
        except OSError:
            return  # ended, or not ours to look at: its output still counts
        if counts != self._io:
            self._io, self._last = counts, now

    def _feed(self, data: bytes) -> None:
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):
            self._process.stdin.write(data)
            self._process.stdin.close()

    def wait(self, budget_s: float | None, silence_s: int | None) -> str | None:
        """None once git has ended; "late" past the budget; "silent" past the silence.
        Waits on the readers, which end when git closes its output: at once, where
        Popen.wait(timeout) would poll (up to 50 ms late)."""
        start = self._monotonic()
        # A look at git's counters dates activity to the look: looking four times per
        # silence gives up within 1.25 silences (a look a second sufficed for 30 s, not
        # for the 1 s a test sets).
        every = 1.0 if silence_s is None else min(1.0, silence_s / 4)
        for thread in self._threads[:2]:
            while thread.is_alive():
                now = self._monotonic()
                self._note_io(now)
                limits = [] if budget_s is None else [start + budget_s - now]
                if silence_s is not None:
                    limits.append(self._last + silence_s - now)
                if limits and min(limits) <= 0:
                    return "late" if budget_s is not None and now - start >= budget_s else "silent"
                thread.join(min([every, *limits]) if limits else None)
        self._process.wait()
        return None

    def output(self) -> tuple[str, str]:
        for thread in self._threads:
            thread.join()
        out, err = (b"".join(self._chunks[fd]) for fd in (1, 2))
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _end(process: subprocess.Popen[bytes], *, group: bool) -> None:
    """End an interrupted git. A detached group (the hook's: git, its ssh, anything they
    started) is killed whole. A git in our own group, which Ctrl-C from the terminal
    reaches anyway, gets SIGTERM when only we were signalled; SIGKILL if it lingers."""
    if group:
        _kill(process, group=True)
    else:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill(process, group=False)
    process.wait()


def _kill(process: subprocess.Popen[bytes], *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group and hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
