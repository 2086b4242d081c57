"""The graph's answers on commit graphs in memory: labels against brute force, at most a
few walks per command, and shallow cuts that answer exactly or `unknown`, never wrong."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus.divergence import labels_of
from majordomus.graph import CommitGraph
from majordomus.history import GraphCache
from majordomus.records import Divergence
from majordomus.tally import counted_walk, tally
from tests.support.memory_graph import MemorySource, random_dag, true_label

UNKNOWN = Divergence("unknown", None, None)


def answer(source: MemorySource, rev: str, handovers: list[str]) -> dict[str, Divergence]:
    return CommitGraph(source, None).labels(rev, handovers)


#   R - A - M1 ----- C1 - C2        (main)
#        \          /
#         H - I1 - I2               (feature, merged)
ISSUE_HISTORY = {
    "R": (),
    "A": ("R",),
    "H": ("A",),
    "I1": ("H",),
    "I2": ("I1",),
    "M1": ("A",),
    "C1": ("M1", "I2"),
    "C2": ("C1",),
}


def test_labels_on_a_history_with_merges() -> None:
    #   and X, a branch off the handover, never merged; Z, another root
    parents: dict[str, tuple[str, ...]] = {**ISSUE_HISTORY, "X": ("H",), "Z": ()}
    source = MemorySource(parents)
    got = answer(source, "C2", ["H", "X", "C2", "M1", "Z", "gone", "I2"])
    assert got == {
        "H": Divergence("advanced", 5, 0),
        "X": Divergence("diverged", 5, 1),
        "C2": Divergence("current", 0, 0),
        "M1": Divergence("advanced", 5, 0),
        "Z": Divergence("unrelated", 8, 1),
        "gone": Divergence("missing", None, None),
        "I2": Divergence("advanced", 3, 0),
    }
    assert answer(MemorySource(parents), "H", ["C2"]) == {"C2": Divergence("behind", 0, 5)}


def test_many_labels_take_one_walk_and_one_more_for_commits_off_the_revision() -> None:
    rng = random.Random(7)
    parents = random_dag(rng, 300)
    source = MemorySource(parents)
    handovers = rng.sample(sorted(parents), 120)
    graph = CommitGraph(source, None)
    got = graph.labels("c299", handovers)
    assert got == {h: true_label(parents, h, "c299") for h in handovers}
    assert len(source.walks) <= 2 and source.counts == 0
    assert graph.walks == len(source.walks)


def test_order_and_labels_of_one_command_share_the_walk() -> None:
    parents = random_dag(random.Random(3), 80)
    source = MemorySource(parents)
    graph = CommitGraph(source, None)
    order = graph.order("c079", list(parents))
    graph.labels("c079", [c for c in parents if c in order][:2])
    assert len(source.walks) == 1 and source.counts == 0


def test_a_switch_to_an_older_commit_is_carried_along_chains_read_only_to_where_they_meet(
    tmp_path: Path,
) -> None:
    """A line of 100 commits, the order of its tip kept; a new commit on the commit thirty
    below it (a branch switch): its order is the kept one carried along the two chains of
    single-parent commits, with no walk, and the tip's chain is read only down to where it
    meets the new commit's (30 parents, not 63)."""
    parents: dict[str, tuple[str, ...]] = {"c000": ()}
    parents.update({f"c{i:03d}": (f"c{i - 1:03d}",) for i in range(1, 100)})
    parents["fix"] = ("c069",)
    source = MemorySource(parents)
    CommitGraph(source, GraphCache(tmp_path / "graph")).order("c099", list(parents))
    walks, source.parents_asked = len(source.walks), 0
    order = CommitGraph(source, GraphCache(tmp_path / "graph")).order("fix", list(parents))
    assert order == {line[0]: rank for rank, line in enumerate(source.walk(["fix"], []))}
    assert len(source.walks) == walks + 1  # the walk just above, for the expected answer
    assert source.parents_asked == 63 + 30  # the new commit's chain, the tip's down to c069


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 70), st.floats(0.0, 0.6))
def test_labels_equal_brute_force_on_random_histories(seed: int, size: int, merges: float) -> None:
    rng = random.Random(seed)
    parents = random_dag(rng, size, merges)
    commits = sorted(parents)
    rev = rng.choice(commits)
    handovers = rng.sample(commits, min(len(commits), rng.randrange(1, 12)))
    source = MemorySource(parents)
    lines = source.walk([rev, *handovers], [])
    got = labels_of(lines, rev, handovers)
    assert got == [true_label(parents, h, rev) for h in handovers]


