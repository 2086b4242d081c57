"""`majordomus mcp` before the MCP SDK is loaded: the handshake answered at once.

The SDK takes about a second to import (two and more on a busy machine), and a client
gives a server little time: Codex leaves an optional server's tools out of a turn when
its `initialize` and `tools/list` are not answered within a second (its
`OPTIONAL_MCP_STARTUP_GRACE`), and a model that calls one then gets "unsupported call".
So `serve` starts the SDK's import in a thread and, meanwhile, answers `initialize`,
`tools/list` and the (empty) lists of prompts and resources from `mcptable` (what the
SDK itself answers: a test holds the two equal).
The first message it does not answer so (a tool call, say) waits for the import, then
the SDK's server takes over the connection: the client's `initialize` replayed to it
(its answer, already given, dropped), then that message and the rest, in order.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import IO, Any

from majordomus import __version__, mcptable

CommandLine = Callable[..., int]


def sdk_installed() -> bool:
    """Whether the MCP SDK can be imported, found without importing it."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        return False


class Loader(threading.Thread):
    """The SDK (and the server built on it) imported beside the handshake."""

    def __init__(self) -> None:
        super().__init__(name="majordomus-mcp-import", daemon=True)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            importlib.import_module("majordomus.mcp_server")
        except BaseException as error:  # handed to the main thread, which raises it
            self.error = error


def _wire() -> tuple[IO[bytes], IO[bytes]]:
    """The connection's input and output, on descriptors of their own: fd 0 then reads
    nothing and fd 1 goes to stderr, so a child process (git) can never write on the wire
    (as the SDK's own stdio transport arranges)."""
    reading, writing = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return os.fdopen(reading, "rb"), os.fdopen(writing, "wb")


def initialize_result(params: Any) -> dict[str, Any] | None:
    """The SDK's answer to a well-formed `initialize`, None for anything else."""
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    if not isinstance(requested, str) or not isinstance(params.get("capabilities"), dict):
        return None
    info = params.get("clientInfo")
    if not (isinstance(info, dict) and isinstance(info.get("name"), str)):
        return None
    if not isinstance(info.get("version"), str):
        return None
    versions = mcptable.HANDSHAKE_VERSIONS
    return {
        "capabilities": mcptable.CAPABILITIES,
        "instructions": mcptable.INSTRUCTIONS,
        "protocolVersion": requested if requested in versions else versions[-1],
        "serverInfo": {"name": "majordomus", "version": __version__},
    }


class Handshake:
    """What the front answers before the SDK is loaded, and what it hands over after."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.initialize: tuple[bytes, Any] | None = None  # the line and its id
        self.initialized: bytes | None = None  # notifications/initialized, to replay

    def _answer(self, ident: Any, result: Mapping[str, Any]) -> None:
        line = json.dumps({"jsonrpc": "2.0", "id": ident, "result": result})
        self.out.write(line.encode("utf-8") + b"\n")
        self.out.flush()

    def take(self, line: bytes) -> bool:
        """Answer `line` here if it is the handshake's (True), else leave it (False)."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        method, ident = message.get("method"), message.get("id")
        params = message.get("params")
        if method == "initialize" and self.initialize is None and ident is not None:
            result = initialize_result(params)
            if result is None:
                return False
            self.initialize = (line, ident)
            self._answer(ident, result)
            return True
        if self.initialize is None:
            return False  # before the handshake: the SDK says what it says
        if method == "notifications/initialized" and "id" not in message:
            self.initialized = line
            return True
        plain = params is None or (isinstance(params, dict) and set(params) <= {"_meta"})
        if method in mcptable.LISTINGS and ident is not None and plain:  # no cursor: page one
            listing: Any = mcptable.LISTINGS[method]
            self._answer(ident, listing)
            return True
        return False

    def replay(self) -> tuple[list[bytes], Any]:
        """The lines the SDK must read first, and the id whose answer was given here."""
        if self.initialize is None:
            return [], None
        lines = [self.initialize[0]] + ([self.initialized] if self.initialized else [])
        return lines, self.initialize[1]


def serve(cwd: str, environ: Mapping[str, str], command_line: CommandLine) -> None:
    loader = Loader()
    loader.start()
    reading, writing = _wire()
    handshake = Handshake(writing)
    while True:
        line = reading.readline()
        if not line:
            return  # the client went away during the handshake: nothing to hand over
        if not line.strip() or handshake.take(line):
            continue
        break
    loader.join()
    if loader.error is not None:
        raise loader.error
    from majordomus import mcp_server

    first, answered = handshake.replay()
    mcp_server.take_over(cwd, environ, command_line, [*first, line], reading, writing, answered)
