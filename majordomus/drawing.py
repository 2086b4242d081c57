"""Commits drawn as `git log --graph` draws them, git itself asked to draw: in a throwaway
git directory that reads this repository's objects, holds one ref per line each chosen
commit is to carry and nothing else, and `git log --graph --simplify-by-decoration`
keeps those commits and the branch and merge structure between them. The repository
itself is never written to: its refs, config and objects are read, as git reads them.

A commit given N lines carries N refs; `%w(1,0,0)%D` writes their names one a line, so
git draws the commit as it draws a commit of N lines of text, and the lines after the
first carry the graph's column lines the way git continues a multi-line commit."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from majordomus.repository import Repository, check_exit
from majordomus.values import DrawnLine

REFS = "refs/majordomus-graph/"
MARK = "\x01"  # around a commit's id on its own line: nothing git draws is a control character
FORMAT = "--format=%x01%H%x01%w(1,0,0)%D"
# What locates or shapes the repository for git, replaced by the throwaway directory's own.
_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_NAMESPACE")


class Drawn(NamedTuple):
    lines: tuple[DrawnLine, ...]
    commits: frozenset[str]  # the commits git drew


def draw(
    repository: Repository,
    tips: Sequence[str],
    counts: Mapping[str, int],
    *,
    replacements: bool,
    colour: bool,
    limit: int | None = None,
) -> Drawn:
    """`git log --graph` of TIPS simplified to the commits of COUNTS (each drawn with as many
    lines as its count) and the merges and roots git keeps between them; at most LIMIT
    commits. REPLACEMENTS: the history is read through replacements (their refs copied)."""
    folder = tempfile.mkdtemp(prefix="majordomus-graph-")
    try:
        gitdir = Path(folder)
        _make_gitdir(repository, gitdir, counts, replacements, tips)
        args = [
            "log",
            "--graph",
            "--simplify-by-decoration",
            f"--decorate-refs={REFS}",
            "--no-show-signature",
            "--color=always" if colour else "--no-color",
            FORMAT,
            *([f"--max-count={limit}"] if limit is not None else []),
            "--stdin",
        ]
        result = subprocess.run(
            ["git", *args],
            input="".join(f"{tip}\n" for tip in tips),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=_environ(repository, gitdir),
            check=False,
        )
        check_exit("log", result.returncode, result.stderr)
        return parse(result.stdout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def parse(out: str) -> Drawn:
    """git's lines, each told apart: a commit's own (its id between MARKs), the next lines of
    that commit (a ref's name after the graph), and the graph's lines between commits."""
    lines: list[DrawnLine] = []
    commits: set[str] = set()
    commit: str | None = None
    following = 0
    for text in out.splitlines():
        if MARK in text:
            graph, commit, _ = text.split(MARK, 2)
            commits.add(commit)
            lines.append(DrawnLine(graph, commit, 0))
            following = 0
            continue
        at = text.find(REFS)
        if at >= 0 and commit is not None:
            following += 1
            lines.append(DrawnLine(text[:at], commit, following))
        else:
            lines.append(DrawnLine(text.rstrip(" "), None, None))
    return Drawn(tuple(lines), frozenset(commits))


def _make_gitdir(
    repository: Repository,
    gitdir: Path,
    counts: Mapping[str, int],
    replacements: bool,
    tips: Sequence[str],
) -> None:
    (gitdir / "refs").mkdir()
    (gitdir / "objects").mkdir()
    (gitdir / "HEAD").write_text("ref: refs/heads/unborn\n", encoding="ascii")
    sha256 = any(len(tip) == 64 for tip in tips)
    config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n"
    if sha256:
        config += "[extensions]\n\tobjectFormat = sha256\n"
    (gitdir / "config").write_text(config, encoding="ascii")
    refs = [
        f"{commit} {REFS}{commit}/{n}" for commit, count in counts.items() for n in range(count)
    ]
    if replacements:
        refs += _replace_refs(repository)
    refs.sort(key=lambda line: line.split(" ", 1)[1].encode())
    packed = "# pack-refs with: peeled fully-peeled sorted \n" + "".join(f"{r}\n" for r in refs)
    (gitdir / "packed-refs").write_text(packed, encoding="ascii")
    with contextlib.suppress(OSError):  # a shallow clone's boundary, as git reads it here
        shutil.copyfile(repository.commondir / "shallow", gitdir / "shallow")


def _replace_refs(repository: Repository) -> list[str]:
    base = repository.environ.get("GIT_REPLACE_REF_BASE") or "refs/replace/"
    base = base if base.endswith("/") else base + "/"
    listed = repository.git("for-each-ref", "--format=%(objectname) %(refname)", base)
    return [line for line in listed.stdout.splitlines() if line.strip()]


def _environ(repository: Repository, gitdir: Path) -> dict[str, str]:
    env = {k: v for k, v in repository.environ.items() if k not in _LOCATING}
    objects = env.get("GIT_OBJECT_DIRECTORY") or str(repository.commondir / "objects")
    grafts = repository.commondir / "info" / "grafts"
    if "GIT_GRAFT_FILE" not in env and grafts.exists():
        env["GIT_GRAFT_FILE"] = str(grafts)
    env.update(
        GIT_DIR=str(gitdir),
        GIT_OBJECT_DIRECTORY=os.path.abspath(objects),
        GIT_NO_LAZY_FETCH="1",  # a partial clone's missing object is never fetched by a read
        GIT_FLUSH="0",
        GIT_PAGER="cat",
    )
    return env