def shallow_case(
    rng: random.Random, size: int, merges: float
) -> tuple[dict[str, tuple[str, ...]], MemorySource, str, list[str]]:
    """A random history and a random shallow cut of it, holding REV and some other tips."""
    parents = random_dag(rng, size, merges)
    commits = sorted(parents)
    rev = rng.choice(commits)
    tips = [rev, *rng.sample(commits, rng.randrange(0, 3))]
    boundary = {c for c in commits if parents[c] and rng.random() < 0.15}
    present: set[str] = set()
    stack = list(tips)
    while stack:
        commit = stack.pop()
        if commit not in present:
            present.add(commit)
            if commit not in boundary:
                stack.extend(parents[commit])
    source = MemorySource(parents, boundary, present)
    handovers = rng.sample(commits, min(len(commits), rng.randrange(1, 10)))
    return parents, source, rev, handovers


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 60), st.floats(0.0, 0.6))
def test_a_shallow_cut_answers_exactly_or_unknown(seed: int, size: int, merges: float) -> None:
    parents, source, rev, handovers = shallow_case(random.Random(seed), size, merges)
    got = answer(source, rev, handovers)
    for handover in handovers:
        if not source.has_commit(handover) and not source.shallow_boundary():
            # a complete clone of fewer branches: the commit is simply not here
            assert got[handover] == Divergence("missing", None, None)
        elif got[handover] != UNKNOWN:
            assert got[handover] == true_label(parents, handover, rev), handover


def test_the_shallow_rule_is_not_blind() -> None:
    """Where the cut graph happens to give the true answer, the rule mostly trusts it."""
    exact = doubted = 0
    for seed in range(300):
        parents, source, rev, handovers = shallow_case(random.Random(seed), 40, 0.2)
        if not source.shallow_boundary():
            continue
        here = [h for h in handovers if source.has_commit(h)]
        naive = labels_of(source.walk([rev, *here], []), rev, here)
        for handover, div in zip(here, naive, strict=True):
            if div == true_label(parents, handover, rev):
                got = answer(source, rev, [handover])[handover]
                exact += got == div
                doubted += got == UNKNOWN
    assert exact > 3 * doubted > 0


def test_a_commit_present_by_another_path_is_not_counted_twice() -> None:
    """The cut hides that `y` (here by a second path) is also below the handover."""
    parents = {
        "y": (),
        "m": ("y",),
        "b": ("m",),
        "H": ("b",),
        "P1": ("H",),
        "q": ("y",),
        "C": ("P1", "q"),
    }
    source = MemorySource(parents, boundary={"b"}, present={"y", "b", "H", "P1", "q", "C"})
    assert true_label(parents, "H", "C") == Divergence("advanced", 3, 0)
    assert answer(source, "C", ["H"]) == {"H": UNKNOWN}
    # Above the handover every counted commit descends from it: exact despite the cut.
    assert answer(source, "P1", ["H"]) == {"H": Divergence("advanced", 1, 0)}


def test_the_issue_history_cut_at_depth_four() -> None:
    parents = ISSUE_HISTORY
    assert answer(MemorySource(parents), "C2", ["H"]) == {"H": Divergence("advanced", 5, 0)}
    # What `git clone --depth 4 --no-single-branch` keeps: I1 is cut from H, yet H is
    # here (branch feature), so the cut is mended and the answer is exact.
    source = MemorySource(parents, boundary={"I1"})
    assert answer(source, "C2", ["H", "I2"]) == {
        "H": Divergence("advanced", 5, 0),
        "I2": Divergence("advanced", 3, 0),
    }
    # Without feature, H is not here: I1 stays cut, and what lies past it is unknown.
    source = MemorySource(parents, boundary={"I1"}, present=set(parents) - {"H"})
    # (M1, counted for I2, could as well be one of I1's hidden ancestors.)
    assert answer(source, "C2", ["A", "I2", "H"]) == {"A": UNKNOWN, "I2": UNKNOWN, "H": UNKNOWN}
    assert answer(source, "C2", ["C1", "I1"]) == {
        "C1": Divergence("advanced", 1, 0),
        "I1": UNKNOWN,
    }


