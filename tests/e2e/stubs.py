"""Fake model servers on 127.0.0.1, one per client's API, that never reach the internet.

Each records every request it receives (path and JSON body) and answers from a script
read in the conversation itself: the newest user turn says what the "model" does.

- a tool result in the newest turn: a short text answer (the turn ends);
- `e2e: run the offered command` in it: a shell tool call running the `Record:` command
  the session-start context offered, exactly as offered, with a body appended;
- `e2e: call the mcp checkpoint tool` in it: a call of the client's name for majordomus'
  MCP `checkpoint` tool (found in the request's tool list);
- anything else: the text `ok`.

Servers are bounded: at most `MAX_REQUESTS` requests and `LIFETIME_S` seconds, after which
they answer 503 and stop by themselves.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_REQUESTS = 120
LIFETIME_S = 240.0
RUN_OFFERED = "e2e: run the offered command"
CALL_MCP = "e2e: call the mcp checkpoint tool"
OFFERED_BODY = "offered, and it ran"
MCP_BODY = "recorded through MCP"
DONE_TEXT = "done"
# The session-start block's line that says how to record: `Record: PROGRAM checkpoint ...`.
_RECORD = re.compile(r'(?m)^Record: (?P<command>\S.*? checkpoint(?: --task t-[0-9a-f]{12})?) "')


@dataclass
class Reply:
    """What the fake model answers: text, or one tool call."""

    text: str = ""
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Seen:
    """One request the fake model received."""

    path: str
    body: dict[str, Any]

    @property
    def text(self) -> str:
        """Every string in the body, one after another (what the model reads)."""
        return strings(self.body)


def strings(value: object) -> str:
    """Every string in a JSON value, joined by line breaks."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(strings(item) for item in value.values())
    if isinstance(value, list):
        return "\n".join(strings(item) for item in value)
    return ""


def offered_command(request_text: str) -> str | None:
    """The `Record:` command offered in the conversation (HTML escapes undone: Gemini
    escapes hook text), or None."""
    found = _RECORD.search(html.unescape(request_text))
    return found.group("command") if found else None


def decide(newest_user_text: str, has_tool_result: bool, request_text: str) -> Reply:
    """The script: what the fake model does with the newest user turn."""
    if has_tool_result:
        return Reply(text=DONE_TEXT)
    if RUN_OFFERED in newest_user_text:
        command = offered_command(request_text)
        if command is None:
            return Reply(text="no Record: line was offered")
        return Reply(tool="shell", arguments={"command": f'{command} "{OFFERED_BODY}"'})
    if CALL_MCP in newest_user_text:
        return Reply(tool="mcp-checkpoint", arguments={"text": MCP_BODY})
    return Reply(text="ok")


def mcp_tool_name(names: list[str]) -> str | None:
    """The client's name for majordomus' `checkpoint` tool among the tools offered."""
    for name in names:
        if "majordomus" in name and name.endswith("checkpoint"):
            return name
    return None


Answer = Callable[["Stub", "BaseHTTPRequestHandler", Seen], None]


class Stub:
    """One fake model server: its address, what it received, its bounds."""

    def __init__(self, name: str, answer: Answer) -> None:
        self.name = name
        self.answer = answer
        self.seen: list[Seen] = []
        self.replies: list[Reply] = []  # what the fake model answered, tool calls included
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + LIFETIME_S
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:
                self._reply_json(200, {})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                seen = Seen(self.path, body if isinstance(body, dict) else {"body": body})
                with stub.lock:
                    stub.seen.append(seen)
                    over = len(stub.seen) > MAX_REQUESTS or time.monotonic() > stub.deadline
                if over:
                    self._reply_json(503, {"error": "e2e stub: out of requests or time"})
                    threading.Thread(target=stub.server.shutdown, daemon=True).start()
                    return
                stub.answer(stub, self, seen)

            def _reply_json(self, status: int, value: object) -> None:
                send_json(self, status, value)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def commands(self) -> list[str]:
        """The shell commands the fake model asked the client to run."""
        with self.lock:
            return [r.arguments["command"] for r in self.replies if r.tool == "shell"]

    def requests(self, path_part: str = "") -> list[Seen]:
        with self.lock:
            return [seen for seen in self.seen if path_part in seen.path]


