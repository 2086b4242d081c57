"""What `init` sets up in a clone so that records travel with the code: `git log` shows them,
they follow amended and rebased commits, `git notes merge` keeps them valid, a plain
`git fetch` brings a remote's records, and a pre-push hook publishes them; each beside
what the user has, never over it."""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus.errors import RefusedError
from majordomus.remote import HOOK_TIMEOUT_S, check_remote, default_remote, fetch_refspec
from majordomus.repository import NOTES_REF
from majordomus.values import HookReport, InitReport, Setting

if TYPE_CHECKING:
    from majordomus.repository import Repository

HOOK_MARK = "# majordomus pre-push hook"
HOOK_LINE = (
    'command -v majordomus >/dev/null 2>&1 && majordomus push --hook "$1" </dev/null || true'
)
DISPLAY_REFS = (NOTES_REF, "refs/notes/remotes/*/majordomus")


def configure(repository: Repository, remote: str | None) -> InitReport:
    """Set this clone up so records travel with the code; idempotent, never clobbering."""
    names = repository.remote_names()
    chosen = remote if remote is not None else default_remote(repository)
    if remote is not None:
        check_remote(remote)
        if remote not in names:
            known = f" (this clone has: {', '.join(names)})" if names else ""
            raise RefusedError(
                f"there is no remote named {remote}{known}; add it with git remote add "
                f"{remote} URL, then run majordomus init --remote {remote} again."
            )
    settings = [_add_value(repository, "notes.displayRef", ref) for ref in DISPLAY_REFS]
    settings.append(_add_value(repository, "notes.rewriteRef", NOTES_REF))
    settings += [
        _set_value(
            repository, "notes.rewrite.amend", "true", "records will not follow git commit --amend"
        ),
        _set_value(
            repository, "notes.rewrite.rebase", "true", "records will not follow git rebase"
        ),
        _set_value(
            repository,
            "notes.rewriteMode",
            "concatenate",
            "a rewrite that lands on a commit with a note may drop or garble records",
        ),
        _set_value(
            repository,
            "notes.majordomus.mergeStrategy",
            "union",
            "git notes merge by hand may not keep the notes valid TOML",
        ),
    ]
    if chosen not in names:
        why = (
            f"no remote named {chosen} yet: after git remote add {chosen} URL, run majordomus init"
        )
        return InitReport(None, tuple(settings), install_hook(repository), why)
    settings += _remote_settings(repository, chosen)
    return InitReport(chosen, tuple(settings), install_hook(repository))


def _config_values(repository: Repository, key: str) -> list[str]:
    return repository.git("config", "--get-all", key, check=False).stdout.splitlines()


def _covers(pattern: str, ref: str) -> bool:
    return pattern == ref or ("*" in pattern and fnmatch.fnmatchcase(ref, pattern))


def _add_value(repository: Repository, key: str, value: str, *, glob: bool = True) -> Setting:
    """One value of a multi-valued key, added beside whatever the user has.

    With `glob`, a value the user already covers with a pattern (notes.displayRef
    = refs/notes/*) is not added again.
    """
    existing = _config_values(repository, key)
    if value in existing or (glob and any(_covers(pattern, value) for pattern in existing)):
        return Setting(key, value, "already")
    repository.git("config", "--local", "--add", key, value)
    return Setting(key, value, "added")


def _set_value(repository: Repository, key: str, value: str, consequence: str) -> Setting:
    """A single-valued key, set only when the user has not set it."""
    typed = ["--type=bool"] if value in ("true", "false") else []
    current = repository.git("config", *typed, "--get", key, check=False)
    have = current.stdout.strip()
    if current.returncode != 0 or not have:
        repository.git("config", "--local", key, value)
        return Setting(key, value, "added")
    if have.lower() == value:
        return Setting(key, value, "already")
    return Setting(
        key,
        have,
        "kept",
        f"{key} is {have}, not {value}: {consequence}; change it if you want that",
    )


