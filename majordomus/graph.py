"""Divergence labels: how the code moved between a handover's commit and the one read from."""

from __future__ import annotations

from typing import NamedTuple, Protocol


class Graph(Protocol):
    def has_commit(self, hex_id: str) -> bool: ...

    def is_shallow(self) -> bool: ...

    def merge_base(self, a: str, b: str) -> str | None: ...

    def ahead_behind(self, commit: str, base: str) -> tuple[int, int]: ...


class Divergence(NamedTuple):
    label: str
    ahead: int | None
    behind: int | None


def divergence(graph: Graph, handover_commit: str, at_commit: str) -> Divergence:
    """The label of a handover attached to `handover_commit`, read from `at_commit`.

    In a shallow repository only positive evidence is trusted: a missing commit
    or an absent common ancestor may lie past the boundary, so it is `unknown`.
    """
    if handover_commit == at_commit:
        return Divergence("current", 0, 0)
    shallow = graph.is_shallow()
    if not graph.has_commit(handover_commit):
        return Divergence("unknown" if shallow else "missing", None, None)
    ahead, behind = graph.ahead_behind(at_commit, handover_commit)
    if behind == 0:
        return Divergence("advanced", ahead, 0)
    if ahead == 0:
        return Divergence("behind", 0, behind)
    if graph.merge_base(at_commit, handover_commit) is not None:
        return Divergence("diverged", ahead, behind)
    if shallow:
        return Divergence("unknown", None, None)
    return Divergence("unrelated", ahead, behind)
