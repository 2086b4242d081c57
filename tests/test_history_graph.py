"""`history --graph` draws what `git log --graph --simplify-by-decoration` draws over the
commits that carry records: the oracle is real git, run in a throwaway copy of the
repository whose only refs sit on exactly those commits (one ref per record, their names
written one a line, so a commit of N records is drawn as git draws a commit of N lines).
Histories with merges and an octopus, another branch checked out, a second clone behind
a bare remote, a shallow clone, a note edited by hand, and hostile notes."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import Clock, hermetic_environ
from tests.support.git import bare
from tests.support.git import git as run_git
from tests.support.hostile_notes import cases, plant
from tests.support.repo import Repo, clone

GRAPH_CHARS = re.compile(r"[*|/\\_.\- ]*")
COMMIT_LINE = re.compile(r"([0-9a-f]{12})(?: |$)")
HAND_EDITED = (
    '[[checkpoint]]\nv = 1\nid = "c-00000000000hand"\ntask = "{task}"\n'
    'head = "0000000000000000000000000000000000000000"\nat = 2026-11-30T03:00:00Z\n'
    'author = "Ada <ada@example.com>"\nbody = "written with git notes add"\n'
)
Shape = list[tuple[str, str | None]]  # each line: its graph, and the commit of a `*` line


def _shape(text: str) -> Shape:
    """The graph of each line majordomus printed, and the commit it names on a `*` line."""
    lines: Shape = []
    for line in text.splitlines():
        if line.startswith("("):
            continue  # the counts after the drawing
        graph = GRAPH_CHARS.match(line)
        assert graph is not None
        rest = line[graph.end() :]
        named = COMMIT_LINE.match(rest)
        on_commit = named is not None and "*" in graph.group()
        lines.append((graph.group().rstrip(), named.group(1) if on_commit and named else None))
    return lines


def _records(
    repo: Repo, rev: str, include_all: bool = False, task: str | None = None
) -> dict[str, int]:
    args = ["history", rev, "--json", *(["--all"] if include_all else [])]
    args += ["--task", task] if task else []
    result = repo.run(*args)
    assert result.code == 0, result.err
    counts: dict[str, int] = {}
    for record in json.loads(result.out)["records"]:
        counts[record["commit"]] = counts.get(record["commit"], 0) + 1
    return counts


def oracle(
    repo: Repo,
    where: Path,
    rev: str,
    include_all: bool = False,
    wrap: bool = True,
    task: str | None = None,
    limit: int | None = None,
) -> Shape:
    """git's own drawing: a copy of the repository's git directory without its refs, a ref
    on each commit that carries records (one per record), and `git log --graph
    --simplify-by-decoration` of REV (and, with INCLUDE_ALL, of those commits)."""
    counts = _records(repo, rev, include_all, task)
    gitdir = Path(repo.git("rev-parse", "--absolute-git-dir").strip())
    copy = where / "oracle.git"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(gitdir, copy, ignore=shutil.ignore_patterns("refs", "packed-refs", "*.lock"))
    (copy / "refs" / "heads").mkdir(parents=True)
    head = repo.git("rev-parse", rev).strip()
    lines = "".join(
        f"create refs/oracle/{c}/{n} {c}\n" for c, count in counts.items() for n in range(count)
    )
    replaced = repo.git("for-each-ref", "--format=create %(refname) %(objectname)", "refs/replace/")
    lines += "".join(f"{line}\n" for line in replaced.splitlines())
    env = {**repo.environ, "GIT_DIR": str(copy)}
    run = Repo(where, env, repo.clock)
    run.git("update-ref", "--stdin", input=lines)
    tips = [head, *(c for c in counts if include_all)]
    fmt = "--format=%x01%H%x01%w(1,0,0)%D" if wrap else "--format=%x01%H"
    most = [f"--max-count={limit}"] if limit else []
    out = run.git(
        "log",
        "--graph",
        "--simplify-by-decoration",
        "--decorate-refs=refs/oracle/",
        fmt,
        *most,
        *tips,
    )
    shape: Shape = []
    for line in out.splitlines():
        if "\x01" in line:
            graph, commit = line.split("\x01")[:2]
            shape.append((graph.rstrip(), commit[:12]))
        else:
            at = line.find("refs/oracle/")
            shape.append(((line[:at] if at >= 0 else line).rstrip(), None))
    return shape


def drawn(repo: Repo, *args: str) -> str:
    result = repo.run("history", "--graph", *args)
    assert result.code == 0, result.err
    assert result.err == ""
    return result.out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Repo, Path]]:
    """A clone behind a bare remote with branches, merges (an octopus among them), several
    records on one commit, a branch no other reaches, and a note edited by hand."""
    root = tmp_path_factory.mktemp("graph")
    environ = hermetic_environ(root / "home")
    clock = Clock()
    remote = bare(root / "remote.git", environ)
    repo = clone(str(remote), root / "a", environ, clock)
    repo.commit("initial", {"README": "queue\n"})
    task = repo.task()

    def step(message: str, *bodies: str) -> None:
        clock.advance(60)
        repo.git("commit", "-q", "--allow-empty", "-m", message)
        for body in bodies:
            clock.advance(1)
            assert repo.run("checkpoint", body).code == 0

    step("one", "first")
    repo.git("switch", "-q", "-c", "feature")
    step("feature 1", "on the feature")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    step("feature 2", "two", "records", "here")
    for branch in ("left", "right"):
        repo.git("switch", "-q", "-c", branch, "main")
        step(f"{branch} 1", f"on {branch}")
        step(f"{branch} 2")
    repo.git("switch", "-q", "main")
    step("main 2", "main moved")
    repo.task("a second task")  # the records after it are of this task
    repo.git("merge", "-q", "--no-edit", "left", "right")  # an octopus
    step("after the octopus")
    repo.git("merge", "-q", "--no-edit", "feature")
    step("after the merge", "merged")
    repo.git("switch", "-q", "-c", "alone", "main~3")
    step("alone", "reached from no other branch")
    repo.git("switch", "-q", "main")
    step("hand-edited")
    note = HAND_EDITED.format(task=task)
    repo.git("notes", "--ref=majordomus", "add", "-f", "-m", note.rstrip("\n"), "HEAD")
    step("last", "the last one")
    repo.git("push", "-q", "origin", "main", "feature", "left", "right", "alone")
    assert repo.run("push").code == 0
    yield repo, root


@pytest.mark.parametrize("rev", ["main", "feature", "left", "main~2"])
def test_the_shape_is_git_s_drawing_of_the_same_commits(world: tuple[Repo, Path], rev: str) -> None:
    repo, root = world
    shape = _shape(drawn(repo, rev))
    assert shape == oracle(repo, root, rev)
    assert any(graph.startswith("*") and commit for graph, commit in shape)


def test_one_task_and_a_limit_are_git_s_drawing_too(world: tuple[Repo, Path]) -> None:
    repo, root = world
    first = json.loads(repo.run("history", "--json").out)["records"][-1]["task"]
    one = drawn(repo, "--task", first)
    assert _shape(one) == oracle(repo, root, "main", task=first)
    assert _shape(one) != _shape(drawn(repo))
    limited = drawn(repo, "--limit", "3")
    assert _shape(limited) == oracle(repo, root, "main", limit=3)
    assert sum(1 for graph, commit in _shape(limited) if commit) == 3
    assert "more records on commits not drawn; majordomus history lists them" in limited


def test_a_linked_worktree_draws_what_its_repository_holds(world: tuple[Repo, Path]) -> None:
    repo, root = world
    repo.git("worktree", "add", "-q", "--detach", str(root / "linked"), "feature")
    try:
        linked = Repo(root / "linked", repo.environ, repo.clock)
        assert _shape(drawn(linked)) == oracle(repo, root, "feature")
    finally:
        repo.git("worktree", "remove", "--force", str(root / "linked"))


def test_merges_branches_and_every_record_are_drawn(world: tuple[Repo, Path]) -> None:
    repo, _ = world
    out = drawn(repo)
    assert "|\\" in out and "|/" in out  # a branch and a merge
    assert "*-." in out  # the octopus, drawn as git draws it
    counts = _records(repo, "main")
    lines = [line for line in out.splitlines() if not line.startswith("(")]
    records = [line for line in lines if re.search(r"\b(checkpoint|handover|task|resume) ", line)]
    assert len(records) == sum(counts.values())
    assert "c-00000000000hand" in out  # the note written by hand with git notes
    assert "(1 more on commits not reachable from" in out  # the branch no other reaches
    # Several records on one commit: the first on its `*` line, the others under it.
    feature_tip = repo.git("rev-parse", "feature").strip()[:12]
    at = next(i for i, line in enumerate(lines) if feature_tip in line)
    assert "*" in lines[at]
    assert all(feature_tip not in line for line in lines[at + 1 : at + 3])
    assert all(re.search(r"^[|/\\ ]+ {13}checkpoint c-", line) for line in lines[at + 1 : at + 3])


def test_a_handover_carries_its_label_against_rev(world: tuple[Repo, Path]) -> None:
    repo, _ = world
    assert re.search(
        r"handover h-\w+  task t-\w+  \[advanced, \d+ ahead, 0 behind; open\]", drawn(repo)
    )
    assert "[current, 0 ahead, 0 behind; open]" in drawn(repo, "feature~1")
    assert re.search(r"\[behind, 0 ahead, \d+ behind; open\]", drawn(repo, "feature~2", "--all"))


def test_another_branch_checked_out_and_all(world: tuple[Repo, Path]) -> None:
    repo, root = world
    repo.git("switch", "-q", "alone")
    try:
        out = drawn(repo)
        assert _shape(out) == oracle(repo, root, "alone")
        assert "reached from no other branch" not in out  # text is never shown, ids are
        everything = drawn(repo, "--all")
        assert _shape(everything) == oracle(repo, root, "alone", include_all=True)
        assert "not reachable" not in everything
    finally:
        repo.git("switch", "-q", "main")


def test_a_second_clone_and_a_shallow_clone(world: tuple[Repo, Path]) -> None:
    repo, root = world
    second = clone(str(root / "remote.git"), root / "second", repo.environ, repo.clock)
    assert second.run("init").code == 0
    assert second.run("fetch").code == 0
    assert _shape(drawn(second)) == oracle(second, root / "second", "HEAD")
    assert _shape(drawn(second)) == _shape(drawn(repo))
    url = f"file://{root / 'remote.git'}"
    shallow = clone(url, root / "shallow", repo.environ, repo.clock, "--depth", "3")
    shallow.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    out = drawn(shallow)
    single = all(n == 1 for n in _records(shallow, "HEAD").values())
    if single:  # git's `grafted` mark makes a line of its own only with several lines
        assert _shape(out) == oracle(shallow, root / "shallow", "HEAD", wrap=False)
    assert "more on commits not reachable" in out  # the records past the boundary
    boundary = shallow.git("rev-parse", "HEAD~2").strip()[:12]
    assert f"* {boundary} " in out  # the boundary, drawn like a root


def test_a_root_without_files_is_drawn_with_its_records(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path / "r", hermetic_environ(tmp_path / "home"), Clock())  # empty root
    repo.task()
    repo.commit("second", {"f": "x"})
    assert repo.run("checkpoint", "on the second").code == 0
    out = drawn(repo)
    root = repo.git("rev-list", "--max-parents=0", "HEAD").strip()[:12]
    assert out.splitlines()[-1].startswith(f"* {root} task t-")
    assert "not drawn" not in out
    assert drawn(repo, "--limit", "2") == out
    other_base = repo.run("history", "--graph", environ={"GIT_REPLACE_REF_BASE": "refs/other/"})
    assert (other_base.code, other_base.out) == (0, out)  # the empty root drawn there too
    assert repo.git("for-each-ref", "refs/replace/").strip() == ""  # nothing written here


def test_a_replacement_in_force_is_drawn_as_git_reads_it(tmp_path: Path) -> None:
    """`git replace --graft`: git reads the history through it, and so does the drawing;
    the repository is left as it was (its refs and its objects)."""
    repo = Repo.init(tmp_path / "r", hermetic_environ(tmp_path / "home"), Clock(), commit=False)
    repo.commit("a", {"f": "a"})
    repo.task()
    repo.git("switch", "-q", "-c", "side")
    side = repo.commit("side", {"f": "side"})
    assert repo.run("checkpoint", "on the side").code == 0
    repo.git("switch", "-q", "main")
    repo.commit("b", {"f": "b"})
    tip = repo.commit("c", {"f": "c"})
    assert repo.run("checkpoint", "on c").code == 0
    before = _shape(drawn(repo))
    assert [c for _, c in before if c] == [tip[:12], repo.git("rev-parse", "HEAD~2").strip()[:12]]
    repo.git("replace", "--graft", tip, side)
    refs = repo.git("for-each-ref")
    objects = repo.git("count-objects", "-v")
    after = _shape(drawn(repo))
    assert [c for _, c in after if c][:2] == [tip[:12], side[:12]]
    assert after == oracle(repo, tmp_path, "HEAD")
    assert (repo.git("for-each-ref"), repo.git("count-objects", "-v")) == (refs, objects)


def test_hostile_notes_draw_no_line_of_their_own(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path / "r", hermetic_environ(tmp_path / "home"), Clock())
    repo.commit("files", {"f": "x"})
    task = repo.task()
    planted = plant(repo.path, repo.environ, cases(task))
    assert planted
    out = drawn(repo, "--all")
    assert _shape(out) == oracle(repo, tmp_path, "HEAD", include_all=True)
    for line in out.splitlines():
        assert line.isprintable(), line
        assert line.startswith(("*", "|", "/", "\\", " ", "(")), line
    result = repo.run("history", "--graph", "--json")
    assert (result.code, result.out) == (2, "")
    assert result.err == "majordomus: give --graph or --json, not both.\n"


def test_colour_on_a_terminal_and_never_off_it(world: tuple[Repo, Path]) -> None:
    repo, _ = world
    plain = drawn(repo)
    assert "\x1b" not in plain
    coloured = repo.run("history", "--graph", tty=True)
    assert coloured.code == 0
    assert "\x1b[33m" in coloured.out
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.out) == plain
    no_colour = repo.run("history", "--graph", tty=True, environ={"NO_COLOR": "1"})
    assert no_colour.out == plain
    repo.git("config", "log.graphColors", 'white, "magenta')  # the repository's own
    try:
        own = repo.run("history", "--graph", tty=True).out
    finally:
        repo.git("config", "--unset", "log.graphColors")
    assert "\x1b[37m|" in own and "\x1b[37m|" not in coloured.out
    assert re.sub(r"\x1b\[[0-9;]*m", "", own) == plain


def test_no_temporary_folder_is_one_sentence_and_exit_3(world: tuple[Repo, Path]) -> None:
    repo, root = world
    refs = repo.git("for-each-ref")
    (root / "a-file").write_text("not a folder\n")
    result = repo.run("history", "--graph", environ={"TMPDIR": str(root / "a-file")})
    assert (result.code, result.out) == (3, "")
    assert result.err.startswith("majordomus: cannot make a temporary folder for git to draw")
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert repo.git("for-each-ref") == refs


def test_a_treeless_clone_is_drawn_and_the_folder_always_removed(tmp_path: Path) -> None:
    """`--filter=tree:0`: git reads a root's tree to judge it, and the clone has none; the
    drawing is the full clone's, nothing fetched, nothing written here. The throwaway
    folder is gone after a drawing, and after git refused to draw."""
    environ = hermetic_environ(tmp_path / "home")
    remote = bare(tmp_path / "remote.git", environ)
    run_git(remote, environ, "config", "uploadpack.allowFilter", "true")
    repo = clone(str(remote), tmp_path / "full", environ, Clock())
    first = repo.commit("root", {"f": "root\n"})
    repo.task()
    repo.git("switch", "-q", "-c", "side")
    repo.commit("side", {"g": "side\n"})
    assert repo.run("checkpoint", "on the side").code == 0
    repo.git("switch", "-q", "main")
    repo.commit("main", {"f": "main\n"})
    assert repo.run("checkpoint", "on main").code == 0
    repo.git("merge", "-q", "--no-edit", "side")
    assert repo.run("checkpoint", "merged").code == 0
    repo.git("push", "-q", "origin", "main", "side")
    assert repo.run("push").code == 0
    url = f"file://{remote}"
    treeless = clone(url, tmp_path / "treeless", environ, repo.clock, "--filter=tree:0", "-n")
    treeless.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    tree = treeless.git("log", "-1", "--format=%T", first).strip()
    assert tree not in treeless.pygit  # (libgit2 fetches nothing)
    assert treeless.run("history").code == 0  # the notes' objects fetched by their read
    objects = treeless.git("count-objects", "-v")
    folder = tmp_path / "tmp"
    folder.mkdir()
    result = treeless.run("history", "--graph", environ={"TMPDIR": str(folder)})
    assert (result.code, result.err) == (0, "")
    assert _shape(result.out) == _shape(drawn(repo)) == oracle(repo, tmp_path, "HEAD")
    assert "|\\" in result.out and f"* {first[:12]} task t-" in result.out  # and the root
    assert treeless.git("count-objects", "-v") == objects
    assert treeless.git("for-each-ref", "refs/replace/") == ""
    assert list(folder.iterdir()) == []
    blobless = clone(url, tmp_path / "blobless", environ, repo.clock, "--filter=blob:none")
    blobless.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    assert blobless.run("history").code == 0
    assert drawn(blobless) == result.out  # its trees all here: nothing to replace
    # Without replacements git cannot judge the root: its refusal, the folder gone too.
    stored = {"TMPDIR": str(folder), "GIT_NO_REPLACE_OBJECTS": "1"}
    refused = treeless.run("history", "--graph", environ=stored)
    assert refused.code == 3 and refused.err.startswith("majordomus: git log failed")
    assert refused.err.count("\n") == 1
    assert list(folder.iterdir()) == []
