"""`majordomus mcp` as a process, spoken to in raw JSON-RPC lines; and the writer of
`majordomus/mcptable.py`, the handshake the server answers before the SDK is loaded:

    .venv/bin/python -m tests.support.mcp_wire

(after a change of a tool, its docstring or a parameter's description: a test says so).
"""

from __future__ import annotations

import json
import pprint
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.cli import MAJORDOMUS

TABLE = Path(__file__).resolve().parent.parent.parent / "majordomus" / "mcptable.py"


class Wire:
    """`majordomus mcp` started as an agent starts it (a child process over stdio)."""

    def __init__(
        self, cwd: Path, environ: Mapping[str, str], argv: Sequence[str] | None = None
    ) -> None:
        self.child = subprocess.Popen(
            list(argv or [*MAJORDOMUS, "mcp"]),
            cwd=cwd,
            env=dict(environ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        assert self.child.stdout is not None
        out = self.child.stdout

        def read() -> None:  # lines as they come, so a test waits with a timeout, never hangs
            for line in out:
                self.lines.put(line)

        threading.Thread(target=read, daemon=True).start()

    def send(self, *messages: Mapping[str, Any]) -> None:
        """All `messages` in one write: a client that does not wait between them."""
        assert self.child.stdin is not None
        self.child.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.child.stdin.flush()

    def answer(self, ident: int) -> dict[str, Any]:
        while True:
            message = json.loads(self.lines.get(timeout=60))
            if isinstance(message, dict) and message.get("id") == ident:
                return message

    def close(self) -> str:
        assert self.child.stdin is not None and self.child.stderr is not None
        self.child.stdin.close()
        assert self.child.wait(timeout=60) == 0
        return self.child.stderr.read().decode()


def initialize(ident: int, version: str = "2025-06-18") -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}


def call(ident: int, tool: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


PING = {"jsonrpc": "2.0", "id": 0, "method": "ping"}  # the front leaves it: the SDK answers
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
# What a client lists at start, each answered by the front from the table.
LISTINGS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


def listings(wire: Wire) -> dict[str, Any]:
    """Each of LISTINGS asked (ids 10 on) in one write, and answered."""
    asked = [{"jsonrpc": "2.0", "id": 10 + n, "method": m} for n, m in enumerate(LISTINGS)]
    wire.send(*asked)
    return {m: wire.answer(10 + n)["result"] for n, m in enumerate(LISTINGS)}


def sdk_handshake(cwd: Path, environ: Mapping[str, str], version: str) -> tuple[Any, Any]:
    """`initialize` and the listings as the SDK itself answers them: a ping first, which
    only the SDK answers, so the server has handed over before the handshake."""
    wire = Wire(cwd, environ)
    wire.send(PING)
    wire.answer(0)
    wire.send(initialize(1, version))
    initialized = wire.answer(1)["result"]
    wire.send(INITIALIZED)
    listed = listings(wire)
    wire.close()
    return initialized, listed


def main() -> None:
    import os

    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from majordomus import mcptable

    with tempfile.TemporaryDirectory() as where:
        environ = {**os.environ, "HOME": where}
        initialized, listed = sdk_handshake(Path(where), environ, HANDSHAKE_PROTOCOL_VERSIONS[-1])
    source = TABLE.read_text(encoding="utf-8")
    head = source[: source.index("# ---- written by tests/support/mcp_wire.py")]
    table = {
        "HANDSHAKE_VERSIONS": tuple(HANDSHAKE_PROTOCOL_VERSIONS),
        "CAPABILITIES": initialized["capabilities"],
        "LISTINGS": listed,
    }
    assert initialized["instructions"] == mcptable.INSTRUCTIONS
    # One line per value pprint would fit (ruff then breaks the dicts, never a string):
    # each text reads whole, as the SDK sends it.
    body = "".join(
        f"{name}: Final = {pprint.pformat(value, width=10_000, sort_dicts=False)}\n"
        for name, value in table.items()
    )
    TABLE.write_text(
        head + "# ---- written by tests/support/mcp_wire.py, not by hand " + "-" * 31 + "\n" + body,
        encoding="utf-8",
    )
    ruff = Path(sys.executable).parent / "ruff"
    subprocess.run([str(ruff), "format", "-q", str(TABLE)], check=True)
    print(f"wrote {TABLE}")


if __name__ == "__main__":
    main()
