"""`majordomus mcp`: the tools through the SDK's own client, in-process and over stdio,
against a real repository; the command line never imports the SDK."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from majordomus import front
from tests.conftest import MAJORDOMUS, Repo

if TYPE_CHECKING:  # the SDK (pydantic: half a second) is imported by the tests that run it,
    # not by every worker that collects this module
    from mcp import Client
    from mcp.types import CallToolResult

TOOLS = {
    "context", "checkpoint", "handover", "resume", "history", "check", "task_new",
    "task_list", "task_use",
}  # fmt: skip


def in_process(repo: Repo, body: Callable[[Client], Awaitable[None]]) -> None:
    from mcp import Client

    from majordomus import mcp_server

    async def main() -> None:
        async with Client(mcp_server.server(str(repo.path), repo.environ, front.run)) as client:
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
