"""What `doctor` reports of the coding agents' settings: where majordomus' hooks are
installed, whether the agent's own settings switch them off, and whether the agent reads
them when it is started in a subfolder of the work tree (`agents` knows the files)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from majordomus.agents import (
    AGENTS,
    LOCAL_FILE,
    PROJECT_FILE,
    STARTED_HERE,
    codex_home,
    first_link,
    link_out,
    load,
    our_events,
    started_here,
    user_file,
)
from majordomus.errors import RefusedError
from majordomus.values import AgentFinding


def _read_quietly(path: Path) -> dict[str, Any] | None:
    try:
        return load(path)[1] if path.exists() else None
    except RefusedError:
        return None


def findings(workdir: Path | None, environ: Mapping[str, str]) -> list[AgentFinding]:
    """Where majordomus' hooks are installed, and whether the agent's own settings switch
    them off (Claude Code `disableAllHooks`, Gemini CLI `hooksConfig.enabled = false`,
    Codex `[features] hooks = false` or its former `codex_hooks`, and a project Codex does
    not trust for hooks installed in the project); a note when an agent that reads a
    project's settings only where it starts (Claude Code, Gemini CLI) has the hooks in the
    work tree alone: started in a subfolder, it runs none of them."""
    home = Path(environ.get("HOME") or Path.home())
    out: list[AgentFinding] = []
    for agent in AGENTS:
        files: list[Path] = [user_file(agent, environ, home)]
        if workdir is not None:
            in_tree = [workdir / PROJECT_FILE[agent]]
            if agent in LOCAL_FILE:
                in_tree.append(workdir / LOCAL_FILE[agent])
            out += _links_out(in_tree, workdir)
            files += [p for p in in_tree if link_out(p, workdir, ()) is None]
        loaded = {path: _read_quietly(path) for path in dict.fromkeys(files)}
        installed = [p for p, data in loaded.items() if data is not None and our_events(data)]
        if not installed:
            continue
        where = ", ".join(str(p) for p in installed)
        off = _disabled_by(agent, loaded, codex_home(environ, home), workdir)
        if off is not None:
            out.append(AgentFinding(False, f"{agent} hooks are installed in {where}, but {off}"))
        elif agent in STARTED_HERE and workdir is not None and files[0] not in installed:
            advice = started_here(agent, workdir, files[0])
            out.append(AgentFinding(True, f"{agent} hooks installed in {where}; {advice}", True))
        else:
            out.append(AgentFinding(True, f"{agent} hooks installed in {where}"))
    return out


def _links_out(files: list[Path], workdir: Path) -> list[AgentFinding]:
    links = [first_link(p, workdir) for p in files if link_out(p, workdir, ()) is not None]
    return [
        AgentFinding(
            False,
            f"{link} is a symbolic link that leads outside the work tree; it is not read, "
            "and agent install refuses to write through it",
        )
        for link in dict.fromkeys(links)  # `.claude` itself: once, not once per file in it
    ]


def _disabled_by(
    agent: str,
    loaded: Mapping[Path, dict[str, Any] | None],
    codex: Path,
    workdir: Path | None,
) -> str | None:
    for path, data in loaded.items():
        if data is None:
            continue
        if agent == "claude" and data.get("disableAllHooks") is True:
            return f"{path} sets disableAllHooks: Claude Code runs none of them (remove it)"
        config = data.get("hooksConfig")
        if agent == "gemini" and isinstance(config, dict) and config.get("enabled") is False:
            return f"{path} sets hooksConfig.enabled to false: Gemini CLI runs none of them"
        if agent == "gemini" and isinstance(config, dict):
            disabled = config.get("disabled")
            if isinstance(disabled, list) and "majordomus" in disabled:
                return f"{path} lists majordomus in hooksConfig.disabled"
    if agent == "codex":
        return _codex_off(loaded, codex, workdir)
    return None


CODEX_FEATURES = ("hooks", "codex_hooks")  # the feature's name, then its former one


def _codex_off(
    loaded: Mapping[Path, dict[str, Any] | None], codex: Path, workdir: Path | None
) -> str | None:
    """Why Codex would run none of the hooks installed: its hooks feature switched off,
    or (for hooks installed in the project) a project Codex does not trust."""
    user_config = codex / "config.toml"  # CODEX_HOME's, as Codex reads it
    configs = [user_config]
    if workdir is not None:  # a committed link out of the tree is not read (/dev/zero)
        shared = workdir / ".codex" / "config.toml"
        configs += [shared] if link_out(shared, workdir, ()) is None else []
    documents = {path: _toml_quietly(path) for path in configs}
    for config_path, document in documents.items():
        features = document.get("features")
        for name in CODEX_FEATURES:
            if isinstance(features, dict) and features.get(name) is False:
                return f"{config_path} sets [features] {name} = false: Codex runs no hooks"
    in_project = [p for p, data in loaded.items() if data and workdir and p.is_relative_to(workdir)]
    if in_project and workdir is not None:
        projects = documents[user_config].get("projects")
        entry = projects.get(str(workdir)) if isinstance(projects, dict) else None
        if not (isinstance(entry, dict) and entry.get("trust_level") == "trusted"):
            return (
                f"Codex runs a project's hooks only once it trusts the project, and "
                f'{user_config} has no [projects."{workdir}"] trust_level = "trusted": start '
                "codex here once, trust the folder and approve the hooks"
            )
    return None


def _toml_quietly(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError):
        return {}
