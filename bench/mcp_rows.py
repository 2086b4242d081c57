"""The MCP rows (`bench/run.py --only mcp`): how long `majordomus mcp` takes to be ready.

Each run starts a fresh server the way an agent does (a child process over stdio) and
talks JSON-RPC to it as a client does: `initialize`, then `notifications/initialized`
and `tools/list`, then one `tools/call` of `context`. Two kinds of run, interleaved:

- SDK first: the child imports the MCP SDK, notes the time (`time.monotonic`, one clock
  for every process of the machine), then runs majordomus' own `main` with `mcp`. It
  gives the SDK's import (the child started to the SDK imported: not majordomus' to make
  faster) and the server's own start-up (the SDK imported to the `tools/list` answer
  read): the target, at most 0.2 s.
- As shipped: the console script `majordomus mcp`, as an agent runs it. It gives the
  start-up a client sees (spawned to the `tools/list` answer read: Codex leaves out of a
  turn the tools of an optional server slower than a second) and the first `context`
  call (sent to answered), which waits for what is left of the SDK's import.

The repository is a scratch clone of the cached one of 100,000 commits, the benchmark
task current and the clone's caches warm (one `context` first): the start-up reads
nothing of it; the first call is a session's first `context` in a clone in use.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from repo_cache import Fixture, scratch_clone
from suite import Setup, replace_section

Log = Callable[[str], None]
BEGIN = "<!-- mcp rows: begin -->"
END = "<!-- mcp rows: end -->"
TARGET_S = 0.2  # the server's own part: the SDK imported to the first tools/list answered
MARK = "mcp-bench sdk imported at "
CHILD = f"""
import sys, time
import mcp.server.mcpserver
sys.stderr.write("{MARK}" + repr(time.monotonic()) + "\\n")
sys.stderr.flush()
from majordomus.__main__ import main
sys.argv = ["majordomus", "mcp"]
raise SystemExit(main())
"""
TIMEOUT_S = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """One server started: seconds from spawn to the SDK imported, from the SDK imported
    to the tools/list answer, and of the first context call; what went wrong, if anything."""

    sdk: float
    server: float
    context: float
    tools: tuple[str, ...]
    error: str = ""


def _send(stdin: IO[bytes], message: Mapping[str, Any]) -> None:
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()


def _answer(stdout: IO[bytes], ident: int) -> dict[str, Any]:
    """The response to request `ident` (notifications and log lines before it skipped)."""
    while True:
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed its output before answering request {ident}")
        message = json.loads(line)
        if isinstance(message, dict) and message.get("id") == ident:
            return message


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def probe(argv: list[str], repo: Path, env: Mapping[str, str]) -> Run:
    """One server started, listed and called once; closed by closing its input."""
    started = time.monotonic()
    child = subprocess.Popen(
        argv,
        cwd=repo,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    try:
        _send(child.stdin, INITIALIZE)
        _answer(child.stdout, 1)
        _send(child.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(child.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = _answer(child.stdout, 2)
        ready = time.monotonic()
        asked = time.monotonic()
        call = {"name": "context", "arguments": {}}
        _send(child.stdin, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        answer = _answer(child.stdout, 3)
        answered = time.monotonic()
        child.stdin.close()
        child.wait(timeout=TIMEOUT_S)
        err = child.stderr.read().decode("utf-8", "replace")
    except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as error:
        child.kill()
        child.wait()
        return Run(0.0, 0.0, 0.0, (), f"{type(error).__name__}: {error}")
    marks = [line for line in err.splitlines() if line.startswith(MARK)]
    imported = float(marks[0].removeprefix(MARK)) if marks else started
    tools = tuple(tool["name"] for tool in listed.get("result", {}).get("tools", []))
    wrong = "" if answer.get("result", {}).get("isError") is False else f"context: {answer}"
    return Run(imported - started, ready - imported, answered - asked, tools, wrong)


def prepared(setup: Setup, fixture: Fixture, where: Path, log: Log) -> Path:
    """A scratch clone of the cached repository, the benchmark task current in it (the
    `context` tool reads the current task), its caches warmed by one `context`: a clone
    in use, as an agent's session finds it."""
    where.mkdir(parents=True, exist_ok=True)
    repo = scratch_clone(fixture, where / "repo", setup.env)
    for argv in (["task", "use", fixture.expectation.task], ["context"]):
        command = [str(setup.majordomus), "-C", str(repo), *argv]
        subprocess.run(command, env=dict(setup.env), check=True, capture_output=True)
    log(f"mcp: a scratch clone of {fixture.shape.commits:,} commits")
    return repo


