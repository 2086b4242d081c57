"""`agent install`: idempotent, keeps the person's own settings, refuses an invalid file
untouched, removes only its own entries, and writes a command that works from anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from majordomus import agents
from majordomus.agents import LOCAL_FILE, PROJECT_FILE, USER_FILE, our_events
from tests.support.cli import MAJORDOMUS
from tests.support.repo import Repo

THEIRS: dict[str, Any] = {
    "permissions": {"allow": ["Bash(make test)"]},
    "env": {"FOO": "1"},
    "hooks": {
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo theirs"}]}
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}],
    },
}


def settings(repo: Repo, name: str = ".claude/settings.local.json") -> Any:
    return json.loads((repo.path / name).read_text())


def ours(data: Any, event: str) -> list[dict[str, Any]]:
    return [
        hook
        for group in data.get("hooks", {}).get(event, [])
        for hook in group["hooks"]
        if agents.is_ours(hook)
    ]


def test_install_three_times_one_entry_per_event_and_theirs_kept(repo: Repo) -> None:
    path = repo.path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS, indent=4))
    first = repo.run("agent", "install", "claude")
    assert first.code == 0, first.err
    written = path.read_bytes()
    for _ in range(2):
        again = repo.run("agent", "install", "claude")
        assert again.code == 0
        assert again.out == f"{path}: already as asked; nothing to change\n"
    assert path.read_bytes() == written
    data = settings(repo)
    assert {k: v for k, v in data.items() if k != "hooks"} == {
        k: v for k, v in THEIRS.items() if k != "hooks"
    }
    assert data["hooks"]["SessionStart"][0] == THEIRS["hooks"]["SessionStart"][0]
    assert data["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    for event in ("SessionStart", "UserPromptSubmit"):
        (hook,) = ours(data, event)
        assert hook["type"] == "command" and hook["timeout"] == 10
        assert hook["command"].endswith(" hook claude")
    assert "Stop" not in data["hooks"]


def test_local_scope_is_kept_out_of_git(repo: Repo) -> None:
    result = repo.run("agent", "install", "claude")
    assert "added /.claude/settings.local.json to .git/info/exclude" in result.out
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""
    repo.run("agent", "install", "claude")
    exclude = (repo.path / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.claude/settings.local.json") == 1


@pytest.mark.parametrize(
    ("agent", "name", "events"),
    [
        ("codex", ".codex/hooks.json", ("SessionStart", "UserPromptSubmit", "Stop")),
        ("gemini", ".gemini/settings.json", ("SessionStart", "BeforeAgent", "AfterAgent")),
    ],
)
def test_agents_without_a_local_file_use_the_project_file_excluded(
    repo: Repo, agent: str, name: str, events: tuple[str, ...]
) -> None:
    result = repo.run("agent", "install", agent, "--enforce")
    assert result.code == 0, result.err
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""
    data = settings(repo, name)
    assert set(data["hooks"]) == set(events)
    (stop,) = ours(data, events[2])
    assert stop["command"].endswith(f" hook {agent} --enforce")
    if agent == "gemini":
        assert stop["timeout"] == 10000 and stop["name"] == "majordomus"  # milliseconds


def test_a_tracked_project_file_is_not_changed_by_a_local_install(repo: Repo) -> None:
    repo.commit("shared gemini settings", {".gemini/settings.json": '{"theme": "dark"}\n'})
    result = repo.run("agent", "install", "gemini")
    assert result.code == 2
    assert "is tracked by git" in result.err and "--scope project" in result.err
    assert (repo.path / ".gemini/settings.json").read_text() == '{"theme": "dark"}\n'


def test_project_scope_commits_no_absolute_path(repo: Repo) -> None:
    result = repo.run("agent", "install", "claude", "--scope", "project")
    assert result.code == 0
    assert "teammates need majordomus installed" in result.err
    data = settings(repo, ".claude/settings.json")
    assert [h["command"] for h in ours(data, "SessionStart")] == ["majordomus hook claude"]


def test_user_scope_writes_in_home(repo: Repo) -> None:
    assert repo.run("agent", "install", "claude", "--scope", "user").code == 0
    home = Path(repo.environ["HOME"])
    assert ours(json.loads((home / ".claude/settings.json").read_text()), "SessionStart")
    assert not (repo.path / ".claude").exists()


@pytest.mark.parametrize(
    "text",
    ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {"hooks": []}}}', "\xff"],
)
def test_an_invalid_file_is_refused_untouched(repo: Repo, text: str) -> None:
    path = repo.path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text(text, encoding="latin-1")
    before = path.read_bytes(), path.stat().st_mtime_ns
    for argv in ([], ["--remove"], ["--enforce"]):
        result = repo.run("agent", "install", "claude", *argv)
        assert result.code == 2 and result.out == ""
        assert result.err.startswith("majordomus: ") and "nothing was changed" in result.err
        assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_remove_takes_out_only_ours(repo: Repo) -> None:
    path = repo.path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    mixed = json.loads(json.dumps(THEIRS))
    mixed["hooks"]["SessionStart"][0]["hooks"].append(
        {"type": "command", "command": "/opt/old/bin/majordomus hook claude"}
    )
    path.write_text(json.dumps(mixed))
    repo.run("agent", "install", "claude", "--enforce")
    result = repo.run("agent", "install", "claude", "--remove")
    assert result.code == 0 and result.out == f"{path}: majordomus hooks removed\n"
    assert settings(repo) == THEIRS
    again = repo.run("agent", "install", "claude", "--remove")
    assert again.out == f"{path}: already as asked; nothing to change\n"


def test_remove_with_nothing_installed_creates_nothing(repo: Repo) -> None:
    assert repo.run("agent", "install", "codex", "--remove").code == 0
    assert not (repo.path / ".codex").exists()


def test_enforce_on_and_off(repo: Repo) -> None:
    repo.run("agent", "install", "claude", "--enforce")
    assert len(ours(settings(repo), "Stop")) == 1
    repo.run("agent", "install", "claude")
    assert "Stop" not in settings(repo)["hooks"]


def test_dry_run_changes_nothing_and_prints_the_diff(repo: Repo) -> None:
    result = repo.run("agent", "install", "claude", "--dry-run")
    assert result.code == 0
    assert result.out.startswith("--- /dev/null\n+++ ")
    assert '+        "SessionStart": [' in result.out or '+    "SessionStart": [' in result.out
    assert "would add /.claude/settings.local.json to .git/info/exclude" in result.out
    assert not (repo.path / ".claude").exists()
    exclude = repo.path / ".git" / "info" / "exclude"
    assert "/.claude" not in (exclude.read_text() if exclude.exists() else "")


def test_unknown_agent_or_scope_is_refused(repo: Repo) -> None:
    assert repo.run("agent", "install", "cursor").code == 2
    bad = repo.run("agent", "install", "claude", "--scope", "team")
    assert bad.code == 2 and bad.err.startswith("majordomus: unknown scope 'team'")


def test_the_written_command_works_from_any_cwd_without_path(repo: Repo, tmp_path: Path) -> None:
    repo.task("queue drops acks")
    repo.run("handover", "-o", "find the drop", "-s", "ack first helps", "-n", "read flush()")
    repo.run("agent", "install", "claude")
    (command,) = [h["command"] for h in ours(settings(repo), "SessionStart")]
    assert command.split()[0].startswith(os.path.dirname(sys.executable))
    env = {**repo.environ, "PATH": "/usr/bin:/bin"}  # as a desktop app might start it
    event = {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(repo.path)}
    done = subprocess.run(
        command,
        shell=True,
        input=json.dumps(event).encode(),
        capture_output=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "> next: read flush()" in text


def test_doctor_reports_hooks_disabled_by_the_agent(repo: Repo) -> None:
    repo.run("agent", "install", "claude")
    doctor = repo.run("doctor")
    assert "note  agent     claude hooks installed in " in doctor.out  # the work tree's only
    home = Path(repo.environ["HOME"])
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"disableAllHooks": true}')
    doctor = repo.run("doctor")
    assert doctor.code == 1
    assert "FAIL  agent     claude hooks are installed in " in doctor.out
    assert "sets disableAllHooks: Claude Code runs none of them" in doctor.out


def test_doctor_reports_gemini_and_codex_switches(repo: Repo) -> None:
    repo.run("agent", "install", "gemini")
    path = repo.path / ".gemini" / "settings.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "hooksConfig": {"enabled": False}}))
    assert "hooksConfig.enabled to false" in repo.run("doctor").out
    repo.run("agent", "install", "codex")
    config = Path(repo.environ["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text("[features]\ncodex_hooks = false\n")
    assert "codex_hooks = false: Codex runs no hooks" in repo.run("doctor").out
    config.write_text("[features]\nhooks = false\n")  # the feature's name since codex-cli 0.171
    assert "sets [features] hooks = false: Codex runs no hooks" in repo.run("doctor").out


def test_codex_s_trust_gate_is_explained_by_install_and_doctor(repo: Repo) -> None:
    """Codex runs a project's hooks only once it trusts the project (until then `codex
    exec` skips them without a word): install says so, and doctor says when the project
    is not trusted, until ~/.codex/config.toml trusts it."""
    installed = repo.run("agent", "install", "codex")
    assert installed.code == 0
    assert "a project's hooks run only once Codex trusts the project" in installed.err
    doctor = repo.run("doctor")
    assert doctor.code == 1
    line = next(line for line in doctor.out.splitlines() if "codex hooks" in line)
    assert line.startswith("FAIL  agent     codex hooks are installed in ")
    assert f'has no [projects."{repo.path}"] trust_level = "trusted"' in line
    config = Path(repo.environ["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[projects."{repo.path}"]\ntrust_level = "trusted"\n')
    line = next(line for line in repo.run("doctor").out.splitlines() if "codex hooks" in line)
    assert line.startswith("ok    agent     codex hooks installed in ")
    # Installed for the user, the project's trust is not asked for.
    user = repo.run("agent", "install", "codex", "--scope", "user")
    assert user.code == 0 and "trusts the project" not in user.err


def test_user_scope_works_outside_a_repository(repo: Repo, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert repo.run("-C", str(plain), "agent", "install", "gemini", "--scope", "user").code == 0
    home = Path(repo.environ["HOME"])
    assert ours(json.loads((home / ".gemini/settings.json").read_text()), "BeforeAgent")
    assert repo.run("-C", str(plain), "agent", "install", "gemini").code == 3


def test_a_settings_file_that_cannot_be_written_is_one_sentence(repo: Repo) -> None:
    home = Path(repo.environ["HOME"])  # the user's own folder: a link there is followed
    (home / ".claude").mkdir()
    target = home / ".claude" / "settings.json"
    target.symlink_to("/proc/no-such-process/settings.json")  # not even root can write there
    result = repo.run("agent", "install", "claude", "--scope", "user")
    assert result.code == 3 and result.out == ""
    assert result.err.startswith(f"majordomus: cannot write {target} (")
    assert result.err.endswith("; it was left as it was.\n") and result.err.count("\n") == 1
    assert os.readlink(target) == "/proc/no-such-process/settings.json"


def test_a_symbolic_link_to_dotfiles_is_followed_not_replaced(repo: Repo, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps({"model": "opus"}))
    home = Path(repo.environ["HOME"])
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to(dotfiles)
    assert repo.run("agent", "install", "claude", "--scope", "user").code == 0
    assert (home / ".claude" / "settings.json").is_symlink()
    data = json.loads(dotfiles.read_text())
    assert data["model"] == "opus" and ours(data, "SessionStart")


def test_a_settings_path_blocked_by_a_file_is_refused(repo: Repo) -> None:
    (repo.path / ".claude").write_text("a file where the folder should be\n")
    result = repo.run("agent", "install", "claude", "--scope", "project")
    assert result.code == 2 and result.err.startswith("majordomus: cannot read ")
    assert (repo.path / ".claude").read_text() == "a file where the folder should be\n"


# ---- symbolic links in the work tree ---------------------------------------------------
# A clone's files are whoever committed them: a link at the settings path, or at a folder on
# the way to it, must not make `agent install` write outside the work tree.

LINK_CASES = [
    ("claude", "local", ".claude/settings.local.json"),
    ("claude", "project", ".claude/settings.json"),
    ("codex", "project", ".codex/hooks.json"),
    ("gemini", "local", ".gemini/settings.json"),
]
VARIANTS = [[], ["--enforce"], ["--remove"], ["--dry-run"]]


def exclude_text(repo: Repo) -> str:
    exclude = repo.path / ".git" / "info" / "exclude"
    return exclude.read_text() if exclude.exists() else ""


def assert_refused(repo: Repo, argv: list[str], link: Path, where: str) -> None:
    before = exclude_text(repo)
    result = repo.run("agent", "install", *argv)
    assert (result.code, result.out) == (2, ""), result.err
    assert result.err == (
        f"majordomus: {link} is a symbolic link that leads {where}, so agent install does "
        "not write through it; nothing was changed.\n"
    )
    assert exclude_text(repo) == before


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(("agent", "scope", "name"), LINK_CASES)
@pytest.mark.parametrize("argv", VARIANTS, ids=["install", "enforce", "remove", "dry-run"])
def test_a_dangling_settings_link_to_outside_is_refused_and_creates_nothing(
    repo: Repo, tmp_path: Path, agent: str, scope: str, name: str, argv: list[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    link = repo.path / name
    link.parent.mkdir()
    link.symlink_to(outside / "planted.json")
    assert_refused(repo, [agent, "--scope", scope, *argv], link, "outside the work tree")
    assert files_under(outside) == []
    assert files_under(link.parent) == [link.name]
    assert os.readlink(link) == str(outside / "planted.json")


@pytest.mark.parametrize(("agent", "scope", "name"), LINK_CASES)
@pytest.mark.parametrize("argv", VARIANTS, ids=["install", "enforce", "remove", "dry-run"])
def test_a_settings_link_to_an_outside_file_is_refused_untouched(
    repo: Repo, tmp_path: Path, agent: str, scope: str, name: str, argv: list[str]
) -> None:
    target = tmp_path / "outside" / "profile.json"
    target.parent.mkdir()
    installed = {"hooks": {"SessionStart": [{"hooks": [{"command": "majordomus hook x"}]}]}}
    target.write_text(json.dumps(installed))  # --remove would have something to take out
    before = target.read_bytes(), target.stat().st_mtime_ns
    link = repo.path / name
    link.parent.mkdir()
    link.symlink_to(target)
    assert_refused(repo, [agent, "--scope", scope, *argv], link, "outside the work tree")
    assert (target.read_bytes(), target.stat().st_mtime_ns) == before
    assert files_under(target.parent) == ["profile.json"]


@pytest.mark.parametrize(("agent", "scope", "name"), LINK_CASES)
@pytest.mark.parametrize("exists", [True, False], ids=["folder", "dangling"])
@pytest.mark.parametrize("argv", VARIANTS, ids=["install", "enforce", "remove", "dry-run"])
def test_a_settings_folder_linked_outside_is_refused_and_not_written_into(
    repo: Repo, tmp_path: Path, agent: str, scope: str, name: str, exists: bool, argv: list[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    if exists:
        (outside / "agent").mkdir()
    folder = repo.path / Path(name).parts[0]
    folder.symlink_to(outside / "agent")
    assert_refused(repo, [agent, "--scope", scope, *argv], folder, "outside the work tree")
    assert files_under(outside) == (["agent"] if exists else [])


def test_a_link_into_the_git_directory_is_refused(repo: Repo) -> None:
    (repo.path / ".claude").symlink_to(".git")
    assert_refused(repo, ["claude"], repo.path / ".claude", "into the git directory")
    assert not (repo.path / ".git" / "settings.local.json").exists()


def test_a_link_that_stays_in_the_work_tree_is_followed(repo: Repo) -> None:
    # A folder kept elsewhere in the work tree (a shared config folder) is no escape.
    (repo.path / "config" / "claude").mkdir(parents=True)
    (repo.path / ".claude").symlink_to("config/claude")
    result = repo.run("agent", "install", "claude")
    assert result.code == 0, result.err
    written = repo.path / "config" / "claude" / "settings.local.json"
    assert ours(json.loads(written.read_text()), "SessionStart")
    (repo.path / ".gemini").mkdir()
    (repo.path / ".gemini" / "settings.json").symlink_to("../config/gemini.json")  # dangling
    result = repo.run("agent", "install", "gemini", "--scope", "project")
    assert result.code == 0, result.err
    assert (repo.path / ".gemini" / "settings.json").is_symlink()
    assert ours(json.loads((repo.path / "config" / "gemini.json").read_text()), "BeforeAgent")


def test_doctor_reads_no_settings_that_a_link_leads_outside_the_work_tree(
    repo: Repo, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    installed = {"hooks": {"BeforeAgent": [{"hooks": [{"command": "majordomus hook gemini"}]}]}}
    (outside / "settings.json").write_text(json.dumps(installed))
    (outside / "config.toml").write_text("[features]\ncodex_hooks = false\n")
    (repo.path / ".gemini").symlink_to(outside)
    (repo.path / ".codex").mkdir()
    (repo.path / ".codex" / "config.toml").symlink_to(outside / "config.toml")
    assert repo.run("agent", "install", "codex", "--scope", "user").code == 0
    home = Path(repo.environ["HOME"])
    agent_lines = [line for line in repo.run("doctor").out.splitlines() if " agent " in line]
    assert agent_lines == [
        f"ok    agent     codex hooks installed in {home}/.codex/hooks.json",
        f"FAIL  agent     {repo.path}/.gemini is a symbolic link that leads outside the work "
        "tree; it is not read, and agent install refuses to write through it",
    ]


def test_doctor_does_not_read_a_committed_link_to_dev_zero(repo: Repo) -> None:
    import resource

    (repo.path / ".claude").mkdir()
    (repo.path / ".claude" / "settings.json").symlink_to("/dev/zero")
    (repo.path / ".codex").mkdir()
    (repo.path / ".codex" / "config.toml").symlink_to("/dev/zero")
    assert repo.run("agent", "install", "codex", "--scope", "user").code == 0

    def bounded() -> None:  # read whole, /dev/zero would take all memory: bound it
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run(
        [*MAJORDOMUS, "doctor"],
        cwd=repo.path,
        env=repo.environ,
        capture_output=True,
        text=True,
        preexec_fn=bounded,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (1, "")
    assert (
        f"FAIL  agent     {repo.path}/.claude/settings.json is a symbolic link that leads "
        "outside the work tree; it is not read, and agent install refuses to write through it\n"
    ) in done.stdout


def test_a_link_loop_at_the_settings_folder_is_refused_unwritten(repo: Repo) -> None:
    (repo.path / ".claude").symlink_to(".claude")
    result = repo.run("agent", "install", "claude")
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"majordomus: cannot read {repo.path}/.claude/settings.local")
    assert result.err.endswith("; nothing was changed.\n") and result.err.count("\n") == 1
    assert os.readlink(repo.path / ".claude") == ".claude"
    assert exclude_text(repo).count(".claude") == 0


# ---- an agent started in a subfolder ---------------------------------------------------------


def started_here(client: str, workdir: Path, user_file: Path, agent: str) -> str:
    return (
        f"{client} reads a project's settings only when it is started in {workdir} itself, "
        "not in a subfolder of it: to have the hooks wherever you start it, run majordomus "
        f"agent install {agent} --scope user (writes {user_file})"
    )


def subfolder_world(repo: Repo) -> Path:
    """A history with a merge, another branch checked out, and a subfolder to start in."""
    repo.commit("src: the queue", {"src/queue/flush.py": "def flush(): ...\n"})
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side: smaller batch", {"src/queue/batch.py": "N = 8\n"})
    repo.git("checkout", "-q", "main")
    repo.commit("main: retry", {"src/queue/retry.py": "TRIES = 3\n"})
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    repo.git("checkout", "-q", "-b", "topic")
    return repo.path / "src" / "queue"


@pytest.mark.parametrize(
    ("agent", "client", "scope"),
    [
        ("claude", "Claude Code", "local"),
        ("claude", "Claude Code", "project"),
        ("gemini", "Gemini CLI", "local"),
        ("gemini", "Gemini CLI", "project"),
    ],
)
def test_install_in_the_work_tree_says_where_claude_and_gemini_look(
    repo: Repo, agent: str, client: str, scope: str
) -> None:
    """Run from a subfolder, the install writes the work tree's file and says that the
    agent reads it only when started at the top, and which scope works from anywhere."""
    sub = subfolder_world(repo)
    home = Path(repo.environ["HOME"])
    result = repo.run("-C", str(sub), "agent", "install", agent, "--scope", scope)
    assert result.code == 0, result.err
    advice = started_here(client, repo.path, home / USER_FILE[agent], agent)
    assert f"majordomus: warning: {advice}.\n" in result.err
    written = repo.path / (
        LOCAL_FILE.get(agent, PROJECT_FILE[agent]) if scope == "local" else PROJECT_FILE[agent]
    )
    assert our_events(json.loads(written.read_text()))
    assert not (sub / written.relative_to(repo.path)).exists()
    removed = repo.run("-C", str(sub), "agent", "install", agent, "--scope", scope, "--remove")
    assert removed.code == 0 and "subfolder" not in removed.err


@pytest.mark.parametrize("agent", ["claude", "gemini", "codex"])
def test_user_scope_and_codex_carry_no_subfolder_advice(repo: Repo, agent: str) -> None:
    sub = subfolder_world(repo)
    user = repo.run("-C", str(sub), "agent", "install", agent, "--scope", "user")
    assert user.code == 0 and "subfolder" not in user.err
    if agent == "codex":  # Codex finds a project's files from a subfolder too
        local = repo.run("-C", str(sub), "agent", "install", "codex")
        assert local.code == 0 and "subfolder" not in local.err


def agent_lines(repo: Repo, *argv: str) -> list[str]:
    return [line for line in repo.run(*argv, "doctor").out.splitlines() if " agent " in line]


def test_doctor_notes_claude_and_gemini_hooks_only_in_the_work_tree(repo: Repo) -> None:
    """A note (not a failure: exit as before) for hooks the agent misses when started in a
    subfolder; none once the user's settings carry them; none for Codex."""
    sub = subfolder_world(repo)
    home = Path(repo.environ["HOME"])
    before = repo.run("doctor").code
    for agent in ("claude", "gemini", "codex"):
        assert repo.run("agent", "install", agent).code == 0
    lines = agent_lines(repo, "-C", str(sub))
    assert repo.run("-C", str(sub), "doctor").code == before
    for agent, client in (("claude", "Claude Code"), ("gemini", "Gemini CLI")):
        where = repo.path / LOCAL_FILE.get(agent, PROJECT_FILE[agent])
        advice = started_here(client, repo.path, home / USER_FILE[agent], agent)
        assert f"note  agent     {agent} hooks installed in {where}; {advice}" in lines
    assert not [line for line in lines if "codex" in line and "subfolder" in line]
    as_json = json.loads(repo.run("doctor", "--json").out)
    noted = [f for f in as_json["findings"] if f["topic"] == "agent" and f["status"] == "note"]
    assert len(noted) == 2 and all(f["healthy"] is True for f in noted)
    for agent in ("claude", "gemini"):
        assert repo.run("agent", "install", agent, "--scope", "user").code == 0
    lines = agent_lines(repo)
    assert not [line for line in lines if "subfolder" in line]
    assert any(line.startswith("ok    agent     claude hooks installed in ") for line in lines)


def test_a_teammate_s_committed_settings_are_noted_in_a_second_clone(
    repo: Repo, tmp_path: Path
) -> None:
    """Project settings committed and pushed, then cloned behind a bare remote: the second
    clone's doctor names its own work tree; a settings file edited by hand (another hook
    kept, an escape in a key) still reads."""
    from tests.support.git import bare
    from tests.support.repo import clone

    subfolder_world(repo)
    assert repo.run("agent", "install", "claude", "--scope", "project").code == 0
    path = repo.path / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    data["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "echo \u001b[2J"}]}]
    data["x\u202eevil"] = True
    path.write_text(json.dumps(data))
    repo.git("add", ".claude/settings.json")
    repo.git("commit", "-q", "-m", "share the hooks")
    remote = bare(tmp_path / "remote.git", repo.environ)
    repo.git("push", "-q", "--no-verify", str(remote), "topic")
    second = clone(str(remote), tmp_path / "second", repo.environ, repo.clock, "-b", "topic")
    lines = agent_lines(second, "-C", str(second.path / "src" / "queue"))
    home = Path(repo.environ["HOME"])
    advice = started_here("Claude Code", second.path, home / USER_FILE["claude"], "claude")
    assert lines == [
        f"note  agent     claude hooks installed in {second.path}/.claude/settings.json; {advice}"
    ]


def test_codex_in_a_linked_work_tree_is_told_where_codex_reads_project_hooks(
    repo: Repo, tmp_path: Path
) -> None:
    """Codex reads a linked work tree's project hooks from the main work tree: an install in
    the linked one says so (the file is still written where asked); none in the main work
    tree, none for user scope, none for the other agents."""
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", "-b", "topic", str(linked))
    said = f"Codex reads the project's hooks from the main work tree ({repo.path}/.codex/hooks"
    there = repo.run("-C", str(linked), "agent", "install", "codex")
    assert there.code == 0 and said in there.err
    assert (linked / PROJECT_FILE["codex"]).exists()
    for argv in (["-C", str(linked), "agent", "install", "codex", "--scope", "user"],
                 ["-C", str(linked), "agent", "install", "claude"],
                 ["agent", "install", "codex"]):  # fmt: skip
        done = repo.run(*argv)
        assert done.code == 0 and "linked work tree" not in done.err, argv


def test_codex_home_holds_the_user_hooks_and_the_config_doctor_reads(
    repo: Repo, tmp_path: Path
) -> None:
    """With CODEX_HOME set, Codex reads hooks.json and config.toml there, not in ~/.codex:
    the user install writes there, and doctor reads its switch and its trust there."""
    codex = tmp_path / "codex-home"
    codex.mkdir()
    repo.environ = {**repo.environ, "CODEX_HOME": str(codex)}
    assert repo.run("agent", "install", "codex", "--scope", "user").code == 0
    assert our_events(json.loads((codex / "hooks.json").read_text()))
    assert not (Path(repo.environ["HOME"]) / ".codex" / "hooks.json").exists()
    assert f"codex hooks installed in {codex / 'hooks.json'}" in repo.run("doctor").out
    (codex / "config.toml").write_text("[features]\nhooks = false\n")
    home_config = Path(repo.environ["HOME"]) / ".codex" / "config.toml"
    home_config.parent.mkdir(exist_ok=True)
    home_config.write_text("[features]\nhooks = true\n")  # not the file Codex reads
    assert f"{codex / 'config.toml'} sets [features] hooks = false" in repo.run("doctor").out
    # A project install is trusted or not by CODEX_HOME's config too.
    assert repo.run("agent", "install", "codex").code == 0
    (codex / "config.toml").write_text(f'[projects."{repo.path}"]\ntrust_level = "trusted"\n')
    assert "trust_level" not in repo.run("doctor").out
