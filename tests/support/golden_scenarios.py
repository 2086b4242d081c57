"""The scenarios behind fixtures/golden/: the README's walkthrough, a merge, a shallow
clone, hostile notes, remotes, agents and adopt (every refusal: `golden_refusals`).
Each step advances the fixed clock first."""

from __future__ import annotations

import json
import shlex

from tests.support.corpus import CORPUS_TASK, NOTES
from tests.support.env import hermetic_environ
from tests.support.golden import Transcript, scenario
from tests.support.repo import Repo

TITLE = "queue drops acks under load"
FIRST = "reproduced under 50 concurrent enqueues; the retry loop re-enters before the ack"
OBJECTIVE = "find why acks drop under concurrent enqueue"
STATE = "ack-before-retry cuts drops from 9% to 1.5%; a second race remains in flush()"
NEXT = "run tests/stress.py with FLUSH_DELAY=5ms and read the flush() lock order"


def _grace_environ(t: Transcript) -> dict[str, str]:
    """A second person's hermetic environment: her own home and git identity."""
    home = t.tmp / "home-grace"
    home.mkdir(parents=True, exist_ok=True)
    identity = {"NAME": "Grace Hopper", "EMAIL": "grace@example.com"}
    return {
        **hermetic_environ(home),
        **{
            f"GIT_{who}_{what}": value
            for who in ("AUTHOR", "COMMITTER")
            for what, value in identity.items()
        },
    }


@scenario
def walkthrough(t: Transcript) -> None:
    """The README's walkthrough: Ada records and pushes in her clone, Grace fetches and
    resumes in hers, both behind one bare remote; then every read command in text and
    JSON, in Grace's clone."""
    ada = t.repo("ada")
    ada.commit("queue: first cut", {"queue.py": "def enqueue(item):\n    retry(item)\n"})
    bare = t.tmp / "queue.git"
    t.git(ada, "init", "-q", "--bare", "-b", "main", str(bare))
    t.git(ada, "remote", "add", "origin", str(bare))
    t.git(ada, "push", "-q", "origin", "main")
    t.clock.advance(10 * 60)
    t.run(ada, "init")
    task = t.run(ada, "task", "new", TITLE).strip()
    t.clock.advance(2 * 60 + 9)
    t.run(ada, "checkpoint", FIRST)
    t.clock.advance(8 * 60)
    (ada.path / "queue.py").write_text("def enqueue(item):\n    ack(item)\n    retry(item)\n")
    t.git(ada, "commit", "-q", "-am", "queue: ack before retry (attempt)")
    t.clock.advance(5 * 60)
    t.run(
        ada,
        "handover",
        "--objective",
        OBJECTIVE,
        "--state",
        STATE,
        "--next",
        NEXT,
        shown=(
            f"majordomus handover --objective '{OBJECTIVE}' \\\n"
            f"      --state '{STATE}' \\\n"
            f"      --next '{NEXT}'"
        ),
    )
    t.run(ada, "push")
    t.git(ada, "push", "-q", "origin", "main")
    t.note("the next morning Grace clones the remote; the code moved on meanwhile")
    t.clock.advance(3 * 3600)
    t.git(ada, "clone", "-q", str(bare), str(t.tmp / "grace"))
    repo = Repo(t.tmp / "grace", _grace_environ(t), t.clock)
    repo.commit("queue: log every ack")
    t.clock.advance(2 * 3600)
    repo.commit("ci: run the stress test nightly")
    t.clock.advance(48 * 60)
    t.run(repo, "init")
    t.run(repo, "fetch")
    t.run(repo, "resume")
    t.clock.advance(60)
    prefix = task[2:6]
    t.run(repo, "history", "--task", prefix)
    t.clock.advance(5 * 60)
    t.run(
        repo, "checkpoint", "flush() takes the lock after the ack: FLUSH_DELAY=5ms drops 4 of 200"
    )
    t.clock.advance(4 * 60 + 10)
    t.run(repo, "check")
    t.note("every read, as text and as JSON")
    for argv in (
        ("task", "list"),
        ("show",),
        ("show", "HEAD~2"),
        ("history",),
        ("history", "--limit", "2"),
        ("check", "--all"),
        ("resume", "--peek"),
        ("profile",),
    ):
        t.run(repo, *argv)
        t.run(repo, *argv, "--json")
    t.run(repo, "show", "HEAD~2", "--markdown")
    t.run(repo, "checkpoint", "--json", "a checkpoint, answered in JSON")
    t.run(repo, "watch", "--count", "1")
    t.clock.advance(60)
    t.run(repo, "handover", "--json", "-o", OBJECTIVE, "-s", "flush() order found", "-n", NEXT)
    t.clock.advance(60)
    t.run(repo, "resume", "--json")
    t.run(repo, "resume", "--json")
    t.run(repo, "task", "new", "--json", "flush() holds the lock too long")
    t.run(repo, "task", "use", prefix)
    t.run(repo, "task", "list")
    t.run(repo, "doctor")
    t.run(repo, "doctor", "--json")
    t.run(repo, "doctor", "--drop-cache")
    t.run(repo, "--version")
    t.note("without init's rewrite settings, doctor says what that costs")
    t.git(repo, "config", "--unset-all", "notes.rewriteRef")
    t.run(repo, "doctor")
    t.run(repo, "doctor", "--json")
    t.git(repo, "log", "--notes=majordomus", "-1", "--format=%h %s%n%N", "HEAD~2")


