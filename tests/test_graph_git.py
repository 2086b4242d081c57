"""The graph's answers in real repositories, checked against git's own: `git rev-list` order,
`git rev-list --left-right --count` and `git merge-base`, with and without what earlier
commands kept, across merges of older-dated branches, branch switches and shallow clones."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

import pygit2
import pytest

from majordomus import history as history_module
from majordomus import tally
from majordomus.cachefile import GRAPH_FILE_NAME
from majordomus.errors import RepositoryError
from majordomus.records import Divergence
from majordomus.tasks import Jobs, open_jobs
from tests.support.env import EMAIL, NAME, Clock
from tests.support.repo import Repo, clone, seeded, worked

UNKNOWN = Divergence("unknown", None, None)


class Git:
    """git's own answers in a complete clone: `git rev-list REV` (its order, and the commits
    it reaches) and the label `git rev-list --left-right --count` and `git merge-base`
    give, counted from those lists. A commit's id names its history, so each commit's list
    is asked of git once per test, not once per label."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.listed: dict[str, list[str] | None] = {}

    def rev_list(self, commit: str) -> list[str] | None:
        """`git rev-list COMMIT`, or None when COMMIT is not a commit here."""
        if commit not in self.listed:
            listed = self.repo.git("rev-list", commit, check=False)
            if not listed:  # git says why: no such object, or not a commit
                assert self.repo.git("cat-file", "-t", commit, check=False).strip() != "commit"
            self.listed[commit] = listed.split() or None
        return self.listed[commit]

    def order(self, rev: str) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.rev_list(rev) or [])}

    def label(self, handover: str, rev: str) -> Divergence:
        if handover == rev:
            return Divergence("current", 0, 0)
        theirs = self.rev_list(handover)
        if theirs is None:
            return Divergence("missing", None, None)
        mine = set(self.rev_list(rev) or [])
        # what `git rev-list --left-right --count REV...HANDOVER` counts
        ahead, behind = len(mine - set(theirs)), len(set(theirs) - mine)
        if behind == 0:
            return Divergence("advanced", ahead, 0)
        if ahead == 0:
            return Divergence("behind", 0, behind)
        based = not mine.isdisjoint(theirs)  # whether `git merge-base` finds one
        return Divergence("diverged" if based else "unrelated", ahead, behind)


def git_label(repo: Repo, handover: str, rev: str) -> Divergence:
    """The label from git's own answers (a complete clone), asked of git there and then."""
    if handover == rev:
        return Divergence("current", 0, 0)
    if repo.git("cat-file", "-t", handover, check=False).strip() != "commit":
        return Divergence("missing", None, None)
    ahead, behind = map(
        int, repo.git("rev-list", "--left-right", "--count", f"{rev}...{handover}").split()
    )
    if behind == 0:
        return Divergence("advanced", ahead, 0)
    if ahead == 0:
        return Divergence("behind", 0, behind)
    base = repo.git("merge-base", rev, handover, check=False).strip()
    return Divergence("diverged" if base else "unrelated", ahead, behind)


def git_order(repo: Repo, rev: str) -> dict[str, int]:
    return {c: i for i, c in enumerate(repo.git("rev-list", rev).split())}