@dataclasses.dataclass(frozen=True, slots=True)
class Series:
    runs: tuple[Run, ...]

    @property
    def good(self) -> tuple[Run, ...]:
        return tuple(run for run in self.runs if not run.error)

    def median_ms(self, field: str) -> float:
        values = [getattr(run, field) for run in self.good]
        return statistics.median(values) * 1000 if values else float("nan")

    def spread_ms(self, field: str) -> str:
        values = [getattr(run, field) * 1000 for run in self.good]
        return f"{min(values):.0f} to {max(values):.0f}" if values else "—"

    def cells(self, field: str) -> str:
        return f"{self.median_ms(field):.0f} | {self.spread_ms(field)}"


@dataclasses.dataclass(frozen=True, slots=True)
class Rows:
    sdk_first: Series
    shipped: Series
    warmup: int

    @property
    def failed(self) -> int:
        return sum(len(s.runs) - len(s.good) for s in (self.sdk_first, self.shipped))


def mcp_rows(setup: Setup, repo: Path, log: Log) -> Rows:
    kinds = {
        "SDK first": [str(setup.python), "-c", CHILD],
        "as shipped": [str(setup.majordomus), "mcp"],
    }
    runs: dict[str, list[Run]] = {name: [] for name in kinds}
    for round_no in range(setup.warmup + setup.runs):
        for name, argv in kinds.items():
            run = probe(argv, repo, setup.env)
            if run.error:
                log(f"mcp: {name} run {round_no + 1} failed: {run.error}")
            if round_no >= setup.warmup:
                runs[name].append(run)
    first, shipped = Series(tuple(runs["SDK first"])), Series(tuple(runs["as shipped"]))
    return Rows(first, shipped, setup.warmup)


def section(rows: Rows, fixture: Fixture, command: str) -> str:
    first, shipped = rows.sdk_first, rows.shipped
    server = first.median_ms("server")
    verdict = "met" if server <= TARGET_S * 1000 else "MISSED"
    tools = sorted({name for run in (*first.good, *shipped.good) for name in run.tools})
    lines = [
        BEGIN,
        "## MCP server start-up",
        "",
        f"Generated by `{command}`: {len(first.runs)} servers of each kind started one "
        f"after another (after {rows.warmup} warm-up rounds), each driven over stdio as "
        "an agent drives it (`initialize`, `tools/list`, one `tools/call` of `context`) "
        f"on a scratch clone of the repository of {fixture.shape.commits:,} commits, its "
        "caches warm. SDK first: the child imports the MCP SDK before majordomus; the "
        "SDK's import is the SDK's, and the target is the server's own part, from the SDK "
        f"imported to the `tools/list` answer read: at most {TARGET_S * 1000:.0f} ms. As "
        "shipped: `majordomus mcp`, which answers `initialize` and `tools/list` while the "
        "SDK imports (Codex leaves out of a turn the tools of an optional server that has "
        "not listed them within a second).",
        "",
        "| measured | median ms | range ms | target | verdict |",
        "| --- | ---: | ---: | --- | --- |",
        "| SDK first: `import mcp.server.mcpserver` (child started to SDK imported) "
        f"| {first.cells('sdk')} | — | for the record |",
        "| SDK first: server's own start-up (SDK imported to `tools/list` answered) "
        f"| {first.cells('server')} | ≤ {TARGET_S * 1000:.0f} ms | {verdict} |",
        "| as shipped: start-up a client sees (spawned to `tools/list` answered) "
        f"| {shipped.cells('server')} | — | for the record |",
        "| as shipped: first `context` call (sent to answered; the SDK's import ends first) "
        f"| {shipped.cells('context')} | — | for the record |",
        "| SDK first: first `context` call (sent to answered) "
        f"| {first.cells('context')} | — | for the record |",
        "",
        f"Tools listed: {', '.join(tools) or 'none'}."
        + (f" {rows.failed} runs failed." if rows.failed else ""),
        "",
        END,
    ]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    replace_section(path, text, BEGIN, END)
