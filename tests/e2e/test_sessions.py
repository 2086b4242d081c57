"""The hooks as the real clients run them: what the model receives.

Every session runs in a victim's clone (a history with merges, a second clone behind a
bare remote, a hostile teammate's checkpoint written with plain git and merged), its
records days old: the task is stale. What each client does with the text is pinned
(docs/agents.md, "What each client does with the text"), so a client bump that changes
it fails here, naming the client and its version.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.e2e import clients, stubs
from tests.e2e.sessions import (
    CONTEXT_HEAD,
    HOSTILE_ID,
    STALE,
    block_of,
    bodies,
    install,
    setup,
    world,
)
from tests.support.agent_text import assert_agent_text

HOOKED = ("claude", "codex", "gemini")


def _context(client: str, seen: stubs.Seen, program: str) -> str:
    """The block as the model reads it, its wrapping checked and taken off, the absolute
    program path written back as `majordomus` (the form agent_text's checks know)."""
    if client == "claude":
        # A message of its own with the system role, the block after a fixed lead.
        carriers = [
            m["content"]
            for m in seen.body["messages"]
            if m.get("role") == "system" and CONTEXT_HEAD in str(m.get("content"))
        ]
        assert carriers and carriers[0].startswith("SessionStart hook additional context: ")
        text = carriers[0]
    elif client == "codex":
        # A developer message whose text is the block, as the hook gave it.
        carriers = [
            part["text"]
            for item in seen.body["input"]
            if item.get("role") == "developer"
            for part in item.get("content", [])
            if CONTEXT_HEAD in part.get("text", "")
        ]
        assert carriers and carriers[0].startswith(CONTEXT_HEAD)
        text = carriers[0]
    else:
        # Inside <hook_context>...</hook_context>, HTML-escaped: `> ` arrives as `&gt; `.
        raw = next(p for p in seen.text.split("<hook_context>")[1:] if p.startswith(CONTEXT_HEAD))
        assert "\n&gt; " in raw and "\n> " not in raw.split("</hook_context>")[0], raw[:400]
        text = html.unescape(raw.split("</hook_context>")[0])
    return block_of(text).replace(program, "majordomus")


def _offered(block: str) -> str:
    found = stubs.offered_command(block)
    assert found is not None, block
    return found


@pytest.mark.parametrize("client", HOOKED)
def test_startup_carries_the_handover_the_reminder_and_one_stop_block(
    client: str, programs: dict[str, Path], node_dir: Path, tmp_path: Path
) -> None:
    victim = world(tmp_path / "world").victim
    hook = install(victim, client, "--enforce")
    program = hook.removesuffix(f" hook {client}")
    with setup(client, programs[client], tmp_path, node_dir) as session:
        session.trust(victim.path)
        before = victim.notes_ref()
        ran = session.run(victim.path, "hello")
        turns = session.main_requests()
    where = clients.label(client)
    assert turns, f"{where}: the model received no request"
    first = turns[0]
    block = _context(client, first, program)
    # The handover, whole; the hostile checkpoint on quoted lines only, nothing invisible raw.
    lines = assert_agent_text(block)
    assert "> objective: find the dropped ack" in lines, (where, block)
    assert any(line.startswith(f"- {HOSTILE_ID} ") for line in lines), (where, block)
    assert f"Record: {program} checkpoint" in html.unescape(first.text), where
    # The stale reminder, once on the first turn, carried as each client carries hook text.
    assert len(STALE.findall(html.unescape(first.text))) == 1, where
    assert _reminder_carried(client, first), where
    # The Stop hook blocked once: its reason is handed to the model as a user turn of the
    # second request, and there is no third (the second stop has stop_hook_active set).
    assert len(turns) == 2, (where, [t.path for t in turns])
    assert "Before stopping, run: " not in html.unescape(first.text), where
    reason, after = _reason_turn(client, turns[1])
    assert f'{program} checkpoint "<what is true now>"' in _reason_as_sent(client, reason), where
    # Gemini runs BeforeAgent again for the turn the block starts: the reminder follows
    # the reason, and the model has read it twice. The others add nothing after it.
    reminders = len(STALE.findall(html.unescape(turns[1].text)))
    if client == "gemini":
        assert STALE.search(after) and after.startswith("<hook_context>"), (where, after)
        assert reminders == 2, (where, reminders)
    else:
        assert after == "" and reminders == 1, (where, after, reminders)
    assert victim.notes_ref() == before, where  # the hooks never write
    _pin_final_answer(client, ran)


def _reminder_carried(client: str, seen: stubs.Seen) -> bool:
    """Whether the reminder came as each client carries hook text: after Claude Code's lead
    naming the hook, as the whole text of a Codex developer message, in Gemini's wrapper."""
    if client == "claude":
        return "UserPromptSubmit hook additional context: majordomus: task " in seen.text
    if client == "codex":
        texts = [
            part.get("text", "")
            for item in seen.body["input"]
            if item.get("role") == "developer"
            for part in item.get("content", [])
        ]
        return any(STALE.match(text) for text in texts)
    return (
        re.search(r"<hook_context>" + STALE.pattern + r"[^<]*</hook_context>", seen.text)
        is not None
    )


def _user_turns(client: str, seen: stubs.Seen) -> list[str]:
    """The text of each user turn of a request, oldest first."""
    body = seen.body
    if client == "claude":
        turns = [m["content"] for m in body["messages"] if m.get("role") == "user"]
    elif client == "codex":
        turns = [i["content"] for i in body["input"] if i.get("role") == "user"]
    else:
        turns = [p for c in body["contents"] if c.get("role", "user") == "user" for p in c["parts"]]
    return [stubs.strings(turn) for turn in turns]


def _reason_turn(client: str, seen: stubs.Seen) -> tuple[str, str]:
    """The one user turn that carries the Stop reason, and the user turns after it."""
    turns = _user_turns(client, seen)
    carrying = [
        n for n, text in enumerate(turns) if "Before stopping, run: " in html.unescape(text)
    ]
    assert len(carrying) == 1, (clients.label(client), turns)
    return turns[carrying[0]], "\n".join(turns[carrying[0] + 1 :])


def _reason_as_sent(client: str, reason: str) -> str:
    """The Stop reason as the client hands it to the model: Codex inside <hook_prompt> with
    `<` and `>` escaped, the others as written."""
    if client == "claude":
        assert "\nStop hook feedback:\nmajordomus: task " in reason, reason
        return reason
    if client == "codex":
        assert "<hook_prompt" in reason and "&lt;what is true now&gt;" in reason, reason
        return html.unescape(reason)
    return reason


def _pin_final_answer(client: str, ran: clients.Ran) -> None:
    """What -p prints as the answer after the one block (codex exec: its JSON events)."""
    if client == "claude":
        assert json.loads(ran.out)["result"] == "ok", ran.out
    elif client == "gemini":
        # -p prints the denied answer too, then the one after the block, run together.
        assert json.loads(ran.out)["response"] == "okok", ran.out


# How many copies of the block the first request of a resumed session carries.
# Claude Code -c: the copy of the session start, kept in the transcript (no second one);
# Codex: the old copy and a new one; Gemini: the new one only.
RESUMED_COPIES = {"claude": 1, "codex": 2, "gemini": 1}


@pytest.mark.parametrize("client", HOOKED)
def test_resume_carries_the_handover_and_the_offered_command_runs_off_path(
    client: str, programs: dict[str, Path], node_dir: Path, tmp_path: Path
) -> None:
    victim = world(tmp_path / "world").victim
    program = install(victim, client).removesuffix(f" hook {client}")
    with setup(client, programs[client], tmp_path, node_dir) as session:
        assert shutil.which("majordomus", path=session.environ["PATH"]) is None
        session.trust(victim.path)
        session.run(victim.path, "hello")
        started = len(session.main_requests())
        session.run(victim.path, stubs.RUN_OFFERED, resume=True)
        turns = session.main_requests()[started:]
        commands = session.stub.commands()
    where = clients.label(client)
    assert len(turns) == 2, (where, len(turns))  # the tool call, then the answer to its result
    first = html.unescape(turns[0].text)
    copies = first.count(CONTEXT_HEAD)
    assert copies == RESUMED_COPIES[client], (where, copies)
    block = _context(client, turns[0], program)
    assert "> objective: find the dropped ack" in block.split("\n"), where
    # The model ran exactly the command the block offered (absolute path, not on PATH).
    offered = _offered(html.unescape(first))
    assert offered == f"{program} checkpoint", (where, offered)
    assert commands == [f'{offered} "{stubs.OFFERED_BODY}"'], (where, commands)
    assert stubs.OFFERED_BODY in bodies(victim), (where, bodies(victim))


# The scope that works from a subdirectory: Claude Code and Gemini CLI read project and
# local settings only from the folder they start in; Codex finds the project's from any.
SUBDIRECTORY_SCOPE = {"claude": "user", "codex": "local", "gemini": "user"}


@pytest.mark.parametrize("client", HOOKED)
def test_a_start_from_a_subdirectory_on_another_branch_carries_the_handover(
    client: str, programs: dict[str, Path], node_dir: Path, tmp_path: Path
) -> None:
    victim = world(tmp_path / "world").victim
    victim.git("checkout", "-q", "-b", "topic")
    victim.commit("topic: try a smaller batch", {"src/deep/batch.py": "batch = 8\n"})
    deep = victim.path / "src" / "deep"
    scope = SUBDIRECTORY_SCOPE[client]
    with setup(client, programs[client], tmp_path, node_dir) as session:
        program = install(victim, client, "--scope", scope, home=session.home)
        program = program.removesuffix(f" hook {client}")
        session.trust(victim.path)
        session.run(deep, "hello")
        turns = session.main_requests()
    where = clients.label(client)
    assert turns, where
    block = _context(client, turns[0], program)
    lines = assert_agent_text(block)
    assert "> objective: find the dropped ack" in lines, (where, block)
    assert any(line.startswith(f"- {HOSTILE_ID} ") for line in lines), (where, block)
    # The handover was written on main: on this branch it is behind HEAD.
    assert any(line.startswith("Open handover ") and "(advanced" in line for line in lines), block


def test_codex_in_a_linked_worktree_runs_the_main_worktrees_project_hooks(
    programs: dict[str, Path], node_dir: Path, tmp_path: Path
) -> None:
    """Codex takes a linked work tree's project settings from the repository's main work
    tree: hooks installed in the linked one are not run, the main one's are (with the
    linked work tree as cwd, so the block is that work tree's)."""
    attacked = world(tmp_path / "world")
    topic = attacked.topic()  # another branch, in a linked work tree
    with setup("codex", programs["codex"], tmp_path, node_dir) as session:
        session.trust(topic.path)
        session.trust(attacked.victim.path)
        program = install(topic, "codex").removesuffix(" hook codex")
        session.run(topic.path, "hello")
        alone = session.main_requests()
        install(attacked.victim, "codex")
        session.run(topic.path, "hello")
        both = session.main_requests()[len(alone) :]
    where = clients.label("codex")
    assert alone and CONTEXT_HEAD not in alone[0].text, where
    assert both, where
    block = _context("codex", both[0], program)
    assert f"- {HOSTILE_ID} " in block and "> objective: find the dropped ack" in block, block


@pytest.mark.parametrize("client", ("claude", "gemini"))
def test_the_local_scope_is_not_read_from_a_subdirectory(
    client: str, programs: dict[str, Path], node_dir: Path, tmp_path: Path
) -> None:
    """Why the user scope above: started in a subdirectory, Claude Code and Gemini CLI do
    not read the clone's own settings, and the session starts without the block."""
    victim = world(tmp_path / "world").victim
    deep = victim.path / "src"
    deep.mkdir()
    install(victim, client)
    with setup(client, programs[client], tmp_path, node_dir) as session:
        session.trust(victim.path)
        session.run(deep, "hello")
        turns = session.main_requests()
    assert turns and all(CONTEXT_HEAD not in t.text for t in turns), clients.label(client)
