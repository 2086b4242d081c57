"""Two chains of single-parent commits that meet at a commit P, above which each is the
whole difference between its revision's history and P's; and an order kept for one of
the two revisions, carried along them to the other."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence, Set
from typing import NamedTuple

Reach = tuple[dict[str, int], tuple[str, ...]]  # reachable commit -> rank, and checked others
CHAIN_MAX = 64  # how far back a revision is followed to an answer learned before


class Meeting(NamedTuple):
    """Two single-parent chains that meet (see `graph.CommitGraph._meetings`)."""

    up: list[str]  # from the revision asked about down to the meeting commit, exclusive
    down: list[str]  # from the kept revision down to the meeting commit, exclusive
    kept: str
    up_at: Mapping[str, int]  # each commit of `up` -> its place there (a label's look-up)
    down_at: Mapping[str, int]  # the same for `down`

    @classmethod
    def of(cls, up: list[str], down: list[str], kept: str) -> Meeting:
        return cls(
            up, down, kept, {c: n for n, c in enumerate(up)}, {c: n for n, c in enumerate(down)}
        )


def chain_of(
    rev: str,
    parents: Callable[[str], Sequence[str] | None],
    known: dict[str, list[str]],
    meets: Collection[str] = (),
) -> list[str]:
    """`rev` and its ancestors down a line of single-parent commits: each is the whole
    difference between one and the next (at most CHAIN_MAX of them); followed no further
    than the first commit of `meets` (where it meets another chain). `known`: the chains
    found before, by their revision (a chain cut at `meets` is not kept)."""
    chain = known.get(rev)
    if chain is None:
        chain = [rev]
        while len(chain) < CHAIN_MAX:
            if chain[-1] in meets:
                return chain  # not kept: a part of the chain
            up = parents(chain[-1])
            if up is None or len(up) != 1:
                break
            chain.append(up[0])
        known[rev] = chain
    return chain


def carried_reach(
    rev: str,
    meeting: Meeting,
    kept: Reach,
    candidates: Collection[str],
    has_commit: Callable[[str], bool],
) -> Reach | None:
    """A kept reach carried along the chains; None when a candidate was not looked for
    (`has_commit`: whether a commit is here)."""
    up, down = meeting.up, meeting.down
    shift = len(up) - len(down)
    # The kept walk listed `down` first (ranks 0..t-1), then exactly the walk of the
    # commit where the chains meet; `rev`'s walk lists `up` first, then that walk.
    if up or down:
        ranks = {c: r + shift for c, r in kept[0].items() if r >= len(down)}
        ranks.update((c, r) for r, c in enumerate(up))
    else:  # `rev` itself: the kept ranks as they are, copied in C
        ranks = dict(kept[0])
    others = [c for c in kept[1] if c not in ranks]
    if down:
        others += [c for c, r in kept[0].items() if r < len(down) and c not in ranks]
    wanted = candidates if isinstance(candidates, Set) else set(candidates)
    if rev in wanted and rev not in ranks:
        ranks[rev] = 0  # the first commit of its own walk
    # Differences of sets, made in C: 100,000 candidates are checked in milliseconds.
    undecided = wanted - ranks.keys()
    if undecided and others:
        undecided -= set(others)
    for commit in sorted(undecided):
        if has_commit(commit):
            return None  # a commit the kept walk did not look for
        others.append(commit)
    return ranks, tuple(others)
