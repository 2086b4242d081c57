"""Coding agents' settings files: write, remove and inspect majordomus' hook entries.

Read-modify-write that keeps every other key and entry, one majordomus entry per
event however often it runs, an invalid file refused untouched, atomic replace.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from majordomus.errors import RefusedError, RepositoryError
from majordomus.tuples import NamedTuple
from majordomus.values import Change

if TYPE_CHECKING:  # the hook answerer imports the tables below: it must not load git
    from majordomus.repository import Repository

AGENTS = ("claude", "codex", "gemini")
SCOPES = ("local", "project", "user")
TIMEOUT_S = 10  # the hook answers well inside a second; this only bounds a wedged one
# Our entries are recognised by their command: `... majordomus hook AGENT ...`, whatever
# the path or interpreter in front of it.
OURS = re.compile(r"""majordomus(?:\.exe)?['"]?\s+hook\s""")


class Events(NamedTuple):
    """What an agent calls the moments majordomus answers (and installs hooks for)."""

    session_start: str
    prompt: str
    stop: str


EVENTS = {
    "claude": Events("SessionStart", "UserPromptSubmit", "Stop"),
    "codex": Events("SessionStart", "UserPromptSubmit", "Stop"),
    "gemini": Events("SessionStart", "BeforeAgent", "AfterAgent"),
}
# Files, relative to the work tree (project) or the home directory (user).
PROJECT_FILE = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
}
LOCAL_FILE = {"claude": ".claude/settings.local.json"}  # the others have none
USER_FILE = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
}
CLIENT = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}
# The agents that read a project's settings (local and project scopes) only in the folder
# they are started in, not when started in a subfolder of the work tree; Codex looks for
# its project's files from a subfolder too.
STARTED_HERE = ("claude", "gemini")


def codex_home(environ: Mapping[str, str], home: Path) -> Path:
    """Where Codex keeps its own files (hooks.json, config.toml): `CODEX_HOME`, else
    ~/.codex."""
    return Path(environ["CODEX_HOME"]) if environ.get("CODEX_HOME") else home / ".codex"


def user_file(agent: str, environ: Mapping[str, str], home: Path) -> Path:
    """The agent's settings file of the user scope."""
    if agent == "codex":
        return codex_home(environ, home) / "hooks.json"
    return home / USER_FILE[agent]


def started_here(agent: str, workdir: Path, user_file: Path) -> str:
    """Where the agent looks for a project's settings, and the scope that works anywhere."""
    return (
        f"{CLIENT[agent]} reads a project's settings only when it is started in {workdir} "
        "itself, not in a subfolder of it: to have the hooks wherever you start it, run "
        f"majordomus agent install {agent} --scope user (writes {user_file})"
    )


def settings_path(agent: str, scope: str, workdir: Path | None, home: Path) -> Path:
    if scope == "user":
        return home / USER_FILE[agent]
    if workdir is None:
        raise RepositoryError(
            "this repository has no work tree; use --scope user, or run in a clone with one."
        )
    if scope == "local" and agent in LOCAL_FILE:
        return workdir / LOCAL_FILE[agent]
    return workdir / PROJECT_FILE[agent]


def hook_command(agent: str, scope: str, executable: str | None = None) -> str:
    """The command the agent runs. Project scope is committed and shared: a bare
    `majordomus` found on PATH, never a path from this machine. Local and user scopes
    stay on this machine: the absolute path, so a desktop app's PATH does not matter."""
    if scope == "project":
        return f"majordomus hook {agent}"
    script = Path(executable or sys.executable).parent / "majordomus"
    if executable is None and script.is_file() and os.access(script, os.X_OK):
        return shlex.join([str(script), "hook", agent])
    return shlex.join([executable or sys.executable, "-m", "majordomus", "hook", agent])


def load(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The file's text and its JSON object; an absent file is an empty object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as error:
        raise RefusedError(f"cannot read {path} ({error}); nothing was changed.") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as error:
        raise RefusedError(
            f"{path} is not valid JSON ({error}); fix it (or move it away) and run again; "
            "nothing was changed."
        ) from None
    if not isinstance(data, dict):
        raise RefusedError(f"{path} does not hold a JSON object; nothing was changed.")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise RefusedError(f'{path}: "hooks" is not an object; nothing was changed.')
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise RefusedError(
                f'{path}: "hooks.{event}" is not a list of hook groups; nothing was changed.'
            )
    return text, data


def is_ours(hook: object) -> bool:
    if not isinstance(hook, dict):
        return False
    command = hook.get("command")
    return isinstance(command, str) and OURS.search(command + " ") is not None


def _entry(agent: str, command: str) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command}
    if agent == "gemini":
        hook = {"name": "majordomus", **hook, "timeout": TIMEOUT_S * 1000}  # milliseconds
    else:
        hook["timeout"] = TIMEOUT_S
    return {"hooks": [hook]}


