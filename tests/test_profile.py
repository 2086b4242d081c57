"""Profiles: layers, precedence, durations, caps, and refusals with path and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from majordomus.errors import RefusedError
from majordomus.profile import parse_config, parse_duration, resolve
from tests.support.repo import Repo

REPO_TOML = """\
profile = "incident"

[profiles.default]
interval = "30m"

[profiles.incident]
interval = "5m"
checkpoint_max = 280
"""


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90s", 90),
        ("20m", 1200),
        ("1h30m", 5400),
        ("2h", 7200),
        (45, 45),
        ("600", 600),
        ("1s", 1),
        (1, 1),
        ("720h", 2592000),
        ("43200m", 2592000),
        (2592000, 2592000),
        ("2592000", 2592000),
    ],
)
def test_durations(value: object, seconds: int) -> None:
    assert parse_duration(value, "interval") == seconds


@pytest.mark.parametrize(
    "value", ["", "20 minutes", "1m1h", "-5", 0, "0", "0h0m0s", -3, 1.5, True, "h"]
)
def test_bad_durations_are_refused(value: object) -> None:
    with pytest.raises(RefusedError) as info:
        parse_duration(value, "x.toml: profiles.default.interval")
    assert info.value.message == (
        "x.toml: profiles.default.interval must be a positive duration such as 90s, 20m, "
        f"1h30m or plain seconds, not {value!r}."
    )


@pytest.mark.parametrize(
    "value",
    [
        "720h1s",
        "719h60m1s",
        2592001,
        "2592001",
        "99999999999999999999",
        99999999999999999999,
        "9" * 4000,
        "99999999999999999999h",
    ],
)
def test_intervals_past_30_days_are_refused(value: object) -> None:
    # Past 30 days nothing is ever stale and the Stop hook's enforcement never fires.
    with pytest.raises(RefusedError) as info:
        parse_duration(value, "x.toml: profiles.default.interval")
    assert info.value.message == (
        "x.toml: profiles.default.interval must be at most 30 days (720h, 2592000 seconds), "
        f"not {value!r}."
    )


def test_layers_and_sources() -> None:
    repo_layer = parse_config(REPO_TOML, "/w/.majordomus.toml")
    user_layer = parse_config(
        "[profiles.incident]\nhandover_max = 500\ninterval = 60\n", "/h/config.toml"
    )
    prof = resolve([repo_layer, user_layer], None, {})
    assert (prof.name, prof.interval_s, prof.checkpoint_max, prof.handover_max) == (
        "incident",
        300,
        280,
        500,
    )
    assert prof.sources == {
        "profile": "/w/.majordomus.toml",
        "interval": "/w/.majordomus.toml",
        "checkpoint_max": "/w/.majordomus.toml",
        "handover_max": "/h/config.toml",
        "trust": "built-in default",
    }


def test_flag_beats_environment_beats_file() -> None:
    layer = parse_config(REPO_TOML, "/w/.majordomus.toml")
    env = {"MAJORDOMUS_PROFILE": "default"}
    assert resolve([layer], None, env).name == "default"
    assert resolve([layer], None, env).interval_s == 1800
    assert resolve([layer], "incident", env).name == "incident"
    assert resolve([], None, {}).sources["profile"] == "built-in default"


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(RefusedError) as info:
        resolve([parse_config(REPO_TOML, "/w/.majordomus.toml")], "night", {})
    assert info.value.message == (
        "unknown profile 'night' (from --profile); known: default, incident."
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "colour = true\n",
            "unknown key 'colour' (known: profile, [profiles.NAME]); fix or remove it.",
        ),
        (
            "[profiles.default]\nintervall = '5m'\n",
            "profiles.default: unknown key 'intervall' (known: interval, checkpoint_max, "
            "handover_max, trust).",
        ),
        (
            "[profiles.default]\ncheckpoint_max = 2001\n",
            "profiles.default.checkpoint_max must be a whole number from 1 to 2000, not 2001.",
        ),
        (
            "[profiles.default]\nhandover_max = '800'\n",
            "profiles.default.handover_max must be a whole number from 1 to 2000, not '800'.",
        ),
        ("profile = 3\n", "key 'profile' must be a profile name, not 3."),
        (
            "profiles = 3\n",
            "unknown key 'profiles' (known: profile, [profiles.NAME]); fix or remove it.",
        ),
        (
            "[profiles]\nincident = 5\n",
            "profiles.incident must be a table such as [profiles.NAME].",
        ),
    ],
)
def test_malformed_files_are_refused_with_path_and_key(text: str, message: str) -> None:
    with pytest.raises(RefusedError) as info:
        parse_config(text, "/w/.majordomus.toml")
    assert info.value.message == f"/w/.majordomus.toml: {message}"


def test_invalid_toml_is_refused() -> None:
    with pytest.raises(RefusedError) as info:
        parse_config("profile = [", "/w/.majordomus.toml")
    assert info.value.message.startswith("/w/.majordomus.toml is not valid TOML (")


def test_profile_command_and_caps_from_files(repo: Repo, home: Path) -> None:
    (repo.path / ".majordomus.toml").write_text(REPO_TOML)
    user = home / ".config" / "majordomus"
    user.mkdir(parents=True)
    (user / "config.toml").write_text("[profiles.incident]\nhandover_max = 500\n")
    result = repo.run("profile")
    assert result.code == 0, result.err
    assert result.out == (
        f"profile         incident         from {repo.path}/.majordomus.toml\n"
        f"interval        5m (300s)        from {repo.path}/.majordomus.toml\n"
        f"checkpoint_max  280              from {repo.path}/.majordomus.toml\n"
        f"handover_max    500              from {user}/config.toml\n"
        "trust           any              from built-in default\n"
    )
    repo.task()
    refused = repo.run("checkpoint", "x" * 281)
    assert (refused.code, refused.out) == (2, "")
    assert refused.err == (
        "majordomus: checkpoint body is 281 characters, over the cap of 280; nothing was "
        "recorded (shorten it: it is never truncated).\n"
    )
    assert repo.run("--profile", "default", "checkpoint", "x" * 281).code == 0


def test_a_bad_profile_file_stops_every_command_that_uses_it(repo: Repo) -> None:
    repo.task()
    before = repo.notes_ref()
    (repo.path / ".majordomus.toml").write_text("[profiles.default]\nnope = 1\n")
    for argv in (["checkpoint", "x"], ["check"], ["profile"]):
        result = repo.run(*argv)
        assert result.code == 2, argv
        assert result.err == (
            f"majordomus: {repo.path}/.majordomus.toml: profiles.default: unknown key 'nope' "
            "(known: interval, checkpoint_max, handover_max, trust).\n"
        )
    assert repo.notes_ref() == before


@pytest.mark.parametrize("layer", ["repo", "personal"])
def test_an_interval_past_30_days_stops_every_command_that_uses_it(
    repo: Repo, home: Path, layer: str
) -> None:
    repo.task()
    repo.run("checkpoint", "first")
    before = repo.notes_ref()
    if layer == "repo":
        path = repo.path / ".majordomus.toml"
    else:
        path = home / ".config" / "majordomus" / "config.toml"
        path.parent.mkdir(parents=True)
    path.write_text('[profiles.default]\ninterval = "99999999999999999999"\n')
    handover = ["handover", "--objective", "o", "--state", "s", "--next", "n"]
    for argv in (
        ["checkpoint", "x"],
        handover,
        ["check"],
        ["watch", "--count", "1"],
        ["profile"],
        ["context"],
    ):
        result = repo.run(*argv)
        assert (result.code, result.out) == (2, ""), argv
        assert result.err == (
            f"majordomus: {path}: profiles.default.interval must be at most 30 days "
            "(720h, 2592000 seconds), not '99999999999999999999'.\n"
        ), argv
    assert repo.notes_ref() == before
