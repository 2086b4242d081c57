"""The real clients: pinned versions, installed from npm into a cache folder outside the
repository, and run with a bounded time in their own process group.

A version bump is one line of `PINNED`. Every failure names the client and its version.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# client -> (npm package, version): the one table to change on a bump.
PINNED = {
    "claude": ("@anthropic-ai/claude-code", "2.1.197"),
    "codex": ("@openai/codex", "0.171.0"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "inspector": ("@modelcontextprotocol/inspector", "0.15.0"),
}
BINARY = {"claude": "claude", "codex": "codex", "gemini": "gemini", "inspector": "mcp-inspector"}
NODE_MAJOR = 20  # the oldest node every pinned client runs on (gemini-cli: >=20)
CALL_TIMEOUT_S = 60  # each client call; killed with its process group past this
INSTALL_TIMEOUT_S = 900


class ClientError(AssertionError):
    """A client that could not be installed or run: the message names it and its version."""


def label(client: str) -> str:
    package, version = PINNED[client]
    return f"{client} ({package}@{version})"


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "majordomus-e2e" / "npm"


def installed_version(prefix: Path, package: str) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = meta.get("version") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def ensure_installed(prefix: Path, environ: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Every pinned client installed under `prefix` (npm install --prefix, one package at a
    time so that a failure names it); their programs. `environ`: npm's environment."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise ClientError(
            "node and npm are needed for the end-to-end suite (apt install nodejs npm)"
        )
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    major = node.stdout.strip().lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < NODE_MAJOR:
        raise ClientError(
            f"node {node.stdout.strip() or '?'} is too old: {label('gemini')} needs node "
            f"{NODE_MAJOR} or later"
        )
    prefix.mkdir(parents=True, exist_ok=True)
    for client, (package, version) in PINNED.items():
        if installed_version(prefix, package) == version and _program(prefix, client).exists():
            continue
        # Saved in the prefix's package.json: a later install prunes what is not listed.
        argv = [
            "npm",
            "install",
            "--prefix",
            str(prefix),
            "--save-exact",
            "--no-audit",
            "--no-fund",
        ]
        try:
            done = subprocess.run(
                [*argv, f"{package}@{version}"],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                check=False,
                env=None if environ is None else dict(environ),
            )
        except subprocess.TimeoutExpired:
            raise ClientError(
                f"npm install of {package}@{version} took over {INSTALL_TIMEOUT_S} s"
            ) from None
        if done.returncode != 0 or installed_version(prefix, package) != version:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise ClientError(f"npm install of {package}@{version} failed: {' | '.join(tail)}")
    return {client: _program(prefix, client) for client in PINNED}


def _program(prefix: Path, client: str) -> Path:
    return prefix / "node_modules" / ".bin" / BINARY[client]


@dataclass
class Ran:
    """One finished client call."""

    client: str
    argv: Sequence[str]
    code: int
    out: str
    err: str

    def ok(self) -> Ran:
        if self.code != 0:
            raise ClientError(
                f"{label(self.client)} exited {self.code}: {self.argv!r}\n"
                f"stdout: {self.out[-2000:]}\nstderr: {self.err[-2000:]}"
            )
        return self


def run(
    client: str,
    argv: Sequence[str],
    cwd: Path,
    environ: Mapping[str, str],
    timeout: float = CALL_TIMEOUT_S,
) -> Ran:
    """One call of a client, stdin closed, in a process group of its own that is killed
    whole when it outlives `timeout`."""
    process = subprocess.Popen(
        list(argv), cwd=cwd, env=dict(environ), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise ClientError(
            f"{label(client)} did not finish within {timeout:.0f} s (killed): {list(argv)!r}\n"
            f"stdout: {out[-2000:]}\nstderr: {err[-2000:]}"
        ) from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return Ran(client, list(argv), process.returncode, out, err)


def agent_path(node_dir: Path) -> str:
    """A PATH for the agents: node, git and the shell, and no `majordomus` on it."""
    entries = [str(node_dir), "/usr/local/bin", "/usr/bin", "/bin"]
    kept = [e for e in dict.fromkeys(entries) if not (Path(e) / "majordomus").exists()]
    return os.pathsep.join(kept)
