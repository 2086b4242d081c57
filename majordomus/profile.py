"""Profiles: the repository's file over the personal file over built-in defaults."""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from majordomus.errors import RefusedError
from majordomus.records import TEXT_CEILING
from majordomus.tuples import NamedTuple

DEFAULT_NAME = "default"
BUILT_IN: Mapping[str, int | str] = {
    "interval": 20 * 60,
    "checkpoint_max": 400,
    "handover_max": 800,
    "trust": "any",
}
TRUST_VALUES = ("any", "signed")  # "signed": agents are handed verified records only
BUILT_IN_SOURCE = "built-in default"
REPO_FILE = ".majordomus.toml"
INTERVAL_MAX_S = 30 * 24 * 3600  # past this nothing is ever stale and enforcement never fires
CONFIG_MAX_BYTES = 1 << 20  # far above any real profile file; a larger one is not read
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class Profile(NamedTuple):
    name: str
    interval_s: int
    checkpoint_max: int
    handover_max: int
    sources: Mapping[str, str]  # "profile" and each key -> where its value came from
    trust: str = "any"  # one of TRUST_VALUES


class ConfigFile(NamedTuple):
    """One parsed layer: its path, its default profile name and its profiles' values."""

    path: str
    profile: str | None
    profiles: Mapping[str, Mapping[str, int | str]]


def parse_duration(value: object, where: str) -> int:
    """`90s`, `20m`, `1h30m` or plain seconds (an integer or digits), from 1s to 30 days."""
    seconds: int | None = None
    if type(value) is int:
        seconds = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            if text.isdecimal():  # not isdigit: int() refuses "²"
                seconds = int(text)
            else:
                match = _DURATION.fullmatch(text)
                if text and match:
                    hours, minutes, secs = (int(g) if g else 0 for g in match.groups())
                    seconds = hours * 3600 + minutes * 60 + secs
        except ValueError:  # more digits than int() converts
            seconds = None
    if seconds is None or seconds <= 0:
        raise RefusedError(
            f"{where} must be a positive duration such as 90s, 20m, 1h30m or plain seconds, "
            f"not {value!r}."
        )
    if seconds > INTERVAL_MAX_S:
        raise RefusedError(
            f"{where} must be at most 30 days (720h, {INTERVAL_MAX_S} seconds), not {value!r}."
        )
    return seconds


def _parse_cap(value: object, where: str) -> int:
    if type(value) is not int or not 1 <= value <= TEXT_CEILING:
        raise RefusedError(
            f"{where} must be a whole number from 1 to {TEXT_CEILING}, not {value!r}."
        )
    return value


def _parse_trust(value: object, where: str) -> str:
    if value not in TRUST_VALUES:
        raise RefusedError(f'{where} must be "any" or "signed", not {value!r}.')
    assert isinstance(value, str)
    return value


_PARSERS: Mapping[str, Callable[[object, str], int | str]] = {
    "interval": parse_duration,
    "checkpoint_max": _parse_cap,
    "handover_max": _parse_cap,
    "trust": _parse_trust,
}
_KNOWN = ", ".join(_PARSERS)


def parse_config(text: str, path: str) -> ConfigFile:
    """Parse one configuration file; anything malformed or unknown is refused with its path."""
    import tomllib  # here: only a configuration file that exists pays for it

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RefusedError(f"{path} is not valid TOML ({error}); fix or remove it.") from None
    except (ValueError, RecursionError) as error:  # a huge integer, nesting past the stack
        raise RefusedError(f"{path} cannot be read as TOML ({error}); fix or remove it.") from None
    profile: str | None = None
    profiles: dict[str, Mapping[str, int | str]] = {}
    for key, value in document.items():
        if key == "profile":
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise RefusedError(f"{path}: key 'profile' must be a profile name, not {value!r}.")
            profile = value
        elif key == "profiles" and isinstance(value, dict):
            for name, table in value.items():
                profiles[name] = _parse_profile_table(table, f"{path}: profiles.{name}")
        else:
            raise RefusedError(
                f"{path}: unknown key '{key}' (known: profile, [profiles.NAME]); fix or remove it."
            )
    return ConfigFile(path, profile, profiles)


