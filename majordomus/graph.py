"""The commit graph's answers: which commits a revision reaches, in what order, and how the
code moved between a handover's commit and that revision (divergence labels).

Every question of a command is answered for all its commits at once: from what an
earlier command learned (kept by commit ids only, which name immutable history), or
from one walk of the graph (two when some handovers sit off the revision's history),
never one git process per record. A shallow clone's cut graph is never remembered,
and a label read from it is exact or `unknown`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence, Set
from contextlib import AbstractContextManager
from typing import Protocol

from majordomus.chains import Meeting, Reach, carried_reach, chain_of
from majordomus.divergence import MISSING, Label, carried_label, from_counts, labels_of
from majordomus.records import Divergence
from majordomus.tally import Line, counted_walk, tally

FEW_LABELS = 3  # up to this many labels, one bounded git count each beats a whole walk


class Source(Protocol):
    """What the graph needs from a repository (the store; an in-memory graph in tests)."""

    def walk(self, tips: Sequence[str], hide: Sequence[str]) -> Sequence[Line]:
        """Commits reachable from `tips` and not from `hide`, in `git rev-list` order, each
        with its parents (none for a shallow boundary commit)."""
        ...

    def stream(self, tips: Sequence[str], topo: bool) -> Iterator[bytes]:
        """`walk(tips, [])` as git writes it, in blocks of whole lines (`git rev-list
        --parents`: each commit's id and its parents', a space between, a line each), never
        held whole (a walk of a million commits is eighty megabytes); `topo`: children
        always before their parents (`--topo-order`)."""
        ...

    def start_stream(self, tips: Sequence[str]) -> None:
        """Start `stream(tips, topo=False)` ahead of need, in the background, if it can."""
        ...

    def parents(self, commit: str) -> tuple[str, ...] | None:
        """The parents as a walk sees them; None when the commit is not here."""
        ...

    def true_parents(self, commit: str) -> tuple[str, ...] | None:
        """The parents the commit object names, even those a shallow clone cut off."""
        ...

    def reading(self) -> AbstractContextManager[object]:
        """A block within which `parents` is asked of many commits in a row (a chain)."""
        ...

    def has_commit(self, commit: str) -> bool: ...

    def commits_here(self, ids: Collection[str]) -> set[str]:
        """Which of these ids name a commit here (one look for many)."""
        ...

    def shallow_boundary(self) -> frozenset[str]:
        """The commits whose parents a shallow clone left out; empty in a complete clone."""
        ...

    def history_replaced(self) -> bool:
        """Whether git reads the history through replacements (replace refs, grafts): they
        change what a commit's history is without changing its id."""
        ...

    def ahead_behind(self, commit: str, base: str) -> tuple[int, int]:
        """(commits reachable from `commit` only, commits reachable from `base` only)."""
        ...

    def merge_base(self, a: str, b: str) -> str | None: ...


class Memory(Protocol):
    """Answers kept between commands, keyed by commit ids only."""

    def reach(self, rev: str) -> Reach | None: ...

    def put_reach(self, rev: str, reach: Reach) -> None: ...

    def label(self, handover: str, rev: str) -> Label | None: ...

    def put_label(self, handover: str, rev: str, label: Label) -> None: ...

    def kept(self) -> Sequence[str]:
        """The revisions answers are kept for, most recently used first."""
        ...

    def save(self) -> None:
        """Keep what was put since the last save (nothing to do when nothing was)."""
        ...


class Walked:
    """The part of the graph one command walked: everything REV reaches (in `git rev-list
    REV` order) and, when asked for, what other commits reach beyond it."""

    def __init__(self, rev: str, lines: Sequence[Line] = (), blocks: Sequence[bytes] = ()) -> None:
        """The walk's `lines`, or the `blocks` git wrote them in: split only when asked for
        (an order walk keeps them for a second question that seldom comes)."""
        self.rev = rev
        self._lines: list[Line] | None = list(lines) if lines or not blocks else None
        self._blocks = blocks
        self.extra: list[list[Line]] = []  # later walks, newest first
        self._known: set[str] | None = None

    @property
    def lines(self) -> list[Line]:
        if self._lines is None:
            text = b"".join(self._blocks).decode("utf-8", "replace")
            self._lines, self._blocks = [line.split() for line in text.splitlines()], ()
        return self._lines

    @property
    def known(self) -> set[str]:
        if self._known is None:
            self._known = {line[0] for line in self.lines}
        return self._known

    @functools.cached_property
    def rank(self) -> dict[str, int]:
        """Commit -> its place in REV's walk (only `order` asks: labels need none)."""
        return {line[0]: i for i, line in enumerate(self.lines)}

    def add(self, lines: Sequence[Line]) -> None:
        fresh = [line for line in lines if line[0] not in self.known]
        self.known.update(line[0] for line in fresh)
        self.extra.insert(0, fresh)

    def heal(self, parents: Mapping[str, tuple[str, ...]]) -> None:
        """Give these boundary commits back the parents the cut left out."""
        for walk in (self.lines, *self.extra):
            for i, line in enumerate(walk):
                if line[0] in parents:
                    walk[i] = [line[0], *parents[line[0]]]

    def all_lines(self) -> list[Line]:
        """Every line walked; children before parents when git listed each walk so."""
        return [line for walk in self.extra for line in walk] + self.lines

    def mended_ranks(self, candidates: Collection[str]) -> dict[str, int]:
        """In a shallow clone whose cut is mended (`heal`): candidates REV reaches only
        through the mended parents (git's walk does not list them), ranked after every
        commit it does list."""
        parents = {line[0]: line[1:] for line in self.all_lines()}
        beyond: dict[str, int] = {}
        stack = [p for line in self.lines for p in line[1:] if p not in self.rank]
        while stack:
            commit = stack.pop()
            if commit in beyond or commit in self.rank:
                continue
            beyond[commit] = len(self.lines) + len(beyond)
            stack.extend(reversed(parents.get(commit, ())))
        return {c: beyond[c] for c in candidates if c in beyond}


