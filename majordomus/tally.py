"""The tally of a walk: in one pass over its lines, how many commits REV and each target
reach alone and together, counted by the set of them each commit is an ancestor of (a
bit mask)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import pairwise
from typing import NamedTuple

Line = Sequence[str]  # a commit id followed by its parents' ids, as `git rev-list --parents`
WALK_KEEP = 120_000  # lines of a walk kept in memory for a second question (about 30 MB)
CHAIN_WINDOW = 1024  # lines told to be a chain at once: a merge costs the lines of its window
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


def counted_walk(
    blocks: Iterable[bytes],
    rev: str,
    targets: Sequence[str],
    wanted: Collection[str] = frozenset(),
    keep: bool = False,
    window: int | None = None,
) -> CountedWalk:
    """One pass over a walk as git writes it (blocks of whole lines of `git rev-list
    --parents`): the rank of each commit `wanted`, the blocks kept (`keep`, while the walk
    has at most WALK_KEEP lines), and for `targets` the commits carrying each mask of
    `count`, counted in runs (along a chain the mask rarely changes). A mask is whole when
    its commit's line comes (all its children came before): only the masks owed to
    parents not yet listed are held.

    No line is split into a list and no commit's mask is looked up where nothing can
    change it: a line whose one parent is the next line's commit (a chain, as most of a
    walk is) hands its mask on to that line. Runs of `window` lines that are all such
    links are told by a few operations on their bytes, in C (a linear history is one
    run); elsewhere only the lines where a mask can change are visited: a commit that is
    REV or a target, a parent named by a line that is not such a link (a merge, a
    branch's last commit, a root), and the line after one of those. (`window`: CHAIN_WINDOW
    unless given.)"""
    window = CHAIN_WINDOW if window is None else window
    counting = bool(targets)
    bits: dict[bytes, int] = {rev.encode(): 1}
    for i, target in enumerate(targets):
        key = target.encode()
        bits[key] = bits.get(key, 0) | 1 << (i + 1)
    wanted_ids = {commit.encode() for commit in wanted}
    walk = _BlockWalk(bits, wanted_ids, counting)
    kept: list[bytes] | None = [] if keep else None
    pending = b""  # the last line so far: which links to it is told by the next
    for block in blocks:
        if kept is not None:
            kept.append(block)
        if not block:
            continue
        if pending:
            walk.add([pending], _first_id(block, 0))
        last = block.rfind(b"\n", 0, len(block) - 1) + 1  # where the block's last line starts
        if last:
            walk.part(block, last, _first_id(block, last), window)
        pending = block[last:].rstrip(b"\n")
        if kept is not None and walk.offset > WALK_KEEP:
            kept = None
    if pending:
        walk.add([pending], None)
    masks = None if walk.owed or not counting else walk.masks
    ranks = {commit.decode(): rank for commit, rank in walk.ranks.items()}
    listed = {commit.decode() for commit in walk.listed}
    return CountedWalk(ranks, kept, masks, listed)


def _first_id(block: bytes, start: int) -> bytes:
    """The first id of the line that starts at `start`."""
    end = block.find(b"\n", start)
    return block[start : end if end >= 0 else len(block)].partition(b" ")[0]


class CountedWalk(NamedTuple):
    ranks: dict[str, int]  # the commits looked for, by their place in the walk
    kept: list[bytes] | None  # the blocks of the walk, while it has at most WALK_KEEP lines
    # The commits carrying each mask, as `tally` takes them; None when a parent came before
    # a child (dates out of order) or never came (a cut graph): the caller then walks
    # again in topological order.
    masks: dict[int, int] | None
    listed: set[str]  # the targets the walk listed


class _BlockWalk:
    """The state of `counted_blocks` from one part of the walk to the next."""

    def __init__(self, bits: dict[bytes, int], wanted: set[bytes], counting: bool) -> None:
        self.bits, self.wanted, self.counting = bits, wanted, counting
        self.named: set[bytes] = set(bits)  # commits whose mask may change on their line
        self.owed: dict[bytes, int] = {}
        self.masks: dict[int, int] = {}
        self.ranks: dict[bytes, int] = {}
        self.listed: set[bytes] = set()
        self.offset = 0  # lines before this part
        self.carried = 0  # the mask the last line handed on, when it links to the next
        self.links = False  # whether the last line of the last part links to this one

    def part(self, block: bytes, end: int, after: bytes, window: int) -> None:
        """The whole lines of a block up to `end`, and the commit of the line after them: in
        runs of `window` lines, each run told as a chain (`_chain`) when it is one, else
        line by line (`add`)."""
        width = len(_first_id(block, 0))  # an id's length
        step = 2 * width + 2  # a line of a chain: an id, a space, its parent's, a newline
        start = 0
        while start < end:
            stop = start + window * step
            if stop < end:
                cut = block.rfind(b"\n", start, stop) + 1
                stop = cut if cut > start else block.index(b"\n", start) + 1
            else:
                stop = end
            run = block[start:stop]
            nxt = after if stop == end else _first_id(block, stop)
            if not self._chain(run, width, nxt):
                lines = run.split(b"\n")
                lines.pop()  # after the last newline: nothing
                self.add(lines, nxt)
            start = stop

    def _chain(self, run: bytes, width: int, after: bytes) -> bool:
        """Whether these whole lines are a chain, each commit's one parent the next line's
        commit (the last's, `after`), every id `width` bytes long; told in C, and then
        taken in as one (`chain`)."""
        step = 2 * width + 2
        lines = len(run) // step
        if (
            len(run) != lines * step
            or run[width::step] != b" " * lines
            or run[step - 1 :: step] != b"\n" * lines
        ):
            return False
        ids = run.split()
        if len(ids) != 2 * lines or ids[-1] != after or ids[1:-1:2] != ids[2::2]:
            return False
        self.chain(ids[::2])
        return True

    def chain(self, commits: list[bytes]) -> None:
        """A part of the walk each line of which links to the next: its commits' ranks, and
        the mask handed down it, changed only at the commits `named` (and at the first
        line, when the line before it does not link to it)."""
        offset = self.offset
        wanted = self.wanted.intersection(commits) if self.wanted else ()
        named = self.named.intersection(commits) if self.counting else ()
        # Where a commit lies: asked of the list for a few (each look scans half a window,
        # a map of the window costs some twelve looks), of a map for more.
        where = (
            commits.index
            if len(wanted) + len(named) < 12
            else {commit: n for n, commit in enumerate(commits)}.__getitem__
        )
        for commit in wanted:
            self.ranks[commit] = offset + where(commit)
        if self.counting:
            visit = sorted(map(where, named))
            if not self.links and (not visit or visit[0]):
                visit.insert(0, 0)
            masks, visited = self.masks, self._visited
            current = self.carried if self.links else 0
            last = -1
            for i in visit:
                between = i - last - 1  # linked lines between two visits: each hands its mask on
                if between:
                    masks[current] = masks.get(current, 0) + between
                current, last = visited(commits[i], current), i
            between = len(commits) - last - 1
            if between:
                masks[current] = masks.get(current, 0) + between
            self.carried, self.links = current, True
        self.offset += len(commits)

    def add(self, lines: list[bytes], after: bytes | None) -> None:
        """A part of the walk, and the line after it (None: the end of the walk)."""
        if not lines:
            return
        split = [line.partition(b" ") for line in lines]
        commits = [commit for commit, _, _ in split]
        if self.wanted:
            offset = self.offset
            for rank, commit in enumerate(commits):
                if commit in self.wanted:
                    self.ranks[commit] = offset + rank
        if self.counting:
            self._count(split, commits, after)
        self.offset += len(lines)

    def _count(
        self, split: list[tuple[bytes, bytes, bytes]], commits: list[bytes], after: bytes | None
    ) -> None:
        nexts = [*commits[1:], None if after is None else after.partition(b" ")[0]]
        links = [
            parents == nxt and b" " not in parents
            for (_, _, parents), nxt in zip(split, nexts, strict=True)
        ]
        named = self.named
        for (_, _, parents), linked in zip(split, links, strict=True):
            if not linked:
                named.update(parents.split())
        visit = [
            i
            for i, commit in enumerate(commits)
            if commit in named or not links[i] or (not links[i - 1] if i else not self.links)
        ]
        owed, masks, visited = self.owed, self.masks, self._visited
        current = self.carried if self.links else 0
        last = -1
        for i in visit:
            between = i - last - 1  # linked lines between two visits: each hands its mask on
            if between:
                masks[current] = masks.get(current, 0) + between
            mask = visited(commits[i], current if (links[i - 1] if i else self.links) else 0)
            if not links[i]:
                for parent in split[i][2].split():
                    owed[parent] = owed.get(parent, 0) | mask
            current, last = mask, i
        between = len(commits) - last - 1
        if between:
            masks[current] = masks.get(current, 0) + between
        self.carried, self.links = current, links[-1]

    def _visited(self, commit: bytes, reached: int) -> int:
        """The mask of a line visited: what reached it from the line before, what its
        children owe it, and its own bit (a target listed); counted once."""
        mask = reached | self.owed.pop(commit, 0)
        bit = self.bits.get(commit)
        if bit is not None:
            mask |= bit
            self.listed.add(commit)
        self.masks[mask] = self.masks.get(mask, 0) + 1
        return mask
