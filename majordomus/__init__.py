"""majordomus: checkpoints and handovers for debugging sessions, stored as git notes."""

from __future__ import annotations

__version__ = "0.1.0"
