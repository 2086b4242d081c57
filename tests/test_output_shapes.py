"""JSON shapes that do not depend on how many answers there are."""

from __future__ import annotations

import json

from tests.support.repo import Repo


def test_check_all_json_is_a_list_of_checks_even_for_one_task(repo: Repo) -> None:
    # docs/behaviour.md: `check --all --json` gives {"checks": [...]}; a script must not have to
    # guess from the number of tasks which of two shapes it was given.
    task = repo.task()
    one = repo.run("check", "--all", "--json")
    assert one.code == 0, one.err
    single = json.loads(repo.run("check", "--json").out)
    assert json.loads(one.out) == {"checks": [single]}
    assert single["task"] == task
