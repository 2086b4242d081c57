"""Entry point for `python -m majordomus` and the console script."""

from __future__ import annotations

import gc
import os
import sys

from majordomus import interrupt


def main() -> int:
    # First of all, so that Ctrl-C or SIGTERM at any later instant, imports
    # included, ends in one line and exit 130, never a traceback.
    interrupt.install()
    try:
        interrupt.pause("start-up", os.environ)
        # A command lives for a fraction of a second and builds tens of thousands of
        # small objects while reading notes: the cyclic collector only slows it down.
        # (`watch`, which runs for long, turns it back on.)
        gc.disable()
        from majordomus.cli import run

        return run(sys.argv[1:])
    except (interrupt.Interrupted, KeyboardInterrupt):
        sys.stderr.write(f"majordomus: {interrupt.message()}\n")
        return 130
    finally:
        interrupt.settle()


if __name__ == "__main__":
    raise SystemExit(main())
