"""Notes written by someone with push access who means harm, and a repository that holds them.

Each case is the exact bytes of one note (written with git's own plumbing, so
nothing is cleaned up on the way in), the object it is attached to, and what a
reader must make of it: how many invalid notes or records it counts, how many
records it hides as not reachable, and which record ids it still lists.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.reliability.helpers import NOTES_REF, commit, git

HEAD40 = "0" * 40
AT = "2026-11-30T03:00:00Z"
# TOML escapes for what a terminal obeys: CSI, OSC 8 hyperlink, C1 CSI, BEL, BS, CR, DEL, NUL.
ESCAPES = (
    r"\u001b[2J\u001b[31mred"
    r" \u001b]8;;https://evil.example/\u0007click me\u001b]8;;\u0007"
    r" \u009b31m \u0007 \u0008 \r \u007f \u0000 end"
)
BIDI = r"\u202e\u2066\u2067\u2068\u2069 reversed \u202a\u202b\u202c\u202d"
ZERO_WIDTH = r"\u200b\u200c\u200d\ufeff\u2028"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    invalid: int  # invalid notes or records a reader counts for it
    hidden: int = 0  # records on objects that are not commits reachable from HEAD
    listed: tuple[str, ...] = ()  # record ids `history --all` must still list
    on: str = "commit"  # commit, tree, blob, gitlink (a tree entry, not a blob)
    writable: bool = True  # whether a write may append to it (else it must refuse, exit 3)


def parsed(source: str) -> str:
    """What a TOML reader makes of a basic string's source text (escapes resolved)."""
    value = tomllib.loads(f'x = "{source}"')["x"]
    assert isinstance(value, str)
    return value


def record(kind: str, ident: str | None, task: str, /, **fields: str) -> str:
    """One `[[kind]]` table; each value is TOML source, so it can be anything at all."""
    values = {
        "v": "1",
        "id": f'"{ident}"' if ident is not None else None,
        "task": f'"{task}"',
        "head": f'"{HEAD40}"',
        "at": AT,
        "author": '"Mallory <mallory@example.com>"',
    }
    values.update(fields)
    lines = [f"[[{kind}]]"] + [f"{key} = {value}" for key, value in values.items() if value]
    return "\n".join(lines) + "\n"


def without(kind: str, task: str, missing: str, /, **fields: str) -> str:
    return record(kind, f"c-missing-{missing}", task, **{**fields, missing: ""})


