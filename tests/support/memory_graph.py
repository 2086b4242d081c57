"""Commit graphs in memory for the graph tests: a `graph.Source` over a dict of parents,
optionally cut the way a shallow clone cuts it, and the answers computed by brute force."""

from __future__ import annotations

import contextlib
import functools
import random
from collections.abc import Collection, Iterator, Mapping, Sequence

from majordomus.records import Divergence


class MemorySource:
    """A `graph.Source` over `parents` (child -> parents); `boundary` commits are shallow:
    their parents are left out of every walk, as git leaves them out of a shallow clone's."""

    def __init__(
        self,
        parents: Mapping[str, tuple[str, ...]],
        boundary: Collection[str] = frozenset(),
        present: Collection[str] | None = None,
        skewed: bool = False,
    ) -> None:
        self.parents_of = dict(parents)
        self.skewed = skewed  # walks list parents before children, as skewed clocks can
        self.boundary = frozenset(boundary)
        self.present = set(parents) if present is None else set(present)
        self.cut = {
            c: () if c in self.boundary else tuple(p for p in ps if p in self.present)
            for c, ps in parents.items()
            if c in self.present
        }
        self.walks: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        self.counts = 0
        self.parents_asked = 0
        self.presence_asked = 0

    def _reach(self, tips: Sequence[str]) -> set[str]:
        seen: set[str] = set()
        stack = [t for t in tips if t in self.cut]
        while stack:
            commit = stack.pop()
            if commit not in seen:
                seen.add(commit)
                stack.extend(self.cut[commit])
        return seen

    def walk(self, tips: Sequence[str], hide: Sequence[str]) -> list[list[str]]:
        lines = self._ordered(tips, hide)
        return lines[::-1] if self.skewed else lines

    def _ordered(self, tips: Sequence[str], hide: Sequence[str]) -> list[list[str]]:
        """Children before parents, always."""
        self.walks.append((tuple(tips), tuple(hide)))
        wanted = self._reach(tips) - self._reach(hide)
        # children first: a depth-first post-order, reversed
        order: list[str] = []
        done: set[str] = set()
        for tip in tips:
            stack: list[tuple[str, bool]] = [(tip, False)]
            while stack:
                commit, expanded = stack.pop()
                if commit not in wanted or (commit in done and not expanded):
                    continue
                if expanded:
                    order.append(commit)
                    continue
                done.add(commit)
                stack.append((commit, True))
                stack.extend((p, False) for p in self.cut[commit] if p not in done)
        order.reverse()
        return [[c, *self.cut[c]] for c in order]

    def stream(self, tips: Sequence[str], topo: bool) -> Iterator[bytes]:
        """`walk`, as git writes it: in blocks of a few whole lines; children before parents
        when `topo`, skewed or not."""
        lines = self._ordered(tips, []) if topo else self.walk(tips, [])
        for start in range(0, len(lines), 3):
            yield "".join(" ".join(line) + "\n" for line in lines[start : start + 3]).encode()

    def start_stream(self, tips: Sequence[str]) -> None:
        """Nothing to start ahead: an in-memory graph answers at once."""

    def parents(self, commit: str) -> tuple[str, ...] | None:
        self.parents_asked += 1
        return self.cut.get(commit)

    def reading(self) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()

    def has_commit(self, commit: str) -> bool:
        self.presence_asked += 1
        return commit in self.cut

    def commits_here(self, ids: Collection[str]) -> set[str]:
        self.presence_asked += 1
        return {commit for commit in ids if commit in self.cut}

    def true_parents(self, commit: str) -> tuple[str, ...] | None:
        return self.parents_of[commit] if commit in self.cut else None

    def shallow_boundary(self) -> frozenset[str]:
        return self.boundary & frozenset(self.cut)

    def history_replaced(self) -> bool:
        return False

    def ahead_behind(self, commit: str, base: str) -> tuple[int, int]:
        self.counts += 1
        mine, theirs = self._reach([commit]), self._reach([base])
        return len(mine - theirs), len(theirs - mine)

    def merge_base(self, a: str, b: str) -> str | None:
        self.counts += 1
        common = self._reach([a]) & self._reach([b])
        return min(common) if common else None


def random_dag(
    rng: random.Random, size: int, merge_rate: float = 0.3
) -> dict[str, tuple[str, ...]]:
    """Commits c00..: each with one parent among the recent ones, some with two, a few roots."""
    parents: dict[str, tuple[str, ...]] = {}
    names = [f"c{i:03d}" for i in range(size)]
    for i, name in enumerate(names):
        if i == 0 or rng.random() < 0.04:
            parents[name] = ()
            continue
        first = names[rng.randrange(max(0, i - 6), i)]
        if i > 2 and rng.random() < merge_rate:
            second = names[rng.randrange(0, i)]
            parents[name] = (first, second) if second != first else (first,)
        else:
            parents[name] = (first,)
    return parents


def true_label(parents: Mapping[str, tuple[str, ...]], handover: str, rev: str) -> Divergence:
    """The label by brute force over whole ancestor sets."""

    @functools.cache
    def ancestors(commit: str) -> frozenset[str]:
        found = {commit}
        for parent in parents[commit]:
            found |= ancestors(parent)
        return frozenset(found)

    if handover == rev:
        return Divergence("current", 0, 0)
    if handover not in parents:
        return Divergence("missing", None, None)
    mine, theirs = ancestors(rev), ancestors(handover)
    ahead, behind = len(mine - theirs), len(theirs - mine)
    if behind == 0:
        return Divergence("advanced", ahead, 0)
    if ahead == 0:
        return Divergence("behind", 0, behind)
    return Divergence("diverged" if mine & theirs else "unrelated", ahead, behind)
