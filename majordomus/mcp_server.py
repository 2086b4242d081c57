"""`majordomus mcp`: the commands as MCP tools over stdio (optional extra `majordomus[mcp]`).

Each tool runs the command itself with `--json`, so validation, caps and answers are
the command's (its JSON text is the tool's text, invisible characters from notes escaped
as the command escapes them; the value is the structured content); a refusal (exit 2
or 3) is a tool error carrying its sentence and `{"exit": N, "message": ...}`; exit-1
answers (stale, nothing open) are ordinary results.
Only this module imports the MCP SDK, and only `majordomus mcp` imports this module,
in a thread while `mcpfront` answers the handshake from `mcptable`: after a change of a
tool (a new one, a docstring, a parameter), `python -m tests.support.mcp_wire` rewrites
that table, and a test fails until it matches what this server answers.
"""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Callable, Mapping
from typing import IO, Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from majordomus import __version__, jsontext
from majordomus.mcptable import INSTRUCTIONS

CommandLine = Callable[..., int]  # front.run: the command line, handed in by `majordomus mcp`


class Runner:
    """Runs one command in-process in the server's directory and environment."""

    def __init__(self, cwd: str, environ: Mapping[str, str], command_line: CommandLine) -> None:
        self.cwd = cwd
        self.environ = dict(environ)
        self.command_line = command_line

    def __call__(self, argv: list[str], stdin: str = "", json_out: bool = True) -> Any:
        out, err = io.StringIO(), io.StringIO()
        if json_out:  # before any `--`, after which it would be an argument
            cut = argv.index("--") if "--" in argv else len(argv)
            argv = [*argv[:cut], "--json", *argv[cut:]]
        code = self.command_line(
            ["-C", self.cwd, *argv],
            environ=self.environ,
            stdin=io.BytesIO(stdin.encode("utf-8")),
            stdout=out,
            stderr=err,
            is_tty=False,
        )
        text = out.getvalue().strip()
        if code in (0, 1) and text and not json_out:
            return text
        if code in (0, 1) and text:
            # The command's own JSON text, as the tool's text: the SDK's encoding of the
            # value would write every character raw, the command escapes invisible ones.
            value = json.loads(text)
            if argv[0] in _LISTINGS and _unverified(value) and self._strict():
                value, count = _withheld(value)
                if isinstance(value, dict):
                    value["untrusted"] = count
                text = jsontext.dumps(value)
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content=value
            )
        lines = [line for line in err.getvalue().splitlines() if line.startswith("majordomus: ")]
        sentence = lines[-1].removeprefix("majordomus: ") if lines else f"exit {code}"
        raise ToolError(f"{sentence}\n{json.dumps({'exit': code, 'message': sentence})}")

    def _strict(self) -> bool:
        """Whether the profile trusts verified records only (`trust = "signed"`)."""
        try:
            answer = self(["profile"])
        except ToolError:
            return True  # a profile that cannot be read: hand over less, not more
        found = answer.structured_content
        trust = found.get("trust") if isinstance(found, dict) else None
        return trust != "any"


# The commands whose answers list records of any status (context and resume choose the
# verified ones themselves): under trust = "signed", an agent gets what is not verified
# named by id, author and status, its text withheld.
_LISTINGS = ("history", "check", "task", "grep")
_NAMED = ("kind", "id", "commit", "author", "signature", "signer")


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and "signature" in value and "kind" in value and "id" in value


def _unverified(value: Any) -> bool:
    if _is_record(value):
        return bool(value["signature"] != "verified")
    if isinstance(value, dict):
        return any(_unverified(item) for item in value.values())
    if isinstance(value, list):
        return any(_unverified(item) for item in value)
    return False


def _withheld(value: Any) -> tuple[Any, int]:
    """`value` with every record not verified cut to its name, and how many were."""
    if _is_record(value) and value["signature"] != "verified":
        return {key: value.get(key) for key in _NAMED} | {"withheld": True}, 1
    if isinstance(value, dict):
        out, count = {}, 0
        for key, item in value.items():
            out[key], found = _withheld(item)
            count += found
        return out, count
    if isinstance(value, list):
        pairs = [_withheld(item) for item in value]
        return [item for item, _ in pairs], sum(found for _, found in pairs)
    return value, 0


def _task(task: str | None) -> list[str]:
    return [f"--task={task}"] if task else []


# Every value a client sends goes on the command line joined to its option (`--task=VALUE`)
# or after `--`, never as a token of its own: `rev="--all"` is a revision, not the flag.


