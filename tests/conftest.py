"""The suite's fixtures: a hermetic environment and a throwaway repository per test.

What they stand on lives in `tests/support/` (shared with the soak campaign); the
names below are re-exported because many test modules import them from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import typer.main
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase
from typer import _click

from majordomus import cli
from tests.support.cli import MAJORDOMUS, Result
from tests.support.env import AUTHOR, EMAIL, NAME, START, Clock, hermetic_environ, isolate_pygit2
from tests.support.repo import Repo

__all__ = [
    "AUTHOR",
    "EMAIL",
    "MAJORDOMUS",
    "NAME",
    "START",
    "Clock",
    "Repo",
    "Result",
    "hermetic_environ",
]

# Each pytest-xdist worker keeps its own example database: no two processes write one.
settings.register_profile(
    "suite",
    database=DirectoryBasedExampleDatabase(
        str(Path(".hypothesis") / "examples" / os.environ.get("PYTEST_XDIST_WORKER", "main"))
    ),
)
settings.load_profile("suite")


@pytest.fixture(scope="session", autouse=True)
def _pygit2_search_paths(tmp_path_factory: pytest.TempPathFactory) -> None:
    # libgit2 fixes its config search paths on first use: point them away from
    # the machine's own configuration before any test opens a repository.
    isolate_pygit2(tmp_path_factory.mktemp("no-config"))


@pytest.fixture(scope="session", autouse=True)
def _one_click_command() -> Iterator[None]:
    # `cli.run` asks typer for the click command of `cli.app` on every call, and typer
    # builds it afresh from the commands' type hints: about 7 ms, a third of the suite's
    # CPU over its thousands of in-process runs. The command is a pure function of the
    # app, so a worker builds it once; every real process (`python -m majordomus`, the
    # hooks, the golden transcripts' regeneration) still builds its own.
    build = typer.main.get_command
    built = build(cli.app)

    def get_command(typer_instance: typer.Typer) -> _click.Command:
        return built if typer_instance is cli.app else build(typer_instance)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.main, "get_command", get_command)
        yield


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
