"""A notes tree listed by one `git ls-tree -r` (`gitobjects.tree_notes`) gives the notes
libgit2's walk gives (`notestree.walk`), in its order, for every shape a tree can take:
git's own fan-out, notes held twice, gitlinks, trees and blobs where notes should be,
names git would never write (out of order, twice, with tabs and spaces spelling a record),
fan-out past 38 digits; a tree with a missing subtree is left to libgit2."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pygit2
import pytest

from majordomus import gitobjects, notestree, render
from majordomus import index as index_module
from majordomus.notetoml import MissingObjectError
from majordomus.repository import NOTES_REF
from tests.support.corpus import corpus
from tests.support.env import Clock
from tests.support.git import bare
from tests.support.hostile_notes import case_of, plant
from tests.support.repo import Repo, clone

Entry = tuple[bytes, bytes, str]  # mode, name, object id


def raw_tree(repo: Repo, entries: Sequence[Entry]) -> str:
    """A tree object written as given, in this order (`--literally`: git checks nothing)."""
    data = b"".join(mode + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    command = ["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"]
    done = subprocess.run(
        command, input=data, capture_output=True, cwd=repo.path, env=repo.environ, check=True
    )
    return done.stdout.decode("ascii").strip()


def walked(repo: Repo, tree: str) -> str:
    return "".join(commit + blob for commit, blob in notestree.walk(repo.pygit, _tree(repo, tree)))


def odd_entries(repo: Repo, tree: str) -> list[tuple[str, str]]:
    """The entries a walk finds that are no note: (path, kind)."""
    odd: list[notestree.OddEntry] = []
    for _ in notestree.walk(repo.pygit, _tree(repo, tree), odd=odd):
        pass
    return [(entry.path, entry.kind) for entry in odd]


def _tree(repo: Repo, tree: str) -> pygit2.Tree:
    found = repo.pygit.get(tree)
    assert isinstance(found, pygit2.Tree)
    return found


def listed(repo: Repo, tree: str) -> str | None:
    return gitobjects.tree_notes(str(repo.path / ".git"), repo.environ, tree)


def test_a_tree_of_every_shape_is_listed_as_libgit2_walks_it(repo: Repo) -> None:
    blob = repo.git("hash-object", "-w", "--stdin", input="[[x]]\nv = 1\n").strip()
    other = repo.git("hash-object", "-w", "--stdin", input="[[y]]\nv = 2\n").strip()
    ids = [f"{n:02x}" + "0123456789abcdef0123456789abcdef012345"[:38] for n in range(8)]
    fake = f"q 100644 blob {blob}\t{ids[0][:2]}".encode()
    # 2-digit folders 19 deep (38 digits above the last name: the deepest a walk enters),
    # and 20 deep (never entered).
    chain = ids[5]
    tree = raw_tree(repo, [(b"100644", chain[38:].encode(), blob)])
    for k in range(18, 0, -1):
        tree = raw_tree(repo, [(b"40000", chain[2 * k : 2 * k + 2].encode(), tree)])
    nineteen = tree  # what the folder `chain[:2]` holds
    too_deep = raw_tree(repo, [(b"100644", b"ab", blob)])
    for _ in range(19):  # 20 folders: never entered
        too_deep = raw_tree(repo, [(b"40000", b"ab", too_deep)])
    too_long = raw_tree(repo, [(b"100644", b"abcd", blob)])
    for _ in range(18):  # 19 folders, entered, then 4 digits: 42 in all, no note
        too_long = raw_tree(repo, [(b"40000", b"ab", too_long)])
    fanned = raw_tree(repo, [(b"100644", ids[1][2:].encode(), blob)])
    fanned_twice = raw_tree(
        repo,
        [
            (
                b"40000",
                ids[2][2:4].encode(),
                raw_tree(repo, [(b"100644", ids[2][4:].encode(), other)]),
            )
        ],
    )
    not_hex = raw_tree(repo, [(b"100644", ids[3][2:].encode(), blob)])
    shapes: dict[str, list[Entry]] = {
        "git's fan-out": [
            (b"40000", ids[1][:2].encode(), fanned),
            (b"40000", ids[2][:2].encode(), fanned_twice),
        ],
        "flat, a gitlink, a symlink, an executable": [
            (b"100644", ids[0].encode(), blob),
            (b"160000", ids[1].encode(), ids[7]),
            (b"120000", ids[2].encode(), blob),
            (b"100755", ids[3].encode(), other),
        ],
        "held flat and fanned out": [
            (b"100644", ids[1].encode(), other),
            (b"40000", ids[1][:2].encode(), fanned),
        ],
        "trees and blobs where notes should be": [
            (b"40000", ids[0].encode(), fanned),
            (b"100644", b"ab", blob),
            (b"40000", b"zz", not_hex),
            (b"40000", b"AB", not_hex),
            (b"100644", ids[4].upper().encode(), blob),
            (b"100644", ids[4][:39].encode(), blob),
        ],
        "names git would not write": [
            (b"100644", ids[6].encode(), other),
            (b"100644", ids[0].encode(), blob),  # out of order
            (b"100644", ids[0].encode(), other),  # twice
            (b"100644", fake, blob),  # a tab and spaces spelling a record
            (b"100644", b"line\n100644 blob " + blob.encode() + b"\t" + ids[4].encode(), blob),
        ],
        "19 folders deep, and 20": [
            (b"40000", b"ab", too_deep),
            (b"40000", chain[:2].encode(), nineteen),
            (b"40000", b"cd", too_long),
        ],
    }
    notes = {}
    odd = {}
    for name, entries in shapes.items():
        tree = raw_tree(repo, entries)
        notes[name], odd[name] = walked(repo, tree), odd_entries(repo, tree)
        # git lists a tree that holds only notes; one with anything else the walk reads.
        assert listed(repo, tree) == (None if odd[name] else notes[name]), name
    # What the walk finds, so that the comparison means something.
    assert notes["held flat and fanned out"] == ids[1] + other + ids[1] + blob
    assert notes["flat, a gitlink, a symlink, an executable"] == (
        ids[0] + blob + ids[3] + other  # git reads no note from a gitlink or a symlink
    )
    assert odd["flat, a gitlink, a symlink, an executable"] == [
        (ids[1], "gitlink"),
        (ids[2], "link"),
    ]
    assert notes["trees and blobs where notes should be"] == ""
    assert odd["trees and blobs where notes should be"] == [
        (ids[0], "tree"),
        ("ab", "name"),
        ("zz", "name"),
        ("AB", "name"),
        (ids[4].upper(), "name"),
        (ids[4][:39], "name"),
    ]
    assert notes["names git would not write"] == ids[6] + other + ids[0] + blob + ids[0] + other
    assert odd["names git would not write"] == [
        (f"q 100644 blob {blob}\\x09{ids[0][:2]}", "name"),
        (f"line\\x0a100644 blob {blob}\\x09{ids[4]}", "name"),
    ]
    assert notes["19 folders deep, and 20"] == ids[5] + blob
    assert odd["19 folders deep, and 20"] == [
        ("ab/" * 19 + "ab", "tree"),
        ("cd/" + "ab/" * 18 + "abcd", "name"),
    ]
    assert odd["git's fan-out"] == odd["held flat and fanned out"] == []
    assert walked(repo, raw_tree(repo, shapes["git's fan-out"])) == ids[1] + blob + ids[2] + other


def test_the_hostile_corpus_and_notes_written_by_git_are_listed_as_libgit2_walks_them(
    repo: Repo,
) -> None:
    task = repo.task()
    plant(repo.path, repo.environ, [case_of(note, task) for note in corpus()])
    for _ in range(3):
        assert repo.run("checkpoint", "one more").code == 0
    tree = repo.git("rev-parse", "refs/notes/majordomus^{tree}").strip()
    expected = walked(repo, tree)
    entries = [note.on for note in corpus() if note.on in ("gitlink", "symlink")]
    assert len(expected) // 80 >= len(corpus()) - len(entries)
    assert listed(repo, tree) == (None if odd_entries(repo, tree) else expected)
    kinds = {"gitlink": "gitlink", "symlink": "link"}
    assert sorted(kind for _, kind in odd_entries(repo, tree)) == sorted(kinds[e] for e in entries)


def test_a_tree_git_cannot_read_is_left_to_libgit2(repo: Repo) -> None:
    absent = "0123456789abcdef0123456789abcdef01234567"
    tree = repo.git("mktree", "--missing", input=f"040000 tree {absent}\tab\n").strip()
    assert listed(repo, tree) is None  # a subtree that is not here
    assert listed(repo, absent) is None  # the tree itself
    blob = repo.git("hash-object", "-w", "--stdin", input="x").strip()
    assert listed(repo, blob) is None  # not a tree
    assert listed(repo, "HEAD") is None  # never a name git resolves
    with pytest.raises(MissingObjectError):  # what libgit2's walk then says
        list(notestree.walk(repo.pygit, _tree(repo, tree)))


@pytest.mark.parametrize("through", ["few notes", "document cache in parts"])
def test_a_first_read_in_a_second_clone_behind_a_bare_remote_is_libgit2s_read(
    tmp_path: Path,
    environ: dict[str, str],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    through: str,
) -> None:
    """A teammate's clone behind a bare remote: records fetched into the remote-tracking
    notes ref and its own, a note appended by hand with git, a merge, another branch
    checked out. Its first read (no caches) lists each notes tree with git; it answers
    as the read that leaves every object to libgit2 (GIT_CEILING_DIRECTORIES), and as
    the next read, from the caches. The records shown are read as a few notes are, or
    as many are: through the document cache, made two at a time."""
    if through == "document cache in parts":
        monkeypatch.setattr(index_module, "PRELOAD_THRESHOLD", 0)
        monkeypatch.setattr(render, "HISTORY_PART", 2)
    remote = bare(tmp_path / "remote.git", environ)
    alice = clone(str(remote), tmp_path / "alice", environ, clock)
    alice.commit("initial")
    alice.git("push", "-q", "origin", "main")
    task = alice.task()
    for n in range(3):
        alice.commit(f"work {n}")
        assert alice.run("checkpoint", f"alice {n}").code == 0
    alice.git("push", "-q", "origin", "main")
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    assert bob.run("task", "use", task).code == 0
    bob.git("checkout", "-q", "-b", "side", "HEAD~1")
    bob.commit("on the side")
    assert bob.run("checkpoint", "bob on the side").code == 0
    bob.git("checkout", "-q", "main")
    bob.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert bob.run("handover", "-o", "find it", "-s", "merged", "-n", "bisect").code == 0
    appended = (
        f'[[checkpoint]]\nv = 1\nid = "c-00000000000a11ce"\ntask = "{task}"\n'
        f'head = "{bob.head()}"\nat = 2026-11-30T03:12:09Z\nauthor = "A <a@example.com>"\n'
        'body = "appended by hand"\n'
    )
    bob.git("notes", f"--ref={NOTES_REF}", "append", "-m", appended, "HEAD")
    alice.commit("later")
    assert alice.run("checkpoint", "alice, later").code == 0
    alice.git("push", "-q", "origin", "main")
    assert alice.run("push").code == 0
    bob.git("fetch", "-q", "origin", f"+{NOTES_REF}:refs/notes/remotes/origin/majordomus")
    bob.git("checkout", "-q", "side")
    commands = [("history", "--all", "--json"), ("history", "--task", task, "--all", "--json")]
    ceiling = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}

    for argv in commands:
        bob.drop_caches()
        with pytest.MonkeyPatch.context() as patch:  # plain: every tree listed with git
            patch.setattr(notestree, "walk_present", _no_walk)
            first = bob.run(*argv)
        assert first.code == 0 and "appended by hand" in first.out and "alice, later" in first.out
        bob.drop_caches()
        assert bob.run(*argv, environ=ceiling).out == first.out  # every object by libgit2
        assert bob.run(*argv).out == first.out  # from the caches
        documents = bob.path / ".git" / "majordomus-records-cache"
        assert documents.is_file() is (through == "document cache in parts")
    tree = bob.git("rev-parse", "refs/notes/remotes/origin/majordomus^{tree}").strip()
    assert listed(bob, tree) == walked(bob, tree) != ""


def _no_walk(*args: object) -> None:
    raise AssertionError("a notes tree walked with libgit2 where git lists it")


def test_a_replaced_notes_tree_is_listed_as_libgit2_walks_it(repo: Repo) -> None:
    """libgit2 honours no `git replace`: neither does the listing by git, which would
    otherwise list the notes of the replacement."""
    blob = repo.git("hash-object", "-w", "--stdin", input="[[x]]\nv = 1\n").strip()
    ids = [f"{n:02x}" + "0123456789abcdef0123456789abcdef012345" for n in range(3)]
    stored = raw_tree(
        repo, [(b"100644", ids[0].encode(), blob), (b"100644", ids[1].encode(), blob)]
    )
    replacement = raw_tree(repo, [(b"100644", ids[2].encode(), blob)])
    repo.git("replace", stored, replacement)
    assert repo.git("ls-tree", stored).count("\n") == 1  # git itself reads the replacement
    assert listed(repo, stored) == walked(repo, stored) == ids[0] + blob + ids[1] + blob
