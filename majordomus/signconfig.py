"""How this clone signs records and whom it trusts: git's own signing and trust
configuration (`gpg.*`, `user.signingKey`, `commit.gpgSign`) and `majordomus.sign`, read by
one git process, and the signature programs run on it, each bounded in time."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from majordomus.repository import Repository
from majordomus.tuples import NamedTuple

# What one `git config` read brings: every gpg.* key and the few others signing needs.
_KEYS = r"^(gpg\..*|user\.signingkey|commit\.gpgsign|majordomus\.sign.*)$"
_WANTED = re.compile(_KEYS)
SIGN_TIMEOUT_S = 10.0  # a signing program silent this long waits on a prompt nobody sees
SSH_FORMATS = ("ssh",)
_TRUE = ("true", "yes", "on", "1", "")
_FALSE = ("false", "no", "off", "0")


class SignConfig(NamedTuple):
    """The keys as git resolves them (the last value of a key wins), names lowercased."""

    values: Mapping[str, str]
    workdir: Path  # where a relative path in the configuration is taken from
    environ: Mapping[str, str]

    def get(self, key: str) -> str | None:
        return self.values.get(key.lower())

    def flag(self, key: str) -> bool | None:
        """A git boolean; None when unset or not a boolean."""
        value = self.get(key)
        if value is None:
            return None
        word = value.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else None

    def path(self, key: str) -> Path | None:
        value = self.get(key)
        if not value:
            return None
        return self.workdir / os.path.expanduser(value)

    @property
    def format(self) -> str:
        return (self.get("gpg.format") or "openpgp").lower()

    def program(self, fmt: str) -> str:
        if fmt == "ssh":
            return self.get("gpg.ssh.program") or "ssh-keygen"
        return self.get("gpg.openpgp.program") or self.get("gpg.program") or "gpg"

    @property
    def signs(self) -> bool:
        """Whether every record written is to be signed: `majordomus.sign`, or when unset,
        `commit.gpgSign` (whoever signs every commit signs without a prompt)."""
        own = self.flag("majordomus.sign")
        return own if own is not None else bool(self.flag("commit.gpgSign"))

    @property
    def sign_source(self) -> str:
        return "majordomus.sign" if self.flag("majordomus.sign") is not None else "commit.gpgSign"

    @property
    def timeout_s(self) -> float:
        """`majordomus.signTimeout` seconds (default 10): how long a signing program may
        stay silent before the write is refused."""
        value = self.get("majordomus.signtimeout")
        try:
            seconds = float(value) if value else SIGN_TIMEOUT_S
        except ValueError:
            seconds = SIGN_TIMEOUT_S
        return seconds if 0 < seconds <= 600 else SIGN_TIMEOUT_S


def read(repository: Repository) -> SignConfig:
    """The signing and trust keys of this clone's configuration: from libgit2 when it is
    loaded (a write), else in one git process."""
    values: dict[str, str] = {}
    if "repo" in repository.__dict__:
        values = repository.config_matching(_WANTED)
    else:
        result = repository.git("config", "-z", "--get-regexp", _KEYS, check=False)
        for item in result.stdout.split("\0"):
            if item:
                key, _, value = item.partition("\n")
                values[key.lower()] = value
    where = repository.workdir or repository.gitdir
    return SignConfig(values, where, repository.environ)


class Ran(NamedTuple):
    """A signature program's answer: exit code (None: not found, or killed at the
    deadline), what it wrote."""

    code: int | None
    out: str
    err: str
    missing: bool = False


def run(
    argv: Sequence[str],
    data: bytes,
    environ: Mapping[str, str],
    timeout_s: float,
    cwd: Path | None = None,
) -> Ran:
    """Run a signature program with `data` on its standard input, detached from the
    terminal (it cannot prompt), killed with its process group past `timeout_s`."""
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(environ),
            cwd=cwd,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        return Ran(None, "", "", missing=True)
    try:
        out, err = process.communicate(data, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it ended just then
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return Ran(None, "", "")
    return Ran(
        process.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )
