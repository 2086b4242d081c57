"""The whole loop once, in-process: task, checkpoint, handover, resume, history, check."""

from __future__ import annotations

import json

from tests.support.env import AUTHOR
from tests.support.repo import Repo


def test_loop(repo: Repo) -> None:
    task = repo.task()
    assert repo.run("checkpoint", "reproduced").code == 0
    at = repo.commit("fix attempt")
    handover = repo.run("handover", "--objective", "o", "--state", "s", "--next", "n", "--json")
    assert handover.code == 0, handover.err
    hid = json.loads(handover.out)["record"]["id"]
    head = repo.commit("more")
    result = repo.run("resume")
    assert result.code == 0, result.err
    rid = json.loads(repo.run("show", "--json").out)["records"][0]["id"]
    assert result.out == (
        f"handover {hid}  task {task}  on {at[:12]}\n"
        f"    by {AUTHOR}, 0s ago\n"
        "code since: advanced, 1 ahead, 0 behind\n"
        "objective: o\n"
        "state: s\n"
        "next: n\n"
        f"recorded resume {rid} on {head[:12]}\n"
    )
    assert repo.run("resume").code == 1
    assert repo.run("check").code == 0
    history = json.loads(repo.run("history", "--json").out)["records"]
    assert [(r["kind"], r["task"]) for r in history] == [
        ("resume", task),
        ("handover", task),
        ("checkpoint", task),
        ("task", task),
    ]
