"""The scenario behind fixtures/golden/graph.txt: `history --graph` over a history with
branches and merges, another branch checked out, a hand-edited note, hostile notes (ids
and tasks holding newlines, escapes, invisible characters, forged ids) and a shallow
clone. Each step advances the fixed clock first."""

from __future__ import annotations

from tests.support.corpus import CORPUS_TASK, NOTES
from tests.support.golden import Transcript, scenario
from tests.support.golden_scenarios import NEXT, OBJECTIVE, TITLE
from tests.support.repo import Repo

HAND_EDITED = (
    '[[checkpoint]]\nv = 1\nid = "c-0000000000000e1d"\ntask = "{task}"\n'
    'head = "0000000000000000000000000000000000000000"\nat = 2026-11-30T03:00:00Z\n'
    'author = "Ada <ada@example.com>"\nbody = "written with git notes add"\n'
)


def _commit(t: Transcript, repo: Repo, message: str) -> None:
    t.clock.advance(60)
    t.git(repo, "commit", "-q", "--allow-empty", "-m", message)


def _plant(t: Transcript, repo: Repo, task: str, name: str) -> None:
    data = (NOTES / name).read_bytes().replace(CORPUS_TASK.encode(), task.encode())
    _commit(t, repo, f"planted: {name}")
    blob = repo.git("hash-object", "-w", "--stdin", input=data.decode("utf-8")).strip()
    repo.git("notes", "--ref=majordomus", "add", "-f", "-C", blob, "HEAD")
    t.note(f"fixtures/notes/{name} written on HEAD with git notes add -C")


@scenario
def graph(t: Transcript) -> None:
    """history --graph: records on the commit graph, drawn as git log --graph draws it."""
    repo = t.repo("queue")
    t.clock.advance(60)
    task = t.run(repo, "task", "new", TITLE).strip()
    _commit(t, repo, "queue: ack before retry")
    t.run(repo, "checkpoint", "acks drop under 50 concurrent enqueues")
    t.git(repo, "switch", "-q", "-c", "feature")
    _commit(t, repo, "feature: flush lock")
    t.clock.advance(60)
    t.run(repo, "handover", "-o", OBJECTIVE, "-s", "flush() takes the lock first", "-n", NEXT)
    _commit(t, repo, "feature: retry once")
    t.run(repo, "checkpoint", "one retry is enough")
    t.git(repo, "switch", "-q", "main")
    _commit(t, repo, "main: bump version")
    t.run(repo, "checkpoint", "version bumped while the feature was under way")
    t.clock.advance(60)
    t.run(repo, "checkpoint", "a second record on the same commit")
    t.note("main and feature have each moved: two lines of records")
    t.run(repo, "history", "--graph")
    t.run(repo, "history", "--graph", "--all")
    _commit(t, repo, "main: merge feature")
    t.git(repo, "merge", "-q", "--no-edit", "feature")
    _commit(t, repo, "main: after the merge")
    t.run(repo, "checkpoint", "merged; the feature's handover is now behind HEAD")
    t.note("after the merge: the feature's records drawn on their branch, joined at the merge")
    t.run(repo, "history", "--graph")
    t.run(repo, "history", "--graph", "--task", task[2:6])
    t.run(repo, "history", "--graph", "--limit", "2")
    t.note("another branch checked out: labels are read against it")
    t.git(repo, "switch", "-q", "feature")
    t.run(repo, "history", "--graph")
    t.run(repo, "history", "--graph", "main")
    t.git(repo, "switch", "-q", "main")
    t.note("a note written by hand with git notes, then hostile notes from a teammate")
    _commit(t, repo, "main: hand-written note")
    text = HAND_EDITED.format(task=task)
    repo.git("notes", "--ref=majordomus", "add", "-f", "-m", text.rstrip("\n"), "HEAD")
    for name in (
        "hostile/forged-ids-in-every-id-field.toml",
        "hostile/a-task-id-that-drives-the-terminal.toml",
        "hostile/raw-c1-bidi-and-zero-width-characters.toml",
        "hostile/duplicate-ids-in-one-note.toml",
        "hostile/the-same-id-on-another-commit.toml",
        "hostile/a-task-id-that-shares-the-real-task-s-prefix.toml",
        "invalid/not-toml.toml",
    ):
        _plant(t, repo, task, name)
    t.run(repo, "history", "--graph")
    t.run(repo, "history", "--graph", "--json")
    t.note("a depth-5 clone with the notes: its boundary drawn as a root")
    ci = t.repo("ci", commit=False)
    t.git(ci, "fetch", "-q", "--depth", "5", f"file://{repo.path}", "main")
    t.git(ci, "reset", "-q", "--hard", "FETCH_HEAD", shown="git reset -q --hard FETCH_HEAD")
    t.git(ci, "fetch", "-q", f"file://{repo.path}", "refs/notes/majordomus:refs/notes/majordomus")
    t.run(ci, "history", "--graph")
    t.run(ci, "history", "--graph", "--all")
