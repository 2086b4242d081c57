"""Sessions of the real clients against the fake model servers, in throwaway repositories.

Each client gets a HOME of its own (never the real ~/.claude, ~/.codex, ~/.gemini), its
settings pointing at its stub, the project trusted where the client gates on trust, and a
PATH without majordomus (the hooks are run by absolute path, as `agent install` writes).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.e2e import clients, stubs
from tests.support.attacks import World, attacked, hostile, record, write_note
from tests.support.env import EMAIL, NAME, hermetic_environ
from tests.support.repo import Repo

API = {"claude": stubs.anthropic, "codex": stubs.openai_responses, "gemini": stubs.gemini}
CONTEXT_HEAD = "majordomus context: task "
HOSTILE_ID = "c-0bad0bad0bad0b01"
# A teammate's checkpoint with a line break and invisible characters in every field.
INVISIBLE = "\u200b\u202e\u2066\u2028\U000e0041"


def attack(world: World) -> None:
    """A hostile teammate's checkpoint of the victim's task, written with plain git on a
    commit of its own that the victim merges: a forged author, newlines and invisible
    characters in every field, the payload lines of `attacks.PAYLOAD`."""
    head, at = world.attacker_commit("attacker: tweak", {"retry.py": "retry = 5\n"})
    text = record(
        "checkpoint", HOSTILE_ID, world.task, head, at,
        author=hostile("Ada Lovelace <ada@example.com>" + INVISIBLE),
        session=hostile("night" + INVISIBLE), body=hostile("it works" + INVISIBLE),
    )  # fmt: skip
    write_note(world.attacker, head, text)


@dataclass
class Setup:
    """One client's session set-up: its program, its HOME, its environment, its stub."""

    client: str
    program: Path
    home: Path
    environ: dict[str, str]
    stub: stubs.Stub

    def run(self, cwd: Path, prompt: str, *extra: str, resume: bool = False) -> clients.Ran:
        return clients.run(self.client, self.argv(prompt, extra, resume), cwd, self.environ).ok()

    def argv(self, prompt: str, extra: tuple[str, ...], resume: bool) -> list[str]:
        program = str(self.program)
        if self.client == "claude":
            again = ["-c"] if resume else []
            allowed = ["--allowedTools", "Bash,mcp__majordomus"]
            return [program, *again, "-p", prompt, "--output-format", "json", *allowed, *extra]
        if self.client == "codex":
            flags = [
                "--dangerously-bypass-hook-trust",  # approves the new hooks, as a person would
                "--dangerously-bypass-approvals-and-sandbox",  # the sandbox makes .git read-only
                "--skip-git-repo-check",
                "--json",
                *extra,
            ]
            if resume:
                return [program, "exec", *flags, "resume", "--last", prompt]
            return [program, "exec", *flags, prompt]
        again = ["--resume", "latest"] if resume else []
        return [program, *again, "-p", prompt, "--yolo", "--output-format", "json", *extra]

    def trust(self, folder: Path) -> None:
        """Trust `folder` as a person does once: Codex's config.toml, Gemini's list."""
        if self.client == "codex":
            config = self.home / ".codex" / "config.toml"
            with config.open("a", encoding="utf-8") as handle:
                handle.write(f'\n[projects."{folder}"]\ntrust_level = "trusted"\n')
        if self.client == "gemini":
            path = self.home / ".gemini" / "trustedFolders.json"
            trusted = json.loads(path.read_text()) if path.exists() else {}
            path.write_text(json.dumps({**trusted, str(folder): "TRUST_FOLDER"}))

    def add_mcp(self, majordomus: str) -> list[str]:
        """majordomus' MCP server configured for the client; the extra arguments a call
        then needs."""
        if self.client == "claude":
            path = self.home / "mcp.json"
            server = {"type": "stdio", "command": majordomus, "args": ["mcp"]}
            path.write_text(json.dumps({"mcpServers": {"majordomus": server}}))
            # -p does not wait for MCP servers (MCP_CONNECTION_NONBLOCKING=false would make
            # it): the server's tools reach the first turn because it answers initialize
            # and tools/list at once, before the SDK is imported (majordomus.mcpfront).
            return ["--mcp-config", str(path), "--strict-mcp-config"]
        config = self.home / ".codex" / "config.toml"
        with config.open("a", encoding="utf-8") as handle:
            # Not `required`: Codex gives an optional server a second to list its tools,
            # which the server's fast handshake (majordomus.mcpfront) meets.
            handle.write(f'\n[mcp_servers.majordomus]\ncommand = "{majordomus}"\nargs = ["mcp"]\n')
        return []

    def main_requests(self) -> list[stubs.Seen]:
        """The requests of the agent's own turns (not titles, routing, token counts)."""
        if self.client == "claude":
            return [s for s in self.stub.requests("/v1/messages") if s.body.get("tools")]
        if self.client == "codex":
            return self.stub.requests("/responses")
        return self.stub.requests(":streamGenerateContent")


