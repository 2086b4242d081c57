"""Divergence labels: how the code moved between a handover's commit and a revision, read
from git's counts, from the tally of a walk (a shallow clone's cut taken into account),
or carried along single-parent chains from a label kept before."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence

from majordomus.chains import Meeting
from majordomus.records import Divergence
from majordomus.tally import Line, count

Label = tuple[str, int | None, int | None]  # a divergence as memory keeps it


UNKNOWN = Divergence("unknown", None, None)
MISSING = Divergence("missing", None, None)


def from_counts(ahead: int, behind: int, related: Callable[[], bool]) -> Divergence:
    """The label of two distinct commits of a complete history from git's counts; `related`
    (asked only when both sides moved) says whether they share any commit."""
    if behind == 0:
        return Divergence("advanced", ahead, 0)
    if ahead == 0:
        return Divergence("behind", 0, behind)
    return Divergence("diverged" if related() else "unrelated", ahead, behind)


def labels_of(
    lines: Sequence[Line],
    rev: str,
    targets: Sequence[str],
    boundary: Collection[str] = frozenset(),
    shallow: bool | None = None,
) -> list[Divergence]:
    """The label of each target (a handover's commit) read from REV, over the lines of
    every commit either reaches.

    In a shallow clone (`boundary` not empty) the cut graph is trusted only where no
    history past the boundary could change the answer: when no boundary commit is
    reachable from REV or the target, or when one is an ancestor of the other and every
    commit counted between them descends from it (a commit that descends from the
    target cannot be one of its hidden ancestors, and every boundary the walk reaches
    is then below both).
    """
    if shallow is None:
        shallow = bool(boundary)
    counted = count(lines, rev, targets)
    if counted is None:
        lines = _kahn(list(lines))
        counted = count(lines, rev, targets)
        assert counted is not None
    only_rev, only_target, both, masks, index = counted
    reaches_boundary = 0
    for commit in boundary:
        j = index.get(commit)
        if j is not None:
            reaches_boundary |= masks[j]
    found = []
    for i, target in enumerate(targets):
        bit = 1 << (i + 1)
        if target == rev:
            found.append(Divergence("current", 0, 0))
            continue
        if target not in index:
            found.append(UNKNOWN if shallow else MISSING)
            continue
        ahead, behind = only_rev[i], only_target[i]
        cut = bool(reaches_boundary & (1 | bit))
        if behind == 0:
            exact = not cut or _between(lines, index, masks, 1, bit, target)
            found.append(Divergence("advanced", ahead, 0) if exact else UNKNOWN)
        elif ahead == 0:
            exact = not cut or _between(lines, index, masks, bit, 1, rev)
            found.append(Divergence("behind", 0, behind) if exact else UNKNOWN)
        elif cut:
            found.append(UNKNOWN)
        elif both[i]:
            found.append(Divergence("diverged", ahead, behind))
        else:
            found.append(Divergence("unrelated", ahead, behind))
    return found


def _kahn(lines: list[Line]) -> list[Line]:
    """A topological order (children first) when commit dates are skewed."""
    present = {line[0]: line for line in lines}
    children = Counter(p for line in lines for p in line[1:] if p in present)
    ready = [line[0] for line in lines if children[line[0]] == 0]
    ready.reverse()
    ordered: list[Line] = []
    while ready:
        commit = ready.pop()
        line = present[commit]
        ordered.append(line)
        for parent in reversed(line[1:]):
            if parent in present:
                children[parent] -= 1
                if children[parent] == 0:
                    ready.append(parent)
    return ordered


def _between(
    lines: Sequence[Line],
    index: Mapping[str, int],
    masks: Sequence[int],
    top: int,
    low: int,
    base: str,
) -> bool:
    """Whether every commit reached from `top` and not from `low` descends from `base`:
    each has a parent that is `base` or is itself one of them."""

    def counted(commit: str) -> bool:
        j = index.get(commit)
        return j is not None and bool(masks[j] & top) and not masks[j] & low

    return all(
        any(p == base or counted(p) for p in line[1:])
        for i, line in enumerate(lines)
        if masks[i] & top and not masks[i] & low
    )


def carried_label(
    handover: str, meetings: Sequence[Meeting], kept_label: Callable[[str, str], Label | None]
) -> Divergence | None:
    """From memory (`kept_label(handover, kept)`), for a revision joined by single-parent
    chains to the one the `meetings` were found for (nearest first), when the chains
    alone decide it: the handover on one of them, or behind the kept revision and so
    behind P, where the chains meet (the chains then only move `ahead`)."""
    for meeting in meetings:
        up, down = meeting.up, meeting.down
        steps = meeting.up_at.get(handover)
        if steps is not None:
            return Divergence("advanced", steps, 0) if steps else Divergence("current", 0, 0)
        at = meeting.down_at.get(handover)
        if at is not None:
            # Its history is P's plus `down` from it on; rev's is P's plus `up`.
            behind = len(down) - at
            if up:
                return Divergence("diverged", len(up), behind)
            return Divergence("behind", 0, behind)
        label = kept_label(handover, meeting.kept)
        if label is None:
            continue
        name, ahead, _ = label
        if name not in ("current", "advanced") or ahead is None or ahead < len(down):
            continue  # off this kept revision's history: these chains cannot tell
        ahead += len(up) - len(down)
        return Divergence("advanced", ahead, 0) if ahead else Divergence("current", 0, 0)
    return None
