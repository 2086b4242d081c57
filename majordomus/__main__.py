"""Entry point for `python -m majordomus` and the console script."""

from __future__ import annotations

import sys


def main() -> int:
    from majordomus.cli import run

    return run(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
