"""`majordomus mcp`: the tools through the SDK's own client, in-process and over stdio,
against a real repository; the command line never imports the SDK."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.cli import MAJORDOMUS
from tests.support.mcp_wire import (
    INITIALIZED,
    LIST,
    Wire,
    call,
    initialize,
    listings,
    sdk_handshake,
)
from tests.support.repo import Repo

if TYPE_CHECKING:  # the SDK (pydantic: half a second) is imported by the tests that run it,
    # not by every worker that collects this module
    from mcp import Client
    from mcp.types import CallToolResult

TOOLS = {
    "context", "checkpoint", "handover", "resume", "history", "search", "check", "task_new",
    "task_list", "task_use",
}  # fmt: skip


def in_process(
    repo: Repo,
    body: Callable[[Client], Awaitable[None]],
    command_line: Callable[..., int] | None = None,
) -> None:
    """`body` with an MCP client of the server in-process, its tools running their command
    lines through `command_line` (`__main__.run` unless given)."""
    from mcp import Client

    from majordomus import mcp_server
    from majordomus.__main__ import run  # (why here: tests/support/cli.py, run_cli)

    runner = command_line or run

    async def main() -> None:
        async with Client(mcp_server.server(str(repo.path), repo.environ, runner)) as client:
            await body(client)

    asyncio.run(main())


def text_of(result: CallToolResult) -> str:
    from mcp.types import TextContent

    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def structured(result: CallToolResult) -> Any:
    assert result.is_error is False, result.content
    return json.loads(text_of(result))


def test_tools_in_process_against_a_real_repository(repo: Repo) -> None:
    async def body(client: Client) -> None:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        for tool in listed.tools:  # one line each, none of the source's indentation
            assert (
                tool.description and "\n" not in tool.description and "  " not in tool.description
            )
        created = structured(await client.call_tool("task_new", {"title": "queue drops acks"}))
        task = created["task"]
        assert created == {"task": task, "title": "queue drops acks"}
        point = structured(await client.call_tool("checkpoint", {"text": "reproduced"}))
        assert point["record"]["body"] == "reproduced" and point["record"]["task"] == task
        hand = structured(
            await client.call_tool(
                "handover", {"objective": "find it", "state": "half", "next": "read flush()"}
            )
        )
        assert hand["record"]["next"] == "read flush()"
        ctx = structured(await client.call_tool("context", {"max_chars": 1000}))
        assert ctx["task"] == task and "> next: read flush()" in ctx["text"]
        resumed = structured(await client.call_tool("resume", {}))
        assert resumed["recorded"] is True and resumed["handover"]["id"] == hand["record"]["id"]
        history = structured(await client.call_tool("history", {"task": task[2:8], "limit": 2}))
        assert [r["kind"] for r in history["records"]] == ["resume", "handover"]
        listed_tasks = structured(await client.call_tool("task_list", {}))
        assert [t["task"] for t in listed_tasks["tasks"]] == [task]
        used = structured(await client.call_tool("task_use", {"task": task[:6]}))
        assert used == {"task": task}
        check = structured(await client.call_tool("check", {}))
        assert check["stale"] is False and check["task"] == task

    in_process(repo, body)
    assert json.loads(repo.run("history", "--json").out)["records"][0]["kind"] == "resume"


def test_a_refusal_is_a_tool_error_and_the_ref_does_not_move(repo: Repo) -> None:
    repo.task()
    before = repo.notes_ref()

    async def body(client: Client) -> None:
        result = await client.call_tool("checkpoint", {"text": "x" * 401})
        assert result.is_error is True
        text = text_of(result)
        first, detail = text.split("\n")
        sentence = (
            "checkpoint body is 401 characters, over the cap of 400; nothing was recorded "
            "(shorten it: it is never truncated)."
        )
        assert first == f"Error executing tool checkpoint: {sentence}"  # the SDK's prefix
        assert json.loads(detail) == {"exit": 2, "message": sentence}
        unknown = await client.call_tool("check", {"task": "t-ffff"})
        assert unknown.is_error is True and json.loads(text_of(unknown).split("\n")[1])["exit"] == 2

    in_process(repo, body)
    assert repo.notes_ref() == before


def test_exit_1_answers_are_ordinary_results(repo: Repo) -> None:
    repo.task()
    repo.run("checkpoint", "interrupted before any handover")
    repo.clock.advance(3600)

    async def body(client: Client) -> None:
        nothing = structured(await client.call_tool("resume", {}))
        assert nothing["handover"] is None and nothing["recorded"] is False
        assert [c["body"] for c in nothing["checkpoints_since"]] == [
            "interrupted before any handover"
        ]

    in_process(repo, body)


def refusal(result: CallToolResult) -> tuple[int, str]:
    assert result.is_error is True, result.content
    detail = json.loads(text_of(result).split("\n")[-1])
    return detail["exit"], detail["message"]


# ---- values that look like options are data ----------------------------------------------

OPTION_LIKE = ["--all", "--help", "-h", "--json", "--", "-", "-n1", "--task=t-0000", "--limit=1"]


@pytest.mark.parametrize("rev", ["--all", "--help", "-h", "-n1", "--limit=1", "--json"])
def test_history_rev_is_a_revision_never_an_option(repo: Repo, rev: str) -> None:
    repo.task()
    repo.run("checkpoint", "on HEAD")

    async def body(client: Client) -> None:
        assert refusal(await client.call_tool("history", {"rev": rev})) == (
            3,
            f"cannot find a commit named '{rev}'; give a branch, tag or commit id.",
        )
        named = structured(await client.call_tool("history", {"rev": "HEAD", "all": True}))
        assert [r["body"] for r in named["records"] if r["kind"] == "checkpoint"] == ["on HEAD"]

    in_process(repo, body)


@pytest.mark.parametrize("text", OPTION_LIKE)
def test_option_like_text_is_recorded_as_that_text(repo: Repo, text: str) -> None:
    repo.task()

    async def body(client: Client) -> None:
        point = structured(await client.call_tool("checkpoint", {"text": text}))
        assert point["record"]["body"] == text
        fields = {"objective": text, "state": f"{text} ", "next": text}
        hand = structured(await client.call_tool("handover", fields))
        assert [hand["record"][k] for k in ("objective", "state", "next")] == [text] * 3
        created = structured(await client.call_tool("task_new", {"title": text}))
        assert created["title"] == text

    in_process(repo, body)


@pytest.mark.parametrize("task", OPTION_LIKE)
def test_an_option_like_task_is_a_task_name_refused_as_such(repo: Repo, task: str) -> None:
    repo.task()
    before = repo.notes_ref()
    sentence = (
        f"{task!r} is not a task id: give t- and at least 4 of its hex digits "
        "(see majordomus task list)."
    )

    async def body(client: Client) -> None:
        handover = {"objective": "o", "state": "s", "next": "n"}
        for tool, arguments in [
            ("checkpoint", {"text": "x"}),
            ("handover", handover),
            ("resume", {}),
            ("history", {}),
            ("check", {}),
            ("task_use", {}),
        ]:
            assert refusal(await client.call_tool(tool, {**arguments, "task": task})) == (
                2,
                sentence,
            ), tool

    in_process(repo, body)
    assert repo.notes_ref() == before


def test_option_like_numbers_are_refused_as_numbers(repo: Repo) -> None:
    repo.task()

    async def body(client: Client) -> None:
        assert refusal(await client.call_tool("context", {"max_chars": -5})) == (
            2,
            "--max-chars must be between 200 and 100000, not -5.",
        )
        assert refusal(await client.call_tool("history", {"limit": -1})) == (
            2,
            "--limit must be 1 or more, not -1.",
        )

    in_process(repo, body)


NOT_A_REMOTE = "is not a remote name or URL; give one that git remote -v lists."


@pytest.mark.parametrize(
    ("argv", "code", "err"),
    [
        (["history", "--", "--all"], 3, "cannot find a commit named '--all'"),
        (["show", "--", "--json"], 3, "cannot find a commit named '--json'"),
        (["adopt", "--", "--all"], 3, "cannot find a commit named '--all'"),
        (["fetch", "--", "--upload-pack=x"], 2, f"'--upload-pack=x' {NOT_A_REMOTE}"),
        (["push", "--", "--all"], 2, f"'--all' {NOT_A_REMOTE}"),
        (["sync", "--", "-h"], 2, f"'-h' {NOT_A_REMOTE}"),
        (["task", "use", "--", "--json"], 2, "'--json' is not a task id"),
        (["agent", "install", "--", "--help"], 2, "unknown agent '--help'"),
    ],
)
def test_after_a_double_dash_each_command_takes_its_argument_as_it_is(
    repo: Repo, argv: list[str], code: int, err: str
) -> None:
    # What the tools rely on: both parsers (the plain one and typer) end the options at `--`.
    repo.task()
    before = repo.notes_ref()
    result = repo.run(*argv)
    assert (result.code, result.out) == (code, ""), result.err
    assert result.err.startswith(f"majordomus: {err}") and result.err.count("\n") == 1
    assert repo.notes_ref() == before


@pytest.mark.parametrize("text", ["--help", "-h", "--json", "--", "-"])
def test_after_a_double_dash_a_checkpoint_and_a_title_are_that_text(repo: Repo, text: str) -> None:
    repo.task()
    assert repo.run("checkpoint", "--json", "--", text).code == 0
    assert repo.run("task", "new", "--", text).code == 0
    records = json.loads(repo.run("history", "--json", "--all").out)["records"]
    assert [r.get("body") for r in records if r["kind"] == "checkpoint"] == [text]
    titles = sorted(r["title"] for r in records if r["kind"] == "task")
    assert titles == sorted([text, "queue drops acks under load"])


FIXED_WORDS = {
    *("context", "checkpoint", "handover", "resume", "history", "check", "task"),
    *("new", "list", "use", "-F", "-", "--json", "--all", "--peek"),
    *("grep", "-i", "--trusted"),
}


def test_every_tool_passes_values_joined_to_their_option_or_after_a_double_dash(
    repo: Repo,
) -> None:
    """The command lines every tool builds, read as they are run: before `--` nothing but
    the tool's own words and `--option=VALUE`, so no parser can take a value for an option."""
    seen: list[list[str]] = []

    from majordomus.__main__ import run

    def recording(argv: list[str], **streams: Any) -> int:
        seen.append(list(argv))
        return run(argv, **streams)

    calls: dict[str, dict[str, Any]] = {
        "context": {"max_chars": -5},
        "checkpoint": {"text": "--help", "task": "--all"},
        "handover": {"objective": "--help", "state": "-s", "next": "--", "task": "--all"},
        "resume": {"task": "--all", "peek": True},
        "history": {"rev": "--all", "task": "--all", "all": True, "limit": -1},
        "search": {
            "pattern": "--all",
            "task": "--all",
            "all": True,
            "ignore_case": True,
            "fixed": True,
            "limit": -1,
        },
        "check": {"task": "--all", "all": True},
        "task_new": {"title": "-h"},
        "task_list": {},
        "task_use": {"task": "--json"},
    }
    assert set(calls) == TOOLS

    async def body(client: Client) -> None:
        for tool, arguments in calls.items():
            await client.call_tool(tool, arguments)

    repo.task()
    in_process(repo, body, recording)
    assert len(seen) == len(TOOLS)
    for argv in seen:
        assert argv[:2] == ["-C", str(repo.path)]
        words = argv[2:]
        before_dash = words[: words.index("--")] if "--" in words else words
        loose = [w for w in before_dash if w not in FIXED_WORDS and not w.startswith("--")]
        unjoined = [w for w in before_dash if w.startswith("--") and w not in FIXED_WORDS]
        assert loose == [], argv
        assert all("=" in w for w in unjoined), argv