def send_json(handler: BaseHTTPRequestHandler, status: int, value: object) -> None:
    data = json.dumps(value).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def send_sse(handler: BaseHTTPRequestHandler, events: list[tuple[str | None, object]]) -> None:
    """Server-sent events, whole, with a length (no chunked encoding needed)."""
    parts = []
    for name, value in events:
        head = f"event: {name}\n" if name else ""
        parts.append(f"{head}data: {json.dumps(value)}\n\n")
    data = "".join(parts).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def serving(name: str, answer: Answer) -> Iterator[Stub]:
    stub = Stub(name, answer)
    thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    thread.start()
    timer = threading.Timer(LIFETIME_S, stub.server.shutdown)
    timer.daemon = True
    timer.start()
    try:
        yield stub
    finally:
        timer.cancel()
        stub.server.shutdown()
        stub.server.server_close()
        thread.join(timeout=5)


# Anthropic Messages (Claude Code): POST /v1/messages, streaming SSE when asked.
def anthropic(stub: Stub, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    body = seen.body
    if "count_tokens" in seen.path:
        send_json(handler, 200, {"input_tokens": 10})
        return
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    newest = users[-1].get("content", "") if users else ""
    has_result = isinstance(newest, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in newest
    )
    reply = decide(strings(newest), has_result, seen.text)
    stub.replies.append(reply)
    names = [t.get("name", "") for t in body.get("tools", []) if isinstance(t, dict)]
    block: dict[str, Any]
    if reply.tool == "shell":
        arguments = {**reply.arguments, "description": "record a checkpoint"}
        block = {"type": "tool_use", "id": f"toolu_{len(stub.seen)}", "name": "Bash"}
    elif reply.tool == "mcp-checkpoint" and mcp_tool_name(names):
        arguments = reply.arguments
        block = {"type": "tool_use", "id": f"toolu_{len(stub.seen)}", "name": mcp_tool_name(names)}
    else:
        arguments = {}
        block = {"type": "text", "text": reply.text or "no such tool was offered"}
    stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
    model = body.get("model", "claude-e2e")
    usage = {"input_tokens": 10, "output_tokens": 5}
    if not body.get("stream"):
        full = {**block, "input": arguments} if stop == "tool_use" else block
        whole = {"id": f"msg_{len(stub.seen)}", "type": "message", "role": "assistant"}
        send_json(
            handler,
            200,
            whole
            | {
                "model": model,
                "content": [full],
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            },
        )
        return
    start = {**block, "input": {}} if stop == "tool_use" else {**block, "text": ""}
    delta = (
        {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
        if stop == "tool_use"
        else {"type": "text_delta", "text": block["text"]}
    )
    message: dict[str, Any] = {
        "id": f"msg_{len(stub.seen)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    send_sse(
        handler,
        [
            ("message_start", {"type": "message_start", "message": message}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": start},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ],
    )


# OpenAI Responses (Codex): POST /v1/responses, streaming SSE.
def openai_responses(stub: Stub, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    body = seen.body
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    newest_user = -1
    for n, given in enumerate(items):
        if given.get("role") == "user" and given.get("type", "message") == "message":
            newest_user = n
    after = items[newest_user + 1 :]
    has_result = any(i.get("type") == "function_call_output" for i in after)
    newest = strings(items[newest_user]) if newest_user >= 0 else ""
    reply = decide(newest, has_result, seen.text)
    stub.replies.append(reply)
    names = [str(t.get("name", "")) for t in body.get("tools", []) if isinstance(t, dict)]
    number = len(stub.seen)
    item: dict[str, Any]
    if reply.tool == "shell":
        name = next((n for n in ("exec_command", "shell_command", "shell") if n in names), "shell")
        command = reply.arguments["command"]
        arguments: dict[str, Any] = (
            {"cmd": command}
            if name == "exec_command"
            else {"command": command}
            if name == "shell_command"
            else {"command": ["bash", "-lc", command]}
        )
        item = {
            "type": "function_call",
            "id": f"fc_{number}",
            "call_id": f"call_{number}",
            "name": name,
            "arguments": json.dumps(arguments),
        }
    elif reply.tool == "mcp-checkpoint" and _namespaced(body):
        # Codex offers an MCP server's tools as a namespace: the call names both.
        item = {
            "type": "function_call",
            "id": f"fc_{number}",
            "call_id": f"call_{number}",
            "namespace": _namespaced(body),
            "name": "checkpoint",
            "arguments": json.dumps(reply.arguments),
        }
    else:
        text = reply.text or "no such tool was offered"
        item = {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{number}",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    response: dict[str, Any] = {
        "id": f"resp_{number}",
        "object": "response",
        "model": body.get("model"),
        "status": "in_progress",
        "output": [],
    }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    events: list[tuple[str | None, object]] = [
        ("response.created", {"type": "response.created", "response": response}),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
    ]
    if item["type"] == "message":
        events.append(
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": item["content"][0]["text"],
                },
            )
        )
    events += [
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "output": [item], "usage": usage},
            },
        ),
    ]
    send_sse(handler, events)


