"""The suite's own harness: an install that fails names the package and its version, a
client that outlives its time is killed with its process group and named."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from tests.e2e import clients


def test_a_failed_install_names_the_package_and_its_version(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on: the registry is unreachable
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    environ = {
        **os.environ,
        "npm_config_registry": f"http://127.0.0.1:{port}/",
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_fetch_retries": "0",
        "npm_config_offline": "false",
    }
    with pytest.raises(clients.ClientError) as raised:
        clients.ensure_installed(tmp_path / "prefix", environ)
    package, version = clients.PINNED["claude"]
    assert str(raised.value).startswith(f"npm install of {package}@{version} failed: ")


def test_a_client_past_its_time_is_killed_with_its_children_and_named(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    with pytest.raises(clients.ClientError) as raised:
        clients.run("codex", ["sh", "-c", script], tmp_path, dict(os.environ), timeout=1)
    assert f"{clients.label('codex')} did not finish within 1 s (killed)" in str(raised.value)
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)  # the whole group was killed, the shell's child too


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (a container's init may not reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
