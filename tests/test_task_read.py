"""A first read of one task picks its notes by their bytes (`git grep`) before it parses
any: the answer is the one a full parse gives, however the notes are spelled. The
property: on a history with a merge and a branch, notes written with plain git in every
TOML spelling that can hide an id (escapes, multi-line and joined strings, literal
strings, quoted and escaped keys and table names, comments, text appended by hand,
concatenated notes, tables that are not TOML) or, as most notes are, plainly (which the
filter skips unless they hold the task's id), `history --task P` read by the filter
equals the same read from the views a full read built, for prefixes that name one task,
several, or none; and so do `resume --peek`, `context` and `check` on a task given."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import filtered
from tests.support.env import Clock, hermetic_environ
from tests.support.repo import Repo

TASKS = ["t-aaaa00000001", "t-aaaa00000002", "t-aaab00000003", "t-bbbb00000004"]
PREFIXES = ["t-aaaa", "t-aaaa00000001", "t-aaab", "bbbb", "t-bbbb00000004", "t-cccc"]
KINDS = ["task", "checkpoint", "handover", "resume"]
WORDS = ["resume", "t-aaaa00000002", "flaky", "ack", "h-00000000000000a1", "\\", '"', "\n", "é"]
PLAIN_WORDS = ["t-aaaa00000002", "flaky", "ack", "h-00000000000000a1", "é"]
HANDOVERS = [f"h-{n:016x}" for n in range(0xA0, 0xA6)]
SESSION_READS = [("resume", "--peek"), ("context",), ("check",)]


@st.composite
def spelled_any(draw: st.DrawFn, text: str) -> str:
    """A TOML string of `text`, in one of the spellings that make it."""
    # Mostly the plain spelling, so that many notes hold nothing that forces a pick.
    style = draw(st.sampled_from(["basic"] * 6 + ["escaped", "literal", "multi", "joined"]))
    if style == "literal" and not any(c in text for c in "'\n\r\\") and text.isprintable():
        return f"'{text}'"

    def escape(c: str, every: bool) -> str:
        if c in '"\\' or not c.isprintable() or (every and draw(st.booleans())):
            wide = draw(st.booleans())
            return f"\\U{ord(c):08X}" if wide else f"\\u{ord(c):04x}"
        return c

    if style == "joined" and text and not text[0].isspace():
        at = draw(st.integers(0, len(text) - 1))
        while at and text[at].isspace():
            at -= 1
        head = "".join(escape(c, False) for c in text[:at])
        rest = "".join(escape(c, False) for c in text[at:])
        return f'"""{head}\\\n    {rest}"""'
    if style == "multi":
        return '"""\n' + "".join(escape(c, False) for c in text) + '"""'
    return '"' + "".join(escape(c, style == "escaped") for c in text) + '"'


@st.composite
def key_any(draw: st.DrawFn, name: str) -> str:
    style = draw(st.sampled_from(["bare"] * 6 + ["quoted", "escaped"]))
    if style == "quoted":
        return f'"{name}"'
    if style == "escaped":
        return '"' + "".join(f"\\u{ord(c):04x}" if draw(st.booleans()) else c for c in name) + '"'
    return name


@st.composite
def table(draw: st.DrawFn, kind: str, head: str, n: int, plain: bool = False) -> str:
    """One record's table: valid, or with a field missing (an invalid record). A `plain`
    one holds no escape, no joined line and no `resume` but its header: a note the filter
    skips, unless it holds the task's id."""
    task = draw(st.sampled_from(TASKS))
    words = PLAIN_WORDS if plain else WORDS

    def spelled(text: str) -> st.SearchStrategy[str]:
        return st.just(f'"{text}"') if plain else spelled_any(text)

    def key(name: str) -> st.SearchStrategy[str]:
        return st.just(name) if plain else key_any(name)

    fields: dict[str, str] = {
        "v": "1",
        "id": draw(spelled(task if kind == "task" else f"{kind[0]}-{n:016x}")),
        "task": draw(spelled(task)),
        "head": f'"{head}"',
        "at": f"2026-11-{1 + n % 28:02d}T03:12:{n % 60:02d}Z",
        "author": '"Ada <ada@example.com>"',
    }
    if kind == "task":
        del fields["task"]
        fields["title"] = draw(spelled(" ".join(draw(st.lists(st.sampled_from(words))))))
    elif kind == "checkpoint":
        fields["body"] = draw(spelled(" ".join(draw(st.lists(st.sampled_from(words), min_size=1)))))
    elif kind == "handover":
        fields["id"] = draw(spelled(draw(st.sampled_from(HANDOVERS))))
        for name in ("objective", "state", "next"):
            fields[name] = draw(spelled(draw(st.sampled_from(words))))
    else:
        fields["handover"] = draw(spelled(draw(st.sampled_from(HANDOVERS))))
        fields["label"] = '"advanced"'
        supersedes = draw(st.lists(st.sampled_from(HANDOVERS), max_size=2))
        fields["supersedes"] = "[" + ", ".join(draw(spelled(h)) for h in supersedes) + "]"
    if draw(st.integers(0, 5)) == 0:
        del fields[draw(st.sampled_from(sorted(fields)))]
    header = draw(st.sampled_from([f"[[{kind}]]", f"[[ {kind} ]]", f'[["{kind}"]]']))
    if not plain and draw(st.integers(0, 8)) == 0:
        header = "[[" + draw(key(kind)) + "]]"
    lines = [header]
    for name, value in fields.items():
        lines.append(f"{draw(key(name))} = {value}")
        if draw(st.integers(0, 6)) == 0:
            lines.append(f"# {draw(st.sampled_from(words)).strip()}")
    return "\n".join(lines) + "\n"