def _remote_settings(repository: Repository, remote: str) -> list[Setting]:
    key = f"remote.{remote}.fetch"
    settings = [_add_value(repository, key, fetch_refspec(remote), glob=False)]
    for spec in _config_values(repository, key):
        destination = spec.lstrip("+").partition(":")[2]
        if spec != fetch_refspec(remote) and _covers(destination, NOTES_REF):
            settings.append(
                Setting(
                    key,
                    spec,
                    "kept",
                    f"{key} has {spec}, which lets git fetch overwrite records not yet pushed; "
                    f"remove it with git config --unset {key} '{spec}'",
                )
            )
    return settings


def hook_script(python: str = sys.executable) -> str:
    """The pre-push hook majordomus installs when there is none."""
    interpreter = shlex.quote(python)
    return f"""#!/bin/sh
{HOOK_MARK} (written by majordomus init; safe to delete).
# Publishes the records in {NOTES_REF} to the remote being pushed to.
# It never fails the push and gives up after MAJORDOMUS_HOOK_TIMEOUT seconds
# ({HOOK_TIMEOUT_S:g} by default): a failure to publish is a warning.
while read -r _local _oid remote_ref _remote_oid; do
    # This push publishes the records itself: a second push of them would race it.
    if [ "$remote_ref" = {NOTES_REF} ]; then exit 0; fi
done
if command -v majordomus >/dev/null 2>&1; then
    majordomus push --hook "$1" </dev/null
elif [ -x {interpreter} ]; then
    {interpreter} -m majordomus push --hook "$1" </dev/null
else
    echo "majordomus: warning: majordomus is not on PATH; records were not published." >&2
fi
exit 0
"""


def hook_line(environ: Mapping[str, str], python: str = sys.executable) -> str:
    """The line to add to a hook majordomus may not write: it finds majordomus as the
    user's shell will, or, when majordomus is not on PATH, through this interpreter."""
    if shutil.which("majordomus", path=environ.get("PATH", os.defpath)):
        return HOOK_LINE
    # stdin stays with the user's hook: it may read the refs being pushed after us.
    return f'{shlex.quote(python)} -m majordomus push --hook "$1" </dev/null || true'


def install_hook(repository: Repository) -> HookReport:
    """Install the pre-push hook, or say exactly what to add to the one that is there."""
    hooks_path = repository.git("config", "--get", "core.hooksPath", check=False).stdout.strip()
    hooks = Path(repository.git("rev-parse", "--git-path", "hooks").stdout.strip())
    if not hooks.is_absolute():
        hooks = (repository.workdir or repository.gitdir) / hooks
    path = hooks / "pre-push"
    script = hook_script()
    try:
        existing: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        existing = None
    except (OSError, UnicodeDecodeError):
        existing = ""
    if existing is not None and existing.startswith(f"#!/bin/sh\n{HOOK_MARK}"):
        if existing == script:
            return HookReport(str(path), "already")
        _write_hook(path, script, replace=True)
        return HookReport(str(path), "updated")
    if existing is not None and "majordomus push --hook" in existing:
        return HookReport(str(path), "already")
    if hooks_path:
        # Often a directory the team shares: the portable line, no path of this machine.
        why = f"core.hooksPath is set to {hooks_path}, which majordomus does not write to"
        return HookReport(str(path), "manual", why, HOOK_LINE)
    line = hook_line(repository.environ)
    if existing is not None:
        return HookReport(str(path), "manual", "a pre-push hook is already there", line)
    try:
        _write_hook(path, script, replace=False)
    except FileExistsError:
        return HookReport(str(path), "manual", "a pre-push hook appeared meanwhile", line)
    except OSError as error:
        return HookReport(str(path), "manual", f"cannot write it ({error.strerror})", line)
    return HookReport(str(path), "installed")


def _write_hook(path: Path, script: str, *, replace: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if replace:
        tmp = path.with_name(f"pre-push.majordomus-{os.getpid()}")
        tmp.write_text(script, encoding="utf-8")
        tmp.chmod(0o755)
        os.replace(tmp, path)
        return
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(script)
    path.chmod(0o755)
