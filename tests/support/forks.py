"""Python scripts run as real processes of their own, each forked from one Python that has
imported majordomus' command line and done nothing else.

A `python -c SCRIPT` costs about 70 ms of processor time before the script's first
command: Python's start-up and the imports of majordomus.cli (typer, click, ...). A fork
of a Python that has made both costs a few milliseconds. The child starts where a fresh
`python -c SCRIPT` would be once it has imported majordomus.cli: nothing else of
majordomus loaded (libgit2 included), no command run, no thread, its own memory; it takes
the job's environment, working directory, arguments and standard streams, runs the
script as `python -c` runs it (SystemExit, an uncaught exception's traceback and exit 1,
atexit), and exits. The jobs of one batch run at once (concurrent writers), and the
answer comes when all have exited.

One server per test process (`shared()`), set up by tests/conftest.py for the session and
started on first use. Where a test needs Python's own start-up (what it imports, how long
it takes, a signal during it) or a process group of its own, it starts `python` itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tests.support.cli import start

JOB_TIMEOUT_S = 120.0  # a bound for a batch that hangs; never a window to hit

SERVER = r"""
import atexit, json, os, sys, traceback
import majordomus.cli  # what every script run here imports first

def child(job):
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for fd, path, flags in ((0, job["stdin"], os.O_RDONLY), (1, job["stdout"], write),
                            (2, job["stderr"], write)):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["-c", *job["argv"]]
    code = 0
    try:
        exec(compile(job["source"], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)

for line in sys.stdin:
    pids = []
    for job in json.loads(line):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            child(job)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    sys.stdout.write(json.dumps(codes) + "\n")
    sys.stdout.flush()
"""

# `python -m majordomus ARGV`, as a script run here: the module run as the main one.
MAJORDOMUS_MAIN = (
    "import runpy; runpy.run_module('majordomus', run_name='__main__', alter_sys=True)"
)


@dataclasses.dataclass(frozen=True)
class Job:
    """A script, its arguments (sys.argv[1:]), environment, working directory and stdin."""

    source: str
    argv: Sequence[str]
    environ: Mapping[str, str]
    cwd: Path | None = None
    stdin: bytes = b""


@dataclasses.dataclass(frozen=True)
class Done:
    """What a job did, as `subprocess.run(..., capture_output=True, text=True)` tells it."""

    returncode: int
    stdout: str
    stderr: str


class Forks:
    """The forking Python, started on first use; `run` and `run_all` give it jobs."""

    def __init__(self, root: Path, environ: Mapping[str, str]) -> None:
        self.root = root
        self.environ = dict(environ)
        self.process: subprocess.Popen[bytes] | None = None
        self.jobs = 0

    def _server(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            self.root.mkdir(parents=True, exist_ok=True)
            self.process = start(
                [sys.executable, "-c", SERVER],
                None,
                self.environ,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        return self.process

    def run(self, job: Job) -> Done:
        (done,) = self.run_all([job])
        return done

    def run_all(self, jobs: Sequence[Job]) -> list[Done]:
        """Every job in a process of its own, all at once; their answers once all have exited."""
        server = self._server()
        assert server.stdin is not None and server.stdout is not None
        sent, files = [], []
        for job in jobs:
            self.jobs += 1
            stem = self.root / f"job{self.jobs}"
            stdin, stdout, stderr = (stem.with_suffix(s) for s in (".in", ".out", ".err"))
            stdin.write_bytes(job.stdin)
            files.append((stdout, stderr))
            sent.append(
                {
                    "source": job.source,
                    "argv": list(job.argv),
                    "env": dict(job.environ),
                    "cwd": str(job.cwd if job.cwd is not None else Path.cwd()),
                    "stdin": str(stdin),
                    "stdout": str(stdout),
                    "stderr": str(stderr),
                }
            )
        server.stdin.write((json.dumps(sent) + "\n").encode())
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], JOB_TIMEOUT_S)
        if not ready:
            self.close()
            raise AssertionError(f"jobs still running after {JOB_TIMEOUT_S} s: {sent}")
        reply = server.stdout.readline()
        if not reply:
            self.close()
            raise AssertionError("the forking Python ended before its jobs did")
        codes = json.loads(reply)
        assert isinstance(codes, list) and len(codes) == len(jobs), codes
        answers = []
        for code, (stdout, stderr) in zip(codes, files, strict=True):
            answers.append(
                Done(
                    code,
                    stdout.read_bytes().decode("utf-8", "replace"),
                    stderr.read_bytes().decode("utf-8", "replace"),
                )
            )
            for path in (stdout, stderr, stdout.with_suffix(".in")):
                path.unlink()
        return answers

    def close(self) -> None:
        """The server ends (its stdin closed), or is killed with any child it left."""
        if self.process is None:
            return
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # still waiting on a batch: it and its children
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process.stdout.close()
        self.process = None


_shared: list[Forks] = []


def shared() -> Forks:
    """This test process's server (tests/conftest.py sets it up for the session)."""
    assert _shared, "no server: tests/conftest.py sets one up for the session"
    return _shared[-1]


def run(job: Job) -> Done:
    """`job` in a process of its own, forked by this test process's server."""
    return shared().run(job)


def run_all(jobs: Sequence[Job]) -> list[Done]:
    """Every job in a process of its own, all at once, forked by this test process's server."""
    return shared().run_all(jobs)


@contextlib.contextmanager
def serving(root: Path, environ: Mapping[str, str]) -> Iterator[Forks]:
    """A server for the tests run meanwhile (`shared()`); closed at the end."""
    server = Forks(root, environ)
    _shared.append(server)
    try:
        yield server
    finally:
        _shared.remove(server)
        server.close()