class CommitGraph:
    """Every history question of one command, answered from memory or by one walk."""

    def __init__(self, source: Source, memory: Memory | None) -> None:
        self.source = source
        self._boundary: frozenset[str] | None = None
        # Whether what a commit id reaches is fixed, so answers about history can be kept
        # between commands: not in a cut graph (a fetch deepens it), nor where git reads
        # the history through replacements (added and removed without a new commit).
        self.lasting = not self.boundary and not source.history_replaced()
        self.memory = memory if self.lasting else None
        self._walked: Walked | None = None
        self._chains: dict[str, list[str]] = {}
        self._meeting_cache: dict[str, list[Meeting]] = {}
        self._expected: tuple[str, tuple[str, ...]] | None = None
        self._told: dict[tuple[str, str], Divergence] = {}  # labels an order walk read
        self.walks = 0  # git walks made: what the tests hold to "one or a few"

    @property
    def boundary(self) -> frozenset[str]:
        if self._boundary is None:
            self._boundary = self.source.shallow_boundary()
        return self._boundary

    def _walk(self, rev: str) -> Walked:
        if self._walked is None or self._walked.rev != rev:
            self.walks += 1
            self._walked = Walked(rev, self.source.walk([rev], []))
        return self._walked

    # ---- reachability and order -------------------------------------------

    def order(self, rev: str, candidates: Collection[str]) -> dict[str, int]:
        """Which candidates `rev` reaches, each with its rank in `git rev-list REV`."""
        if not candidates:
            return {}  # no record anywhere: no walk (a million commits take a second)
        ranks = self._order(rev, candidates)
        # Kept at once, not with the labels that may follow: at 1,000,000 commits that one
        # write, made later, raised the peak of a first history by 15 MiB (to 200).
        self._keep()
        # An answer from memory ranks what was looked for then, and carried along a
        # chain it ranks the chain's commits too: only the candidates asked about now.
        wanted = candidates if isinstance(candidates, Set) else set(candidates)
        if ranks.keys() <= wanted:  # compared in C: at 1,000,000 commits, the usual answer
            return dict(ranks)
        return {commit: rank for commit, rank in ranks.items() if commit in wanted}

    def start_order(self, rev: str, worth: Callable[[], bool]) -> None:
        """The walk an order of `rev` will take started now, in the background, when it is
        sure to be taken: a complete clone where nothing is kept (a fresh clone, dropped
        caches), so no answer can come from memory, and `worth()` (asked only then) says
        there is something to order."""
        if self.boundary or (self.memory is not None and self.memory.kept()) or not worth():
            return
        self.source.start_stream([rev])

    def expect_labels(self, rev: str, handovers: Collection[str]) -> None:
        """The labels read from `rev` the command asks for after an order of `rev`: a walk
        made for that order reads the labels of the handovers on its history in the same
        pass (at a million commits, one walk of git's instead of two)."""
        self._expected = (rev, tuple(dict.fromkeys(handovers)))

    def labels(self, rev: str, handovers: Collection[str]) -> dict[str, Divergence]:
        """The label of each handover commit read from `rev`."""
        found = self._labels(rev, handovers)
        self._keep()
        return found

    def _keep(self) -> None:
        """What an answer added to memory, kept for the next command at once: no caller
        has to remember to (a command may stop right after it asked)."""
        if self.memory is not None:
            self.memory.save()

    def _order(self, rev: str, candidates: Collection[str]) -> dict[str, int]:
        reach = self._kept_reach(rev, candidates)
        if reach is None:
            if self.boundary or (self._walked is not None and self._walked.rev == rev):
                walked = self._walk(rev)
                ranks = {c: walked.rank[c] for c in candidates if c in walked.rank}
                if self.boundary:
                    self._heal(walked, rev)
                    ranks.update(walked.mended_ranks(candidates))
            else:
                ranks = self._streamed_ranks(rev, candidates)
            reach = (ranks, tuple(c for c in candidates if c not in ranks))
            if self.memory is not None:
                self.memory.put_reach(rev, reach)
        return reach[0]

    def _streamed_ranks(self, rev: str, candidates: Collection[str]) -> dict[str, int]:
        """Ranks in `git rev-list REV`, read line by line. The lines are kept for the labels
        of the same command while there are at most WALK_KEEP of them; past that, nothing
        but the ranks (the labels then walk again, line by line), and the labels expected
        (`expect_labels`), counted on the way. Each of those targets that the walk lists is
        reached by REV, so all its own history is in the walk: when the walk ends in order
        (no parent listed before a child, none missing) its label is read from the counts.
        A target the walk does not list (off REV's history, or not here) is left to
        `labels`."""
        wanted = candidates if isinstance(candidates, Set | dict) else set(candidates)
        self.walks += 1
        targets = self._expected_targets(rev)
        walk = counted_walk(self.source.stream([rev], topo=False), rev, targets, wanted, True)
        if walk.kept is not None:
            self._walked = Walked(rev, blocks=walk.kept)
        if walk.masks is not None:
            only_rev, only_target, _ = tally(walk.masks, len(targets))
            for i, target in enumerate(targets):
                if target in walk.listed:
                    div = from_counts(only_rev[i], only_target[i], lambda: True)  # an ancestor
                    self._told[rev, target] = div
                    if self.memory is not None:
                        self.memory.put_label(target, rev, (div.label, div.ahead, div.behind))
        return walk.ranks

    def _expected_targets(self, rev: str) -> list[str]:
        """The handovers whose labels from `rev` an order walk of `rev` is to read too: in a
        complete clone, those no answer kept in memory gives."""
        if self._expected is None or self._expected[0] != rev or self.boundary:
            return []
        return [
            h
            for h in self._expected[1]
            if h != rev
            and (rev, h) not in self._told
            and (self.memory is None or self.memory.label(h, rev) is None)
        ]

    def _kept_reach(self, rev: str, candidates: Collection[str]) -> Reach | None:
        """The reach from memory: for `rev` itself, or for a revision joined to it by
        chains of single-parent commits (see `_meetings`), the nearest that looked for
        every candidate."""
        if self.memory is None:
            return None
        if self._walked is not None and self._walked.rev == rev:
            return None
        exact, has_commit = self.memory.reach(rev), self.source.has_commit
        if exact is not None:  # `rev` itself: no chain to follow (no parent to read)
            reach = carried_reach(rev, Meeting.of([], [], rev), exact, candidates, has_commit)
            if reach is not None:
                return reach
        for meeting in self._meetings(rev):
            kept = self.memory.reach(meeting.kept)
            if kept is None:
                continue
            reach = carried_reach(rev, meeting, kept, candidates, has_commit)
            if reach is not None:
                if meeting.up or meeting.down or len(reach[1]) != len(kept[1]):
                    self.memory.put_reach(rev, reach)
                return reach
        return None

    def _meetings(self, rev: str) -> list[Meeting]:
        """The revisions memory holds answers for that `rev` joins by single-parent chains:
        `rev`'s chain (`up`) and a kept revision's (`down`) meet at a commit P, and
        every commit above P on either chain has P's history and nothing else beyond itself.
        So ancestors(rev) = up + ancestors(P) and ancestors(kept) = down + ancestors(P),
        each union disjoint: a branch switch to an older commit, a new commit on it, or
        a commit on top of the kept revision. Nearest first."""
        assert self.memory is not None
        if rev in self._meeting_cache:
            return self._meeting_cache[rev]
        found: list[Meeting] = []
        if not self.memory.kept():  # nothing kept (a fresh clone): no chain to follow
            self._meeting_cache[rev] = found
            return found
        with self.source.reading():
            mine = chain_of(rev, self.source.parents, self._chains)
            position = {commit: s for s, commit in enumerate(mine)}
            for kept in self.memory.kept():
                theirs = chain_of(kept, self.source.parents, self._chains, position)
                for t, commit in enumerate(theirs):
                    s = position.get(commit)
                    if s is not None:
                        found.append(Meeting.of(mine[:s], theirs[:t], kept))
                        break
        found.sort(key=lambda m: len(m.up) + len(m.down))
        self._meeting_cache[rev] = found
        return found

    # ---- divergence labels ------------------------------------------------

    def _labels(self, rev: str, handovers: Collection[str]) -> dict[str, Divergence]:
        found: dict[str, Divergence] = {}
        wanted = []
        off: list[str] = []  # labels kept for rev, off its history: their commits may be gone
        memory = self.memory
        for commit in dict.fromkeys(handovers):
            told = self._told.get((rev, commit))  # read by this command's walk (and kept)
            kept = None if told is not None or memory is None else memory.label(commit, rev)
            if told is not None:
                found[commit] = told
            elif kept is not None:
                found[commit] = Divergence(*kept)
                if kept[0] not in ("current", "advanced"):
                    off.append(commit)
            elif (
                memory is not None
                and (carried := carried_label(commit, self._meetings(rev), memory.label))
                is not None
            ):
                # Read on the chains by this command (so its commit is here), and kept for
                # rev itself: the next command reads it without following them.
                found[commit] = carried
                memory.put_label(commit, rev, (carried.label, carried.ahead, carried.behind))
            else:
                wanted.append(commit)
        # A handover off rev's history can go (its branch deleted, its commits pruned): a
        # label kept for it holds only while its commit is here, else it is `missing`.
        if off:
            found.update((c, MISSING) for c in set(off) - self.source.commits_here(off))
        if not wanted:
            return found
        walked = self._walked is not None and self._walked.rev == rev
        computed: dict[str, Divergence] | None = None
        if self.boundary or walked:
            computed = self._walk_labels(rev, wanted)
        elif len(wanted) > FEW_LABELS:
            computed = self._streamed_labels(rev, wanted)
        if computed is None:
            # Which handovers are here, in one look (by git while libgit2 is not loaded: a
            # first `resume --peek` or `context` would load it for this alone).
            here = self.source.commits_here([c for c in wanted if c != rev])
            computed = {commit: self._count_label(commit, rev, here) for commit in wanted}
        for commit, div in computed.items():
            found[commit] = div
            if self.memory is not None and div.label not in ("missing", "unknown"):
                self.memory.put_label(commit, rev, (div.label, div.ahead, div.behind))
        return found

    def _count_label(self, handover: str, rev: str, here: Collection[str]) -> Divergence:
        """One label from git's bounded counts (complete clones only); `here`: the
        handovers whose commits are here."""
        if handover == rev:
            return Divergence("current", 0, 0)
        if handover not in here:
            return MISSING
        ahead, behind = self.source.ahead_behind(rev, handover)
        return from_counts(ahead, behind, lambda: self.source.merge_base(rev, handover) is not None)

    def _streamed_labels(self, rev: str, handovers: Sequence[str]) -> dict[str, Divergence] | None:
        """Every label of a complete clone from one walk of REV and the handovers, read line
        by line (a second, in topological order, when dates are out of order); None when
        neither adds up (the caller then counts each label with git)."""
        here = self.source.commits_here([h for h in handovers if h != rev])
        found = {h: MISSING for h in handovers if h != rev and h not in here}
        targets = [h for h in handovers if h != rev and h not in found]
        found.update((h, Divergence("current", 0, 0)) for h in handovers if h == rev)
        if not targets:
            return found
        for topo in (False, True):
            self.walks += 1
            masks = counted_walk(self.source.stream([rev, *targets], topo), rev, targets).masks
            if masks is not None:
                break
        else:
            return None
        only_rev, only_target, both = tally(masks, len(targets))
        for target, ahead, behind, shared in zip(targets, only_rev, only_target, both, strict=True):
            found[target] = from_counts(ahead, behind, shared.__bool__)
        return found

    def _walk_labels(self, rev: str, handovers: Sequence[str]) -> dict[str, Divergence]:
        walked = self._walk(rev)
        off = [h for h in handovers if h not in walked.known and self.source.has_commit(h)]
        if off:
            self.walks += 1
            walked.add(self.source.walk(off, [rev]))
        boundary = self._heal(walked, rev) if self.boundary else self.boundary
        divs = labels_of(walked.all_lines(), rev, handovers, boundary, shallow=bool(self.boundary))
        return dict(zip(handovers, divs, strict=True))

    def _heal(self, walked: Walked, rev: str) -> frozenset[str]:
        """Mend the cut where it cut nothing off: a boundary commit whose parents are all
        here after all (fetched along another branch) gets them back, with their history.
        Returns the boundary commits that stay cut."""
        remaining = set(self.boundary)
        while True:
            healable = {}
            for commit in remaining & walked.known:
                parents = self.source.true_parents(commit)
                if parents and all(self.source.has_commit(p) for p in parents):
                    healable[commit] = parents
            if not healable:
                return frozenset(remaining)
            remaining -= healable.keys()
            walked.heal(healable)
            tips = [p for ps in healable.values() for p in ps if p not in walked.known]
            if tips:
                self.walks += 1
                walked.add(self.source.walk(tips, [rev]))
