"""`hook AGENT`: recorded hook inputs for every event; always exit 0, stdout empty or exactly
the agent's documented JSON, never a traceback, never a record written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import MAJORDOMUS
from tests.support.repo import Repo

SESSION = {"session_id": "abc123", "transcript_path": "/tmp/t.jsonl"}
# What each agent's schema allows a hook to print, per kind of answer.
CONTEXT_KEYS = {"hookSpecificOutput": {"hookEventName", "additionalContext"}}
START = {"claude": "SessionStart", "codex": "SessionStart", "gemini": "SessionStart"}
PROMPT = {"claude": "UserPromptSubmit", "codex": "UserPromptSubmit", "gemini": "BeforeAgent"}
STOP = {"claude": "Stop", "codex": "Stop", "gemini": "AfterAgent"}
SILENT = {"claude": "", "codex": "", "gemini": "{}\n"}
STOP_SILENT = {"claude": "", "codex": "{}\n", "gemini": "{}\n"}
BLOCK = {"claude": "block", "codex": "block", "gemini": "deny"}
AGENTS = ("claude", "codex", "gemini")


def payload(repo: Repo, event: str, **extra: Any) -> bytes:
    return json.dumps(
        {**SESSION, "cwd": str(repo.path), "hook_event_name": event, **extra}
    ).encode()


def hook(repo: Repo, agent: str, data: bytes, *extra: str) -> str:
    """Run the hook in-process; check the contract every call must keep; return stdout."""
    before = repo.notes_ref()
    result = repo.run("hook", agent, *extra, stdin=data)
    assert result.code == 0
    assert result.err == ""
    assert repo.notes_ref() == before  # never writes a record
    if result.out:
        assert result.out.endswith("\n") and result.out.count("\n") == 1
        json.loads(result.out)
    return result.out


def context_of(out: str, event: str) -> str:
    answer = json.loads(out)
    assert set(answer) == set(CONTEXT_KEYS)
    assert set(answer["hookSpecificOutput"]) == CONTEXT_KEYS["hookSpecificOutput"]
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    text = answer["hookSpecificOutput"]["additionalContext"]
    assert isinstance(text, str)
    return text


@pytest.fixture
def task_repo(repo: Repo) -> Repo:
    repo.task("queue drops acks")
    repo.run("checkpoint", "reproduced under load")
    repo.run("handover", "-o", "find the drop", "-s", "ack first helps", "-n", "read flush()")
    return repo


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact"])
def test_session_start_gives_the_context_block(task_repo: Repo, agent: str, source: str) -> None:
    out = hook(task_repo, agent, payload(task_repo, START[agent], source=source))
    text = context_of(out, START[agent])
    assert text == task_repo.run("context", "--max-chars", "4000").out.rstrip("\n")
    assert "> next: read flush()" in text


@pytest.mark.parametrize("agent", AGENTS)
def test_prompt_submit_reminds_only_when_stale(task_repo: Repo, agent: str) -> None:
    assert (
        hook(task_repo, agent, payload(task_repo, PROMPT[agent], prompt="go on")) == SILENT[agent]
    )
    task_repo.clock.advance(1201)
    text = context_of(hook(task_repo, agent, payload(task_repo, PROMPT[agent])), PROMPT[agent])
    assert text.startswith("majordomus: task t-") and "\n" not in text
    assert "no checkpoint for 20m 01s (interval 20m)" in text


@pytest.mark.parametrize("agent", AGENTS)
def test_stop_blocks_once_per_stale_episode_and_only_when_enforced(
    task_repo: Repo, agent: str
) -> None:
    stop = STOP[agent]
    assert (
        hook(task_repo, agent, payload(task_repo, stop, stop_hook_active=False), "--enforce")
        == (STOP_SILENT[agent])
    )  # fresh
    task_repo.clock.advance(1201)
    assert hook(task_repo, agent, payload(task_repo, stop)) == STOP_SILENT[agent]  # not enforced
    active = payload(task_repo, stop, stop_hook_active=True)
    assert hook(task_repo, agent, active, "--enforce") == STOP_SILENT[agent]
    blocked = json.loads(hook(task_repo, agent, payload(task_repo, stop), "--enforce"))
    assert set(blocked) == {"decision", "reason"} and blocked["decision"] == BLOCK[agent]
    assert 'majordomus checkpoint "<what is true now>"' in blocked["reason"]
    again = hook(task_repo, agent, payload(task_repo, stop, stop_hook_active=False), "--enforce")
    assert again == STOP_SILENT[agent]  # once per episode
    task_repo.run("checkpoint", "the flush lock order is the second race")
    assert hook(task_repo, agent, payload(task_repo, stop), "--enforce") == STOP_SILENT[agent]
    task_repo.clock.advance(1201)  # a new stale episode
    assert json.loads(hook(task_repo, agent, payload(task_repo, stop), "--enforce"))["decision"]


@pytest.mark.parametrize(
    ("agent", "event", "extra"),
    [
        ("claude", "PreCompact", {"trigger": "auto", "custom_instructions": ""}),
        ("claude", "PreCompact", {"trigger": "manual"}),
        ("claude", "SessionEnd", {"reason": "logout"}),
        ("claude", "Notification", {"message": "waiting"}),
        ("codex", "PreCompact", {"trigger": "auto"}),
        ("gemini", "PreCompress", {"trigger": "auto"}),
        ("gemini", "SessionEnd", {"reason": "exit"}),
    ],
)
def test_other_events_never_block(
    task_repo: Repo, agent: str, event: str, extra: dict[str, Any]
) -> None:
    task_repo.clock.advance(99999)
    assert hook(task_repo, agent, payload(task_repo, event, **extra), "--enforce") == SILENT[agent]


BAD_INPUTS = {
    "empty": b"",
    "malformed": b'{"hook_event_name": "SessionStart", ',
    "not an object": b'["SessionStart"]',
    "no event": b'{"session_id": "x"}',
    "event not a string": b'{"hook_event_name": 7}',
    "not utf-8": b'{"hook_event_name": "\xff"}',
    "deep": b"[" * 100000,
}


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_silent(task_repo: Repo, agent: str, name: str) -> None:
    assert hook(task_repo, agent, BAD_INPUTS[name]) == SILENT[agent]


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize(
    "text", ["profile = [\n", '[profiles.default]\ninterval = "99999999999999999999"\n']
)
def test_a_bad_profile_is_silent_in_the_agents_own_format(
    task_repo: Repo, agent: str, text: str
) -> None:
    (task_repo.path / ".majordomus.toml").write_text(text)
    data = json.dumps({"hook_event_name": START[agent]}).encode()
    assert hook(task_repo, agent, data) == SILENT[agent]


def test_arguments_the_hook_does_not_know_are_no_verdict(task_repo: Repo) -> None:
    # An agent reads exit 2 as "block": a flag the hook does not know still exits 0.
    result = subprocess.run(
        [*MAJORDOMUS, "hook", "claude", "--no-such-flag"],
        cwd=task_repo.path,
        env=task_repo.environ,
        input=b"{}",
        capture_output=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, b"")


def test_a_10_mb_input_is_silent(task_repo: Repo) -> None:
    big = json.dumps({"hook_event_name": "SessionStart", "pad": "x" * 10_000_000}).encode()
    assert hook(task_repo, "claude", big) == ""


@pytest.mark.parametrize("agent", AGENTS)
def test_no_repository_no_commit_no_task(repo: Repo, tmp_path: Path, agent: str) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    empty = Repo.init(tmp_path / "empty", repo.environ, repo.clock, commit=False)
    for where in (plain, empty.path, repo.path):  # no repository, no commit, no task
        for event in (START[agent], PROMPT[agent]):
            data = json.dumps({"hook_event_name": event, "cwd": str(where)}).encode()
            result = repo.run("-C", str(where), "hook", agent, stdin=data)
            assert (result.code, result.out, result.err) == (0, SILENT[agent], "")


def test_several_candidate_tasks_are_named_to_the_agent(repo: Repo) -> None:
    for title in ("one", "two"):
        repo.task(title)
        repo.run("handover", "-o", "o", "-s", "s", "-n", "n")
    (repo.path / ".git" / "majordomus-task").unlink()
    text = context_of(hook(repo, "claude", payload(repo, "SessionStart")), "SessionStart")
    assert text.startswith("majordomus: no current task, and 2 tasks have an open handover")


def test_the_event_argument_beats_the_input(task_repo: Repo) -> None:
    out = hook(task_repo, "claude", b'{"hook_event_name": "Notification"}', "SessionStart")
    assert "> next: read flush()" in context_of(out, "SessionStart")


def test_the_budget_fits_codex(task_repo: Repo) -> None:
    for n in range(12):  # about 5,400 characters of checkpoints
        task_repo.run("checkpoint", f"{n} " + "y" * 390)
    text = context_of(hook(task_repo, "codex", payload(task_repo, "SessionStart")), "SessionStart")
    assert len(text) <= 4000  # Codex cuts hook text past about 2,500 tokens


def test_a_real_process_from_another_directory_without_typer(
    task_repo: Repo, tmp_path: Path
) -> None:
    """As an agent runs it: a separate process, started elsewhere, the repository named
    by the input's cwd; the fast path does not load the command-line library."""
    probe = (
        "import sys; from majordomus.__main__ import main; code = main(); "
        "sys.stderr.write(repr(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'typer', 'click', 'mcp', 'pydantic'})))"
        "; raise SystemExit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "hook", "claude"],
        input=payload(task_repo, "SessionStart", source="startup"),
        capture_output=True,
        cwd=tmp_path,
        env=task_repo.environ,
        check=False,
    )
    assert done.returncode == 0
    assert done.stderr == b"[]"
    assert "> next: read flush()" in context_of(done.stdout.decode(), "SessionStart")


