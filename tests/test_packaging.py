"""The package's metadata: an SPDX licence, a bounded build backend, the version written
in one place, and a changelog in the Keep a Changelog form. (Building and installing the
wheel is `make wheel-check`'s, which CI runs: too slow for every test run.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from majordomus import __version__

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_licence_is_an_spdx_expression_with_its_file() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_the_build_backend_is_bounded() -> None:
    (requirement,) = PYPROJECT["build-system"]["requires"]
    assert re.fullmatch(r"setuptools>=\d+(\.\d+)*,<\d+", requirement), requirement


def test_the_version_is_written_once() -> None:
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "majordomus.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_the_changelog_keeps_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "[Keep a Changelog](https://keepachangelog.com/en/1.1.0/)" in text
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", text, re.MULTILINE)
    assert releases and releases[0][0] == "Unreleased"
    for name, date in releases[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", name) and date, name
    kinds = set(re.findall(r"^### (.+)$", text, re.MULTILINE))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_ci_checks_the_wheel_after_the_tests() -> None:
    steps = (ROOT / ".ci" / "run").read_text().splitlines()
    assert steps.index("make wheel-check") == steps.index("make test") + 1