# What a client is told of each parameter (every parameter of every tool has one: a test
# fails for a tool whose parameter lacks it).
Task = Annotated[
    str | None,
    Field(
        description="The task: its id (t- and 12 hex digits) or a unique prefix of 4 or more "
        "of its hex digits; the current task when left out."
    ),
]
EveryTask = Annotated[
    str | None,
    Field(description="Only this task (its id or a unique prefix); every task if left out."),
]
Revision = Annotated[
    str | None,
    Field(description="Read from this commit: a branch, tag or commit id (HEAD when left out)."),
]


class Tools:
    """The MCP tools: each method whose name starts with `tool_` is a tool the server lists,
    under the rest of its name, its docstring the description, each parameter described by
    its annotation (`definitions` builds them all the same way)."""

    def __init__(self, run: Runner) -> None:
        self.run = run

    async def tool_context(
        self,
        max_chars: Annotated[
            int | None,
            Field(description="The most characters the block may take: 200 to 100000 (4000)."),
        ] = None,
    ) -> dict[str, Any]:
        """The bounded context block of the current task: its open handover whole with its
        label, staleness, the newest checkpoints, and how to record."""
        extra = [f"--max-chars={max_chars}"] if max_chars is not None else []
        result: dict[str, Any] = self.run(["context", *extra])
        return result

    async def tool_checkpoint(
        self,
        text: Annotated[
            str,
            Field(
                description="What is true right now, in a few lines; refused, never cut, when "
                "longer than the profile's cap."
            ),
        ],
        task: Task = None,
    ) -> dict[str, Any]:
        """Record what is true right now on HEAD (refused when over the profile's cap)."""
        result: dict[str, Any] = self.run(["checkpoint", "-F", "-", *_task(task)], stdin=text)
        return result

    async def tool_handover(
        self,
        objective: Annotated[str, Field(description="What the work is for.")],
        state: Annotated[str, Field(description="What is known and done now.")],
        next: Annotated[str, Field(description="The next action to take.")],
        task: Task = None,
    ) -> dict[str, Any]:
        """Record a handover on HEAD: objective, state and next action, all required."""
        argv = ["handover", f"--objective={objective}", f"--state={state}", f"--next={next}"]
        argv += _task(task)
        result: dict[str, Any] = self.run(argv)
        return result

    async def tool_resume(
        self,
        peek: Annotated[
            bool, Field(description="Show the open handover but record nothing (no resume).")
        ] = False,
        task: Task = None,
    ) -> dict[str, Any]:
        """Pick up the newest open handover (with `peek`, record nothing). Nothing open is
        an ordinary answer, with the checkpoints recorded since (`checkpoints_since`)."""
        result: dict[str, Any] = self.run(["resume", *(["--peek"] if peek else []), *_task(task)])
        return result

    async def tool_history(
        self,
        rev: Revision = None,
        task: EveryTask = None,
        all: Annotated[
            bool, Field(description="Also the records on commits not reachable from rev.")
        ] = False,
        limit: Annotated[int | None, Field(description="At most this many records.")] = None,
    ) -> dict[str, Any]:
        """Records on commits reachable from REV (HEAD), newest first; every task unless
        `task` is given."""
        argv = ["history", *_task(task)]
        argv += ["--all"] if all else []
        argv += [f"--limit={limit}"] if limit is not None else []
        argv += ["--", rev] if rev else []
        result: dict[str, Any] = self.run(argv)
        return result

    async def tool_search(
        self,
        pattern: Annotated[
            str,
            Field(
                description="A Python regular expression tried on each line of each record's "
                "text (with fixed, a fixed string)."
            ),
        ],
        task: EveryTask = None,
        all: Annotated[
            bool, Field(description="Also the records on commits not reachable from HEAD.")
        ] = False,
        ignore_case: Annotated[bool, Field(description="Upper and lower case alike.")] = False,
        fixed: Annotated[bool, Field(description="The pattern is a fixed string.")] = False,
        limit: Annotated[int | None, Field(description="At most this many records.")] = None,
    ) -> dict[str, Any]:
        """Records whose text (bodies, handover fields, titles, sessions) has a line that
        matches `pattern`, newest first, each with the fields and lines that matched: the
        answer of `grep --json`. Under trust = "signed", only verified records are searched."""
        argv = ["grep", *_task(task)]
        argv += ["--all"] if all else []
        argv += ["-i"] if ignore_case else []
        argv += ["-F"] if fixed else []
        argv += [f"--limit={limit}"] if limit is not None else []
        argv += ["--trusted"]  # under trust = "signed", only verified records are searched
        result: dict[str, Any] = self.run([*argv, "--", pattern])
        return result

    async def tool_check(
        self,
        task: Task = None,
        all: Annotated[bool, Field(description="Every task, one answer each.")] = False,
    ) -> dict[str, Any]:
        """Age of the last checkpoint against the interval: fresh or stale."""
        result: dict[str, Any] = self.run(["check", *_task(task), *(["--all"] if all else [])])
        return result

    async def tool_task_new(
        self, title: Annotated[str, Field(description="What the task is, in one line.")]
    ) -> dict[str, Any]:
        """Create a task, record it on HEAD and make it current."""
        result: dict[str, Any] = self.run(["task", "new", "--", title])
        return result

    async def tool_task_list(self) -> dict[str, Any]:
        """Tasks with title, last activity, checkpoint age and open handover."""
        result: dict[str, Any] = self.run(["task", "list"])
        return result

    async def tool_task_use(
        self,
        task: Annotated[
            str,
            Field(description="The task: its id or a unique prefix of 4 or more hex digits."),
        ],
    ) -> dict[str, Any]:
        """Make a task current in this work tree (a unique prefix of 4+ hex digits will do)."""
        return {"task": self.run(["task", "use", "--", task], json_out=False)}