def _parse_profile_table(table: object, where: str) -> Mapping[str, int | str]:
    if not isinstance(table, dict):
        raise RefusedError(f"{where} must be a table such as [profiles.NAME].")
    values: dict[str, int | str] = {}
    for key, value in table.items():
        parser = _PARSERS.get(key)
        if parser is None:
            raise RefusedError(f"{where}: unknown key '{key}' (known: {_KNOWN}).")
        values[key] = parser(value, f"{where}.{key}")
    return values


def read_config(path: Path) -> ConfigFile | None:
    try:
        # stat first: opening a FIFO would block, and /dev/zero never ends.
        if not stat.S_ISREG(path.stat().st_mode):
            raise RefusedError(f"{path} is not a regular file; replace or remove it.")
        with path.open("rb") as handle:
            data = handle.read(CONFIG_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RefusedError(f"{path} cannot be read ({error.strerror}).") from None
    if len(data) > CONFIG_MAX_BYTES:
        raise RefusedError(f"{path} is over {CONFIG_MAX_BYTES} bytes; fix or remove it.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RefusedError(f"{path} is not UTF-8 text; fix or remove it.") from None
    return parse_config(text, str(path))


def user_config_path(environ: Mapping[str, str]) -> Path | None:
    base = environ.get("XDG_CONFIG_HOME") or (
        str(Path(environ["HOME"]) / ".config") if environ.get("HOME") else ""
    )
    return Path(base) / "majordomus" / "config.toml" if base else None


def resolve(layers: list[ConfigFile], requested: str | None, environ: Mapping[str, str]) -> Profile:
    """The effective profile; `layers` ordered from the highest (repository) down."""
    sources: dict[str, str] = {}
    if requested is not None:
        name, sources["profile"] = requested, "--profile"
    elif environ.get("MAJORDOMUS_PROFILE"):
        name, sources["profile"] = environ["MAJORDOMUS_PROFILE"], "MAJORDOMUS_PROFILE"
    else:
        named = [layer for layer in layers if layer.profile is not None]
        if named:
            name, sources["profile"] = named[0].profile or DEFAULT_NAME, named[0].path
        else:
            name, sources["profile"] = DEFAULT_NAME, BUILT_IN_SOURCE
    if name != DEFAULT_NAME and not any(name in layer.profiles for layer in layers):
        known = sorted({DEFAULT_NAME, *(n for layer in layers for n in layer.profiles)})
        raise RefusedError(
            f"unknown profile '{name}' (from {sources['profile']}); known: {', '.join(known)}."
        )
    values: dict[str, int | str] = {}
    for key, default in BUILT_IN.items():
        values[key], sources[key] = default, BUILT_IN_SOURCE
        for layer in layers:
            if key in layer.profiles.get(name, {}):
                values[key], sources[key] = layer.profiles[name][key], layer.path
                break
    # A committed file is a teammate's input: it may ask for more trust, never for less.
    # "signed" in any layer holds, whatever a layer above it says.
    strict = [
        layer.path for layer in layers if layer.profiles.get(name, {}).get("trust") == "signed"
    ]
    if strict:
        values["trust"], sources["trust"] = "signed", strict[-1]
    interval, checkpoint_max, handover_max, trust = (
        values["interval"],
        values["checkpoint_max"],
        values["handover_max"],
        values["trust"],
    )
    assert isinstance(interval, int) and isinstance(checkpoint_max, int)
    assert isinstance(handover_max, int) and isinstance(trust, str)
    return Profile(
        name=name,
        interval_s=interval,
        checkpoint_max=checkpoint_max,
        handover_max=handover_max,
        sources=sources,
        trust=trust,
    )


def load(workdir: Path | None, requested: str | None, environ: Mapping[str, str]) -> Profile:
    layers: list[ConfigFile] = []
    paths = [workdir / REPO_FILE if workdir else None, user_config_path(environ)]
    for path in paths:
        layer = read_config(path) if path else None
        if layer is not None:
            layers.append(layer)
    return resolve(layers, requested, environ)
