"""Entry point for `python -m majordomus` and the console script, and `run`: a command line
to its exit code, the one place errors become exit codes."""

from __future__ import annotations

import sys
from typing import IO, NoReturn

# The first thing done: from here on Ctrl-C or SIGTERM waits for `main` to answer it (one
# line, exit 130), even when it comes before `main` runs (the console script still has
# work of its own). Before this, Python is still starting, and a Ctrl-C is its own.
try:
    import gc
    import os

    from majordomus import interrupt

    interrupt.install(held=True)
except KeyboardInterrupt:  # Python's own, while the handler was being put in place
    if sys.argv[1:2] != ["hook"]:  # an agent reads any exit but 0 as a verdict
        sys.stderr.write("majordomus: interrupted; nothing was stored.\n")
    raise SystemExit(0 if sys.argv[1:2] == ["hook"] else 130) from None

import contextlib
import datetime
import time
from collections.abc import Callable, Mapping, Sequence


def main() -> int:
    hook = sys.argv[1:2] == ["hook"]
    try:
        interrupt.release()  # inside the try: a signal that came during start-up is raised here
        interrupt.pause("start-up", os.environ)
        # A command lives for a fraction of a second and builds tens of thousands of
        # small objects while reading notes: the cyclic collector only slows it down.
        # (`watch`, which runs for long, turns it back on.)
        gc.disable()
        if hook:
            # Agents run this at every prompt: answered without loading the full command line.
            from majordomus.hooks import main as answer_hook

            code = answer_hook(sys.argv[1:])
            if code is not None:
                return code
        code = run(sys.argv[1:])
        # A hook's odd arguments (a flag it does not know) are still no verdict for the agent.
        return 0 if hook else code
    except Exception:
        # Code that an interruption cut short (an import half done, say) can fail in its
        # own way afterwards: that is still the interruption, not a crash to print.
        if not interrupt.signalled():
            raise
        return _interrupted(hook)
    except KeyboardInterrupt:  # ours, or Python's own before ours was in place
        return _interrupted(hook)
    finally:
        interrupt.settle()


def run(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    now: Callable[[], datetime.datetime] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    is_tty: bool | None = None,
) -> int:
    """The command line `argv` (the program name left out) run to its exit code: read
    plainly (`front`) when it is written so, else by typer (`cli`)."""
    from majordomus import front
    from majordomus.errors import MajordomusError
    from majordomus.invocation import Invocation, Terminal

    env = dict(os.environ if environ is None else environ)
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    tty = _is_tty(out) if is_tty is None else is_tty
    terminal = Terminal(
        stdin=stdin if stdin is not None else sys.stdin.buffer,
        stdout=out,
        stderr=err,
        is_tty=tty,
        colour=tty and "NO_COLOR" not in env and env.get("TERM") != "dumb",
    )
    invocation = Invocation(
        terminal=terminal,
        environ=env,
        now=now or (lambda: datetime.datetime.now(datetime.UTC)),
        sleep=sleep,
        command_line=run,
    )
    found = front.plain(argv)
    if found is None:
        from majordomus import cli  # typer, and every command

        command = cli.command_for(argv)
    interrupt.reset()
    try:
        if found is None:
            return cli.dispatch(command, argv, invocation)
        return front.dispatch(found, invocation)
    except MajordomusError as error:
        from majordomus import plaintext

        # Messages can quote notes (task ids, say): escaped like every other output.
        err.write(f"majordomus: {plaintext.safe(error.message)}\n")
        return int(error.code)
    except KeyboardInterrupt:  # interrupt.Interrupted included
        interrupt.heard()
        err.write(f"majordomus: {interrupt.message()}\n")
        return 130
    except BrokenPipeError:
        return 0
    finally:
        with contextlib.suppress(Exception):
            out.flush()


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _interrupted(hook: bool) -> int:
    interrupt.settle()
    if hook:  # an agent reads any exit but 0 as a verdict: a hook never gives one
        return 0
    sys.stderr.write(f"majordomus: {interrupt.message()}\n")
    return 130


def script() -> int:
    """The console script and `python -m majordomus`: `main`, and the process ends there;
    unless a profiler or a tracer watches it (cProfile, coverage): they write what they
    gathered as the interpreter exits, so it does."""
    code = main()
    if sys.getprofile() is None and sys.gettrace() is None:
        _leave(code)
    return code


def _leave(code: int) -> NoReturn:
    """End the process with `code` once what it wrote is flushed, without the interpreter's
    teardown: a last collection over every object the command built, then freeing them
    one by one, took 20-70 ms (the most after a first read of every note) and keeps
    nothing. Nothing is left to it: files are closed where they are written, child
    processes are waited for or left to end as they would be anyway, and no other
    thread is still at work once `main` has answered."""
    import atexit
    import contextlib

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A reader that is gone (a closed pipe), a stream closed already: nothing to flush.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code & 0xFF)


if __name__ == "__main__":
    raise SystemExit(script())