def test_over_stdio_as_an_agent_starts_it(repo: Repo) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    repo.task("over stdio")
    params = StdioServerParameters(
        command=MAJORDOMUS[0], args=[*MAJORDOMUS[1:], "mcp"], env=repo.environ, cwd=repo.path
    )

    async def main() -> None:
        async with Client(params) as client:
            tools = await client.list_tools()
            assert {tool.name for tool in tools.tools} == TOOLS
            point = structured(await client.call_tool("checkpoint", {"text": "via stdio"}))
            assert point["record"]["body"] == "via stdio"
            refused = await client.call_tool("checkpoint", {"text": "   "})
            assert refused.is_error is True
            assert json.loads(text_of(refused).split("\n")[1])["exit"] == 2

    asyncio.run(main())
    shown = json.loads(repo.run("show", "--json").out)["records"]
    assert [r.get("body") for r in shown if r["kind"] == "checkpoint"] == ["via stdio"]


def test_importing_the_command_line_imports_neither_mcp_nor_pydantic() -> None:
    probe = (
        "import sys, majordomus.cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'pydantic'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


# The console script's entry point, in a Python where the SDK cannot be imported.
WITHOUT_THE_SDK = """
import sys

class NoSdk:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoSdk())
from majordomus.__main__ import main
raise SystemExit(main())
"""


def test_without_the_sdk_one_sentence_and_exit_2(repo: Repo) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_SDK, "mcp"],
        capture_output=True,
        text=True,
        cwd=repo.path,
        env=repo.environ,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "majordomus: the MCP SDK is not installed; install it with pip install "
        "'majordomus[mcp]'.\n",
    )


