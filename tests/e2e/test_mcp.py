"""majordomus' MCP tools called by the real clients (the fake model asks for the call) and
by the MCP Inspector's command line; their results are the commands' `--json`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import clients, stubs
from tests.e2e.sessions import history, install, setup, world


def _tool_result(client: str, seen: stubs.Seen) -> Any:
    """The JSON the client handed back to the model as the tool's result."""
    if client == "claude":
        last = seen.body["messages"][-1]["content"]
        results = [b for b in last if b.get("type") == "tool_result"]
        assert len(results) == 1 and not results[0].get("is_error"), last
        content = results[0]["content"]
        text = content if isinstance(content, str) else stubs.strings(content)
    else:
        outputs = [i for i in seen.body["input"] if i.get("type") == "function_call_output"]
        assert len(outputs) == 1, outputs
        # Codex puts its own "Wall time: ...\nOutput:\n" before the tool's text.
        output = outputs[0]["output"]
        text = output if isinstance(output, str) else stubs.strings(output)
        head, found, text = text.partition("\nOutput:\n")
        assert found and head.startswith("Wall time: "), output
    return json.loads(text)


@pytest.mark.parametrize("client", ("claude", "codex"))
def test_the_client_calls_the_checkpoint_tool_and_gets_the_commands_json(
    client: str, programs: dict[str, Path], node_dir: Path, tmp_path: Path
) -> None:
    victim = world(tmp_path / "world").victim
    majordomus = install(victim, client).removesuffix(f" hook {client}")
    with setup(client, programs[client], tmp_path, node_dir) as session:
        session.trust(victim.path)
        extra = session.add_mcp(majordomus)
        session.run(victim.path, stubs.CALL_MCP, *extra)
        turns = session.main_requests()
    where = clients.label(client)
    offered = stubs.strings(turns[0].body.get("tools", []))
    # Not retried: a server that has not answered when the first request leaves is missing
    # from it (seen under load: `majordomus mcp` imports the SDK for over a second).
    assert "mcp__majordomus" in offered, f"{where}: majordomus' MCP tools were not offered"
    assert len(turns) == 2, (where, len(turns))  # the call, then the answer to its result
    result = _tool_result(client, turns[1])
    landed = [r for r in history(victim) if r.get("body") == stubs.MCP_BODY]
    assert len(landed) == 1, (where, landed)
    assert result["record"] == landed[0], (where, result, landed)


def _aged(value: Any, ages: list[int]) -> Any:
    """`value` with every age in seconds (`*age_s`) taken out into `ages`: the tool and the
    command run on the real clock, a second boundary apart at most."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            if key.endswith("age_s") and isinstance(item, int):
                ages.append(item)
            else:
                kept[key] = _aged(item, ages)
        return kept
    if isinstance(value, list):
        return [_aged(item, ages) for item in value]
    return value


def assert_same_answer(got: Any, expected: Any, where: tuple[str, str]) -> None:
    """Equal but for ages, which differ by a second at most."""
    got_ages: list[int] = []
    expected_ages: list[int] = []
    assert _aged(got, got_ages) == _aged(expected, expected_ages), where
    assert len(got_ages) == len(expected_ages), where
    assert all(0 <= e - g <= 2 for g, e in zip(got_ages, expected_ages, strict=True)), where


def _command_json(repo_path: Path, environ: dict[str, str], majordomus: str, *argv: str) -> Any:
    """The command itself, as a process on the real clock: its `--json` value."""
    done = subprocess.run(
        [majordomus, *argv, "--json"], cwd=repo_path, env=environ,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_the_inspector_cli_calls_the_tools_and_gets_the_commands_json(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    victim = world(tmp_path / "world").victim
    majordomus = install(victim, "claude").removesuffix(" hook claude")
    environ = {
        **victim.environ,
        "PATH": clients.agent_path(Path(shutil.which("node") or "/usr/bin").parent),
    }

    def call(*argv: str) -> Any:
        ran = clients.run(
            "inspector", [str(programs["inspector"]), "--cli", majordomus, "mcp", *argv],
            victim.path, environ,
        ).ok()  # fmt: skip
        return json.loads(ran.out)

    listed = call("--method", "tools/list")
    names = sorted(tool["name"] for tool in listed["tools"])
    assert names == sorted(TOOLS), names
    where = clients.label("inspector")
    for tool, args, argv in (
        ("history", ["limit=3"], ["history", "--limit", "3"]),
        ("task_list", [], ["task", "list"]),
        ("context", [], ["context"]),
    ):
        flags = [f for arg in args for f in ("--tool-arg", arg)]
        result = call("--method", "tools/call", "--tool-name", tool, *flags)
        assert result["isError"] is False, (where, tool, result)
        expected = _command_json(victim.path, environ, majordomus, *argv)
        assert_same_answer(result["structuredContent"], expected, (where, tool))
        assert_same_answer(json.loads(result["content"][0]["text"]), expected, (where, tool))
    # A write: the record it answers with is the one history shows.
    result = call(
        "--method",
        "tools/call",
        "--tool-name",
        "checkpoint",
        "--tool-arg",
        "text=via the inspector",
    )
    record = result["structuredContent"]["record"]
    shown = _command_json(victim.path, environ, majordomus, "history", "--limit", "1")
    assert shown["records"] == [record], (where, shown, record)
    # A refusal: a tool error carrying the command's sentence and its exit code.
    refused = call("--method", "tools/call", "--tool-name", "history", "--tool-arg", "rev=--all")
    assert refused["isError"] is True, (where, refused)
    text = refused["content"][0]["text"]
    assert json.loads(text.splitlines()[-1])["exit"] == 3, (where, text)


TOOLS = ("check", "checkpoint", "context", "handover", "history", "resume", "search", "task_list",
         "task_new", "task_use")  # fmt: skip
