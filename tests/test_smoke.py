"""The whole loop once, in-process: task, checkpoint, handover, resume, history, check."""

from __future__ import annotations

from tests.conftest import Repo


def test_loop(repo: Repo) -> None:
    task = repo.task()
    assert repo.run("checkpoint", "reproduced").code == 0
    repo.commit("fix attempt")
    assert repo.run("handover", "--objective", "o", "--state", "s", "--next", "n").code == 0
    repo.commit("more")
    result = repo.run("resume")
    assert result.code == 0, result.err
    assert "advanced, 1 ahead, 0 behind" in result.out
    assert repo.run("resume").code == 1
    assert repo.run("check").code == 0
    assert task in repo.run("history").out