def _handover(t: Transcript, repo: Repo, what: str) -> None:
    t.run(repo, "handover", "-o", OBJECTIVE, "-s", what, "-n", NEXT)


@scenario
def merge(t: Transcript) -> None:
    """A handover on a branch that is merged; labels from every side of a history with merges."""
    repo = t.repo("queue")
    t.clock.advance(60)
    task = t.run(repo, "task", "new", TITLE).strip()
    t.git(repo, "switch", "-q", "-c", "feature")
    t.clock.advance(60)
    t.git(repo, "commit", "-q", "--allow-empty", "-m", "feature: ack before retry")
    t.clock.advance(60)
    _handover(t, repo, "the ack moved; flush() still races")
    t.clock.advance(60)
    t.git(repo, "switch", "-q", "main")
    t.git(repo, "commit", "-q", "--allow-empty", "-m", "main: bump version")
    t.note("on main, which lacks the handover's commit and has one of its own")
    t.run(repo, "resume", "--peek")
    t.run(repo, "history")
    t.run(repo, "history", "--all")
    t.clock.advance(60)
    t.git(repo, "merge", "-q", "--no-edit", "feature")
    t.clock.advance(60)
    t.git(repo, "commit", "-q", "--allow-empty", "-m", "main: after the merge")
    t.note("after the merge: the handover's commit is an ancestor of HEAD")
    t.run(repo, "resume", "--peek")
    t.run(repo, "resume", "--peek", "--json")
    t.run(repo, "history", "--limit", "1")
    t.git(repo, "rev-list", "--left-right", "--count", "feature...HEAD")
    t.note("an older checkout: HEAD is an ancestor of the handover's commit")
    t.git(repo, "switch", "-q", "--detach", "feature~1")
    t.run(repo, "resume", "--peek")
    t.note("an unrelated history")
    t.git(repo, "switch", "-q", "--orphan", "elsewhere")
    t.git(repo, "commit", "-q", "--allow-empty", "-m", "unrelated root")
    t.run(repo, "resume", "--peek")
    t.note("a handover on a commit that no longer exists")
    t.git(repo, "switch", "-q", "main")
    t.git(repo, "switch", "-q", "-c", "dropped")
    t.clock.advance(60)
    t.git(repo, "commit", "-q", "--allow-empty", "-m", "dropped: an experiment")
    t.clock.advance(60)
    _handover(t, repo, "tried an experiment, then dropped the branch")
    t.git(repo, "switch", "-q", "main")
    t.git(repo, "branch", "-q", "-D", "dropped")
    t.git(repo, "reflog", "expire", "--expire=now", "--all")
    t.git(repo, "gc", "-q", "--prune=now")
    t.run(repo, "resume", "--peek", "--task", task[2:6])
    t.clock.advance(60)
    t.run(repo, "resume")
    t.run(repo, "history", "--all")