def test_skewed_dates_still_count_in_topological_order() -> None:
    parents = {"a": (), "b": ("a",), "c": ("b",), "d": ("c", "a")}
    assert answer(MemorySource(parents, skewed=True), "d", ["b", "a", "c", "x"]) | {} == {
        "b": Divergence("advanced", 2, 0),
        "a": Divergence("advanced", 3, 0),
        "c": Divergence("advanced", 1, 0),
        "x": Divergence("missing", None, None),
    }


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 70), st.floats(0.0, 0.6), st.booleans())
def test_labels_read_line_by_line_equal_brute_force(
    seed: int, size: int, merges: float, skewed: bool
) -> None:
    """The labels of many handovers, from a walk never held whole (dates out of order too:
    the walk is then made again in topological order)."""
    rng = random.Random(seed)
    parents = random_dag(rng, size, merges)
    commits = sorted(parents)
    rev = rng.choice(commits)
    handovers = [*rng.sample(commits, min(len(commits), rng.randrange(4, 20))), "gone"]
    source = MemorySource(parents, skewed=skewed)
    graph = CommitGraph(source, None)
    assert graph.labels(rev, handovers) == {h: true_label(parents, h, rev) for h in handovers}
    assert graph.walks == len(source.walks) <= (2 if skewed else 1)


def _tally_bit_by_bit(masks: dict[int, int], targets: int) -> tuple[list[int], ...]:
    """`tally` by its definition: every bit of every mask counted on its own."""
    only_target, both = [0] * targets, [0] * targets
    for mask, many in masks.items():
        for bit in range(targets):
            if mask >> (bit + 1) & 1:
                (both if mask & 1 else only_target)[bit] += many
    rev_total = sum(many for mask, many in masks.items() if mask & 1)
    return [rev_total - b for b in both], only_target, both


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_counts_of_nested_masks_and_any_others_equal_their_definition(data: st.DataObject) -> None:
    """Along few merges the masks of a walk nest (counted bit by bit where each first
    appears); any others are counted bit by bit: both give the definition's counts."""
    targets = data.draw(st.integers(1, 40))
    bits = data.draw(st.permutations(range(targets)))
    masks: dict[int, int] = {}
    mask = data.draw(st.sampled_from([0, 1]))
    for bit in bits[: data.draw(st.integers(0, targets))]:  # a chain, each holding the last
        mask |= 1 << (bit + 1)
        masks[mask] = data.draw(st.integers(1, 1000))
    for other in data.draw(st.lists(st.integers(0, 2 ** (targets + 1) - 1), max_size=3)):
        masks[other] = data.draw(st.integers(1, 1000))  # masks that may break the chain
    assert tally(masks, targets) == _tally_bit_by_bit(masks, targets)


