"""A new agent session in another clone: behind a bare remote, shallow, and read afresh."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.env import Clock
from tests.support.git import bare
from tests.support.repo import Repo, clone


def seeded_with_handover(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> tuple[Repo, Path, str, str]:
    """A clone that recorded a task and its handover, two commits back, pushed to a bare remote."""
    remote = bare(tmp_path / "remote.git", environ)
    first = clone(str(remote), tmp_path / "first", environ, clock)
    first.commit("initial")
    task = first.task("queue drops acks")
    hid = json.loads(
        first.run("handover", "-o", "find the drop", "-s", "half", "-n", "read flush()",
                  "--json").out
    )["record"]["id"]  # fmt: skip
    first.commit("after the handover")
    first.commit("and one more")
    first.git("push", "-q", "origin", "main")
    assert first.run("push").code == 0
    return first, remote, task, hid


def session_start(repo: Repo) -> str:
    event = {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(repo.path)}
    result = repo.run("hook", "claude", stdin=json.dumps(event).encode())
    assert (result.code, result.err) == (0, "")
    if not result.out:
        return ""
    return str(json.loads(result.out)["hookSpecificOutput"]["additionalContext"])


def test_a_second_clone_starts_with_the_handover(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, remote, task, hid = seeded_with_handover(tmp_path, environ, clock)
    second = clone(str(remote), tmp_path / "second", environ, clock)
    assert session_start(second) == ""  # records not fetched yet: nothing to say
    assert second.run("fetch").code == 0
    text = session_start(second)
    assert text.startswith(f"majordomus context: task {task}\n")
    assert "\n> title: queue drops acks\n" in text
    assert "(no current task in this work tree: this is the task of the one open handover" in text
    assert f"Open handover {hid} on " in text and "(advanced, 2 ahead, 0 behind)" in text
    fresh = second.run("context", "--json").out
    assert second.run("context", "--json").out == fresh  # from the caches
    second.drop_caches()
    assert second.run("context", "--json").out == fresh  # read afresh
    assert not (second.path / ".git" / "majordomus-task").exists()  # the hook wrote nothing


def test_a_shallow_clone_never_guesses(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, remote, task, hid = seeded_with_handover(tmp_path, environ, clock)
    shallow = clone(f"file://{remote}", tmp_path / "shallow", environ, clock, "--depth", "1")
    shallow.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    # The handover's commit lies past the shallow boundary: whether it is reachable
    # from HEAD cannot be told, so its task is not taken...
    assert session_start(shallow) == ""
    assert shallow.run("resume", "--peek").code == 2
    # ...and named explicitly, its label is `unknown`, never a guess.
    text = session_start(Repo(shallow.path, {**environ, "MAJORDOMUS_TASK": task}, clock))
    assert f"Open handover {hid} on " in text and "(unknown)" in text


def test_the_commands_offered_for_an_implied_task_name_it(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, remote, task, _ = seeded_with_handover(tmp_path, environ, clock)
    second = clone(str(remote), tmp_path / "second", environ, clock)
    assert second.run("fetch").code == 0
    assert f'Record: majordomus checkpoint --task {task} "what is true now"' in session_start(
        second
    )
    clock.advance(3600)
    stop = {"hook_event_name": "Stop", "stop_hook_active": False, "cwd": str(second.path)}
    result = second.run("hook", "claude", "--enforce", stdin=json.dumps(stop).encode())
    reason = json.loads(result.out)["reason"]
    command = reason.split("run: ")[1].split(" (or")[0]
    assert command == f'majordomus checkpoint --task {task} "<what is true now>"'
    done = second.run("checkpoint", "--task", task, "what is true now")
    assert done.code == 0, done.err  # the command offered works as offered


def test_only_reading_commands_take_the_implied_task(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """One open handover reachable from HEAD implies its task to `context`, the hooks and
    `resume`; a write and `check` still need a task named or current."""
    _, remote, task, hid = seeded_with_handover(tmp_path, environ, clock)
    second = clone(str(remote), tmp_path / "second", environ, clock)
    assert second.run("fetch").code == 0
    before = second.notes_ref()
    refusal = (
        "majordomus: no current task: start one with majordomus task new TITLE, pick one "
        "with majordomus task use TASK, or pass --task TASK.\n"
    )
    for argv in (["checkpoint", "x"], ["handover", "-o", "o", "-s", "s", "-n", "n"], ["check"]):
        result = second.run(*argv)
        assert (result.code, result.out, result.err) == (2, "", refusal), argv
    assert second.notes_ref() == before
    assert json.loads(second.run("context", "--json").out)["task"] == task
    peek = second.run("resume", "--peek", "--json")
    assert peek.code == 0 and json.loads(peek.out)["handover"]["id"] == hid
