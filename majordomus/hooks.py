"""`majordomus hook AGENT`: answer a coding agent's hook in that agent's own JSON format.

Always exits 0 (Claude Code, Codex and Gemini CLI read exit 2 as "block"), never
writes a record, and says nothing when it has nothing to say or cannot tell.
Kept free of typer so that `python -m majordomus hook ...` starts fast.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from majordomus.agents import AGENTS, EVENTS
from majordomus.tuples import NamedTuple

if TYPE_CHECKING:
    from majordomus.invocation import Inputs, Invocation
    from majordomus.tasks import Jobs
    from majordomus.values import CheckResult

INPUT_MAX_BYTES = 1024 * 1024  # hook inputs are small; anything larger is not one
HOOK_CONTEXT_CHARS = 4000  # Codex cuts hook text past about 2,500 tokens
STOP_STATE_FILE = "majordomus-hook-stop"


class Answer(NamedTuple):
    """What the hook prints: nothing, or one JSON object."""

    payload: dict[str, Any] | None

    def text(self) -> str:
        if self.payload is None:
            return ""
        return json.dumps(self.payload, ensure_ascii=False) + "\n"


def program(argv0: str, executable: str) -> str:
    """How the commands offered to the agent name majordomus: as this hook was run (the
    entry `agent install` writes runs it by absolute path, often not on the agent's PATH),
    so that the agent can run them as offered."""
    import shlex

    name = os.path.basename(argv0)
    if name == "majordomus" and os.path.isabs(argv0):
        return shlex.quote(argv0)
    if name == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "majordomus":
        return shlex.join([executable, "-m", "majordomus"])  # python -m majordomus hook ...
    return "majordomus"


def _silent(agent: str, event: str) -> Answer:
    # Gemini parses stdout as JSON, and Codex requires JSON from a Stop hook: `{}` is
    # their documented "nothing to add". Claude Code takes empty output as that.
    if agent == "gemini" or (agent == "codex" and event == EVENTS["codex"].stop):
        return Answer({})
    return Answer(None)


def _context_answer(agent: str, event: str, text: str) -> Answer:
    return Answer({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def _block(agent: str, reason: str) -> Answer:
    decision = "deny" if agent == "gemini" else "block"
    return Answer({"decision": decision, "reason": reason})


def read_input(stdin: IO[bytes]) -> dict[str, Any] | None:
    """The hook's JSON object, or None for anything else (empty, too large, malformed)."""
    data = stdin.read(INPUT_MAX_BYTES + 1)
    if len(data) > INPUT_MAX_BYTES:
        # Drain what the agent is still writing, so it never blocks on a full pipe.
        while stdin.read(1 << 20):
            pass
        return None
    try:
        value = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def answer(
    agent: str,
    event: str | None,
    payload: Mapping[str, Any],
    *,
    cwd: str,
    environ: Mapping[str, str],
    now: Callable[[], datetime.datetime],
    enforce: bool,
    program: str = "majordomus",
) -> Answer:
    """The answer to one hook call, its commands spelt with `program`; may raise (the caller
    turns any failure into silence)."""
    name = event or payload.get("hook_event_name")
    if not isinstance(name, str):
        return _silent(agent, "")
    where = payload.get("cwd")
    if isinstance(where, str) and where and cwd == "." and os.path.isdir(where):
        cwd = where
    # Imported here: a hook that has nothing to do (an event we do not answer) stays cheap.
    from majordomus import context
    from majordomus.errors import MajordomusError
    from majordomus.invocation import Inputs
    from majordomus.tasks import AmbiguousTaskError

    inputs = Inputs(cwd=cwd, environ=environ, now=now)
    events = EVENTS[agent]
    if name == events.session_start:
        try:
            result = context.build(inputs, HOOK_CONTEXT_CHARS, program=program)
        except AmbiguousTaskError as error:
            refusal = error.sentence(error.candidates, program)
            return _context_answer(agent, name, f"majordomus: {refusal}")
        if result.task is None:
            return _silent(agent, name)
        return _context_answer(agent, name, result.text)
    if name == events.prompt:
        try:
            line = _stale_line(inputs, program)
        except MajordomusError:
            return _silent(agent, name)
        return _context_answer(agent, name, line) if line else _silent(agent, name)
    if name == events.stop:
        if not enforce or payload.get("stop_hook_active") is True:
            return _silent(agent, name)
        try:
            reason = _stop_reason(inputs, program)
        except MajordomusError:
            return _silent(agent, name)
        return _block(agent, reason) if reason else _silent(agent, name)
    return _silent(agent, name)  # PreCompact / PreCompress / SessionEnd: never block


def _stale(inputs: Inputs) -> tuple[Jobs, CheckResult, str] | None:
    """The jobs, the check of the session's task and the flag that names it in a command
    (`--task T` when the task was implied, not current), when that task is stale."""
    from majordomus import context
    from majordomus.errors import RefusedError

    try:
        opened = context.session(inputs)
    except RefusedError:  # no task, or several to choose from: nothing to remind of
        return None
    flag = f" --task {opened.task}" if opened.implied else ""
    return (opened.jobs, opened.check, flag) if opened.check.stale else None


def _stale_line(inputs: Inputs, program: str) -> str | None:
    from majordomus import plaintext

    found = _stale(inputs)
    if found is None:
        return None
    _, result, flag = found
    return (
        f"majordomus: task {plaintext.safe(result.task)} has no checkpoint for "
        f"{plaintext.age(result.age_s)} (interval {plaintext.interval(result.interval_s)}): record "
        f'what is true now with {program} checkpoint{flag} "..." before it is lost.'
    )


def _stop_reason(inputs: Inputs, program: str) -> str | None:
    """Block once per stale episode: an episode ends when a checkpoint makes the task fresh."""
    from majordomus import plaintext

    found = _stale(inputs)
    if found is None:
        return None
    jobs, result, flag = found
    last = result.last_checkpoint.record.id if result.last_checkpoint else "-"
    episode = f"{result.task} {last}\n"
    path = jobs.repository.gitdir / STOP_STATE_FILE
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == episode:
            return None
    tmp = path.with_name(f"{STOP_STATE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(episode, encoding="utf-8")
    os.replace(tmp, path)
    return (
        f"majordomus: task {plaintext.safe(result.task)} has no checkpoint for "
        f"{plaintext.age(result.age_s)} (interval {plaintext.interval(result.interval_s)}). Before "
        f'stopping, run: {program} checkpoint{flag} "<what is true now>" (or, to '
        f'end the session, {program} handover{flag} --objective "..." --state '
        '"..." --next "...").'
    )


def run(
    agent: str,
    event: str | None,
    *,
    stdin: IO[bytes],
    stdout: IO[str],
    cwd: str = ".",
    environ: Mapping[str, str] | None = None,
    now: Callable[[], datetime.datetime] | None = None,
    enforce: bool = False,
    program: str = "majordomus",
) -> int:
    """Answer one hook call. Whatever happens: exit 0, and stdout empty or one JSON object."""
    # Bad input or any failure still answers the agent's "nothing to add" (`{}` where
    # the agent parses stdout as JSON), never output it would refuse.
    text = _silent(agent, event or "").text() if agent in AGENTS else ""
    with contextlib.suppress(BaseException):
        payload = read_input(stdin)
        if agent in AGENTS and payload is not None:
            text = answer(
                agent,
                event,
                payload,
                cwd=cwd,
                environ=os.environ if environ is None else environ,
                now=now or (lambda: datetime.datetime.now(datetime.UTC)),
                enforce=enforce,
                program=program,
            ).text()
    with contextlib.suppress(BaseException):
        stdout.write(text)
        stdout.flush()
    return 0


def hook_command(
    invocation: Invocation, agent: str, event: str | None = None, enforce: bool = False
) -> int:
    """`run` for the hook command line typer reads (`main` reads the plain one)."""
    import sys

    return run(
        agent,
        event,
        stdin=invocation.terminal.stdin,
        stdout=invocation.terminal.stdout,
        cwd=invocation.cwd,
        environ=invocation.environ,
        now=invocation.now,
        enforce=enforce,
        program=program(sys.argv[0], sys.executable),
    )


def main(argv: list[str]) -> int | None:
    """`hook AGENT [EVENT] [--enforce]` without typer; None when argv is not that plain form
    (then the full command line parses it, help and errors included)."""
    words = [word for word in argv if word != "--enforce"]
    if not 2 <= len(words) <= 3 or words[0] != "hook" or words[1] not in AGENTS:
        return None
    if any(word.startswith("-") for word in words):
        return None
    import sys

    return run(
        words[1],
        words[2] if len(words) == 3 else None,
        stdin=sys.stdin.buffer,
        stdout=sys.stdout,
        enforce="--enforce" in argv,
        program=program(sys.argv[0], sys.executable),
    )
