"""Records dated in the future (a writer whose clock runs ahead): flagged wherever an age
is shown, never "0s ago", and never what keeps a task fresh."""

from __future__ import annotations

import datetime
import json
from typing import Any

from tests.support.env import AUTHOR, START
from tests.support.repo import Repo

HOUR = 3600


def as_json(repo: Repo, *argv: str, code: int = 0) -> Any:
    result = repo.run(*argv, "--json")
    assert result.code == code, result.err
    return json.loads(result.out)


def at(seconds: float) -> datetime.datetime:
    return START + datetime.timedelta(seconds=seconds)


def skewed_checkpoint(repo: Repo, body: str, ahead_s: float, now_s: float) -> str:
    """A checkpoint written by a clock `ahead_s` fast; the reader's clock then reads `now_s`."""
    repo.clock.now = at(now_s + ahead_s)
    record_id: str = as_json(repo, "checkpoint", body)["record"]["id"]
    repo.clock.now = at(now_s)
    return record_id


def test_check_never_counts_a_future_checkpoint_as_fresh(repo: Repo) -> None:
    task = repo.task()
    honest = as_json(repo, "checkpoint", "honest")["record"]["id"]
    future = skewed_checkpoint(repo, "from a fast clock", 2 * HOUR, 60)
    assert repo.run("check").out == (
        f"{task}: last checkpoint 1m 00s ago, interval 20m, fresh, no open handover; "
        f"checkpoint {future} is in the future by 2h 00m (clock skew?), not counted\n"
    )
    repo.clock.now = at(30 * 60)  # the fast writer stopped: stale, not fooled for two hours
    result = repo.run("check", "--json")
    assert result.code == 1
    doc = json.loads(result.out)
    assert (doc["last_checkpoint"]["id"], doc["age_s"], doc["stale"]) == (honest, 1800, True)
    assert (doc["skew_s"], doc["skewed_checkpoint"]["id"]) == (2 * HOUR - 1800 + 60, future)
    # Within a minute ahead is ordinary jitter, not skew.
    near = skewed_checkpoint(repo, "a second ahead", 59, 31 * 60)
    doc = as_json(repo, "check")
    assert (doc["last_checkpoint"]["id"], doc["age_s"], doc["stale"]) == (near, 0, False)
    assert doc["skewed_checkpoint"]["id"] == future


def test_only_future_checkpoints_fall_back_to_the_task_start(repo: Repo) -> None:
    task = repo.task()
    future = skewed_checkpoint(repo, "from a fast clock", 2 * HOUR, 25 * 60)
    result = repo.run("check")
    assert (result.code, result.out) == (
        1,
        f"{task}: no checkpoint; task started 25m 00s ago, interval 20m, STALE, no open "
        f"handover; checkpoint {future} is in the future by 2h 00m (clock skew?), not counted\n",
    )
    assert repo.run("task", "list").out == (
        f"* {task}  queue drops acks under load  last activity in the future by 2h 00m "
        "(clock skew?)  checkpoint in the future by 2h 00m (clock skew?)\n"
    )


def test_a_task_dated_in_the_future_throughout_is_stale(repo: Repo) -> None:
    repo.clock.now = at(HOUR)
    task = repo.task()
    repo.clock.now = at(0)
    result = repo.run("check")
    assert (result.code, result.out) == (
        1,
        f"{task}: no checkpoint; every record is dated in the future, interval 20m, STALE, "
        "no open handover\n",
    )
    checked = as_json(repo, "check", code=1)
    assert (checked["age_s"], checked["stale"], checked["skew_s"]) == (None, True, HOUR)


def test_task_list_flags_future_ages(repo: Repo) -> None:
    task = repo.task()
    as_json(repo, "checkpoint", "honest")
    skewed_checkpoint(repo, "from a fast clock", 2 * HOUR, 600)
    assert repo.run("task", "list").out == (
        f"* {task}  queue drops acks under load  last activity in the future by 2h 00m "
        "(clock skew?)  checkpoint 10m 00s ago; a newer one is in the future by 2h 00m "
        "(clock skew?)\n"
    )
    (listed,) = as_json(repo, "task", "list")["tasks"]
    assert (listed["checkpoint_age_s"], listed["skew_s"]) == (600, 2 * HOUR)


def test_the_next_checkpoint_says_the_previous_one_is_dated_after_it(repo: Repo) -> None:
    repo.task()
    skewed_checkpoint(repo, "from a fast clock", 2 * HOUR, 0)
    repo.clock.now = at(60)
    result = repo.run("checkpoint", "honest")
    assert result.out.endswith(
        "\nprevious checkpoint of this task: dated 1h 59m after this one (clock skew?)\n"
    )
    repo.clock.now = at(120)
    doc = as_json(repo, "checkpoint", "honest again")
    # The previous checkpoint by date is still the one from the fast clock.
    assert (doc["previous_age_s"], doc["skew_s"]) == (0, 2 * HOUR - 120)


def test_resume_flags_a_handover_from_the_future(repo: Repo) -> None:
    task = repo.task()
    repo.clock.now = at(3 * HOUR)
    handover = as_json(repo, "handover", "-o", "o", "-s", "s", "-n", "n")["record"]
    repo.clock.now = at(0)
    result = repo.run("resume", "--peek")
    assert result.out.splitlines()[:2] == [
        f"handover {handover['id']}  task {task}  on {repo.head()[:12]}",
        f"    by {AUTHOR}, in the future by 3h 00m (clock skew?)",
    ]