# ---- what a client reads of the tools, and a server called before it is asked for them ----


def test_every_tool_has_a_readable_title_and_every_parameter_a_description(repo: Repo) -> None:
    """Over every tool the server lists (a tool added later included): titles a person can
    read, on the tool and its schemas, and a one-line description for each parameter."""

    async def body(client: Client) -> None:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        for tool in listed.tools:
            words = tool.name.replace("_", " ")
            assert tool.title == words
            schema = tool.input_schema
            assert schema["title"] == f"{words} arguments"
            assert tool.output_schema is not None
            assert tool.output_schema["title"] == f"{words} answer"
            shown = json.dumps(tool.model_dump(by_alias=True))
            assert "tool_" not in shown and "Arguments" not in shown and "DictOutput" not in shown
            for name, parameter in schema["properties"].items():
                described = parameter.get("description")
                assert isinstance(described, str) and described.strip(), (tool.name, name)
                assert "\n" not in described and described.endswith("."), (tool.name, name)

    in_process(repo, body)


def world_with_a_hand_written_note(repo: Repo) -> str:
    """A task on a history with a merge, another branch checked out, and a note a teammate
    wrote by hand with plain git: invisible characters and forged lines in its body."""
    from tests.support.attacks import hostile, record, write_note

    task = repo.task()
    base = repo.head()
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side: smaller batch")
    repo.git("checkout", "-q", "-")
    repo.commit("main: retry on timeout")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    body = hostile("flush() drops the last ack\u200b\u2028\u202e\x1b[31m")
    note = record("checkpoint", "c-00000000000000aa", task, base, repo.clock.now, body=body)
    write_note(repo, repo.head(), note)
    repo.git("checkout", "-q", "-b", "topic")
    return task