def our_events(data: Mapping[str, Any]) -> tuple[str, ...]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return ()
    return tuple(
        event
        for event, groups in hooks.items()
        if isinstance(groups, list)
        and any(
            isinstance(g, dict)
            and isinstance(g.get("hooks"), list)
            and any(map(is_ours, g["hooks"]))
            for g in groups
        )
    )


def edited(data: dict[str, Any], wanted: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """`data` with exactly the `wanted` majordomus entries (event -> group), everything
    else kept in place. An event whose one entry is already the wanted one is left as is."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    hooks: dict[str, Any] = out.get("hooks", {})
    for event in list(hooks):
        groups = hooks[event]
        mine = [g for g in groups if isinstance(g, dict) and any(map(is_ours, _hooks_of(g)))]
        if event in wanted and mine == [wanted[event]]:
            continue
        kept = []
        for group in groups:
            inner = _hooks_of(group)
            if not any(map(is_ours, inner)):
                kept.append(group)
                continue
            rest = [h for h in inner if not is_ours(h)]
            if rest:
                kept.append({**group, "hooks": rest})
        if event in wanted:
            kept.append(wanted[event])
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    for event, group in wanted.items():
        if event not in hooks:
            hooks[event] = [group]
    if hooks:
        out["hooks"] = hooks
    else:
        out.pop("hooks", None)
    return out


def _hooks_of(group: object) -> list[Any]:
    if isinstance(group, dict) and isinstance(group.get("hooks"), list):
        return list(group["hooks"])
    return []


def dump(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write beside the file, flush to disk, then rename over it: old or new, never half.
    A symbolic link (settings kept in a dotfiles repository) is followed, never replaced."""
    import tempfile  # here, not at the top: every command imports this module (for doctor)

    path = Path(os.path.realpath(path))

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def refuse_links_out(path: Path, workdir: Path, gitdirs: tuple[Path, ...]) -> None:
    """Refuse a settings path that a symbolic link (the file, or a folder between the work
    tree and it) leads outside the work tree or into the git directory: a clone's files are
    its committers', and a link they committed must not make this command write elsewhere."""
    where = link_out(path, workdir, gitdirs)
    if where is not None:
        raise RefusedError(
            f"{first_link(path, workdir)} is a symbolic link that leads {where}, so agent "
            "install does not write through it; nothing was changed."
        )


def link_out(path: Path, workdir: Path, gitdirs: tuple[Path, ...]) -> str | None:
    resolved = Path(os.path.realpath(path))  # a dangling link: where writing would create it
    if not resolved.is_relative_to(os.path.realpath(workdir)):
        return "outside the work tree"
    if any(resolved.is_relative_to(os.path.realpath(gitdir)) for gitdir in gitdirs):
        return "into the git directory"
    return None


def first_link(path: Path, workdir: Path) -> Path:
    current = workdir
    for part in path.relative_to(workdir).parts:
        current = current / part
        if current.is_symlink():
            return current
    return path


def _is_tracked(repository: Repository, path: Path) -> bool:
    assert repository.workdir is not None
    result = repository.git(
        f"--work-tree={repository.workdir}",
        "ls-files",
        "--error-unmatch",
        "--",
        str(path.relative_to(repository.workdir)),
        check=False,
    )
    return result.returncode == 0


def _exclude_line(repository: Repository, path: Path) -> tuple[Path, str | None]:
    """The `.git/info/exclude` line that keeps `path` out of git, None when it is there."""
    assert repository.workdir is not None
    line = "/" + path.relative_to(repository.workdir).as_posix()
    exclude = repository.commondir / "info" / "exclude"
    try:
        present = line in exclude.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        present = False
    return exclude, None if present else line


def install(
    repository: Repository | None,
    environ: Mapping[str, str],
    agent: str,
    scope: str = "local",
    enforce: bool = False,
    dry_run: bool = False,
    remove: bool = False,
    executable: str | None = None,
) -> Change:
    if agent not in AGENTS:
        raise RefusedError(f"unknown agent '{agent}': give one of {', '.join(AGENTS)}.")
    if scope not in SCOPES:
        raise RefusedError(f"unknown scope '{scope}': give one of {', '.join(SCOPES)}.")
    home = Path(environ.get("HOME") or Path.home())
    if scope == "user":
        path = user_file(agent, environ, home)
    else:
        path = settings_path(agent, scope, repository.workdir if repository else None, home)
    in_tree = scope != "user" and repository is not None
    if repository is not None and in_tree:
        _refuse_in_tree(repository, path, scope, remove)
    before, data = load(path)
    command = hook_command(agent, scope, executable)
    after = edited(data, {} if remove else _wanted(agent, command, enforce))
    changed = after != data or (before is None and not remove)
    text = dump(after) if changed else (before or "")
    diff = _diff(path, before, text)
    excluded = None
    if repository is not None and in_tree and scope == "local" and not remove:
        excluded = _exclude(repository, path, dry_run)
    written = changed and not dry_run and not (remove and before is None)
    if written:
        _write_settings(path, text)
    return Change(
        agent=agent,
        scope=scope,
        path=path,
        changed=changed and not (remove and before is None),
        written=written,
        events=our_events(after),
        command=command,
        diff=diff,
        excluded=excluded,
        warnings=_warnings(agent, scope, path, remove)
        + _subfolder_warning(agent, scope, repository, home, remove)
        + _linked_worktree_warning(agent, scope, repository, remove),
    )


def _refuse_in_tree(repository: Repository, path: Path, scope: str, remove: bool) -> None:
    """Refuse a settings file in the work tree that a link leads out of, or one a local
    install would change for the whole team."""
    if repository.workdir is not None:
        refuse_links_out(path, repository.workdir, (repository.gitdir, repository.commondir))
    if scope == "local" and not remove and _is_tracked(repository, path):
        raise RefusedError(
            f"{path} is tracked by git, so a local install would change what your team "
            "shares: use --scope project to change it on purpose, or --scope user."
        )


def _wanted(agent: str, command: str, enforce: bool) -> dict[str, dict[str, Any]]:
    """The majordomus entries an install writes: event -> group."""
    events = EVENTS[agent]
    wanted = {events.session_start: _entry(agent, command), events.prompt: _entry(agent, command)}
    if enforce:
        wanted[events.stop] = _entry(agent, command + " --enforce")
    return wanted


def _diff(path: Path, before: str | None, text: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=str(path) if before is not None else "/dev/null",
            tofile=str(path),
        )
    )


