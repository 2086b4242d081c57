"""The suite's fixtures: a hermetic environment and a throwaway repository per test.

What they stand on lives in `tests/support/` (shared with the soak campaign); tests
import it from there, module by module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.support import forks
from tests.support.env import Clock, hermetic_environ, isolate_pygit2
from tests.support.repo import Repo

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
def _forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Python scripts as real processes forked from one Python (tests/support/forks.py),
    # started by the first test of this process that runs one.
    root = tmp_path_factory.mktemp("forks")
    with forks.serving(root / "jobs", hermetic_environ(root)):
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