def test_a_call_sent_with_initialize_before_any_answer_or_tools_list_is_answered(
    repo: Repo,
) -> None:
    """A client that sends a tool call straight after `initialize`, without waiting for its
    answer and without `notifications/initialized` or `tools/list` (a client that lists the
    tools later, or never), gets the tool's answer: every tool is registered before the
    server reads its first line."""
    from tests.support.agent_text import invisible

    task = world_with_a_hand_written_note(repo)
    wire = Wire(repo.path, repo.environ)
    wire.send(initialize(1), call(2, "checkpoint", text="reproduced on topic"), call(3, "context"))
    assert wire.answer(1)["result"]["serverInfo"]["name"] == "majordomus"
    point = wire.answer(2)["result"]
    assert point["isError"] is False
    assert point["structuredContent"]["record"]["body"] == "reproduced on topic"
    assert point["structuredContent"]["record"]["task"] == task
    context = wire.answer(3)["result"]
    assert context["isError"] is False
    (block,) = context["content"]
    assert invisible(block["text"]) == []  # the teammate's characters escaped, never raw
    text = context["structuredContent"]["text"]
    assert "reproduced on topic" in text and "flush() drops the last ack" in text
    assert all(line.startswith("> ") for line in text.splitlines() if "evil.example" in line)
    wire.send({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
    listed = wire.answer(4)["result"]["tools"]
    assert {tool["name"] for tool in listed} == TOOLS
    assert wire.close() == ""
    shown = json.loads(repo.run("history", "--json").out)["records"]
    assert next(r["body"] for r in shown if r["kind"] == "checkpoint") == "reproduced on topic"


def test_a_call_before_initialize_gets_an_error_answer_and_records_nothing(repo: Repo) -> None:
    repo.task()
    before = repo.notes_ref()
    wire = Wire(repo.path, repo.environ)
    wire.send(call(1, "checkpoint", text="too early"))
    early = wire.answer(1)
    assert "error" in early and "result" not in early  # an answer, not silence
    assert repo.notes_ref() == before
    wire.send(initialize(2), {"jsonrpc": "2.0", "method": "notifications/initialized"})
    wire.send(call(3, "checkpoint", text="after initialize"))
    wire.answer(2)
    assert wire.answer(3)["result"]["structuredContent"]["record"]["body"] == "after initialize"
    wire.close()
    assert repo.notes_ref() != before


def test_the_handshake_answered_before_the_sdk_is_loaded_is_the_sdk_s(repo: Repo) -> None:
    """`initialize` and the listings as the front answers them (from `mcptable`) and as
    the SDK's server answers them, word for word; when this fails after a change of a tool,
    run .venv/bin/python -m tests.support.mcp_wire."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from majordomus import mcpfront, mcptable

    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == mcptable.HANDSHAKE_VERSIONS
    latest = HANDSHAKE_PROTOCOL_VERSIONS[-1]
    sdk = sdk_handshake(repo.path, repo.environ, latest)
    wire = Wire(repo.path, repo.environ)
    wire.send(initialize(1, latest), INITIALIZED)
    front = wire.answer(1)["result"], listings(wire)
    assert wire.close() == ""
    assert front == sdk
    assert {tool["name"] for tool in sdk[1]["tools/list"]["tools"]} == TOOLS
    for version in HANDSHAKE_PROTOCOL_VERSIONS:  # the SDK's rule: the client's, if known
        answer = mcpfront.initialize_result(initialize(1, version)["params"])
        assert answer is not None and answer["protocolVersion"] == version
    unknown = mcpfront.initialize_result(initialize(1, "1999-01-01")["params"])
    assert unknown is not None and unknown["protocolVersion"] == latest
    malformed_params: list[Any] = [None, [], {"protocolVersion": 7}, {"protocolVersion": latest}]
    for malformed in malformed_params:
        assert mcpfront.initialize_result(malformed) is None  # left to the SDK to refuse


# A Python whose MCP SDK cannot finish importing until the test allows it: the import
# waits (in the thread that imports it) for the file named in MCP_GO to exist.
HELD_SDK = """
import os, sys, threading, time

class Held:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" and threading.current_thread() is not threading.main_thread():
            while not os.path.exists(os.environ["MCP_GO"]):
                time.sleep(0.01)
        return None

sys.meta_path.insert(0, Held())
from majordomus.__main__ import main
raise SystemExit(main())
"""


def test_the_handshake_does_not_wait_for_the_sdk_and_a_call_waits_for_it(
    repo: Repo, tmp_path: Path
) -> None:
    """With the SDK's import held, `initialize` and `tools/list` are answered all the
    same (a client's start-up does not wait for the SDK); a tool call sent meanwhile is
    answered once the import is let go, with the tool's own answer."""
    import time

    repo.task()
    go = tmp_path / "go"
    held = [sys.executable, "-c", HELD_SDK, "mcp"]
    wire = Wire(repo.path, {**repo.environ, "MCP_GO": str(go)}, held)
    wire.send(initialize(1), {"jsonrpc": "2.0", "method": "notifications/initialized"}, LIST)
    assert wire.answer(1)["result"]["serverInfo"]["name"] == "majordomus"
    assert {tool["name"] for tool in wire.answer(2)["result"]["tools"]} == TOOLS
    wire.send(call(3, "checkpoint", text="sent while the SDK loads"))
    time.sleep(0.3)
    assert wire.lines.empty()  # nothing answered it yet: the import is held
    go.touch()
    point = wire.answer(3)["result"]
    assert point["isError"] is False
    assert point["structuredContent"]["record"]["body"] == "sent while the SDK loads"
    assert wire.close() == ""
