"""`make soak` stands on the same support code as the suite: its imports must resolve."""

from __future__ import annotations

import importlib


def test_the_soak_campaign_imports_what_it_runs() -> None:
    run = importlib.import_module("soak.run")
    teams = importlib.import_module("soak.teams")
    assert callable(run.main) and callable(teams.run_round)
