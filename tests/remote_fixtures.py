"""Real remotes for the transport tests: bare repositories, clones, `git daemon` on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pygit2

from majordomus.records import NoteError, parse_note
from tests.conftest import Clock, Repo


def git(cwd: Path, environ: Mapping[str, str], *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=dict(environ), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def bare(path: Path, environ: Mapping[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, environ, "init", "-q", "--bare", "-b", "main", str(path))
    return path


def clone(url: str, path: Path, environ: dict[str, str], clock: Clock, *options: str) -> Repo:
    git(path.parent, environ, "clone", "-q", *options, url, str(path))
    return Repo(path, environ, clock)


def seeded(root: Path, environ: dict[str, str], clock: Clock) -> tuple[Path, Repo]:
    """A bare repository holding one commit on main, and the clone that pushed it."""
    remote = bare(root / "remote.git", environ)
    first = clone(str(remote), root / "a", environ, clock)
    first.commit("initial")
    first.git("push", "-q", "origin", "main")
    return remote, first


def ref_ids(path: Path, ref: str = "refs/notes/majordomus") -> set[str]:
    """Every record id in the notes `ref` of the repository at `path` (git dir or work tree)."""
    repo = pygit2.Repository(str(path))
    if ref not in repo.references:
        return set()
    commit = repo.references[ref].peel(pygit2.Commit)
    ids: set[str] = set()
    pending = [commit.tree]
    while pending:
        tree = pending.pop()
        for entry in tree:
            obj = repo[entry.id]
            if isinstance(obj, pygit2.Tree):
                pending.append(obj)
            elif isinstance(obj, pygit2.Blob):
                with contextlib.suppress(NoteError):
                    ids.update(record.id for record in parse_note(obj.data).records)
    return ids


def history_ids(repo: Repo) -> list[str]:
    """Record ids as every read command sees them (local and remote-tracking refs united)."""
    result = repo.run("history", "--all", "--json")
    assert result.code == 0, result.err
    return sorted(record["id"] for record in json.loads(result.out)["records"])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def git_daemon(base: Path, environ: Mapping[str, str]) -> Iterator[str]:
    """`git daemon` serving `base` on 127.0.0.1 (push enabled); yields its URL prefix."""
    for _ in range(5):
        port = free_port()
        process = subprocess.Popen(
            [
                "git",
                "daemon",
                "--export-all",
                "--enable=receive-pack",
                f"--base-path={base}",
                "--listen=127.0.0.1",
                f"--port={port}",
                "--reuseaddr",
                "--informative-errors",
                str(base),
            ],
            env=dict(environ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if _wait_listening(process, port):
            break
        process.kill()
        process.wait()
    else:
        raise AssertionError("git daemon did not start on 127.0.0.1")
    try:
        yield f"git://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _wait_listening(process: subprocess.Popen[bytes], port: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False  # the port was taken between probing and binding
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.02)
    return False
