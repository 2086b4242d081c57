"""Entry point for `python -m majordomus` and the console script."""

from __future__ import annotations

import sys
from typing import NoReturn

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
        from majordomus.front import run

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
