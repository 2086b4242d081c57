"""Concurrent writers across linked work trees of one clone: records written = records read."""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.support.env import hermetic_environ
from tests.support.trials import concurrent_writers


def test_concurrent_writers_across_work_trees_lose_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("MAJORDOMUS_TEST_SEED") or random.randrange(1 << 32))
    home = tmp_path / "home"
    home.mkdir()
    outcome = concurrent_writers(tmp_path, hermetic_environ(home), seed, writers=6, work_trees=2)
    assert outcome.problems == [], f"seed {seed} (MAJORDOMUS_TEST_SEED={seed} reproduces)"
    assert outcome.read == outcome.written >= 1
    assert outcome.work_trees == 3