PREFIX = "tool_"


def definitions(tools: Tools) -> list[Tool]:
    """Every tool of `tools`, built the one way: its name without `tool_`, a readable title
    (the name, words apart) on the tool and on its schemas (the SDK names them after the
    method: `tool_checkpointArguments`), the docstring on one line as its description."""
    built = []
    for attribute in vars(Tools):
        if not attribute.startswith(PREFIX):
            continue
        method = getattr(tools, attribute)
        name = attribute.removeprefix(PREFIX)
        title = name.replace("_", " ")
        # The docstring as a client shows it: without the indentation of the source.
        description = inspect.cleandoc(method.__doc__ or "").replace("\n", " ")
        tool = Tool.from_function(method, name=name, title=title, description=description)
        tool.parameters["title"] = f"{title} arguments"
        if tool.output_schema is not None:
            tool.output_schema["title"] = f"{title} answer"
        built.append(tool)
    return built


def server(cwd: str, environ: Mapping[str, str], command_line: CommandLine) -> MCPServer:
    """The server with every tool registered before it reads its first message: a client
    that calls a tool straight after `initialize`, before or without `tools/list`, finds it."""
    tools = Tools(Runner(cwd, environ, command_line))
    app: MCPServer = MCPServer(
        "majordomus",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        tools=definitions(tools),
    )
    return app


def serve(cwd: str, environ: Mapping[str, str], command_line: CommandLine) -> None:
    server(cwd, environ, command_line).run("stdio")


class _Lines:
    """The connection's input as the SDK's stdio transport reads it: the lines the front
    read first, then the rest of the stream, each read in a worker thread."""

    def __init__(self, first: list[bytes], reading: IO[bytes]) -> None:
        self.first = first
        self.reading = reading

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        if self.first:
            return self.first.pop(0).decode("utf-8", "replace")
        line = await anyio.to_thread.run_sync(self.reading.readline)
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class _Output:
    """The connection's output, less the SDK's answer to the `initialize` replayed to it
    (the front gave that answer already)."""

    def __init__(self, writing: IO[bytes], answered: Any) -> None:
        self.writing = writing
        self.answered = answered

    async def write(self, text: str) -> None:
        if self.answered is not None:
            message = json.loads(text)
            if isinstance(message, dict) and message.get("id") == self.answered:
                self.answered = None
                return
        self.writing.write(text.encode("utf-8"))

    async def flush(self) -> None:
        self.writing.flush()


def take_over(
    cwd: str,
    environ: Mapping[str, str],
    command_line: CommandLine,
    first: list[bytes],
    reading: IO[bytes],
    writing: IO[bytes],
    answered: Any,
) -> None:
    """The SDK's server on the connection `mcpfront` opened: `first` read before the rest
    of `reading`, the answer to request `answered` (the replayed `initialize`) not sent."""
    app = server(cwd, environ, command_line)
    lowlevel = app._lowlevel_server  # what MCPServer.run_stdio_async runs, on these streams
    lines: Any = _Lines(first, reading)
    output: Any = _Output(writing, answered)

    async def main() -> None:
        async with stdio_server(stdin=lines, stdout=output) as (receive, send):
            await lowlevel.run(receive, send, lowlevel.create_initialization_options())

    anyio.run(main)