@st.composite
def note(draw: st.DrawFn, head: str, start: int) -> str:
    """A note as people and tools leave them: tables, maybe appended text or a second
    document, maybe a line that is no TOML."""
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    plain = draw(st.booleans())  # what most notes are: then a filter skips many
    text = "\n".join(draw(table(kind, head, start + i, plain)) for i, kind in enumerate(kinds))
    extra = draw(st.sampled_from(["", "", "appended", "concatenated", "broken"]))
    if extra == "appended":
        words = PLAIN_WORDS if plain else WORDS
        text += f"\n{draw(st.sampled_from(words))} by hand, not TOML\n"
    elif extra == "concatenated":
        text += "\n" + draw(table(draw(st.sampled_from(KINDS)), head, start + 9, plain))
    elif extra == "broken":
        text += '\n[[checkpoint]]\nbody = "unterminated\n'
    return text


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_first_read_of_a_task_equals_the_read_from_every_note(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = Repo.init(root / "repo", hermetic_environ(root / "home"), Clock())
        commits = [repo.head()]
        for n in range(5):
            commits.append(repo.commit(f"main {n}"))
        repo.git("checkout", "-q", "-b", "side", commits[2])
        for n in range(3):
            commits.append(repo.commit(f"side {n}"))
        repo.git("checkout", "-q", "main")
        repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
        commits.append(repo.head())
        repo.git("checkout", "-q", "-b", "elsewhere", commits[3])  # some notes off HEAD
        commits.append(repo.commit("elsewhere"))
        annotated = data.draw(
            st.lists(st.sampled_from(commits), min_size=4, max_size=10, unique=True)
        )
        for i, commit in enumerate(annotated):
            text = data.draw(note(commit, 10 * i))
            repo.git("notes", "--ref=majordomus", "add", "-f", "-F", "-", commit, input=text)
        reads = [
            ("history", "--task", prefix, *data.draw(st.sampled_from([(), ("--all",)])), "--json")
            for prefix in data.draw(st.lists(st.sampled_from(PREFIXES), min_size=3, max_size=3))
        ]
        # What a session reads first of a task it is given: the same filter, the same answer.
        reads += [
            (*data.draw(st.sampled_from(SESSION_READS)), "--task", prefix, "--json")
            for prefix in data.draw(st.lists(st.sampled_from(PREFIXES), min_size=2, max_size=2))
        ]
        picked = []
        for argv in reads:
            repo.drop_caches()
            picked.append(filtered.picked(repo, argv))
        repo.drop_caches()
        assert repo.run("history", "--json").code == 0  # every note read, the views kept
        for argv, by_filter in zip(reads, picked, strict=True):
            whole = repo.run(*argv)
            assert (by_filter.code, by_filter.err) == (whole.code, whole.err), argv
            if whole.code:
                continue
            by_bytes, full = json.loads(by_filter.out), json.loads(whole.out)
            if argv[0] != "history":
                assert by_filter.out == whole.out or filtered.but_invalid(by_bytes, full), argv
                continue
            assert by_bytes["records"] == full["records"], argv
            assert (by_bytes["rev"], by_bytes["hidden"]) == (full["rev"], full["hidden"])
            assert by_bytes["invalid"] <= full["invalid"]


def test_a_resume_of_another_task_that_names_the_handover_resolves_it(
    repo: Repo,
) -> None:
    """A resume filed under another task names the handover by its id alone: the read of
    the handover's task reads it too, and the handover is resolved as in a full read."""
    first, second = repo.head(), repo.commit("second")
    handover = (
        '[[handover]]\nv = 1\nid = "h-00000000000000b1"\ntask = "t-aaaa00000001"\n'
        f'head = "{first}"\nat = 2026-11-01T03:12:00Z\nauthor = "Ada <ada@example.com>"\n'
        'objective = "o"\nstate = "s"\nnext = "n"\n'
    )
    resume = (
        '[[resume]]\nv = 1\nid = "r-00000000000000b2"\ntask = "t-bbbb00000004"\n'
        f'head = "{second}"\nat = 2026-11-01T03:13:00Z\nauthor = "Ada <ada@example.com>"\n'
        'handover = "h-00000000000000b1"\nlabel = "advanced"\n'
    )
    repo.git("notes", "--ref=majordomus", "add", "-F", "-", first, input=handover)
    repo.git("notes", "--ref=majordomus", "add", "-F", "-", second, input=resume)
    argv = ("history", "--task", "t-aaaa", "--json")
    picked = json.loads(filtered.picked(repo, argv).out)
    assert [(r["id"], r["resolved"]) for r in picked["records"]] == [("h-00000000000000b1", True)]
    repo.drop_caches()
    assert repo.run("history", "--json").code == 0
    assert json.loads(repo.run(*argv).out) == picked


def _handover(ident: str, task: str, head: str, at: str) -> str:
    return (
        f'[[handover]]\nv = 1\nid = "{ident}"\ntask = "{task}"\nhead = "{head}"\n'
        f'at = {at}\nauthor = "Ada <ada@example.com>"\nobjective = "o"\nstate = "s"\nnext = "n"\n'
    )


def _resume(ident: str, task: str, head: str, at: str, handover: str) -> str:
    return (
        f'[[resume]]\nv = 1\nid = "{ident}"\ntask = "{task}"\nhead = "{head}"\n'
        f'at = {at}\nauthor = "Ada <ada@example.com>"\nhandover = "{handover}"\n'
        'label = "advanced"\n'
    )


def test_a_record_id_another_task_reuses_hides_nothing(repo: Repo) -> None:
    """A forged note that reuses a handover's id under another task, on a commit nearer
    HEAD, is another record, never a newer copy: both tasks list their own, in a first
    read by the filter (which never reads the other task's note) and in a full read."""
    first = repo.head()
    repo.git("checkout", "-q", "-b", "side")
    side = repo.commit("side")
    repo.git("checkout", "-q", "main")
    repo.commit("main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    forged = repo.head()
    ident = "h-00000000000000c1"
    mine = _handover(ident, "t-aaaa00000001", first, "2026-11-01T03:12:00Z")
    theirs = _handover(ident, "t-bbbb00000004", forged, "2026-11-02T03:12:00Z")
    repo.git("notes", "--ref=majordomus", "add", "-F", "-", first, input=mine)
    repo.git("notes", "--ref=majordomus", "add", "-F", "-", forged, input=theirs)
    repo.git("notes", "--ref=majordomus", "add", "-m", "not TOML", side)
    argv = ("history", "--task", "t-aaaa", "--json")
    picked = json.loads(filtered.picked(repo, argv).out)
    assert [(r["id"], r["task"], r["commit"]) for r in picked["records"]] == [
        (ident, "t-aaaa00000001", first)
    ]
    repo.drop_caches()
    every = json.loads(repo.run("history", "--json").out)
    assert sorted((r["id"], r["task"]) for r in every["records"]) == [
        (ident, "t-aaaa00000001"),
        (ident, "t-bbbb00000004"),
    ]
    assert json.loads(repo.run("history", "--json").out) == every  # from the views, warm
    full = json.loads(repo.run(*argv).out)
    assert full["records"] == picked["records"]
    # `invalid` counts among the notes each read: the note that is no TOML holds no id.
    assert (picked["invalid"], full["invalid"]) == (0, 1)


def test_the_copy_of_a_resume_a_read_lists_decides_what_it_resolves(repo: Repo) -> None:
    """Two copies of one resume of another task (a forged one nearer HEAD naming another
    handover): a read lists the copy nearest HEAD, so the handover the older copy names
    stays open, in a first read by the filter as in a full read."""
    first, second = repo.head(), repo.commit("second")
    third = repo.commit("third")
    ident, other = "h-00000000000000d1", "h-00000000000000d2"
    handover = _handover(ident, "t-aaaa00000001", first, "2026-11-01T03:12:00Z")
    older = _resume("r-00000000000000d3", "t-bbbb00000004", second, "2026-11-02T03:12:00Z", ident)
    nearer = _resume("r-00000000000000d3", "t-bbbb00000004", third, "2026-11-03T03:12:00Z", other)
    for commit, text in ((first, handover), (second, older), (third, nearer)):
        repo.git("notes", "--ref=majordomus", "add", "-F", "-", commit, input=text)
    argv = ("history", "--task", "t-aaaa", "--json")
    picked = json.loads(filtered.picked(repo, argv).out)
    assert [(r["id"], r["resolved"]) for r in picked["records"]] == [(ident, False)]
    repo.drop_caches()
    assert repo.run("history", "--json").code == 0
    assert json.loads(repo.run(*argv).out) == picked
    peek = ("resume", "--peek", "--task", "t-aaaa", "--json")
    repo.drop_caches()
    by_filter = filtered.picked(repo, peek)
    repo.drop_caches()
    assert repo.run("history", "--json").code == 0
    assert repo.run(*peek).out == by_filter.out
    assert json.loads(by_filter.out)["handover"]["id"] == ident
