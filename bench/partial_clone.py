"""Partial clones: reading N notes through git's lazy fetches vs majordomus' one batch.

`.venv/bin/python bench/partial_clone.py [--notes 300]` builds, in a temporary
folder, a remote of N commits with one note each (served with
uploadpack.allowFilter), then for each filter (blob:none, tree:0) times:
git reading the notes after a plain `git fetch` (one lazy fetch per missing
object), `majordomus history --all` after the same plain fetch (the read fetches
what it lacks in one batch), and `majordomus fetch` in a fresh clone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = "t-0123456789ab"
MAJORDOMUS = [sys.executable, "-m", "majordomus"]


def git(cwd: Path, env: dict[str, str], *args: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, check=True
    )
    return result.stdout.decode()


def at(i: int) -> str:
    return f"2026-11-30T{3 + i // 3600:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z"


def build_remote(root: Path, env: dict[str, str], notes: int) -> Path:
    remote = root / "remote.git"
    git(root, env, "init", "-q", "--bare", "-b", "main", str(remote))
    stream = ["blob\nmark :1\ndata 2\nx\n"]
    for i in range(notes):
        message = f"commit {i}"
        stream.append(
            f"commit refs/heads/main\nmark :{i + 10}\ncommitter A <a@x> {1796000000 + i} +0000\n"
            f"data {len(message)}\n{message}\nM 100644 :1 f{i}\n"
        )
    marks = root / "marks"
    git(
        remote,
        env,
        "fast-import",
        "--quiet",
        f"--export-marks={marks}",
        stdin="".join(stream).encode(),
    )
    commit_of = dict(line.split() for line in marks.read_text().splitlines())
    out = ["commit refs/notes/majordomus\ncommitter A <a@x> 1796100000 +0000\ndata 5\nnotes\n"]
    for i in range(notes):
        head = commit_of[f":{i + 10}"]
        common = f'task = "{TASK}"\nhead = "{head}"\nat = {at(i)}\nauthor = "A <a@x>"\n'
        body = f'[[checkpoint]]\nv = 1\nid = "c-{i:016x}"\n{common}body = "checkpoint {i}"\n'
        if i == 0:
            body = f'[[task]]\nv = 1\nid = "{TASK}"\n{common}title = "bench"\n' + body
        data = body.encode()
        out.append(f"N inline {head}\ndata {len(data)}\n{body}")
    git(remote, env, "fast-import", "--quiet", stdin="".join(out).encode())
    git(remote, env, "config", "uploadpack.allowFilter", "true")
    return remote


def timed(cwd: Path, env: dict[str, str], *argv: str) -> float:
    start = time.monotonic()
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
    return time.monotonic() - start


def missing(cwd: Path, env: dict[str, str]) -> int:
    refs = git(cwd, env, "for-each-ref", "--format=%(objectname)", "refs/notes").split()
    out = git(cwd, env, "rev-list", "--objects", "--no-walk", "--missing=print", *refs)
    return sum(1 for line in out.splitlines() if line.startswith("?"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=300)
    notes = parser.parse_args().notes
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "A",
            "GIT_AUTHOR_EMAIL": "a@x",
            "GIT_COMMITTER_NAME": "A",
            "GIT_COMMITTER_EMAIL": "a@x",
        }
        url = f"file://{build_remote(root, env, notes)}"
        tracking = "+refs/notes/majordomus:refs/notes/remotes/origin/majordomus"
        print(f"{notes} notes; git {git(root, env, 'version').split()[-1]}")
        print(
            "| filter | missing after git fetch | git, lazy | majordomus history | "
            "majordomus fetch (fresh clone) |"
        )
        print("| --- | --- | --- | --- | --- |")
        for flt in ("blob:none", "tree:0"):
            clones = {}
            for name in ("lazy", "batch", "fetch"):
                clones[name] = root / f"{name}-{flt.replace(':', '-')}"
                git(root, env, "clone", "-q", f"--filter={flt}", url, str(clones[name]))
            for name in ("lazy", "batch"):
                git(clones[name], env, "fetch", "-q", "origin", tracking)
            lacking = missing(clones["lazy"], env)
            lazy = timed(
                clones["lazy"],
                env,
                "git",
                "log",
                "--notes=remotes/origin/majordomus",
                "--format=%N",
            )
            batch = timed(clones["batch"], env, *MAJORDOMUS, "history", "--all")
            fetch = timed(clones["fetch"], env, *MAJORDOMUS, "fetch")
            left = sum(missing(clones[name], env) for name in clones)
            assert left == 0, f"{left} objects still missing"
            print(f"| {flt} | {lacking} | {lazy:.2f} s | {batch:.2f} s | {fetch:.2f} s |")


if __name__ == "__main__":
    main()