@scenario
def shallow(t: Transcript) -> None:
    """A depth-1 clone (what CI checks out) with the notes fetched: labels are never guessed."""
    origin = t.repo("origin")
    t.clock.advance(60)
    task = t.run(origin, "task", "new", TITLE).strip()
    t.clock.advance(60)
    origin.commit("queue: ack before retry")
    _handover(t, origin, "handed over two commits before the tip")
    for message in ("queue: log every ack", "ci: stress nightly"):
        t.clock.advance(60)
        origin.commit(message)
    ci = t.repo("ci", commit=False)
    t.git(ci, "fetch", "-q", "--depth", "1", f"file://{origin.path}", "main")
    t.git(ci, "reset", "-q", "--hard", "FETCH_HEAD", shown="git reset -q --hard FETCH_HEAD")
    t.git(ci, "fetch", "-q", f"file://{origin.path}", "refs/notes/majordomus:refs/notes/majordomus")
    t.clock.advance(60)
    t.note("the handover's commit is past the shallow boundary: the label is unknown")
    t.run(ci, "resume", "--peek", "--task", task[2:6])
    t.run(ci, "resume", "--peek", "--task", task[2:6], "--json")
    t.run(ci, "history")
    t.run(ci, "history", "--all")
    t.run(ci, "history", "--all", "--json")
    t.run(ci, "show", "HEAD")
    t.run(ci, "doctor")
    t.note("deepened past the handover's commit, the label is exact")
    t.git(ci, "fetch", "-q", "--deepen", "3", f"file://{origin.path}", "main")
    t.run(ci, "resume", "--peek", "--task", task[2:6])


def _plant(t: Transcript, repo: Repo, task: str, name: str) -> None:
    """A corpus note, byte for byte, on a new commit (as someone with push access wrote it)."""
    data = (NOTES / name).read_bytes().replace(CORPUS_TASK.encode(), task.encode())
    t.clock.advance(60)
    repo.commit(f"planted: {name}")
    blob = repo.git("hash-object", "-w", "--stdin", input=data.decode("utf-8")).strip()
    repo.git("notes", "--ref=majordomus", "add", "-f", "-C", blob, "HEAD")
    t.note(f"fixtures/notes/{name} written on HEAD with git notes add -C")


@scenario
def hostile(t: Transcript) -> None:
    """Notes from someone with push access: escaped in text, JSON and markdown; invalid counted."""
    repo = t.repo("queue")
    task = t.run(repo, "task", "new", TITLE).strip()
    for name in (
        "hostile/terminal-escapes-everywhere.toml",
        "hostile/raw-c1-bidi-and-zero-width-characters.toml",
        "hostile/floats-json-cannot-carry.toml",
    ):
        _plant(t, repo, task, name)
        t.run(repo, "show")
        t.run(repo, "show", "--json")
    t.run(repo, "show", "--markdown")
    _plant(t, repo, task, "hostile/markdown-that-tries-to-leave-its-code-block.toml")
    t.run(repo, "show", "--markdown")
    _plant(t, repo, task, "hostile/a-task-id-that-drives-the-terminal.toml")
    t.run(repo, "show")
    _plant(t, repo, task, "invalid/not-toml.toml")
    t.run(repo, "show")
    t.run(repo, "show", "--json")
    t.run(repo, "history", "--limit", "3")
    t.run(repo, "task", "list")
    t.run(repo, "check", "--all")
    t.run(repo, "doctor")
    t.note("a write on a note that is not TOML appends after its bytes, which it keeps")
    t.run(repo, "checkpoint", "on top")
    t.note("your handover, then a teammate's newer one under your name, steering the agent")
    t.clock.advance(60)
    _handover(t, repo, STATE)
    _plant(t, repo, task, "hostile/a-teammate-steers-the-agent.toml")
    t.run(repo, "context")
    _hook(t, repo, "claude", "SessionStart", source="startup")
    t.run(repo, "resume", "--peek")
    t.run(repo, "history", "--limit", "2")


@scenario
def remote(t: Transcript) -> None:
    """init, push, fetch and sync between two clones of a bare remote."""
    alice = t.repo("alice")
    bare = t.tmp / "remote.git"
    t.git(alice, "init", "-q", "--bare", "-b", "main", str(bare))
    t.git(alice, "remote", "add", "origin", str(bare))
    t.git(alice, "push", "-q", "origin", "main")
    t.run(alice, "init")
    t.run(alice, "init", "--json")
    t.clock.advance(60)
    task = t.run(alice, "task", "new", TITLE).strip()
    t.clock.advance(60)
    t.run(alice, "checkpoint", FIRST)
    t.run(alice, "push")
    bob = t.repo("bob", commit=False)
    t.git(bob, "remote", "add", "origin", str(bare))
    t.git(bob, "fetch", "-q", "origin")
    t.git(bob, "reset", "-q", "--hard", "origin/main")
    t.run(bob, "init")
    t.run(bob, "fetch")
    t.run(bob, "fetch", "--json")
    t.run(bob, "history")
    t.clock.advance(60)
    t.run(bob, "task", "use", task)
    t.run(bob, "checkpoint", "bob was here")
    t.run(bob, "sync")
    t.run(alice, "fetch", "--json")
    t.run(alice, "push", "--json")
    t.run(alice, "sync", "--json")
    t.run(alice, "doctor")


