"""`show` in a plain repository answers without loading libgit2: git finds the notes
attached to one commit, over every notes ref and at every fan-out depth, and reads them,
giving libgit2's answer to the byte; anything unusual is left to libgit2, never guessed.

Each command runs in a fresh process twice: as it runs (plain layout) and with
GIT_CEILING_DIRECTORIES set, which leaves discovery, and so every read, to libgit2.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pygit2
import pytest

from majordomus import gitobjects, notestree
from majordomus.repository import NOTES_REF
from tests.support import forks
from tests.support.env import Clock
from tests.support.forks import Job
from tests.support.git import bare
from tests.support.repo import Repo, clone

# Commands in one fresh process: each one's answer, and whether libgit2 was loaded by then.
PROBE = """
import io, json, sys
from majordomus.__main__ import run
answers = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    code = run(argv, stdout=out, stderr=err)
    answers.append([code, out.getvalue(), err.getvalue(), "pygit2" in sys.modules])
print(json.dumps(answers))
"""
Answer = list[object]  # [exit code, stdout, stderr, libgit2 loaded]


def _probe(repo: Repo, commands: Sequence[Sequence[str]], environ: dict[str, str]) -> list[Answer]:
    argvs = [["-C", str(repo.path), *argv] for argv in commands]
    done = forks.run(Job(PROBE, [json.dumps(argvs)], environ))  # a fresh Python, forked
    assert done.returncode == 0, done.stderr
    answers: list[Answer] = json.loads(done.stdout)
    return answers


def _answers(repo: Repo, elsewhere: Path, commands: Sequence[Sequence[str]]) -> list[Answer]:
    """Each command's answer in a plain layout (a fresh process), checked equal to the
    answer libgit2 reads (in this process, where libgit2 is loaded anyway)."""
    elsewhere.mkdir(exist_ok=True)
    plain = _probe(repo, commands, repo.environ)
    ceiling = {"GIT_CEILING_DIRECTORIES": str(elsewhere)}
    by_libgit2 = [repo.run(*argv, environ=ceiling) for argv in commands]
    assert [a[:3] for a in plain] == [[r.code, r.out, r.err] for r in by_libgit2]
    return plain


def _shows(repo: Repo, elsewhere: Path, *revs: str) -> list[Answer]:
    """`show` on HEAD (--json, --markdown, text) and on each rev, answered identically with
    and without libgit2, and without loading it; the answers."""
    commands = [["show", "--json"], ["show", "--markdown"], ["show"]]
    commands += [["show", rev, "--json"] for rev in revs]
    plain = _answers(repo, elsewhere, commands)
    assert [a[3] for a in plain] == [False] * len(commands)
    assert all(a[0] == 0 and a[2] == "" for a in plain), plain
    return plain


def _ids(answer: Answer) -> list[str]:
    """The ids of the records shown, sorted."""
    assert isinstance(answer[1], str)
    return sorted(record["id"] for record in json.loads(answer[1])["records"])


def _git_ids(repo: Repo, rev: str) -> list[str]:
    """The record ids of a commit's note as git shows it, sorted."""
    text = repo.git("notes", f"--ref={NOTES_REF}", "show", rev)
    return sorted(set(re.findall(r'^id = "([^"]+)"$', text, re.MULTILINE)))


def _invalid(answer: Answer) -> int:
    assert isinstance(answer[1], str)
    invalid: int = json.loads(answer[1])["invalid"]
    return invalid


def _note_text(i: int, commit: str, body: str) -> str:
    return (
        f'[[checkpoint]]\nv = 1\nid = "c-{i:04d}{commit[:8]}"\ntask = "t-000000000000"\n'
        f'head = "{commit}"\nat = 2026-11-30T03:00:00Z\nauthor = "A <a@example.com>"\n'
        f'body = "{body}"\n'
    )


def _blob(repo: Repo, text: str) -> str:
    return repo.git("hash-object", "-w", "--stdin", input=text).strip()


def _tree(repo: Repo, entries: Sequence[tuple[str, str, str]], missing: bool = False) -> str:
    """A tree made by git mktree from (mode, id, name) entries."""
    kinds = {"100644": "blob", "040000": "tree", "160000": "commit"}
    listing = "".join(f"{mode} {kinds[mode]} {oid}\t{name}\n" for mode, oid, name in entries)
    return repo.git("mktree", *(["--missing"] if missing else []), input=listing).strip()