def cases(task: str) -> list[Case]:
    """The corpus, for records of `task` (the repository's current task)."""
    cp = {"body": '"b"'}
    ho = {"objective": '"o"', "state": '"s"', "next": '"n"'}
    wrong_types = [
        record("checkpoint", "c-w1", task, v='"1"', **cp),
        record("checkpoint", "c-w2", task, v="1.0", **cp),
        record("checkpoint", "c-w3", task, v="true", **cp),
        record("checkpoint", None, task, id="1", **cp),
        record("checkpoint", "c-w5", task, at=f'"{AT}"', **cp),
        record("checkpoint", "c-w6", task, at="2026-11-30", **cp),
        record("checkpoint", "c-w7", task, at="2026-11-30T03:00:00", **cp),
        record("checkpoint", "c-w8", task, head='"abc"', **cp),
        record("checkpoint", "c-w9", task, head=f'"{"A" * 40}"', body='"b"'),
        record("checkpoint", "c-w10", task, body="42"),
        record("checkpoint", "c-w11", task, body='["x"]'),
        record("checkpoint", "c-w12", task, session="3", **cp),
        record("task", "t-w13", task, title="{}"),
        record("resume", "r-w14", task, handover='"h-1"', label='"sideways"'),
        record("resume", "r-w15", task, handover='"h-1"', label='"current"', ahead="-1"),
        record("resume", "r-w16", task, handover='"h-1"', label='"current"', ahead="true"),
        record("resume", "r-w17", task, handover='"h-1"', label='"current"', supersedes='"h-2"'),
        record("resume", "r-w18", task, handover='"h-1"', label='"current"', supersedes="[1]"),
        record("handover", "h-w19", task, objective='"o"', state='"s"', next="{ a = 1 }"),
    ]
    missing = [
        *(without("checkpoint", task, key, **cp) for key in ("v", "task", "head", "at", "author")),
        record("checkpoint", None, task, **cp),
        record("checkpoint", "c-no-body", task),
        record("handover", "h-no-next", task, objective='"o"', state='"s"'),
        record("task", "t-no-title", task),
        record("resume", "r-no-label", task, handover='"h-1"'),
        record("resume", "r-no-handover", task, label='"current"'),
    ]
    long = '"' + "x" * 2001 + '"'
    good = record("checkpoint", "c-good", task, **cp)
    nested = "[" * 300 + "1" + "]" * 300
    padding = "# " + "p" * (1 << 20) + "\n"
    hostile_task = "t-\\u001b[2Jabcd\\u009b"
    return [
        # Not TOML as a whole: read table by table, and a write appends after the bytes.
        Case("not TOML", b"[[checkpoint]\nv = 1\n", 1),
        Case("not UTF-8", b'[[checkpoint]]\nbody = "\xff\xfe"\n', 1),
        Case("byte-order mark", b"\xef\xbb\xbf" + good.encode(), 1),
        Case("wrong types", "\n".join(wrong_types).encode(), len(wrong_types)),
        Case("missing fields", "\n".join(missing).encode(), len(missing)),
        Case(
            "kinds as plain keys",
            b'checkpoint = "x"\nhandover = []\nresume = { a = 1 }\ntask = [1, 2]\n',
            4,
        ),
        Case(
            "over the ceiling",
            "\n".join(
                [
                    record("checkpoint", "c-long", task, body=long),
                    record("checkpoint", "c-long-author", task, author=long, **cp),
                    record("checkpoint", "x" * 2001, task, **cp),
                    record("checkpoint", "c-empty", task, body='""'),
                ]
            ).encode(),
            4,
        ),
        Case("deep nesting", ("x = " + "[" * 100_000 + "]" * 100_000).encode(), 1, writable=False),
        Case(
            "deep nesting inside records",
            (
                record("checkpoint", "c-nested", task, deep=nested, **cp)
                + record("checkpoint", None, task, deep=nested)
            ).encode(),
            1,
            writable=False,
        ),
        Case(
            "an integer past int()",
            (record("checkpoint", "c-bigint", task, **cp) + "n = " + "9" * 5000 + "\n").encode(),
            1,
            writable=False,
        ),
        Case("over 1 MiB", (padding + good.replace("c-good", "c-big")).encode(), 1, writable=False),
        Case(
            "date-times past UTC",
            (
                record("checkpoint", "c-year1", task, at="0001-01-01T00:00:00+01:00", **cp)
                + record("checkpoint", "c-year9999", task, at="9999-12-31T23:59:59-01:00", **cp)
            ).encode(),
            2,
        ),
        Case(
            "terminal escapes everywhere",
            "\n".join(
                [
                    record(
                        "checkpoint",
                        f"c-esc{ESCAPES}",
                        task,
                        author=f'"Mallory{ESCAPES} <m@example.com>"',
                        session=f'"s{ESCAPES}"',
                        body=f'"{ESCAPES}\\nsecond line {ESCAPES}"',
                        extra=f'{{ "key{ESCAPES}" = "{ESCAPES}" }}',
                    ),
                    record(
                        "handover",
                        f"h-esc{ESCAPES}",
                        task,
                        at="2026-11-30T03:00:01Z",
                        objective=f'"{ESCAPES}"',
                        state=f'"{BIDI}"',
                        next=f'"{ZERO_WIDTH}"',
                    ),
                    record(
                        "resume",
                        f"r-esc{ESCAPES}",
                        task,
                        handover=f'"h-gone{ESCAPES}"',
                        label='"current"',
                        supersedes=f'["h-old{ESCAPES}"]',
                    ),
                ]
            ).encode(),
            0,
            listed=tuple(parsed(f"{k}-esc{ESCAPES}") for k in "chr"),
        ),
        Case(
            "raw C1, bidi and zero-width characters",
            record(
                "checkpoint",
                "c-raw\u009b\u202e",
                task,
                body='"raw \u009b31m \u202e\u2066 \u200b\ufeff"',
            ).encode(),
            0,
            listed=("c-raw\u009b\u202e",),
        ),
        Case(
            "a task id that drives the terminal",
            (
                record("task", hostile_task, hostile_task, title=f'"{ESCAPES}"')
                + record("checkpoint", "c-hostile-task", hostile_task, **cp)
                + record("handover", f"h-hostile{ESCAPES}", hostile_task, **ho)
            ).encode(),
            0,
            listed=("c-hostile-task",),
        ),
        Case(
            "a task id that shares the real task's prefix",
            record("task", f"{task[:6]}{ESCAPES}", f"{task[:6]}{ESCAPES}", title='"x"').encode(),
            0,
        ),
        Case(
            "markdown that tries to leave its code block",
            record(
                "checkpoint",
                "c-md`` ` ``",
                task,
                body=r'"```\n~~~\n~~~~~~~~~~\n<img src=x onerror=alert(1)>\n[click](https://evil.example)"',
            ).encode(),
            0,
            listed=("c-md`` ` ``",),
        ),
        Case(
            "floats JSON cannot carry",
            record(
                "checkpoint", "c-nan", task, extra="{ f = nan, g = -inf, h = [inf] }", **cp
            ).encode(),
            0,
            listed=("c-nan",),
        ),
        Case(
            "duplicate ids in one note",
            (
                record("checkpoint", "c-dup", task, body='"first"')
                + record("checkpoint", "c-dup", task, body='"second, same id"')
            ).encode(),
            0,
            listed=("c-dup",),
        ),
        Case(
            "the same id on another commit",
            record("checkpoint", "c-dup", task, body='"third, elsewhere"').encode(),
            0,
            listed=("c-dup",),
        ),
        Case(
            "unknown kinds",
            f'[[flag]]\nid = "x-1"\nlabel = "{ESCAPES}"\n\n[["kind{ESCAPES}"]]\nv = 1\n'.encode(),
            0,
        ),
        Case(
            "valid but unusual",  # an inline array: a [[checkpoint]] after it is read apart
            (
                f'checkpoint = [{{ v = 1, id = "c-inline", task = "{task}", head = "{HEAD40}", '
                'at = 2026-11-30T04:00:00.5+01:00, author = "A <a@b>", body = "inline" }]\n'
            ).encode(),
            0,
            listed=("c-inline",),
        ),
        Case("an empty note", b"", 0),
        Case(
            "a note on a tree",
            record("checkpoint", "c-on-tree", task, **cp).encode(),
            0,
            hidden=1,
            listed=("c-on-tree",),
            on="tree",
        ),
        Case(
            "a note on a blob",
            record("checkpoint", "c-on-blob", task, **cp).encode(),
            0,
            hidden=1,
            listed=("c-on-blob",),
            on="blob",
        ),
        Case("a submodule entry in the notes tree", b"", 1, on="gitlink", writable=False),
    ]