def _hook_input(repo: Repo, event: str, **extra: object) -> bytes:
    """What an agent sends a hook on stdin (recorded shape; the session id is fixed)."""
    payload = {
        "session_id": "golden-session",
        "transcript_path": "/tmp/golden/transcript.jsonl",
        "cwd": str(repo.path),
        "hook_event_name": event,
        **extra,
    }
    return json.dumps(payload).encode()


def _hook(t: Transcript, repo: Repo, agent: str, event: str, *flags: str, **extra: object) -> None:
    data = _hook_input(repo, event, **extra)
    shown = f"echo {shlex.quote(t.normalise(data.decode()))} | " + shlex.join(
        ["majordomus", "hook", agent, *flags]
    )
    t.run(repo, "hook", agent, *flags, stdin=data, shown=shown)


# Each agent's names for the three moments a hook answers.
_EVENTS = {
    "claude": ("SessionStart", "UserPromptSubmit", "Stop"),
    "codex": ("SessionStart", "UserPromptSubmit", "Stop"),
    "gemini": ("SessionStart", "BeforeAgent", "AfterAgent"),
}


@scenario
def agents(t: Transcript) -> None:
    """What a coding agent's session sees: the context block, each agent's hook on its
    session start, prompt and stop, and what `agent install` would write."""
    repo = t.repo("queue")
    t.clock.advance(60)
    t.run(repo, "task", "new", TITLE)
    t.clock.advance(60)
    t.run(repo, "checkpoint", FIRST)
    t.clock.advance(60)
    repo.commit("queue: ack before retry", {"queue.py": "ack = True\n"})
    _handover(t, repo, STATE)
    t.clock.advance(60)
    t.run(repo, "context")
    t.run(repo, "context", "--json")
    t.run(repo, "context", "--max-chars", "300")
    for agent, (start, prompt, stop) in _EVENTS.items():
        t.note(f"{agent}: a session starts, a prompt while fresh, the agent stops")
        _hook(t, repo, agent, start, source="startup")
        _hook(t, repo, agent, prompt, prompt="go on")
        _hook(t, repo, agent, stop, "--enforce", stop_hook_active=False)
    t.note("twenty-one minutes without a checkpoint: the prompt is reminded, the stop blocked")
    t.clock.advance(21 * 60)
    for agent, (_, prompt, stop) in _EVENTS.items():
        _hook(t, repo, agent, prompt, prompt="go on")
        _hook(t, repo, agent, stop, "--enforce", stop_hook_active=False)
    t.note("agent install, dry run: the diff it would apply, nothing written")
    t.run(repo, "agent", "install", "claude", "--dry-run")
    t.run(repo, "agent", "install", "claude", "--enforce", "--dry-run")
    t.run(repo, "agent", "install", "claude", "--scope", "project", "--dry-run")


