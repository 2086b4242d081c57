"""Entry point for `python -m majordomus` and the console script."""

from __future__ import annotations

import gc
import os
import sys


def main() -> int:
    # Everything inside the try, the handler's own import first: Ctrl-C or SIGTERM at
    # any instant from here on ends in one line and exit 130, never a traceback.
    # (Before this line runs, Python is still starting, and a Ctrl-C is its own.)
    hook = sys.argv[1:2] == ["hook"]
    try:
        from majordomus import interrupt

        interrupt.install()
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
        from majordomus.cli import run

        code = run(sys.argv[1:])
        # A hook's odd arguments (a flag it does not know) are still no verdict for the agent.
        return 0 if hook else code
    except Exception:
        # Code that an interruption cut short (an import half done, say) can fail in its
        # own way afterwards: that is still the interruption, not a crash to print.
        if not _signalled():
            raise
        return _interrupted(hook)
    except KeyboardInterrupt:  # ours, or Python's own before ours was in place
        return _interrupted(hook)
    finally:
        _settle()


def _interrupted(hook: bool) -> int:
    _settle()
    if hook:  # an agent reads any exit but 0 as a verdict: a hook never gives one
        return 0
    sys.stderr.write(f"majordomus: {_said()}\n")
    return 130


def _signalled() -> bool:
    module = sys.modules.get("majordomus.interrupt")
    signalled = getattr(module, "signalled", None)
    return bool(signalled()) if callable(signalled) else False


def _said() -> str:
    module = sys.modules.get("majordomus.interrupt")
    message = getattr(module, "message", None)
    return str(message()) if callable(message) else "interrupted; nothing was stored."


def _settle() -> None:
    module = sys.modules.get("majordomus.interrupt")
    settle = getattr(module, "settle", None)
    if callable(settle):
        settle()


if __name__ == "__main__":
    raise SystemExit(main())
