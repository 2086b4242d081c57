"""Entry point for `python -m majordomus` and the console script."""

from __future__ import annotations

import gc
import sys


def main() -> int:
    # A command lives for a fraction of a second and builds tens of thousands of
    # small objects while reading notes: the cyclic collector only slows it down.
    # (`watch`, which runs for long, turns it back on.)
    gc.disable()
    if sys.argv[1:2] == ["hook"]:
        # Agents run this at every prompt: answered without loading the full command line.
        from majordomus.hooks import main as hook

        code = hook(sys.argv[1:])
        if code is not None:
            return code
    from majordomus.cli import run

    return run(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
