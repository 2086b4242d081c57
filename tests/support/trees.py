"""A victim and an attacker behind one bare remote, for the hostile notes tree and notes ref
tests: the victim works with majordomus (records pushed and not yet pushed), the attacker
writes the shared notes ref with plain git only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

from tests.support.env import Clock
from tests.support.git import NOTES_REF
from tests.support.repo import Repo, clone, seeded

TRACKING_REF = "refs/notes/remotes/origin/majordomus"
SESSION_START = json.dumps({"hook_event_name": "SessionStart", "source": "startup"}).encode()


class Scene(NamedTuple):
    remote: Path
    victim: Repo
    attacker: Repo
    noted: str  # the shared commit that carries the victim's pushed records
    pushed: frozenset[str]  # record ids the remote had before the attack
    mine: frozenset[str]  # every record id of the victim's, pushed or not
    unpushed: str  # the id of the victim's last checkpoint, not pushed


def ok(repo: Repo, *argv: str) -> str:
    result = repo.run(*argv)
    assert result.code == 0, (argv, result.err)
    assert "Traceback" not in result.err
    return result.out


def record_id(repo: Repo, *argv: str) -> str:
    return str(json.loads(ok(repo, *argv, "--json"))["record"]["id"])


def scene(tmp_path: Path, environ: dict[str, str], clock: Clock) -> Scene:
    """The victim ran `init`, wrote a task and a checkpoint and pushed them, then wrote a
    checkpoint and a handover on a commit of its own; the attacker has the records."""
    remote, victim = seeded(tmp_path, environ, clock)
    ok(victim, "init")
    pushed = {victim.task("victim task"), record_id(victim, "checkpoint", "pushed words")}
    ok(victim, "push")
    noted = victim.head()
    victim.commit("unpushed work")
    unpushed = record_id(victim, "checkpoint", "unpushed words")
    handover = ("handover", "-o", "find the drop", "-s", "half way", "-n", "read flush()")
    mine = pushed | {unpushed, record_id(victim, *handover)}
    attacker = clone(str(remote), tmp_path / "attacker", environ, clock)
    attacker.git("fetch", "-q", "origin", f"{NOTES_REF}:{NOTES_REF}")
    return Scene(remote, victim, attacker, noted, frozenset(pushed), frozenset(mine), unpushed)


def publish_tree(attacker: Repo, replaced: dict[str, str], *also: str) -> str:
    """The attacker's notes tree with these `git mktree` lines (by path), committed on top of
    its notes ref and pushed as the remote's notes ref by plain git, with the refs `also`
    names (`main`); the new notes commit.
    The tree is written as given, in git's order (`hash-object --literally`: what mktree
    would refuse too, a gitlink that names a blob)."""
    lines = {}
    for line in attacker.git("ls-tree", NOTES_REF).splitlines():
        lines[line.split("\t", 1)[1]] = line
    lines.update(replaced)
    tree = literal_tree(attacker, list(lines.values()))
    old = attacker.git("rev-parse", NOTES_REF).strip()
    commit = attacker.git("commit-tree", tree, "-p", old, "-m", "notes").strip()
    attacker.git("update-ref", NOTES_REF, commit)
    attacker.git("push", "-q", "origin", *also, f"{NOTES_REF}:{NOTES_REF}")
    return commit


def literal_tree(repo: Repo, lines: list[str]) -> str:
    """A tree object of these `git ls-tree` lines, written as they say (modes as git writes
    them, entries in git's order: a tree's name sorts as if it ended in a slash)."""
    entries = []
    for line in lines:
        head, name = line.split("\t", 1)
        mode, kind, oid = head.split(" ")
        key = name + "/" if kind == "tree" else name
        entries.append((key.encode(), mode.lstrip("0").encode(), name.encode(), oid))
    data = b"".join(m + b" " + n + b"\0" + bytes.fromhex(o) for _, m, n, o in sorted(entries))
    command = ["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"]
    done = subprocess.run(
        command, input=data, capture_output=True, cwd=repo.path, env=repo.environ, check=True
    )
    return done.stdout.decode("ascii").strip()


def blob(repo: Repo, data: bytes | str) -> str:
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    return repo.git("hash-object", "-w", "--stdin", input=text).strip()


def ids(repo: Repo) -> set[str]:
    """Every record id every read lists (local and remote-tracking refs united)."""
    result = repo.run("history", "--all", "--json")
    assert result.code == 0, result.err
    return {record["id"] for record in json.loads(result.out)["records"]}


def invalid(repo: Repo) -> int:
    result = repo.run("history", "--all", "--json")
    assert result.code == 0, result.err
    return int(json.loads(result.out)["invalid"])


def session_start(repo: Repo) -> tuple[str, str]:
    """What `majordomus hook claude` answers at SessionStart: its context, and its stderr."""
    result = repo.run("hook", "claude", stdin=SESSION_START)
    assert result.code == 0 and "Traceback" not in result.err, result.err
    answer: dict[str, Any] = json.loads(result.out)
    return str(answer["hookSpecificOutput"]["additionalContext"]), result.err


def third_clone(scene: Scene, tmp_path: Path, clock: Clock) -> Repo:
    """A clone made after the attack that fetches the records with majordomus."""
    third = clone(str(scene.remote), tmp_path / "third", scene.victim.environ, clock)
    ok(third, "fetch")
    return third
