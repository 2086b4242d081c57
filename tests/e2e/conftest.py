"""The end-to-end suite's fixtures: the pinned clients, installed once into the cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e import clients


@pytest.fixture(scope="session")
def programs() -> dict[str, Path]:
    try:
        return clients.ensure_installed(clients.cache_dir())
    except clients.ClientError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def node_dir() -> Path:
    node = shutil.which("node")
    assert node is not None, "node is needed for the end-to-end suite"
    return Path(node).resolve().parent