def _exclude(repository: Repository, path: Path, dry_run: bool) -> str | None:
    """The line that keeps a local install's file out of git, added to `.git/info/exclude`
    (unless `dry_run`); None when it is there already."""
    exclude, excluded = _exclude_line(repository, path)
    if excluded is not None and not dry_run:
        try:
            existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
            sep = "" if not existing or existing.endswith("\n") else "\n"
            write_atomic(exclude, f"{existing}{sep}{excluded}\n")
        except (OSError, UnicodeDecodeError) as error:
            raise RepositoryError(
                f"cannot add {excluded} to {exclude} ({error}); nothing was changed."
            ) from None
    return excluded


def _warnings(agent: str, scope: str, path: Path, remove: bool) -> tuple[str, ...]:
    warnings: list[str] = []
    if scope == "project" and not remove:
        warnings.append(
            f"{path} is shared: its hooks run `majordomus` from PATH, so teammates need "
            "majordomus installed, and an agent started from a desktop app needs it on that "
            "app's PATH (see docs/agents.md)."
        )
    if agent == "codex" and not remove:
        gate = (
            "; a project's hooks run only once Codex trusts the project (start codex here "
            "once and trust the folder: until then codex exec skips them without a word)"
            if scope != "user"
            else ""
        )
        warnings.append(
            "Codex runs new hooks only after you approve them, and not when its hooks feature "
            "is off ([features] hooks = false, or codex_hooks = false, its former name, in "
            f"~/.codex/config.toml){gate}."
        )
    return tuple(warnings)


def _subfolder_warning(
    agent: str, scope: str, repository: Repository | None, home: Path, remove: bool
) -> tuple[str, ...]:
    """For an agent that reads a project's settings only where it starts: say so."""
    if remove or scope == "user" or agent not in STARTED_HERE or repository is None:
        return ()
    if repository.workdir is None:
        return ()
    return (started_here(agent, repository.workdir, home / USER_FILE[agent]) + ".",)


def _linked_worktree_warning(
    agent: str, scope: str, repository: Repository | None, remove: bool
) -> tuple[str, ...]:
    """Codex reads a linked work tree's project hooks from the main work tree's folder (seen
    with codex-cli 0.171): an install in a linked work tree writes a file it never reads."""
    if agent != "codex" or remove or scope == "user" or repository is None:
        return ()
    if repository.gitdir == repository.commondir or repository.commondir.name != ".git":
        return ()  # the main work tree, or linked work trees of a bare repository
    main = repository.commondir.parent
    return (
        f"this is a linked work tree: Codex reads the project's hooks from the main work "
        f"tree ({main}/.codex/hooks.json), not from this one; run the install there (its "
        "hooks then run here too), or use --scope user.",
    )


def _write_settings(path: Path, text: str) -> None:
    try:
        write_atomic(path, text)
    except OSError as error:
        raise RepositoryError(
            f"cannot write {path} ({error.strerror or error}); it was left as it was."
        ) from None