@contextmanager
def setup(client: str, program: Path, root: Path, node_dir: Path) -> Iterator[Setup]:
    home = root / f"{client}-home"
    home.mkdir(parents=True)
    with stubs.serving(client, API[client]) as stub:
        environ = {**hermetic_environ(home), "PATH": clients.agent_path(node_dir)}
        if client == "claude":
            environ |= {
                "ANTHROPIC_BASE_URL": stub.url,
                "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            }
        elif client == "codex":
            (home / ".codex").mkdir()
            environ |= {"CODEX_HOME": str(home / ".codex"), "E2E_API_KEY": "dummy"}
            (home / ".codex" / "config.toml").write_text(
                'model = "gpt-e2e"\nmodel_provider = "stub"\n\n[model_providers.stub]\n'
                f'name = "stub"\nbase_url = "{stub.url}/v1"\nwire_api = "responses"\n'
                'env_key = "E2E_API_KEY"\n'
            )
        else:
            (home / ".gemini").mkdir()
            environ |= {"GOOGLE_GEMINI_BASE_URL": stub.url, "GEMINI_API_KEY": "dummy"}
            settings = {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"disableAutoUpdate": True},
            }
            (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        try:
            yield Setup(client, program, home, environ, stub)
        finally:  # what the model received, kept beside a failed test's repositories
            seen = [{"path": s.path, "body": s.body} for s in stub.requests()]
            (root / f"{client}-requests.json").write_text(json.dumps(seen, indent=1))


def world(root: Path) -> World:
    """The victim's world after the attack, its identity in the clone's own config too:
    Codex starts MCP servers with few of its environment's variables (no GIT_AUTHOR_*)."""
    attacked_world = attacked(root, attack)
    for key, value in (("user.name", NAME), ("user.email", EMAIL)):
        attacked_world.victim.git("config", key, value)
    return attacked_world


def install(repo: Repo, client: str, *options: str, home: Path | None = None) -> str:
    """`agent install CLIENT OPTIONS` in `repo` (user scope under `home`); the hook command."""
    environ = {"HOME": str(home)} if home else None
    done = repo.run("agent", "install", client, *options, environ=environ)
    assert done.code == 0, done.err
    lines = [line for line in done.out.splitlines() if line.startswith("hook command: ")]
    assert len(lines) == 1, done.out
    return lines[0].removeprefix("hook command: ")


def history(repo: Repo) -> list[dict[str, object]]:
    done = repo.run("history", "--json")
    assert done.code == 0, done.err
    records = json.loads(done.out)["records"]
    assert isinstance(records, list)
    return records


def bodies(repo: Repo) -> list[object]:
    return [r.get("body") for r in history(repo) if r.get("kind") == "checkpoint"]


def block_of(text: str) -> str:
    """The `context` block inside a request's text: from its first line to its last."""
    start = text.index(CONTEXT_HEAD)
    lines = text[start:].split("\n")
    end = next(n for n, line in enumerate(lines) if line.startswith("Pick up the open handover"))
    return "\n".join(lines[: end + 1])


def count(seen: stubs.Seen, piece: str, unescape: Callable[[str], str] = html.unescape) -> int:
    return unescape(seen.text).count(piece)


# The prompt hook's reminder (the Stop reason starts alike, then says "Before stopping").
STALE = re.compile(
    r"majordomus: task t-[0-9a-f]{12} has no checkpoint for [^\n]*?: record what is true now with "
)
