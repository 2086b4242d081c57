"""The profile files in fixtures/profiles/: each gives exactly its effective profile, or is
refused (exit 2) with exactly its sentence, as fixtures/profiles/manifest.toml states."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.corpus import PROFILES
from tests.support.repo import Repo

CASES: list[dict[str, Any]] = tomllib.loads((PROFILES / "manifest.toml").read_text("utf-8"))["case"]


def test_the_manifest_uses_every_profile_file() -> None:
    used = {case["file"] for case in CASES}
    on_disk = {str(p.relative_to(PROFILES)) for p in PROFILES.glob("*/*.toml")}
    assert used == on_disk


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_each_profile_file_gives_its_expected_answer(
    repo: Repo, home: Path, case: dict[str, Any]
) -> None:
    if case.get("layer", "repo") == "personal":
        path = home / ".config" / "majordomus" / "config.toml"
    else:
        path = repo.path / ".majordomus.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((PROFILES / case["file"]).read_bytes())
    result = repo.run(*case.get("args", []), "profile", "--json", environ=case.get("environ"))
    if "effective" in case:
        assert (result.code, result.err) == (0, "")
        assert json.loads(result.out.replace(str(path), "{path}")) == case["effective"]
    else:
        expected = case["refusal"].replace("{path}", str(path)) + "\n"
        assert (result.code, result.out, result.err) == (2, "", expected)