def _namespaced(body: dict[str, Any]) -> str | None:
    """The namespace of majordomus' MCP tools among a Responses request's tools."""
    for tool in body.get("tools", []):
        if not isinstance(tool, dict) or tool.get("type") != "namespace":
            continue
        inner = [t.get("name") for t in tool.get("tools", []) if isinstance(t, dict)]
        if "majordomus" in str(tool.get("name")) and "checkpoint" in inner:
            return str(tool["name"])
    return None


# Gemini generateContent / streamGenerateContent (Gemini CLI): POST /v1beta/models/M:ACTION.
def gemini(stub: Stub, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    body = seen.body
    if ":countTokens" in seen.path:
        send_json(handler, 200, {"totalTokens": 10})
        return
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":  # a side question (routing)
        value = filled(config.get("responseJsonSchema") or config.get("responseSchema") or {})
        send_json(handler, 200, _gemini_answer({"text": json.dumps(value)}))
        return
    contents = [c for c in body.get("contents", []) if isinstance(c, dict)]
    users = [c for c in contents if c.get("role", "user") == "user"]
    newest = users[-1].get("parts", []) if users else []
    has_result = any(isinstance(p, dict) and "functionResponse" in p for p in newest)
    reply = decide(strings(newest), has_result, seen.text)
    stub.replies.append(reply)
    names = [
        str(d.get("name", ""))
        for t in body.get("tools", [])
        if isinstance(t, dict)
        for d in t.get("functionDeclarations", [])
        if isinstance(d, dict)
    ]
    part: dict[str, Any]
    if reply.tool == "shell":
        name = next((n for n in ("run_shell_command", "shell") if n in names), "run_shell_command")
        part = {"functionCall": {"name": name, "args": reply.arguments}}
    elif reply.tool == "mcp-checkpoint" and mcp_tool_name(names):
        part = {"functionCall": {"name": mcp_tool_name(names), "args": reply.arguments}}
    else:
        part = {"text": reply.text or "no such tool was offered"}
    answer = _gemini_answer(part)
    if ":streamGenerateContent" in seen.path:
        send_sse(handler, [(None, answer)])
    else:
        send_json(handler, 200, answer)


def _gemini_answer(part: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-e2e",
    }


def filled(schema: object) -> object:
    """The plainest value a JSON schema accepts: the first of an enum, 1, "e2e", required
    properties filled (a routing question gets the lowest score, a next-speaker question
    the user)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or list(properties)
        return {name: filled(properties.get(name, {})) for name in required}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "e2e"