def test_answers_are_kept_at_once_and_labels_carried_along_a_switch_are_true(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each answer is kept at once (a command may stop right after it asked): an order,
    then the labels that follow it; after a switch to a new commit on an older one, the
    labels carried along the two chains are the true ones, and a second look reads them
    from the file, without a walk."""
    parents: dict[str, tuple[str, ...]] = {"c000": ()}
    parents.update({f"c{i:03d}": (f"c{i - 1:03d}",) for i in range(1, 100)})
    parents["fix"] = ("c069",)
    source = MemorySource(parents)
    writes: list[int] = []
    write = GraphCache.write

    def counted(self: GraphCache, *payload: object) -> bool:
        writes.append(len(payload))
        return write(self, *payload)

    monkeypatch.setattr(GraphCache, "write", counted)
    CommitGraph(source, GraphCache(tmp_path / "graph")).order("c099", list(parents))
    assert len(writes) == 1
    handovers = ["c010", "c069", "c080", "c099", "fix"]
    writes.clear()
    graph = CommitGraph(source, GraphCache(tmp_path / "graph"))
    graph.expect_labels("fix", handovers)
    graph.order("fix", list(parents))
    assert len(writes) == 1
    found = graph.labels("fix", handovers)
    assert len(writes) == 2
    assert found == {h: true_label(parents, h, "fix") for h in handovers}
    walks = len(source.walks)
    again = CommitGraph(source, GraphCache(tmp_path / "graph")).labels("fix", handovers)
    assert again == found and len(source.walks) == walks


def test_labels_kept_or_carried_for_commits_pruned_since_are_missing(tmp_path: Path) -> None:
    """A branch deleted and pruned after its labels were kept: every label kept for one of
    its commits is `missing`, as brute force over what is left says, the others as kept
    (one look for the presence of all those off the revision's history); and after a
    switch the same: what the chains carry was read on them, and the two that carry
    nothing (their commits are gone) are counted after one look for both (a look each,
    once; libgit2 loaded for it in a first `resume --peek`)."""
    parents: dict[str, tuple[str, ...]] = {"c000": ()}
    parents.update({f"c{i:03d}": (f"c{i - 1:03d}",) for i in range(1, 60)})
    parents.update({f"feat{i}": (f"feat{i - 1}" if i else "c050",) for i in range(10)})
    parents["fix"] = ("c050",)
    handovers = ["c010", "c055", "feat3", "feat9", "c059"]
    path = tmp_path / "graph"
    # Kept: labels from the feature's head, then from main's head.
    for rev in ("feat9", "c059"):
        graph = CommitGraph(MemorySource(parents), GraphCache(path))
        graph.labels(rev, handovers)
    pruned = {c: ps for c, ps in parents.items() if not c.startswith("feat")}
    source = MemorySource(parents, present=pruned)
    for rev, looks in (("c059", 1), ("fix", 1)):
        source.presence_asked = 0
        found = CommitGraph(source, GraphCache(path)).labels(rev, handovers)
        assert found == {h: true_label(pruned, h, rev) for h in handovers}, rev
        assert [h for h, div in found.items() if div.label == "missing"] == ["feat3", "feat9"]
        assert source.presence_asked == looks, rev


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 70), st.floats(0.0, 0.6), st.data())
def test_a_walk_counted_in_blocks_equals_its_definition(
    seed: int, size: int, merges: float, data: st.DataObject
) -> None:
    """`counted_walk` over a walk cut into blocks anywhere between lines: the rank of each
    commit looked for is its line, and the commits carrying each mask are those whose
    set of REV and targets reaching them is that mask, counted by brute force."""
    rng = random.Random(seed)
    _check_counted_walk(rng, random_dag(rng, size, merges), data)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 90), st.integers(0, 4), st.data())
def test_a_walk_of_chains_counted_in_runs_equals_its_definition(
    seed: int, size: int, forks: int, data: st.DataObject
) -> None:
    """The same over histories made mostly of chains (a linear history, branches merged
    back, a second root), with ids as long as git's and runs of a few lines: a run that
    is a chain is told at once, the others line by line, and a run may start or end
    anywhere in a block, at a merge, a fork, a root or the walk's end."""
    rng = random.Random(seed)
    names = [hashlib.sha1(f"{seed} {i}".encode()).hexdigest() for i in range(size)]
    parents: dict[str, tuple[str, ...]] = {names[0]: ()}
    starts = set(rng.sample(range(1, size), min(size - 1, forks)))
    for i in range(1, size):
        if i in starts and rng.random() < 0.3:
            parents[names[i]] = ()  # another root
        elif i in starts:
            parents[names[i]] = (names[rng.randrange(0, i)],)  # a branch off an older commit
        elif rng.random() < 0.05 and i > 2:
            parents[names[i]] = (names[i - 1], names[rng.randrange(0, i - 1)])  # a merge
        else:
            parents[names[i]] = (names[i - 1],)
    _check_counted_walk(rng, parents, data, window=data.draw(st.integers(1, 6)))


def _check_counted_walk(
    rng: random.Random,
    parents: dict[str, tuple[str, ...]],
    data: st.DataObject,
    window: int | None = None,
) -> None:
    commits = sorted(parents)
    rev = rng.choice(commits)
    targets = rng.sample(commits, min(len(commits), rng.randrange(0, 8)))
    lines = MemorySource(parents).walk([rev, *targets], [])
    text = [(" ".join(line) + "\n").encode() for line in lines]
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=6)))
    blocks = [b"".join(text[a:b]) for a, b in pairwise([0, *cuts, len(text)]) if a < b]
    wanted = set(rng.sample(commits, min(len(commits), 5)))
    if window is None:
        walk = counted_walk(iter(blocks), rev, targets, wanted)
    else:
        walk = counted_walk(iter(blocks), rev, targets, wanted, window=window)

    def reaches(tip: str) -> set[str]:
        found, stack = set(), [tip]
        while stack:
            commit = stack.pop()
            if commit not in found:
                found.add(commit)
                stack.extend(parents[commit])
        return found

    reach = [reaches(tip) for tip in (rev, *targets)]
    expected: Counter[int] = Counter()
    for line in lines:
        expected[sum(1 << bit for bit, found in enumerate(reach) if line[0] in found)] += 1
    assert walk.ranks == {line[0]: i for i, line in enumerate(lines) if line[0] in wanted}
    walked = {line[0] for line in lines}
    assert walk.listed == ({rev, *targets} & walked if targets else set())
    if targets:
        assert walk.masks == dict(expected)
    else:
        assert walk.masks is None
    skewed = counted_walk(iter([b"".join(reversed(text))]), rev, targets)
    if targets and any(len(line) > 1 for line in lines):
        assert skewed.masks is None  # a parent listed before its child: walk again in order
