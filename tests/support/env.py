"""The hermetic environment: nothing from the developer's own git or majordomus set-up."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pygit2

START = datetime.datetime(2026, 11, 30, 3, 0, 0, tzinfo=datetime.UTC)
NAME, EMAIL = "Ada Lovelace", "ada@example.com"
AUTHOR = f"{NAME} <{EMAIL}>"


def doctor_signing_lines(records: int) -> str:
    """What `doctor` says of signing in a clone of the hermetic environment, which signs
    nothing and has no trust configuration, holding `records` unsigned records."""
    return (
        "ok    signing   not signing records (majordomus.sign true signs them with git's "
        "signing key)\n"
        "ok    trust     ssh: gpg.ssh.allowedSignersFile not set; openpgp: gpg's keyring "
        "(~/.gnupg)\n"
        f"ok    signed    0 verified, {records} unsigned, 0 bad, 0 unknown-key\n"
    )


def hermetic_environ(home: Path) -> dict[str, str]:
    """A minimal environment: own HOME and XDG dirs, no system git config, fixed identity,
    no automatic gc."""
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
        # No background housekeeping after each commit, fetch and merge (git starts
        # `git maintenance run --auto`, which starts `git gc --auto`: two processes that
        # find nothing to do in a test's repository); a test that wants gc runs it.
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "maintenance.auto",
        "GIT_CONFIG_VALUE_0": "false",
        "GIT_CONFIG_KEY_1": "gc.auto",
        "GIT_CONFIG_VALUE_1": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "TZ": "UTC",
    }


def isolate_pygit2(empty_dir: Path) -> None:
    """Point libgit2's config search paths at an empty folder.

    libgit2 fixes them on first use, so this runs before any repository opens.
    """
    empty_dir.mkdir(parents=True, exist_ok=True)
    for level in (
        pygit2.enums.ConfigLevel.SYSTEM,
        pygit2.enums.ConfigLevel.XDG,
        pygit2.enums.ConfigLevel.GLOBAL,
    ):
        pygit2.settings.search_path[level] = str(empty_dir)


class Clock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime.datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)