def _literal_tree(repo: Repo, entries: Sequence[tuple[str, str, str]]) -> str:
    """A tree of files and gitlinks (mode, id, name), in git's order, that git mktree would
    refuse: a gitlink may name a blob here."""
    data = b"".join(
        f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid)
        for mode, oid, name in sorted(entries, key=lambda entry: entry[2])
    )
    command = ["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"]
    done = subprocess.run(
        command, input=data, capture_output=True, cwd=repo.path, env=repo.environ, check=True
    )
    return done.stdout.decode("ascii").strip()


def _set_notes_tree(repo: Repo, tree: str, ref: str = NOTES_REF) -> str:
    parent = repo.git("rev-parse", "--verify", "-q", ref, check=False).strip()
    commit = repo.git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", "by hand")
    repo.git("update-ref", ref, commit.strip())
    return commit.strip()


def _merged_history(tmp_path: Path, environ: dict[str, str], clock: Clock) -> tuple[Repo, str]:
    """An origin whose main has a merge: a checkpoint on the side branch, a handover on the
    merge commit; the side commit's id."""
    origin = Repo.init(tmp_path / "origin", environ, clock)
    origin.task()
    origin.commit("main moves", {"main.txt": "m"})
    origin.git("checkout", "-q", "-b", "side", "HEAD~1")
    side = origin.commit("on the side", {"side.txt": "x"})
    assert origin.run("checkpoint", "seen on the side").code == 0
    origin.git("checkout", "-q", "main")
    origin.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert origin.run("handover", "-o", "find it", "-s", "seen", "-n", "bisect").code == 0
    assert origin.run("checkpoint", "after the merge").code == 0
    return origin, side