class History:
    """Random commits, branches and merges made in-process, with dates that sometimes go back
    (an older-dated branch merged late), so git's order is not the order of creation.
    Every commit has the first one's tree, so a branch switch is a move of HEAD alone
    (`git checkout` would change no file): made in-process too, as are HEAD's moves."""

    def __init__(self, repo: Repo, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        self.pygit = repo.pygit
        self.when = 1_800_000_000
        self.commits = [repo.head()]

    def commit(self, parents: list[str], message: str) -> str:
        self.when += self.rng.choice([60, 60, 60, -3600, -86400, 0])
        signature = pygit2.Signature(NAME, EMAIL, self.when, 0)
        tree = self.pygit.get(parents[0]).tree.id  # type: ignore[union-attr]
        oid = self.pygit.create_commit(None, signature, signature, message, tree, parents)
        self.commits.append(str(oid))
        return str(oid)

    def head(self) -> str:
        return str(self.pygit.head.target)

    def switch(self, branch: str) -> None:
        """`git checkout BRANCH`, where no file changes."""
        self.pygit.set_head(f"refs/heads/{branch}")

    def move_head(self, commit: str) -> None:
        """`git update-ref HEAD COMMIT`: the branch HEAD names moves (or HEAD, detached)."""
        target = self.pygit.references["HEAD"].target
        if isinstance(target, str):
            self.pygit.references.create(target, pygit2.Oid(hex=commit), force=True)
        else:
            self.pygit.set_head(pygit2.Oid(hex=commit))

    def step(self, i: int) -> None:
        branches = list(self.pygit.branches.local)
        head = self.head()
        action = self.rng.random()
        if action < 0.55:
            new = self.commit([head], f"work {i}")
        elif action < 0.75:
            other = self.pygit.branches.local[self.rng.choice(branches)].target
            if str(other) == head:
                return
            new = self.commit([head, str(other)], f"merge {i}")
        elif action < 0.9:
            name = f"b{i}"
            self.pygit.branches.local.create(name, self.pygit.get(self.rng.choice(self.commits)))  # type: ignore[arg-type]
            self.switch(name)
            return
        else:
            self.switch(self.rng.choice(branches))
            return
        self.move_head(new)


def jobs_of(repo: Repo) -> Jobs:
    return open_jobs(str(repo.path), repo.environ)


def check_against_git(repo: Repo, git: Git, rng: random.Random, commits: list[str]) -> None:
    rev = repo.head()
    candidates = rng.sample(commits, min(len(commits), 25))
    handovers = rng.sample(commits, min(len(commits), rng.choice([2, 12])))
    jobs = jobs_of(repo)
    order = jobs.history.graph().order(rev, candidates)
    labels = jobs.history.graph().labels(rev, handovers)
    expected = git.order(rev)
    assert order == {c: expected[c] for c in candidates if c in expected}
    assert labels == {h: git.label(h, rev) for h in handovers}
    assert jobs.history.graph().walks <= 2


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_order_and_labels_equal_gits_with_kept_answers_and_without(repo: Repo, seed: int) -> None:
    rng = random.Random(seed)
    history, git = History(repo, rng), Git(repo)
    for i in range(40):
        history.step(i)
        if i % 4 == 3:
            check_against_git(repo, git, rng, history.commits)  # with what earlier steps kept
            (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
            check_against_git(repo, git, rng, history.commits)  # fresh


def test_one_walk_answers_every_label_of_a_history(repo: Repo) -> None:
    rng = random.Random(11)
    history = History(repo, rng)
    for i in range(60):
        history.step(i)
    jobs = jobs_of(repo)
    rev = repo.head()
    handovers = history.commits[:: max(1, len(history.commits) // 40)]
    graph = jobs.history.graph()
    graph.order(rev, history.commits)
    labels = graph.labels(rev, handovers)
    assert graph.walks <= 2
    # git asked there and then, and the answers the other tests count from its lists
    assert labels == {h: git_label(repo, h, rev) for h in handovers}
    assert labels == {h: Git(repo).label(h, rev) for h in handovers}
    assert (
        graph.order(rev, history.commits)
        == {c: i for c, i in git_order(repo, rev).items() if c in history.commits}
        == {c: i for c, i in Git(repo).order(rev).items() if c in history.commits}
    )


def shallow_clone(origin: Repo, path: Path, depth: int) -> Repo:
    clone = Repo(path, origin.environ, origin.clock)
    origin.git(
        "clone",
        "-q",
        "--depth",
        str(depth),
        "--no-single-branch",
        f"file://{origin.path}",
        str(path),
    )
    return clone


@pytest.mark.parametrize("seed", [5, 6])
def test_a_shallow_clone_answers_as_the_full_one_or_unknown(
    tmp_path: Path, repo: Repo, seed: int
) -> None:
    rng = random.Random(seed)
    history = History(repo, rng)
    for i in range(45):
        history.step(i)
    repo.git("checkout", "-q", "main")
    rev = repo.head()
    git = Git(repo)  # the full clone's answers
    exact = cuts = 0
    for depth in rng.sample(range(1, 12), 4):
        clone = shallow_clone(repo, tmp_path / f"depth{depth}", depth)
        assert clone.git("rev-parse", "HEAD").strip() == rev
        handovers = rng.sample(history.commits, 12)
        jobs = jobs_of(clone)
        shallow_file = clone.path / ".git" / "shallow"
        cut = set(shallow_file.read_text().split()) if shallow_file.exists() else set()
        assert jobs.history.graph().boundary == cut
        cuts += bool(cut)
        got = jobs.history.graph().labels(rev, handovers)
        # Commits git lists keep git's order; those only the mended graph reaches follow.
        order = jobs.history.graph().order(rev, history.commits)
        listed = git_order(clone, rev)
        assert {c: r for c, r in order.items() if c in listed} == {
            c: listed[c] for c in history.commits if c in listed
        }
        assert set(order) <= set(git.order(rev))
        assert min((r for c, r in order.items() if c not in listed), default=len(listed)) >= len(
            listed
        )
        for handover in handovers:
            if got[handover] != UNKNOWN:
                assert got[handover] == git.label(handover, rev)
                exact += 1
        if cut:  # a cut graph is never kept
            assert not (clone.path / ".git" / GRAPH_FILE_NAME).exists()
    assert exact > 0 and cuts > 0


def issue_history(repo: Repo) -> str:
    """R-A; a handover on H (branch feature off A); H-I1-I2 merged into main (A-M1,
    C1 = merge(M1, I2), C2). Returns the task id."""
    repo.commit("A")
    task = repo.task()
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("H")
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    repo.git("checkout", "-q", "-b", "integration")
    repo.commit("I1")
    repo.commit("I2")
    repo.git("checkout", "-q", "main")
    repo.commit("M1")
    repo.git("merge", "-q", "--no-ff", "-m", "C1", "integration")
    repo.commit("C2")
    repo.git("branch", "-q", "-D", "integration")
    return task


def peek(repo: Repo, task: str) -> tuple[str, int | None, int | None]:
    result = repo.run("resume", "--peek", "--json", "--task", task)
    assert result.code == 0, result.err
    out = json.loads(result.out)
    return out["label"], out["ahead"], out["behind"]


def test_the_issue_history_in_a_shallow_clone_is_exact_or_unknown_never_diverged(
    tmp_path: Path, repo: Repo
) -> None:
    task = issue_history(repo)
    assert peek(repo, task) == ("advanced", 5, 0)
    clone = shallow_clone(repo, tmp_path / "shallow", 4)
    clone.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    assert clone.git("rev-list", "--left-right", "--count", "HEAD...origin/feature").split() == [
        "5",
        "1",
    ]  # what git itself answers inside the cut graph
    # I1 is cut from H, but H came along with branch feature: the cut is mended, and
    # the handover is listed as reachable, as in the full clone.
    assert peek(clone, task) == ("advanced", 5, 0)
    history = json.loads(clone.run("history", "--json").out)
    labels = [(r["label"], r["ahead"]) for r in history["records"] if r["kind"] == "handover"]
    assert labels == [("advanced", 5)] and history["hidden"] == 0
    # Without branch feature, H is not here: unknown, never a guess.
    single = tmp_path / "single"
    repo.git("clone", "-q", "--depth", "4", f"file://{repo.path}", str(single))
    lone = Repo(single, repo.environ, repo.clock)
    lone.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    assert peek(lone, task) == ("unknown", None, None)
    lone.git("fetch", "-q", "--unshallow", "origin")
    assert peek(lone, task) == ("advanced", 5, 0)


def test_show_of_a_parent_past_the_boundary_says_the_clone_is_shallow(
    tmp_path: Path, repo: Repo
) -> None:
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side")
    repo.git("checkout", "-q", "main")
    repo.commit("main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge", "side")
    clone = shallow_clone(repo, tmp_path / "shallow", 1)
    before = clone.git("for-each-ref").strip()
    result = clone.run("show", "HEAD^2")
    assert result.code == 3 and result.out == ""
    assert result.err == (
        "majordomus: cannot find a commit named 'HEAD^2' in this shallow clone, whose history "
        "stops at its boundary; run git fetch --unshallow (or --deepen N) to bring the older "
        "commits, or give a branch, tag or commit id that is here.\n"
    )
    assert clone.git("for-each-ref").strip() == before


def test_equal_times_follow_rev_list_after_merging_an_older_branch(
    tmp_path: Path, repo: Repo, clock: Clock
) -> None:
    """Records made in the same second are listed in `git rev-list REV` order, whether or
    not an earlier command kept the order of the revision before the merge."""
    repo.task()
    pygit = repo.pygit
    base = repo.head()
    old = pygit2.Signature(NAME, EMAIL, int(clock.now.timestamp()) - 86400, 0)
    tree = pygit.revparse_single(base).peel(pygit2.Tree).id
    side = str(pygit.create_commit("refs/heads/side", old, old, "old side", tree, [base]))
    for i in range(3):
        repo.commit(f"main {i}")
        assert repo.run("checkpoint", f"on main {i}").code == 0
    repo.git("checkout", "-q", "side")
    assert repo.run("checkpoint", "on the old side").code == 0
    repo.git("checkout", "-q", "main")
    assert repo.run("history", "--json").code == 0  # keeps the order of main
    repo.git("merge", "-q", "--no-ff", "-m", "merge the old side", "side")
    kept = json.loads(repo.run("history", "--json").out)["records"]
    (repo.path / ".git" / GRAPH_FILE_NAME).unlink()
    fresh = json.loads(repo.run("history", "--json").out)["records"]
    assert kept == fresh
    order = git_order(repo, repo.head())
    checkpoints = [r for r in fresh if r["kind"] == "checkpoint"]
    assert [r["commit"] for r in checkpoints] == sorted(
        (r["commit"] for r in checkpoints), key=order.__getitem__
    )
    assert side in [r["commit"] for r in checkpoints]


@pytest.mark.parametrize("seed", [21, 22])
def test_a_branch_switch_near_a_kept_revision_is_answered_without_a_walk(
    repo: Repo, seed: int
) -> None:
    """Switching to an older commit of a history (merges below it), committing there, and
    switching again: every answer equals git's, from what the previous command kept, with
    no walk, as long as the revisions are joined by chains of single-parent commits.
    Handovers off the kept revision's history (a side branch) still get git's answer."""
    rng = random.Random(seed)
    history = History(repo, rng)
    for i in range(12):  # merges and branches below the chain
        history.step(i)
    repo.git("checkout", "-q", "-B", "main")
    for i in range(30):
        history.move_head(history.commit([history.head()], f"line {i}"))
    repo.git("checkout", "-q", "-B", "side", f"HEAD~{rng.randrange(5, 25)}")
    side = history.commit([repo.head()], "side")
    repo.git("update-ref", "HEAD", side)
    repo.git("checkout", "-q", "main")
    commits = [*history.commits]
    git = Git(repo)
    on_main = set(git.rev_list(repo.head()) or [])
    handovers = rng.sample([c for c in commits if c in on_main], 16)  # off main: the end

    def answers(expect_walks: int | None) -> None:
        rev = repo.head()
        jobs = jobs_of(repo)
        graph = jobs.history.graph()
        order = graph.order(rev, commits)
        labels = graph.labels(rev, handovers)
        expected = git.order(rev)
        assert order == {c: expected[c] for c in commits if c in expected}
        assert labels == {h: git.label(h, rev) for h in handovers}
        if expect_walks is not None:
            assert graph.walks == expect_walks

    answers(None)  # main: walked, and kept
    for round_ in range(3):
        back = rng.randrange(1, 28)
        repo.git("checkout", "-q", "-B", f"fix{round_}", f"main~{back}")
        answers(0)  # the commit itself, below the kept revision
        new = history.commit([repo.head()], f"fix {round_}")
        repo.git("update-ref", "HEAD", new)
        commits.append(new)
        answers(0)  # a new commit on it: nobody has seen it
        repo.git("checkout", "-q", "main")
        answers(0)  # back: from what main's own command kept
    # Handovers off main's history (the side branch, the random branches): the chains
    # cannot tell them, and the answer comes from git, still equal to git's.
    handovers = list(dict.fromkeys([*[c for c in commits if c not in on_main][:12], side]))
    repo.git("checkout", "-q", "-B", "late", "main~3")
    answers(None)


def test_a_walk_too_long_to_keep_is_read_line_by_line_with_gits_answers(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past WALK_KEEP lines a walk is never held: order and labels are read from git line
    by line (again in topological order when dates go back), and equal git's."""
    monkeypatch.setattr(tally, "WALK_KEEP", 5)
    rng = random.Random(31)
    history, git = History(repo, rng), Git(repo)
    for i in range(40):
        history.step(i)
    for _ in range(3):
        rev = repo.head()
        jobs = jobs_of(repo)
        graph = jobs.history.graph()
        order = graph.order(rev, history.commits)
        labels = graph.labels(rev, history.commits)
        expected = git.order(rev)
        assert order == {c: expected[c] for c in history.commits if c in expected}
        assert labels == {h: git.label(h, rev) for h in history.commits}
        assert graph.walks <= 3
        repo.git("checkout", "-q", rng.choice(history.commits))


@pytest.mark.parametrize("keep", [5, tally.WALK_KEEP], ids=["line-by-line", "kept"])
@pytest.mark.parametrize("seed", [41, 43])
def test_labels_expected_before_an_order_are_read_in_its_walk_as_git_counts_them(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, seed: int, keep: int
) -> None:
    """`history` says which labels it will ask for before it asks for the order: the walk
    made for the order reads the labels of the handovers on the revision's history in the
    same pass. Across merges, dates that go back (the walk then out of order: the labels
    walk as before), branch switches, handovers off the history and a commit that is not
    here, every label equals git's, kept or fresh; with every handover on the history and
    the walk in order, one walk answers all."""
    monkeypatch.setattr(tally, "WALK_KEEP", keep)
    rng = random.Random(seed)
    history, git = History(repo, rng), Git(repo)
    absent = "0123456789abcdef" * 2 + "01234567"
    for i in range(36):
        history.step(i)
        if i % 9 != 8:
            continue
        rev = repo.head()
        reached = set(git.rev_list(rev) or [])
        handovers = [*rng.sample(history.commits, min(len(history.commits), 10)), absent]
        for fresh in (True, False):
            if fresh:
                (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
            graph = jobs_of(repo).history.graph()
            graph.expect_labels(rev, handovers)
            order = graph.order(rev, history.commits)
            labels = graph.labels(rev, handovers)
            expected = git.order(rev)
            assert order == {c: expected[c] for c in history.commits if c in expected}
            assert labels == {h: git.label(h, rev) for h in handovers}
            assert graph.walks <= 3
        # On the history alone, dates in order (each commit after its parents): one walk.
        on_history = [h for h in handovers if h in reached]
        dated = repo.git("log", "--format=%H %ct %P", rev).splitlines()
        when = {line.split()[0]: int(line.split()[1]) for line in dated}
        in_order = all(when[line.split()[0]] >= when[p] for line in dated for p in line.split()[2:])
        (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
        graph = jobs_of(repo).history.graph()
        graph.expect_labels(rev, on_history)
        graph.order(rev, history.commits)
        assert graph.labels(rev, on_history) == {h: git.label(h, rev) for h in on_history}
        if in_order:
            assert graph.walks == 1


@pytest.mark.parametrize(
    ("keep", "read_size"),
    [(5, 1 << 20), (tally.WALK_KEEP, 1 << 20), (tally.WALK_KEEP, 50)],
    ids=["line-by-line", "kept", "lines-longer-than-a-read"],
)
def test_a_walk_started_ahead_answers_as_the_walk_made_when_asked(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, keep: int, read_size: int
) -> None:
    """`history` in a clone where nothing is kept starts the order's walk before it reads
    the notes (git runs in the background, into a temporary file): the order and labels
    read from it equal git's, in one walk; where something is kept, nothing is started.
    Read in parts that may end inside a line (a merge's is longer than a small read)."""
    monkeypatch.setattr(tally, "WALK_KEEP", keep)
    monkeypatch.setattr(history_module, "READ_SIZE", read_size)
    rng = random.Random(51)
    history, git = History(repo, rng), Git(repo)
    for i in range(30):
        history.step(i)
    rev = repo.head()
    reached = set(git.rev_list(rev) or [])
    handovers = [c for c in history.commits if c in reached][::3]
    (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
    jobs = jobs_of(repo)
    graph = jobs.history.graph()
    graph.start_order(rev, worth=lambda: False)  # nothing to order: nothing started
    assert jobs.history._started is None
    graph.start_order(rev, worth=lambda: True)
    assert jobs.history._started is not None
    graph.expect_labels(rev, handovers)
    order = graph.order(rev, history.commits)
    assert jobs.history._started is None  # read, and its git waited for
    expected = git.order(rev)
    assert order == {c: expected[c] for c in history.commits if c in expected}
    assert graph.labels(rev, handovers) == {h: git.label(h, rev) for h in handovers}
    assert graph.walks <= 2
    kept = jobs_of(repo)  # the graph cache now holds this revision: nothing to start
    kept.history.graph().start_order(rev, worth=lambda: True)
    assert kept.history._started is None


def test_no_walk_is_started_ahead_in_a_shallow_clone_or_without_a_temporary_folder(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shallow clone's walk is made whole, as asked (its cut is mended first), and a
    walk cannot be started without a temporary folder to write in: in both, nothing is
    started, and `history` answers with what git counts."""
    import tempfile

    worked(repo, [f"step {n}" for n in range(4)])
    shallow = shallow_clone(repo, tmp_path / "shallow", depth=3)
    shallow.git("fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    jobs = jobs_of(shallow)
    jobs.history.graph().start_order(shallow.head(), worth=lambda: True)
    assert jobs.history._started is None
    out = json.loads(shallow.run("history", "--json").out)
    assert [r["label"] for r in out["records"] if r["kind"] == "handover"] == ["advanced"]

    def no_folder() -> None:
        raise FileNotFoundError("no usable temporary directory")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_folder)
    (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
    jobs = jobs_of(repo)
    jobs.history.graph().start_order(repo.head(), worth=lambda: True)
    assert jobs.history._started is None
    handover = json.loads(repo.run("history", "--json").out)["records"][0]
    expected = git_label(repo, handover["commit"], repo.head())
    assert handover["kind"] == "handover"
    assert (handover["label"], handover["ahead"], handover["behind"]) == tuple(expected)


def test_a_walk_started_ahead_that_git_cannot_make_says_so_as_any_walk_does(repo: Repo) -> None:
    """Started in a process that runs threads too (nothing runs in the child before git:
    it is spawned, not forked), at the lowest priority, which git keeps to its end."""
    absent = "0123456789abcdef0123456789abcdef01234567"
    jobs = jobs_of(repo)
    stop = threading.Event()
    other_thread = threading.Thread(target=stop.wait)
    other_thread.start()
    try:
        jobs.history.start_stream([absent])
    finally:
        stop.set()
        other_thread.join()
    started = jobs.history._started
    assert started is not None
    assert os.getpriority(os.PRIO_PROCESS, started.process.pid) == 19  # not waited for yet
    with pytest.raises(RepositoryError) as ahead:
        list(jobs.history.stream([absent], topo=False))
    with pytest.raises(RepositoryError) as asked:
        list(jobs.history.stream([absent], topo=False))
    assert str(ahead.value) == str(asked.value)
    assert started.process.returncode is not None and started.out.closed
    # Started for other tips, or asked in topological order: stopped, and walked as asked.
    jobs.history.start_stream([absent])
    other = jobs.history._started
    assert other is not None
    rev = repo.head()
    assert walked_lines(jobs.history.stream([rev], topo=True)) == [
        line.split() for line in repo.git("rev-list", "--parents", "--topo-order", rev).splitlines()
    ]
    assert other.process.returncode is not None and other.out.closed


def test_a_walk_started_ahead_that_stops_halfway_is_walked_again_past_what_it_gave(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The git started ahead writes into a temporary file: a full disk (here a limit on
    the file's size) stops it halfway, in the middle of a line. The lines it ended are
    given, the one it cut is not, and the rest come from a walk made as asked: the
    whole walk, each line once."""
    import resource

    from majordomus import history as history_module

    monkeypatch.setattr(
        history_module,
        "_lowest_priority",
        lambda pid: resource.prlimit(pid, resource.RLIMIT_FSIZE, (150, 150)),  # two lines and a bit
    )
    for i in range(6):
        repo.commit(f"more {i}")
    rev = repo.head()
    jobs = jobs_of(repo)
    jobs.history.start_stream([rev])
    started = jobs.history._started
    assert started is not None
    expected = [line.split() for line in repo.git("rev-list", "--parents", rev).splitlines()]
    assert walked_lines(jobs.history.stream([rev], topo=False)) == expected
    assert started.process.returncode != 0  # it did stop halfway


def test_an_order_of_no_commit_walks_nothing(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """No record anywhere yet (a clone before anyone wrote one): nothing to rank, so no walk
    (at a million commits it took a second), kept or started ahead."""
    for i in range(5):
        repo.commit(f"work {i}")
    (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
    jobs = jobs_of(repo)
    graph = jobs.history.graph()
    assert graph.order(repo.head(), []) == {}
    assert graph.walks == 0 and jobs.history._started is None
    done = repo.run("history", "--json")
    assert done.code == 0 and json.loads(done.out)["records"] == []
    assert not (repo.path / ".git" / GRAPH_FILE_NAME).exists()  # nothing walked, nothing kept


def test_history_with_a_limit_labels_what_it_shows_as_git_counts_it(repo: Repo) -> None:
    """With --limit the walk counts only the handovers of the newest records (those shown
    are most likely among them). Here the newest seventy records sit on a branch HEAD does
    not reach, so the one record shown is an older handover outside them: its label is
    counted when asked for, and equals git's, fresh and from the caches."""
    base = repo.head()
    side: list[str] = []
    stream = ""
    for n in range(70):  # a branch of seventy commits, each to carry a newer record
        parent = f"from {base}\n" if n == 0 else ""
        stream += f"commit refs/heads/side\nmark :{n + 1}\n"
        stream += f"committer A <a@example.com> {1764400000 + n} +0000\ndata 5\nside\n{parent}"
    marks = repo.path / ".git" / "marks"
    subprocess.run(
        ["git", "fast-import", "--quiet", f"--export-marks={marks}"],
        cwd=repo.path, env=repo.environ, input=stream.encode(), check=True,
    )  # fmt: skip
    found = dict(line.split() for line in marks.read_text().splitlines())
    side = [found[f":{n + 1}"] for n in range(70)]
    handover_on = repo.commit("on main")
    for n in range(3):
        repo.commit(f"main moves {n}")
    task = "t-0000000000aa"
    notes = [(handover_on, (
        f'[[handover]]\nv = 1\nid = "h-00000000000000aa"\ntask = "{task}"\n'
        f'head = "{handover_on}"\nat = 2026-01-01T00:00:00Z\nauthor = "A <a@example.com>"\n'
        'objective = "o"\nstate = "s"\nnext = "n"\n'
    ))]  # fmt: skip
    for n, commit in enumerate(side):
        notes.append((commit, (
            f'[[checkpoint]]\nv = 1\nid = "c-{n:016x}"\ntask = "{task}"\nhead = "{commit}"\n'
            f'at = 2026-06-01T00:{n // 60:02d}:{n % 60:02d}Z\nauthor = "A <a@example.com>"\n'
            f'body = "on the side {n}"\n'
        )))  # fmt: skip
    for commit, text in notes:
        repo.git("notes", "--ref=majordomus", "add", "-m", text, commit)
    (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
    for _ in range(2):  # fresh, then from what the first kept
        out = json.loads(repo.run("history", "--limit", "1", "--json").out)
        (shown,) = out["records"]
        assert shown["id"] == "h-00000000000000aa"
        expected = git_label(repo, handover_on, repo.head())
        assert (shown["label"], shown["ahead"], shown["behind"]) == tuple(expected)
        assert out["hidden"] == 70


def answers_git_gives(repo: Repo) -> None:
    """`history --all` and `history` hold git's answers: each handover's label is what
    `git rev-list --left-right --count` and `git merge-base` give, and the records shown
    without --all are those on commits `git rev-list HEAD` lists; and they are the answers
    of a fresh read (every cache dropped), which leaves caches that answer the same."""

    def history(*argv: str) -> dict[str, object]:
        result = repo.run("history", *argv, "--json")
        assert (result.code, result.err) == (0, ""), result.err
        return dict(json.loads(result.out))

    rev = repo.head()
    wide, narrow = history("--all"), history()
    records = wide["records"]
    assert isinstance(records, list)
    reached = set(repo.git("rev-list", rev).split())
    handovers = [r for r in records if r["kind"] == "handover"]
    assert len(handovers) >= 3
    for record in handovers:
        label = Divergence(record["label"], record["ahead"], record["behind"])
        assert label == git_label(repo, record["commit"], rev), record["id"]
    shown = [r for r in records if r["commit"] in reached]
    assert narrow["records"] == shown
    assert narrow["hidden"] == len(records) - len(shown)
    assert repo.run("doctor", "--drop-cache").code in (0, 1)
    assert (history("--all"), history()) == (wide, narrow)  # fresh
    assert (history("--all"), history()) == (wide, narrow)  # from what the fresh read kept


def stitched_history(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> tuple[Path, Repo, str, list[str]]:
    """A bare remote, and alice's clone that published to it: a handover on each of three
    commits of main (each changing src/queue.py), one on a side branch off the first,
    merged into main, and a commit after the merge. (remote, alice, root, the three
    handovers' commits on main.)"""
    remote, alice = seeded(tmp_path, environ, clock)
    root = alice.head()
    alice.task("stitched history")
    handovers = []
    for n in range(3):
        alice.commit(f"main {n}", {"src/queue.py": f"retry = {n}\n"})
        clock.advance(60)
        assert alice.run("handover", "-o", f"o{n}", "-s", "s", "-n", "n").code == 0
        handovers.append(alice.head())
    alice.git("checkout", "-q", "-b", "side", handovers[0])
    alice.commit("side work")
    clock.advance(60)
    assert alice.run("handover", "-o", "side", "-s", "s", "-n", "n").code == 0
    alice.git("checkout", "-q", "main")
    alice.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    alice.commit("after the merge")
    alice.git("push", "-q", "origin", "main", "side")
    assert alice.run("push").code == 0
    return remote, alice, root, handovers


@pytest.mark.parametrize("options", [(), ("--filter=blob:none",)], ids=["full", "partial"])
def test_replace_refs_and_grafts_move_the_answers_as_they_move_gits(
    tmp_path: Path, environ: dict[str, str], clock: Clock, options: tuple[str, ...]
) -> None:
    """A replacement (`git replace --graft`, a grafts file) changes a commit's history
    without changing its id, and git's rev-list and merge-base read history through it:
    majordomus answers as git does while one is in force (keeping no answer by commit id
    then), and as before once it is gone, whatever it kept meanwhile. Here a teammate's
    clone (a full one, or a partial one, whose refs are read another way), warm and on
    another branch, fetches the replace ref published with the code."""
    remote, alice, root, handovers = stitched_history(tmp_path, environ, clock)
    # Cut main's history below its third commit, as a migrated repository is stitched.
    alice.git("replace", "--graft", handovers[2], root)
    alice.git("push", "-q", "origin", "refs/replace/*:refs/replace/*")

    alice.git("--git-dir", str(remote), "config", "uploadpack.allowFilter", "true")
    bob = clone(f"file://{remote}", tmp_path / "bob", environ, clock, *options)
    assert bob.run("fetch").code == 0
    bob.git("checkout", "-q", "side")
    bob.commit("bob on side")
    answers_git_gives(bob)  # no replacement here yet
    before = bob.run("history", "--all", "--json").out
    bob.git("fetch", "-q", "origin", "refs/replace/*:refs/replace/*")
    answers_git_gives(bob)
    assert bob.run("history", "--all", "--json").out != before  # the graft cut a path
    bob.git("checkout", "-q", "main")
    answers_git_gives(bob)
    assert json.loads(bob.run("history", "--json").out)["hidden"] == 1  # main 1, cut off
    bob.git("pack-refs", "--all")  # the replace ref packed, none left loose
    assert not list((bob.path / ".git" / "refs" / "replace").iterdir())
    answers_git_gives(bob)
    assert json.loads(bob.run("history", "--json").out)["hidden"] == 1
    # Under another base, named by GIT_REPLACE_REF_BASE (for git and so for majordomus).
    moved = "refs/stitched/" + handovers[2]
    bob.git("update-ref", moved, f"refs/replace/{handovers[2]}")
    bob.git("update-ref", "-d", f"refs/replace/{handovers[2]}")
    answers_git_gives(bob)
    assert json.loads(bob.run("history", "--json").out)["hidden"] == 0
    based = Repo(bob.path, {**environ, "GIT_REPLACE_REF_BASE": "refs/stitched/"}, clock)
    answers_git_gives(based)
    assert json.loads(based.run("history", "--json").out)["hidden"] == 1
    bob.git("update-ref", f"refs/replace/{handovers[2]}", moved)
    bob.git("update-ref", "-d", moved)
    # Gone again: the answers are those of the history as stored.
    bob.git("replace", "-d", handovers[2])
    answers_git_gives(bob)
    assert json.loads(bob.run("history", "--json").out)["hidden"] == 0
    grafts = bob.path / ".git" / "info" / "grafts"
    grafts.write_text(f"{handovers[2]} {root}\n")
    answers_git_gives(bob)
    grafts.unlink()
    bob.git("fetch", "-q", "origin", "refs/replace/*:refs/replace/*")
    # Replacements turned off, for git and so for majordomus.
    answers_git_gives(Repo(bob.path, {**environ, "GIT_NO_REPLACE_OBJECTS": "1"}, clock))
    bob.git("config", "core.useReplaceRefs", "false")
    answers_git_gives(bob)


def test_a_grafts_file_named_relatively_is_the_one_git_reads(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """GIT_GRAFT_FILE given as a relative path: git, started anywhere in the work tree (or
    with -C), reads it from the top of the work tree, where it moves to; started in a git
    dir, a bare repository, or with GIT_DIR and no work tree, from where it started.
    majordomus answers as git does in each (another file of that name, a decoy, stands
    where the other reading would find it), and as the history as stored once the
    variable is unset."""
    remote, _, root, handovers = stitched_history(tmp_path, environ, clock)
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    (bob.path / "stitch.grafts").write_text(f"{handovers[2]} {root}\n")
    decoy = f"{bob.head()}\n"  # another graft: HEAD without parents
    (bob.path / "src" / "stitch.grafts").write_text(decoy)
    named = {**environ, "GIT_GRAFT_FILE": "stitch.grafts"}
    within = Repo(bob.path / "src", named, clock)
    stored = git_order(bob, bob.head())
    assert git_order(within, within.head()) != stored  # git reads the top's file
    answers_git_gives(within)
    answers_git_gives(Repo(bob.path, named, clock))
    # GIT_DIR named without a work tree: git takes where it starts as the top, and reads
    # the file there (the decoy): the repository located through the environment.
    as_top = Repo(bob.path / "src", {**named, "GIT_DIR": str(bob.path / ".git")}, clock)
    assert git_order(as_top, as_top.head()) not in (stored, git_order(within, within.head()))
    answers_git_gives(as_top)
    # Inside the git dir of a clone: git stays there, and reads the file there.
    (bob.path / ".git" / "stitch.grafts").write_text(decoy)
    answers_git_gives(Repo(bob.path / ".git", named, clock))
    bare = tmp_path / "bare.git"
    bob.git("clone", "-q", "--bare", str(bob.path), str(bare))
    bob.git("--git-dir", str(bare), "fetch", "-q", str(bob.path), "refs/notes/*:refs/notes/*")
    (bare / "stitch.grafts").write_text(decoy)
    answers_git_gives(Repo(bare, named, clock))
    answers_git_gives(bob)  # unset: the history as stored, whatever was kept meanwhile
    assert json.loads(bob.run("history", "--json").out)["hidden"] == 0


def test_a_label_kept_for_a_handover_whose_branch_was_pruned_since_is_missing(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """A handover off HEAD's history can lose its commit: the branch deleted, the commits
    pruned (notes keep no commit alive). What an earlier command kept about it (its label
    from HEAD, and from a revision HEAD's chain meets) then gives way to `missing`, as a
    fresh read says and git (`cat-file -t` fails): here in a teammate's warm clone, after
    a merge and a branch switch, once the remote dropped the branch and gc pruned it."""
    remote, alice = seeded(tmp_path, environ, clock)
    alice.task("pruned branch")
    alice.commit("main 0")
    assert alice.run("handover", "-o", "on main", "-s", "s", "-n", "n").code == 0
    alice.git("checkout", "-q", "-b", "merged")
    alice.commit("merged work")
    alice.git("checkout", "-q", "main")
    alice.git("merge", "-q", "--no-ff", "-m", "merge", "merged")
    alice.git("checkout", "-q", "-b", "spike")
    for n in range(2):
        alice.commit(f"spike {n}")
        clock.advance(60)
        assert alice.run("handover", "-o", f"spike {n}", "-s", "s", "-n", "n").code == 0
    alice.git("push", "-q", "origin", "main", "spike")
    assert alice.run("push").code == 0

    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    bob.commit("bob on main")
    answers_git_gives(bob)  # the spike's labels kept from main's head
    bob.git("checkout", "-q", "-b", "fix", "main~1")
    bob.commit("bob's fix")  # a new head whose chain meets main's: labels carried along it
    answers_git_gives(bob)
    alice.git("push", "-q", "origin", "--delete", "spike")
    bob.git("fetch", "-q", "--prune", "origin")
    bob.git("reflog", "expire", "--expire=now", "--all")
    bob.git("gc", "-q", "--prune=now")
    spike = json.loads(bob.run("history", "--all", "--json").out)["records"]
    labels = [r["label"] for r in spike if r["kind"] == "handover" and r["id"]]
    assert labels.count("missing") == 2
    answers_git_gives(bob)
    bob.git("checkout", "-q", "main")
    answers_git_gives(bob)


def test_the_copy_listed_after_a_shallow_clone_deepens_is_the_one_head_now_reaches(
    repo: Repo, tmp_path: Path
) -> None:
    """A record on an amended commit and its original: a clone of depth 1 (every branch)
    reaches neither copy and has only the original, which it lists; once `git fetch
    --deepen` brings the amended one into HEAD's history, the read lists that copy at
    once, as a fresh read does (HEAD did not move)."""
    assert repo.run("init").code == 0
    repo.task()
    repo.commit("work", {"a.txt": "1\n"})
    assert repo.run("checkpoint", "on the work").code == 0
    repo.git("branch", "kept")
    repo.clock.advance(60)
    git_at_clock = {
        **repo.environ,
        "GIT_COMMITTER_DATE": f"{int(repo.clock.now.timestamp())} +0000",
    }
    subprocess.run(
        ["git", "commit", "-q", "--amend", "-m", "work, amended"],
        cwd=repo.path, env=git_at_clock, check=True,
    )  # fmt: skip
    amended = repo.head()
    for n in range(3):
        repo.commit(f"main moves {n}")
    shallow = shallow_clone(repo, tmp_path / "shallow", 1)
    shallow.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")

    def listed() -> tuple[str, int]:
        out = json.loads(shallow.run("history", "--all", "--json").out)
        (checkpoint,) = [r for r in out["records"] if r["kind"] == "checkpoint"]
        hidden = json.loads(shallow.run("history", "--json").out)["hidden"]
        return checkpoint["commit"], hidden

    before = listed()
    assert before == listed() and before[0] != amended
    shallow.git("fetch", "-q", "--deepen", "5")
    assert amended in shallow.git("rev-list", "HEAD").split()
    assert listed() == listed() == (amended, 0)
    assert shallow.run("doctor", "--drop-cache").code in (0, 1)
    assert listed() == (amended, 0)


def test_the_copy_listed_follows_a_graft_as_git_reaches_it(repo: Repo) -> None:
    """A record on two commits (an amend copied it) is listed by its copy on a commit HEAD
    reaches: the amended one, or through a graft the original one, as `git rev-list HEAD`
    reaches them, fresh or not; once the graft is gone, the amended one again."""
    assert repo.run("init").code == 0  # notes.rewriteRef: the amend copies the record
    repo.task()
    original = repo.commit("work", {"a.txt": "1\n"})
    assert repo.run("checkpoint", "on the work").code == 0
    repo.git("branch", "kept", original)
    repo.git("commit", "-q", "--amend", "-m", "work, amended")
    amended = repo.head()
    repo.commit("more")
    repo.git("checkout", "-q", "-b", "other", "kept")
    repo.git("checkout", "-q", "main")

    def listed() -> str:
        records = json.loads(repo.run("history", "--json").out)["records"]
        (checkpoint,) = [r for r in records if r["kind"] == "checkpoint"]
        assert checkpoint["commit"] in repo.git("rev-list", "HEAD").split()
        commit: str = checkpoint["commit"]
        return commit

    def fresh() -> str:
        assert repo.run("doctor", "--drop-cache").code in (0, 1)
        return listed()

    assert listed() == listed() == amended
    repo.git("replace", "--graft", "HEAD", original)
    assert listed() == listed() == fresh() == listed() == original
    repo.git("replace", "-d", repo.head())
    assert listed() == listed() == fresh() == listed() == amended


def test_in_one_second_a_record_rev_reaches_comes_before_one_it_does_not(repo: Repo) -> None:
    """Two records in one second, one on an old commit HEAD reaches, one on a branch it does
    not: graph order lists the reached one first, whether the read holds every note (a
    hand-appended line makes two more commits noted) or only the tasks' views, fresh or
    not, for every task or for one. (An unreached commit was ranked by how many noted
    commits the read held, below an old commit's rank when those were few.)"""
    task = repo.task()  # on the root: every record below is in the same second
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side")
    side = json.loads(repo.run("checkpoint", "on the side", "--json").out)["record"]["id"]
    repo.git("checkout", "-q", "main")
    old = repo.commit("old")
    reached = json.loads(repo.run("checkpoint", "on main", "--json").out)["record"]["id"]
    for n in range(3):
        repo.commit(f"main moves {n}")
    assert git_order(repo, repo.head())[old] == 3

    def ids(*argv: str) -> list[str]:
        result = repo.run("history", *argv, "--json")
        assert result.code == 0, result.err
        return [r["id"] for r in json.loads(result.out)["records"] if r["kind"] == "checkpoint"]

    want = [reached, side]
    for argv in (("--all",), ("--all", "--task", task)):
        assert ids(*argv) == ids(*argv) == want, argv
        assert repo.run("doctor", "--drop-cache").code in (0, 1)
        assert ids(*argv) == want, argv
    repo.git("notes", "--ref=majordomus", "append", "-m", "a line by hand", "HEAD")
    repo.git("notes", "--ref=majordomus", "append", "-m", "another", "HEAD~1")
    for argv in (("--all",), ("--all", "--task", task)):
        assert ids(*argv) == ids(*argv) == want, argv
        assert repo.run("doctor", "--drop-cache").code in (0, 1)
        assert ids(*argv) == want, argv


def test_the_history_questions_adopt_patches_and_merge_ask_are_answered_as_git_does(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """Merge bases, ranges, ancestry and walks asked of `History` (by adopt, the facts a
    handover stores, and merge) equal git's on a history with a side branch merged, in the
    clone that wrote it and in a second clone behind the bare remote on another branch,
    with a replacement in force: a question about the history as stored ignores it, as
    `GIT_NO_REPLACE_OBJECTS=1 git` does, the others see it, as plain git does."""
    remote, alice, root, handovers = stitched_history(tmp_path, environ, clock)
    alice.git("replace", "--graft", handovers[2], root)
    alice.git("push", "-q", "origin", "refs/replace/*:refs/replace/*")
    bob = clone(f"file://{remote}", tmp_path / "bob", environ, clock)
    bob.git("fetch", "-q", "origin", "refs/replace/*:refs/replace/*")
    bob.git("checkout", "-q", "side")
    bob.commit("bob on side")
    for repo in (alice, bob):
        stored = Repo(repo.path, {**repo.environ, "GIT_NO_REPLACE_OBJECTS": "1"}, clock)
        history = jobs_of(repo).history
        commits = repo.git("rev-list", "--all").split()
        listed = stored.git("rev-list", "--parents", "--all").splitlines()
        assert len(commits) >= 7 and any(len(line.split()) > 2 for line in listed)  # a merge
        differ = 0  # pairs the replacement answers otherwise: the two questions are apart
        for a in commits:
            for b in commits:
                base = stored.git("merge-base", a, b, check=False).strip() or None
                assert history.merge_base(a, b, stored=True) == base
                seen = repo.git("merge-base", a, b, check=False).strip() or None
                assert history.merge_base(a, b) == seen
                differ += base != seen
                assert history.between(b, a) == stored.git("rev-list", f"{b}..{a}").split()
                asked = subprocess.run(
                    ["git", "merge-base", "--is-ancestor", b, a],
                    cwd=repo.path,
                    env=stored.environ,
                    check=False,
                )
                assert history.descends(a, b) == (asked.returncode == 0 and a != b), (a, b)
        assert differ > 0
        head = repo.head()
        since = int(repo.git("log", "-1", "--format=%ct", handovers[1]))
        expected = repo.git("rev-list", "--no-merges", f"--max-age={since}", head).split()
        assert history.since(head, since) == expected
        tips = [handovers[0], handovers[1]]
        walked = repo.git("rev-list", "--parents", "--boundary", *tips, f"^{root}")
        assert history.boundary_walk(tips, root) == walked.splitlines()


def walked_lines(blocks: Iterable[bytes]) -> list[list[str]]:
    """A walk's lines, from the blocks `History.stream` gives: each block whole lines."""
    lines: list[list[str]] = []
    for block in blocks:
        assert block.endswith(b"\n")
        lines += [line.split() for line in block.decode().splitlines()]
    return lines


@pytest.mark.parametrize("window", [1, 3, tally.CHAIN_WINDOW])
def test_a_mostly_linear_history_read_in_runs_answers_as_git_does(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """Long runs of one-parent commits (told at once, `window` lines a run) between merges,
    branches off older commits, clocks that go back, a branch checked out and commits no
    branch HEAD is on reaches: order and labels equal git's, from a walk that counts the
    labels it is told to expect and from one that does not, and in a clone behind a bare
    remote where nothing is kept."""
    monkeypatch.setattr(tally, "CHAIN_WINDOW", window)
    rng = random.Random(window)
    history, git = History(repo, rng), Git(repo)
    for i in range(90):
        if rng.random() < 0.8:
            history.move_head(history.commit([history.head()], f"line {i}"))
        else:
            history.step(i)
    rev = repo.head()
    reached = set(git.rev_list(rev) or [])
    handovers = [c for c in history.commits if c in reached][::7] + [
        c for c in history.commits if c not in reached
    ][:3]
    for expect in (True, False):
        (repo.path / ".git" / GRAPH_FILE_NAME).unlink(missing_ok=True)
        jobs = jobs_of(repo)
        graph = jobs.history.graph()
        if expect:
            graph.expect_labels(rev, handovers)
        expected = git.order(rev)
        assert graph.order(rev, history.commits) == {
            c: expected[c] for c in history.commits if c in expected
        }
        assert graph.labels(rev, handovers) == {h: git.label(h, rev) for h in handovers}
    remote = tmp_path / "remote.git"
    repo.git("init", "-q", "--bare", str(remote))
    repo.git("push", "-q", str(remote), "--all")
    repo.git("push", "-q", str(remote), "HEAD:refs/heads/tip")  # what the clone checks out
    repo.git(f"--git-dir={remote}", "symbolic-ref", "HEAD", "refs/heads/tip")
    behind = clone(str(remote), tmp_path / "behind", repo.environ, repo.clock)
    tip, theirs = behind.head(), Git(behind)
    graph = jobs_of(behind).history.graph()
    graph.expect_labels(tip, handovers)  # some are not in the clone: no branch holds them
    expected = theirs.order(tip)
    assert graph.order(tip, history.commits) == {
        c: expected[c] for c in history.commits if c in expected
    }
    assert graph.labels(tip, handovers) == {h: theirs.label(h, tip) for h in handovers}