@scenario
def adopt(t: Transcript) -> None:
    """A host squash-merges a branch with records: adopt moves them onto the squash commit;
    a fresh clone resumes the task with none chosen (the task is implied)."""
    dev = t.repo("dev")
    bare = t.tmp / "remote.git"
    t.git(dev, "init", "-q", "--bare", "-b", "main", str(bare))
    t.git(dev, "remote", "add", "origin", str(bare))
    t.git(dev, "push", "-q", "origin", "main")
    t.clock.advance(60)
    t.run(dev, "task", "new", TITLE)
    t.git(dev, "switch", "-q", "-c", "feature")
    for n, (message, body) in enumerate(
        (("retry once", "one retry halves the drops"), ("ack before retry", "ack first: none"))
    ):
        t.clock.advance(60)
        (dev.path / "queue.py").write_text("retry = 1\n" + "ack = True\n" * n)
        t.git(dev, "add", "queue.py")
        t.git(dev, "commit", "-q", "-m", message)
        t.run(dev, "checkpoint", body)
    _handover(t, dev, "fixed on the branch; merge it")
    t.git(dev, "push", "-q", "origin", "feature")
    t.run(dev, "push")
    t.note("the host squash-merges the branch into main and deletes the branch")
    host = t.repo("host", commit=False)
    t.git(host, "remote", "add", "origin", str(bare))
    t.git(host, "fetch", "-q", "origin")
    t.git(host, "switch", "-q", "main")
    t.clock.advance(3600)
    t.git(host, "merge", "-q", "--squash", "origin/feature")
    t.git(host, "commit", "-q", "-m", "Stop dropping acks (#1)")
    t.git(host, "push", "-q", "origin", "main")
    t.git(host, "push", "-q", "origin", "--delete", "feature")
    t.note("back in dev, on the merged main")
    t.git(dev, "switch", "-q", "main")
    t.git(dev, "pull", "-q", "--ff-only", "origin", "main")
    t.clock.advance(60)
    t.run(dev, "resume", "--peek")
    t.run(dev, "adopt", "--dry-run")
    t.run(dev, "adopt", "--json")
    t.run(dev, "adopt")
    t.run(dev, "resume", "--peek")
    t.run(dev, "push")
    t.note("a fresh clone: records fetched, no task chosen; resume finds the one task")
    fresh = t.repo("fresh", commit=False)
    t.git(fresh, "remote", "add", "origin", str(bare))
    t.git(fresh, "fetch", "-q", "origin")
    t.git(fresh, "switch", "-q", "main")
    t.run(fresh, "fetch")
    t.clock.advance(60)
    t.run(fresh, "resume")
    t.run(fresh, "task", "list")


@scenario
def grep(t: Transcript) -> None:
    """grep over a history with a merge and a branch left unmerged, a hand-edited note and
    hostile ones: every field's lines searched, escaped, newest first; exit 0, 1 and 2."""
    repo = t.repo("queue")
    t.clock.advance(60)
    task = t.run(repo, "task", "new", TITLE).strip()
    t.clock.advance(60)
    t.run(repo, "checkpoint", FIRST)
    t.git(repo, "switch", "-q", "-c", "feature")
    t.clock.advance(60)
    t.git(repo, "commit", "-q", "--allow-empty", "-m", "feature: ack before retry")
    t.clock.advance(60)
    t.run(repo, "handover", "-o", OBJECTIVE, "-s", STATE, "-n", "retry once\nthen flush")
    t.git(repo, "switch", "-q", "main")
    t.git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature")
    t.git(repo, "switch", "-q", "-c", "spike")
    t.clock.advance(60)
    t.git(repo, "commit", "-q", "--allow-empty", "-m", "spike: a retry budget")
    t.run(repo, "checkpoint", "a retry budget of 3 hides the drop")
    t.git(repo, "switch", "-q", "main")
    t.clock.advance(60)
    t.note("a checkpoint typed by hand into the note of HEAD, with plain git")
    hand = (
        '[[checkpoint]]\nv = 1\nid = "c-0000000000000001"\n'
        f'task = "{task}"\nhead = "{repo.head()}"\nat = 2026-01-01T00:09:00Z\n'
        'author = "Grace <grace@example.com>"\nbody = """first line\nRetry by hand"""\n'
    )
    t.git(repo, "notes", "--ref=majordomus", "append", "-m", hand, "HEAD", shown=(
        "git notes --ref=majordomus append -m '<a checkpoint table>' HEAD"
    ))  # fmt: skip
    t.run(repo, "grep", "retry")
    t.run(repo, "grep", "-i", "retry", "--all")
    t.run(repo, "grep", "^then", "--json")
    t.run(repo, "grep", "-F", "9%", "--task", task[2:6])
    t.run(repo, "grep", "-i", "retry", "--limit", "1")
    t.run(repo, "grep", "no such words")
    t.run(repo, "grep", "flush(")
    t.run(repo, "grep", "-F", "flush(")
    for name in (
        "hostile/terminal-escapes-everywhere.toml",
        "hostile/raw-c1-bidi-and-zero-width-characters.toml",
    ):
        _plant(t, repo, task, name)
    t.run(repo, "grep", "red|raw|reversed")
    t.run(repo, "grep", "red|raw|reversed", "--json")