def test_a_fresh_clone_with_merges_as_ci_runs_it(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    origin, side = _merged_history(tmp_path, environ, clock)
    here = clone(str(origin.path), tmp_path / "here", environ, clock)
    here.git("fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    head = here.head()
    first = here.git("rev-list", "--max-parents=0", "HEAD").strip()  # the task record's
    answers = _shows(here, tmp_path / "elsewhere", side, first, head)
    assert _ids(answers[0]) == _git_ids(here, "HEAD") and len(_ids(answers[0])) == 2
    assert _ids(answers[3]) == _git_ids(here, side) and len(_ids(answers[3])) == 1
    assert _ids(answers[4]) == _git_ids(here, first) and _ids(answers[4])[0].startswith("t-")
    assert answers[5][1] == answers[0][1]
    assert answers[0][1] == origin.run("show", "--json").out  # what the writer's clone shows
    markdown = answers[1][1]
    assert isinstance(markdown, str) and all(i in markdown for i in _ids(answers[0]))
    # On another branch, at an older commit: the checkout's HEAD is what is shown.
    here.git("checkout", "-q", "-b", "fix", side)
    here.git("pack-refs", "--all")
    answers = _shows(here, tmp_path / "elsewhere")
    assert _ids(answers[0]) == _git_ids(here, side)
    # A linked work tree (a .git file) at the merge: its own HEAD, the shared notes.
    here.git("worktree", "add", "-q", "--detach", str(tmp_path / "linked"), head)
    linked = Repo(tmp_path / "linked", environ, clock)
    answers = _shows(linked, tmp_path / "elsewhere")
    assert _ids(answers[0]) == _git_ids(here, head)


def _many_commits(repo: Repo, count: int) -> list[str]:
    """`count` commits on no branch, made in-process (each a child of HEAD)."""
    pg = repo.pygit
    tree = pg.head.peel(pygit2.Commit).tree.id
    signature = pygit2.Signature("A", "a@example.com", 1796007600, 0)
    head = pg.head.target
    return [
        str(pg.create_commit(None, signature, signature, f"c{i}", tree, [head]))
        for i in range(count)
    ]


def test_notes_git_fanned_out(repo: Repo, tmp_path: Path) -> None:
    *commits, bare_commit = _many_commits(repo, 301)
    lines = [f"commit {NOTES_REF}", "committer A <a@example.com> 1796007600 +0000", "data 0"]
    for i, commit in enumerate(commits):
        text = _note_text(i, commit, f"note {i}")
        lines += [f"N inline {commit}", f"data {len(text.encode())}", text]
    repo.git("fast-import", "--quiet", input="\n".join(lines) + "\n")
    root = repo.git("ls-tree", "--name-only", NOTES_REF).split()
    assert len(root) > 100 and all(len(name) == 2 for name in root)  # git fanned it out
    repo.git("checkout", "-q", "--detach", commits[7])
    repo.task()  # majordomus writes into git's fanned-out tree
    assert repo.run("checkpoint", "on a fanned-out note").code == 0
    answers = _shows(repo, tmp_path / "elsewhere", commits[8], bare_commit)
    assert _ids(answers[0]) == _git_ids(repo, commits[7]) and len(_ids(answers[0])) == 3
    assert _ids(answers[3]) == _git_ids(repo, commits[8]) == [f"c-0008{commits[8][:8]}"]
    assert _ids(answers[4]) == []


def _flat_notes(repo: Repo) -> dict[str, str]:
    """The notes at the top of the notes tree: annotated object -> blob."""
    listing = repo.git("ls-tree", NOTES_REF).splitlines()
    return {line.split()[3]: line.split()[2] for line in listing}


def _fanned_copies(repo: Repo, commit: str, notes: dict[str, str]) -> str:
    """A notes tree holding `commit`'s note flat, at `ab/…` and at `ab/cd/…`, beside the
    notes that `notes` lays out flat (annotated object -> blob)."""
    flat, one, two = (_blob(repo, _note_text(i, commit, f"copy {i}")) for i in range(3))
    deeper = _tree(repo, [("100644", two, commit[4:])])
    fanned = _tree(repo, [("100644", one, commit[2:]), ("040000", deeper, commit[2:4])])
    others = [("100644", blob, name) for name, blob in notes.items() if name[:2] != commit[:2]]
    return _tree(repo, [*others, ("100644", flat, commit), ("040000", fanned, commit[:2])])


def test_a_note_held_flat_and_fanned_out_at_two_depths(repo: Repo, tmp_path: Path) -> None:
    repo.task()
    assert repo.run("checkpoint", "the note majordomus wrote").code == 0
    head = repo.head()
    present = _flat_notes(repo)
    del present[head]
    _set_notes_tree(repo, _fanned_copies(repo, head, present))
    answers = _shows(repo, tmp_path / "elsewhere")
    assert _ids(answers[0]) == [f"c-{i:04d}{head[:8]}" for i in range(3)]  # flat, then deeper
    assert set(_git_ids(repo, "HEAD")) <= set(_ids(answers[0]))  # git shows one copy


def test_a_note_edited_by_hand(repo: Repo, tmp_path: Path) -> None:
    repo.task()
    assert repo.run("checkpoint", "before the edit").code == 0
    repo.git("notes", f"--ref={NOTES_REF}", "append", "-m", "a note from a person", "HEAD")
    repo.git("notes", f"--ref={NOTES_REF}", "append", "-m", "[[checkpoint]]\nid = 3", "HEAD")
    answers = _shows(repo, tmp_path / "elsewhere")
    assert _ids(answers[0]) == _git_ids(repo, "HEAD")
    assert len(_ids(answers[0])) == 2 and _invalid(answers[0]) == 2  # the text, the table


def test_a_note_that_is_not_toml_and_trees_where_notes_should_be(
    repo: Repo, tmp_path: Path
) -> None:
    repo.task()
    assert repo.run("checkpoint", "the readable one").code == 0
    head = repo.head()
    readable = repo.git("rev-parse", f"{NOTES_REF}:{head}").strip()
    junk = _blob(repo, "not toml at all = = =\n")
    inner = _tree(repo, [("100644", junk, "x")])
    (other,) = _many_commits(repo, 1)
    # HEAD: a tree at the flat name (counted, never entered), the note one level down.
    # `other`: one tree at its note's place at two depths (one entry: one object, as one
    # blob there is one note), and a note that is not TOML two levels down.
    level2 = _tree(repo, [("100644", junk, other[4:]), ("040000", inner, other[4:6])])
    level1 = _tree(repo, [("040000", inner, other[2:]), ("040000", level2, other[2:4])])
    ours = _tree(repo, [("100644", readable, head[2:])])
    entries = [("040000", inner, head), ("040000", ours, head[:2])]
    entries += [("040000", inner, other), ("040000", level1, other[:2])]
    if head[:2] == other[:2]:
        pytest.skip("the two commits share a fan-out directory")  # 1 in 256: ids are fixed
    _set_notes_tree(repo, _tree(repo, entries))
    answers = _shows(repo, tmp_path / "elsewhere", other)
    assert len(_ids(answers[0])) == 2 and _invalid(answers[0]) == 1
    assert _ids(answers[3]) == [] and _invalid(answers[3]) == 2


def test_gitlinks_where_notes_should_be(repo: Repo, tmp_path: Path) -> None:
    repo.task()
    assert repo.run("checkpoint", "the readable one").code == 0
    head = repo.head()
    readable = repo.git("rev-parse", f"{NOTES_REF}:{head}").strip()
    (here,) = _many_commits(repo, 1)
    absent = "0123456789abcdef0123456789abcdef01234567"
    # HEAD: a gitlink where its fan-out directory is, its note flat. `here`: a gitlink at
    # its note's place naming a commit that is here (no blob: unreadable).
    entries = [("100644", readable, head), ("160000", here, head[:2])]
    entries += [("160000", here, here)]
    if head[:2] == here[:2]:
        pytest.skip("the two commits share a fan-out directory")
    _set_notes_tree(repo, _tree(repo, entries))
    answers = _shows(repo, tmp_path / "elsewhere", here)
    assert len(_ids(answers[0])) == 2 and _invalid(answers[0]) == 0
    assert _ids(answers[3]) == [] and _invalid(answers[3]) == 1
    # A gitlink naming a commit that is not here, or a blob that holds a record: counted
    # by its mode, the object it names never read (nor missing: nothing to fetch).
    for named in (absent, readable):
        gitlink = ("160000", named, here)
        _set_notes_tree(repo, _literal_tree(repo, [*entries[:2], gitlink]))
        answers = _shows(repo, tmp_path / "elsewhere", here)
        assert _ids(answers[3]) == [] and _invalid(answers[3]) == 1


def test_notes_from_remotes_are_read_with_the_local_ones(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote = bare(tmp_path / "remote.git", environ)
    alice = clone(str(remote), tmp_path / "alice", environ, clock)
    alice.commit("initial")
    alice.git("push", "-q", "origin", "main")
    task = alice.task()
    assert alice.run("checkpoint", "alice, first").code == 0
    assert alice.run("push").code == 0
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    assert bob.run("task", "use", task).code == 0
    assert bob.run("checkpoint", "bob, not pushed").code == 0
    assert alice.run("checkpoint", "alice, second").code == 0
    assert alice.run("push").code == 0
    # A plain git fetch moves the remote-tracking notes ref only: both refs are read.
    bob.git("fetch", "-q", "origin", f"+{NOTES_REF}:refs/notes/remotes/origin/majordomus")
    bob.git("update-ref", "refs/notes/remotes/team/two/majordomus", f"{NOTES_REF}~1")
    answers = _shows(bob, tmp_path / "elsewhere")
    local = _git_ids(bob, "HEAD")
    fetched = [i for i in _git_ids(alice, "HEAD") if i not in local]
    assert len(fetched) == 1 and _ids(answers[0]) == sorted([*local, *fetched])


def test_a_commit_with_no_note_and_a_repository_with_no_notes(repo: Repo, tmp_path: Path) -> None:
    answers = _shows(repo, tmp_path / "elsewhere")  # no notes ref at all
    assert json.loads(str(answers[0][1])) == {"commit": repo.head(), "records": [], "invalid": 0}
    repo.task()
    repo.commit("after the task")
    answers = _shows(repo, tmp_path / "elsewhere", repo.git("rev-parse", "HEAD~1").strip())
    assert _ids(answers[0]) == [] and len(_ids(answers[3])) == 1


def test_a_shallow_clone(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    origin, _ = _merged_history(tmp_path, environ, clock)
    here = clone(f"file://{origin.path}", tmp_path / "here", environ, clock, "--depth", "1")
    here.git("fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    assert (here.path / ".git" / "shallow").exists()
    answers = _shows(here, tmp_path / "elsewhere")
    assert _ids(answers[0]) == _git_ids(here, "HEAD") and len(_ids(answers[0])) == 2


def test_what_is_not_read_by_git_is_left_to_libgit2(repo: Repo, tmp_path: Path) -> None:
    repo.task()
    assert repo.run("checkpoint", "the note").code == 0
    head = repo.head()
    blob = repo.git("rev-parse", f"{NOTES_REF}:{head}").strip()
    elsewhere = tmp_path / "elsewhere"
    show = [["show", "--json"]]
    # A notes tree out of git's order: a lookup by name is libgit2's.
    other = "f" * 40 if head[0] != "f" else "0" * 40
    entries = sorted([(head, blob), (other, blob)], reverse=True)
    raw = b"".join(b"100644 %s\0%s" % (n.encode(), bytes.fromhex(o)) for n, o in entries)
    unsorted = subprocess.run(
        ["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        cwd=repo.path,
        env=repo.environ,
        input=raw,
        capture_output=True,
        check=True,
    ).stdout.decode()
    _set_notes_tree(repo, unsorted.strip())
    plain = _answers(repo, elsewhere, show)
    assert plain[0][3] is True and plain[0][0] == 0
    # A subtree that is not in the clone: the full read says so, as libgit2 does.
    absent = "0123456789abcdef0123456789abcdef01234567"
    _set_notes_tree(repo, _tree(repo, [("040000", absent, head[:2])], missing=True))
    plain = _answers(repo, elsewhere, show)
    assert plain[0][3] is True and plain[0][0] == 0
    # The notes ref at a tree: refused, in libgit2's words.
    repo.git("update-ref", NOTES_REF, repo.git("rev-parse", "HEAD^{tree}").strip())
    plain = _answers(repo, elsewhere, show)
    assert plain[0][0] == 3 and plain[0][3] is True


def test_the_notes_found_are_those_notestree_finds(repo: Repo) -> None:
    """gitobjects.attached_notes against notestree.find (libgit2), tree by tree."""
    repo.task()
    assert repo.run("checkpoint", "a note").code == 0
    head = repo.head()
    commits = [head, repo.commit("two"), repo.commit("three")]
    present = _flat_notes(repo)
    hand_made = _set_notes_tree(repo, _fanned_copies(repo, head, present))
    pg = repo.pygit
    gitdir = str(repo.path / ".git")
    batch = gitobjects.Batch(gitdir, repo.environ)
    try:
        for target in (hand_made, f"{hand_made}~1"):
            target_id = repo.git("rev-parse", target).strip()
            root = pg[target_id].peel(pygit2.Tree)
            for commit in commits:
                found = list(notestree.find_kinds(pg, root, commit))
                expected = [str(oid) for oid, kind in found if kind == "note"]
                odd = [(kind, str(oid)) for oid, kind in found if kind != "note"]
                assert gitobjects.attached_notes(batch, [target_id], commit) == (expected, odd)
        both = [repo.git("rev-parse", t).strip() for t in (f"{hand_made}~1", hand_made)]
        assert gitobjects.attached_notes(batch, both, head) == (
            list(
                dict.fromkeys(
                    str(oid)
                    for target in both
                    for oid in notestree.find(pg, pg[target].peel(pygit2.Tree), head)
                )
            ),
            [],
        )
        with pytest.raises(gitobjects.UnsureError):  # a tree is no notes commit
            gitobjects.attached_notes(batch, [str(root.id)], head)
        with pytest.raises(gitobjects.UnsureError):  # nor is an object that is not here
            gitobjects.attached_notes(batch, ["0123456789abcdef0123456789abcdef01234567"], head)
    finally:
        batch.close()


def test_cat_file_batch_check_cannot_tell_a_gitlink_from_an_absent_note(repo: Repo) -> None:
    """Why notes are found by reading trees: `git cat-file --batch-check` over
    `<notes>:<path>` says `missing` both for a path that is not in the tree and for a
    gitlink there (naming a commit not in the clone), which libgit2 counts as an
    unreadable note; the tree itself says which is which."""
    absent = "0123456789abcdef0123456789abcdef01234567"
    head = repo.head()
    tree = _tree(repo, [("160000", absent, head)], missing=True)
    notes = _set_notes_tree(repo, tree)
    asked = f"{notes}:{head}\n{notes}:{head[:2]}/{head[2:]}\n"
    checked = repo.git("cat-file", "--batch-check", input=asked).splitlines()
    assert checked == [f"{notes}:{head} missing", f"{notes}:{head[:2]}/{head[2:]} missing"]
    assert repo.git("ls-tree", notes) == f"160000 commit {absent}\t{head}\n"
    assert gitobjects.tree_entries(repo.pygit.odb.read(tree)[1]) == {head: ("commit", absent)}


def test_a_replaced_note_is_read_as_libgit2_reads_it(repo: Repo, tmp_path: Path) -> None:
    """libgit2 honours no `git replace`: neither do the reads made by git for it."""
    task = repo.task()
    assert repo.run("checkpoint", "the stored note").code == 0
    head = repo.head()
    stored = repo.git("rev-parse", f"{NOTES_REF}:{head}").strip()
    repo.git("replace", stored, _blob(repo, _note_text(0, head, "a replacement")))
    assert repo.run("history", "--task", task).code == 0  # builds the caches a warm read uses
    plain = _answers(
        repo,
        tmp_path / "elsewhere",
        [["show", "--json"], ["show", head, "--json"], ["history", "--task", task, "--json"]],
    )
    assert [a[3] for a in plain] == [False, False, False]
    assert "a replacement" not in str(plain[0][1]) and "the stored note" in str(plain[0][1])
