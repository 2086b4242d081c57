"""The hermetic fixture: own HOME and XDG dirs, no system git config, fixed identities.

`Repo` is a real git repository in a temporary folder. Commits are made with
pygit2 in-process (fast); majordomus runs in-process through `cli.run` with
the fixture's environment, an injectable clock and no sleeping, or as a real
subprocess where a test needs one (concurrency, kills, terminals).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pygit2
import pytest

from majordomus import cli

START = datetime.datetime(2026, 11, 30, 3, 0, 0, tzinfo=datetime.UTC)
NAME, EMAIL = "Ada Lovelace", "ada@example.com"
AUTHOR = f"{NAME} <{EMAIL}>"
MAJORDOMUS = [sys.executable, "-m", "majordomus"]


def hermetic_environ(home: Path) -> dict[str, str]:
    """A minimal environment: nothing from the developer's own git or majordomus set-up."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "SYSTEMROOT") if k in os.environ}
    return {
        **keep,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": NAME,
        "GIT_AUTHOR_EMAIL": EMAIL,
        "GIT_COMMITTER_NAME": NAME,
        "GIT_COMMITTER_EMAIL": EMAIL,
        "GIT_EDITOR": "false",
        "GIT_TERMINAL_PROMPT": "0",
        "TZ": "UTC",
    }


@pytest.fixture(scope="session", autouse=True)
def _pygit2_search_paths(tmp_path_factory: pytest.TempPathFactory) -> None:
    # libgit2 fixes its config search paths on first use: point them away from
    # the machine's own configuration before any test opens a repository.
    empty = tmp_path_factory.mktemp("no-config")
    for level in (
        pygit2.enums.ConfigLevel.SYSTEM,
        pygit2.enums.ConfigLevel.XDG,
        pygit2.enums.ConfigLevel.GLOBAL,
    ):
        pygit2.settings.search_path[level] = str(empty)


class Clock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime.datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


@dataclasses.dataclass
class Result:
    code: int
    out: str
    err: str


class Repo:
    """A throwaway git repository and the means to drive majordomus in it."""

    def __init__(self, path: Path, environ: dict[str, str], clock: Clock) -> None:
        self.path = path
        self.environ = environ
        self.clock = clock
        self.sleeps: list[float] = []

    @classmethod
    def init(cls, path: Path, environ: dict[str, str], clock: Clock, commit: bool = True) -> Repo:
        path.mkdir(parents=True, exist_ok=True)
        pygit2.init_repository(str(path), initial_head="main")
        repo = cls(path, environ, clock)
        if commit:
            repo.commit("initial")
        return repo

    @property
    def pygit(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.path))

    def commit(self, message: str, files: Mapping[str, str] | None = None) -> str:
        """A commit on HEAD (with `files` written and staged), made in-process."""
        repo = self.pygit
        for name, text in (files or {}).items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            repo.index.add(name)
        repo.index.write()
        tree = repo.index.write_tree()
        when = int(self.clock.now.timestamp())
        signature = pygit2.Signature(NAME, EMAIL, when, 0)
        parents = [] if repo.head_is_unborn else [repo.head.target]
        oid = repo.create_commit("HEAD", signature, signature, message, tree, parents)
        return str(oid)

    def git(self, *args: str, check: bool = True, input: str | None = None) -> str:
        result = subprocess.run(
            ["git", *args],
            cwd=self.path,
            env=self.environ,
            capture_output=True,
            text=True,
            input=input,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
        return result.stdout

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def notes_ref(self) -> str | None:
        out = self.git("rev-parse", "--verify", "-q", "refs/notes/majordomus", check=False)
        return out.strip() or None

    def run(
        self,
        *argv: str,
        stdin: bytes = b"",
        environ: Mapping[str, str] | None = None,
        tty: bool = False,
    ) -> Result:
        """majordomus in-process, in this repository, with the fixture's clock."""
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(
            ["-C", str(self.path), *argv],
            environ={**self.environ, **(environ or {})},
            stdin=io.BytesIO(stdin),
            stdout=out,
            stderr=err,
            now=self.clock,
            sleep=self.sleeps.append,
            is_tty=tty,
        )
        return Result(code, out.getvalue(), err.getvalue())

    def spawn(
        self, *argv: str, stdin: bool = False, environ: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """majordomus as a real process (real clock); stdin is a pipe when asked for."""
        return subprocess.Popen(
            [*MAJORDOMUS, "-C", str(self.path), *argv],
            env={**self.environ, **(environ or {})},
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def task(self, title: str = "queue drops acks under load") -> str:
        result = self.run("task", "new", title)
        assert result.code == 0, result.err
        return result.out.strip()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def environ(home: Path) -> dict[str, str]:
    return hermetic_environ(home)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def repo(tmp_path: Path, environ: dict[str, str], clock: Clock) -> Iterator[Repo]:
    yield Repo.init(tmp_path / "repo", environ, clock)
