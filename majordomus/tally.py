"""The tally of a walk: in one pass over its lines, how many commits REV and each target
reach alone and together, counted by the set of them each commit is an ancestor of (a
bit mask)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import NamedTuple

Line = Sequence[str]  # a commit id followed by its parents' ids, as `git rev-list --parents`
WALK_KEEP = 120_000  # lines of a walk kept in memory for a second question (about 30 MB)
Counts = tuple[list[int], list[int], list[int], list[int], dict[str, int]]


def count(lines: Sequence[Line], rev: str, targets: Sequence[str]) -> Counts | None:
    """For each target T: (ancestors of REV only, of T only, of both), the bit mask of what
    each line reaches and each commit's line, from one pass over the lines; None when
    they are not in topological order (children first), which skewed dates can cause.

    Each commit carries the set of (REV and the targets) it is an ancestor of, as bits;
    commits with the same set are counted together, so the cost is one pass plus the
    distinct sets, however many targets there are.
    """
    index = {line[0]: i for i, line in enumerate(lines)}
    masks = [0] * len(lines)
    for bit, commit in enumerate((rev, *targets)):
        if commit in index:
            masks[index[commit]] |= 1 << bit
    for i, line in enumerate(lines):
        mask = masks[i]
        for parent in line[1:]:
            j = index.get(parent)
            if j is not None:
                if j < i:
                    return None
                masks[j] |= mask
    only_rev, only_target, both = tally(Counter(masks), len(targets))
    return only_rev, only_target, both, masks, index


def tally(masks: Mapping[int, int], targets: int) -> tuple[list[int], list[int], list[int]]:
    """From how many commits carry each mask (bit 0: REV reaches it; bit i+1: target i
    does): per target, the commits REV reaches only, the target only, and both."""
    only_target = [0] * targets
    both = [0] * targets
    rev_total = sum(many for mask, many in masks.items() if mask & 1)
    for in_rev, into in ((1, both), (0, only_target)):
        _add_bits({m >> 1: n for m, n in masks.items() if m & 1 == in_rev}, into)
    only_rev = [rev_total - both[i] for i in range(targets)]
    return only_rev, only_target, both


def _add_bits(masks: Mapping[int, int], into: list[int]) -> None:
    """Add how many commits carry each mask to each bit of the mask. Along a history
    with few merges the masks nest (each one holds the one before, less crowded): each
    bit is then counted once, where it first appears, with the commits of every mask
    from there on, not once per mask that holds it (a thousand handovers would cost half
    a million steps); masks that do not nest are counted bit by bit."""
    chain = sorted(masks.items(), key=lambda item: item[0].bit_count())
    if all(a & ~b == 0 for (a, _), (b, _) in pairwise(chain)):
        after = sum(many for _, many in chain)  # the commits of this mask and every later one
        previous = 0
        for mask, many in chain:
            _each_bit(mask & ~previous, after, into)
            after -= many
            previous = mask
        return
    for mask, many in masks.items():
        _each_bit(mask, many, into)


def _each_bit(mask: int, many: int, into: list[int]) -> None:
    while mask:
        low = mask & -mask
        into[low.bit_length() - 1] += many
        mask ^= low


class CountedWalk(NamedTuple):
    ranks: dict[str, int]  # the commits looked for, by their place in the walk
    kept: list[Line] | None  # its lines, while there are at most WALK_KEEP (when asked)
    # The commits carrying each mask, as `tally` takes them; None when a parent came before
    # a child (dates out of order) or never came (a cut graph): the caller then walks
    # again in topological order.
    masks: dict[int, int] | None
    listed: set[str]  # the targets the walk listed


def counted_walk(
    lines: Iterator[list[str]],
    rev: str,
    targets: Sequence[str],
    wanted: Collection[str] = frozenset(),
    keep: bool = False,
) -> CountedWalk:
    """One pass over a walk's lines: the rank of each commit `wanted`, the lines kept
    (`keep`), and for `targets` the commits carrying each mask of `count`, counted in runs
    (along a chain the mask rarely changes). A mask is whole when its commit's line comes
    (all its children came before): only the masks owed to parents not yet listed are held."""
    counting = bool(targets)
    bits: dict[str, int] = {rev: 1}
    for i, target in enumerate(targets):
        bits[target] = bits.get(target, 0) | 1 << (i + 1)
    owed: dict[str, int] = {}
    masks: dict[int, int] = {}
    current, run = 0, 0
    listed: set[str] = set()
    ranks: dict[str, int] = {}
    kept: list[Line] | None = [] if keep else None
    # A commit kept is named by one string, its child's and its own line's: most lines
    # kept then hold one new string, not two (a third of the memory of a long walk).
    named: dict[str, str] = {}
    for rank, line in enumerate(lines):
        commit = line[0]
        if kept is not None:
            same = named.pop(commit, None)
            if same is not None:
                line[0] = commit = same
            if len(line) == 2:  # one parent: most commits
                named[line[1]] = line[1]
            kept.append(line)
            if len(kept) > WALK_KEEP:
                kept, named = None, {}
        if commit in wanted:
            ranks[commit] = rank
        if not counting:
            continue
        mask = owed.pop(commit, 0)
        bit = bits.get(commit)
        if bit is not None:
            mask |= bit
            listed.add(commit)
        if mask != current:
            if run:
                masks[current] = masks.get(current, 0) + run
            current, run = mask, 0
        run += 1
        if len(line) == 2:  # one parent: most commits
            parent = line[1]
            owed[parent] = owed.get(parent, 0) | mask
        else:
            for parent in line[1:]:
                owed[parent] = owed.get(parent, 0) | mask
    if run:
        masks[current] = masks.get(current, 0) + run
    return CountedWalk(ranks, kept, None if owed or not counting else masks, listed)
