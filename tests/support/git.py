"""Real git: one runner, bare remotes and clones, and `git daemon` on 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

NOTES_REF = "refs/notes/majordomus"
DAEMON_START_S = 10.0  # an upper bound for `git daemon` to listen; never a window to hit


def git(
    cwd: Path,
    environ: Mapping[str, str],
    *args: str,
    stdin: bytes | str | None = None,
    check: bool = True,
) -> str:
    """Real git in `cwd`; its stdout, or an AssertionError with git's own words."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=dict(environ),
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.decode()}")
    return result.stdout.decode("utf-8", "replace")


def bare(path: Path, environ: Mapping[str, str]) -> Path:
    """An empty bare repository whose default branch is `main`. No `git gc --auto` after
    each push: a push runs the remote's git without the environment's config (git clears
    GIT_CONFIG_COUNT for it), so the remote is told in its own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, environ, "init", "-q", "--bare", "-b", "main", str(path))
    git(path, environ, "config", "receive.autogc", "false")
    return path


def make_clone(path: Path, environ: Mapping[str, str]) -> Path:
    """A repository with one commit on `main`."""
    path.mkdir(parents=True)
    git(path, environ, "init", "-q", "-b", "main")
    git(path, environ, "commit", "-q", "--allow-empty", "-m", "initial")
    return path


def commit(path: Path, environ: Mapping[str, str], message: str) -> str:
    """An empty commit on HEAD, made by git; its id."""
    git(path, environ, "commit", "-q", "--allow-empty", "-m", message)
    return git(path, environ, "rev-parse", "HEAD").strip()


def lose_object(path: Path, environ: Mapping[str, str], object_id: str) -> None:
    """One object gone from the clone at `path` (a damaged clone, or a partial one whose
    promisor remote still has it): every pack made loose objects (moved aside, unpacked
    by git), then that object's file deleted."""
    objects = Path(git(path, environ, "rev-parse", "--git-path", "objects").strip())
    objects = objects if objects.is_absolute() else path / objects
    aside = objects / "aside"
    aside.mkdir()
    for pack in sorted((objects / "pack").glob("*.pack")):
        kept = aside / pack.name
        pack.rename(kept)
        for other in (objects / "pack").glob(f"{pack.stem}.*"):
            other.unlink()
        git(path, environ, "unpack-objects", "-q", stdin=kept.read_bytes())
        kept.unlink()
    aside.rmdir()
    (objects / object_id[:2] / object_id[2:]).unlink()


def add_worktrees(clone: Path, environ: Mapping[str, str], count: int) -> list[Path]:
    """`count` linked work trees of `clone`, each on its own branch with its own commit."""
    trees = []
    for i in range(count):
        tree = clone.parent / f"{clone.name}-wt{i}"
        git(clone, environ, "worktree", "add", "-q", "-b", f"wt{i}", str(tree))
        commit(tree, environ, f"work in wt{i}")
        trees.append(tree)
    return trees


def common_dir(path: Path, environ: Mapping[str, str]) -> Path:
    out = git(path, environ, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(out.strip())


def lock_files(path: Path, environ: Mapping[str, str]) -> list[Path]:
    """Lock files a killed writer of the notes ref can leave behind."""
    common = common_dir(path, environ)
    candidates = [common / (NOTES_REF + ".lock"), common / "packed-refs.lock"]
    return [lock for lock in candidates if lock.exists()]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def git_daemon(base: Path, environ: Mapping[str, str]) -> Iterator[str]:
    """`git daemon` serving `base` on 127.0.0.1 (push enabled); yields its URL prefix.

    The port is probed free, then bound by the daemon: when another process (a test on
    another worker) takes it in between, the daemon exits and another port is tried.
    """
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
        if process.stderr is not None:
            process.stderr.close()
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
    deadline = time.monotonic() + DAEMON_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False  # the port was taken between probing and binding
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.02)
    return False