def test_a_real_process_with_a_huge_input_on_a_pipe(task_repo: Repo) -> None:
    done = subprocess.run(
        [*MAJORDOMUS, "hook", "gemini"],
        input=b"{" * 10_000_000,
        capture_output=True,
        cwd=task_repo.path,
        env=task_repo.environ,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")


@pytest.mark.parametrize("tasks", [1, 2])
def test_choosing_the_task_from_open_handovers_walks_once_not_on_every_prompt(
    repo: Repo, tmp_path: Path, tasks: int
) -> None:
    """No current task: the hook finds the task (or the candidates) from the open handovers
    reachable from HEAD, which takes a walk of the history; what the walk answered is kept,
    so the next prompt does not walk again. After a merge, on another branch."""
    for title in ("one", "two")[:tasks]:
        repo.task(title)
        repo.git("checkout", "-q", "-b", f"work-{title}")
        repo.commit(f"on {title}")
        assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
        repo.git("checkout", "-q", "main")
        repo.git("merge", "-q", "--no-ff", "-m", f"merge {title}", f"work-{title}")
    repo.git("checkout", "-q", "-b", "later")
    repo.commit("later")
    (repo.path / ".git" / "majordomus-task").unlink()
    trace = tmp_path / "trace.json"
    walks = []
    for _ in range(3):
        result = repo.run(
            "hook",
            "claude",
            stdin=payload(repo, "UserPromptSubmit"),
            environ={"GIT_TRACE2_EVENT": str(trace)},
        )
        assert (result.code, result.err) == (0, "")
        lines = trace.read_text().splitlines() if trace.exists() else []  # no git started
        started = [json.loads(line) for line in lines]
        walks.append(sum(e.get("event") == "start" and "rev-list" in e["argv"] for e in started))
        trace.unlink(missing_ok=True)
    assert walks[0] >= 1 and walks[1:] == [0, 0], walks


def _offered(text: str, start: str, end: str) -> str:
    """The command a line of the answer offers, between `start` and `end`."""
    line = next(line for line in text.split("\n") if start in line)
    return line.split(start, 1)[1].split(end, 1)[0]


@pytest.mark.parametrize("entry", ["script", "module"])
def test_the_commands_offered_run_as_offered_without_majordomus_on_path(
    task_repo: Repo, entry: str
) -> None:
    # The hook entry agent install writes runs majordomus by absolute path (the console
    # script, or this Python with -m); an agent whose PATH lacks it runs what it is offered.
    script = Path(sys.executable).parent / "majordomus"
    argv = [str(script)] if entry == "script" else [sys.executable, "-m", "majordomus"]
    environ = {**task_repo.environ, "PATH": "/usr/bin:/bin"}
    on_path = subprocess.run(["sh", "-c", "command -v majordomus"], env=environ, check=False)
    assert on_path.returncode != 0

    def run_hook(event: str, *flags: str) -> str:
        done = subprocess.run(
            [*argv, "hook", "claude", *flags],
            input=payload(task_repo, event, stop_hook_active=False),
            capture_output=True,
            cwd=task_repo.path,
            env=environ,
            check=True,
        )
        return done.stdout.decode()

    text = context_of(run_hook("SessionStart"), "SessionStart")
    record = _offered(text, "Record: ", ' "what is true now"')
    assert record.endswith(" checkpoint") and record != "majordomus checkpoint"
    program = record.removesuffix(" checkpoint")
    assert text.endswith(f"Pick up the open handover with: {program} resume.")
    # The records were written on the suite's clock, days before the real one: stale.
    reason = json.loads(run_hook("Stop", "--enforce"))["reason"]
    assert _offered(reason, "run: ", ' "<what is true now>"') == record
    before = task_repo.notes_ref()
    ran = subprocess.run(
        ["sh", "-c", record + ' "offered, and it ran"'],
        cwd=task_repo.path,
        env=environ,
        check=False,
    )
    assert ran.returncode == 0 and task_repo.notes_ref() != before
    shown = json.loads(task_repo.run("show", "--json").out)["records"]
    assert "offered, and it ran" in [r.get("body") for r in shown]


def test_the_refusal_a_hook_hands_over_names_majordomus_as_the_entry_ran_it(repo: Repo) -> None:
    # No current task and two with an open handover: the agent is told to pick one, with
    # the command spelt as the hook entry runs majordomus (not on the agent's PATH).
    for title in ("one", "two"):
        repo.task(title)
        assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    (repo.path / ".git" / "majordomus-task").unlink()
    script = Path(sys.executable).parent / "majordomus"
    done = subprocess.run(
        [str(script), "hook", "claude"],
        input=payload(repo, "SessionStart", source="startup"),
        capture_output=True,
        cwd=repo.path,
        env={**repo.environ, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    text = context_of(done.stdout.decode(), "SessionStart")
    assert text.startswith("majordomus: no current task, and 2 tasks have an open handover")
    assert text.endswith(f"; pick one with {script} task use TASK (or pass --task TASK).")