@dataclasses.dataclass(frozen=True)
class Planted:
    case: Case
    target: str  # the object the note annotates


def plant(path: Path, environ: Mapping[str, str], corpus: Sequence[Case]) -> list[Planted]:
    """Each case on a fresh commit (or its tree, or a blob) of the current branch."""
    planted = []
    for index, case in enumerate(corpus):
        head = commit(path, environ, f"hostile {index}: {case.name}")
        if case.on == "tree":
            target = git(path, environ, "rev-parse", "HEAD^{tree}").strip()
        elif case.on == "blob":
            blob = f"a blob {index}\n".encode()
            target = git(path, environ, "hash-object", "-w", "--stdin", stdin=blob).strip()
        else:
            target = head
        if case.on == "gitlink":
            _plant_gitlink(path, environ, target)
        else:
            blob_id = git(path, environ, "hash-object", "-w", "--stdin", stdin=case.data).strip()
            git(
                path,
                environ,
                "notes",
                "--ref=majordomus",
                "add",
                "-f",
                "--allow-empty",
                "-C",
                blob_id,
                target,
            )
        planted.append(Planted(case, target))
    return planted


def _plant_gitlink(path: Path, environ: Mapping[str, str], target: str) -> None:
    """A notes tree whose entry for `target` is a submodule commit, not a blob."""
    old = git(path, environ, "rev-parse", NOTES_REF).strip()
    listing = git(path, environ, "ls-tree", NOTES_REF)
    listing += f"160000 commit {'1' * 40}\t{target}\n"
    tree = git(path, environ, "mktree", "--missing", stdin=listing.encode()).strip()
    new = git(path, environ, "commit-tree", tree, "-p", old, "-m", "gitlink").strip()
    git(path, environ, "update-ref", NOTES_REF, new, old)


def plant_remote_refs(path: Path, environ: Mapping[str, str], task: str) -> int:
    """A remote-tracking notes ref a fetch could bring, with escapes.

    Returns the invalid count it adds. (A ref at a blob stops every command with
    exit 3: test_a_notes_ref_that_is_not_a_commit.)
    """
    note = record("checkpoint", f"c-remote{ESCAPES}", task, body=f'"{ESCAPES}"')
    blob_id = git(path, environ, "hash-object", "-w", "--stdin", stdin=note.encode()).strip()
    git(
        path,
        environ,
        "notes",
        "--ref=remotes/mallory/majordomus",
        "add",
        "-f",
        "-C",
        blob_id,
        "HEAD",
    )
    return 0
