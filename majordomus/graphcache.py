"""The graph cache: what the commit graph answered, kept for a few recent revisions."""

from __future__ import annotations

from pathlib import Path

from majordomus.cachefile import CacheFile

Reach = tuple[dict[str, int], tuple[str, ...]]  # reachable commit -> rank, and checked others
Label = tuple[str, int | None, int | None]
KEEP_REVS = 3


class GraphCache(CacheFile):
    """What the commit graph answered: the rank of annotated commits in `git rev-list REV`
    for a few recent revisions, and divergence labels between two commits. Commit ids
    name immutable history, so an answer stays true: nothing is kept where they do not
    (a shallow clone, a replacement in force), and a label of a handover off REV's
    history is used only while that commit is here (graph.CommitGraph)."""

    # Ranks follow git's own order across merges (an older layout derived them).
    # Never written while git reads the history through replacements (graph.CommitGraph).
    FORMAT = "graph:revs reach:(rank-in-rev-list,checked) labels:(label,ahead,behind) unreplaced"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.revs: list[str] = []  # most recently used last
        self.reaches: dict[str, Reach] = {}
        self.labels: dict[str, Label] = {}
        self.dirty = False
        loaded = self.load()
        try:
            if loaded is not None:
                self.revs, self.reaches, self.labels = (
                    list(loaded[0]),
                    dict(loaded[1]),
                    dict(loaded[2]),
                )
        except (ValueError, TypeError, IndexError):
            self.revs, self.reaches, self.labels = [], {}, {}

    def _touch(self, rev: str) -> None:
        if rev in self.revs:
            self.revs.remove(rev)
        self.revs.append(rev)
        del self.revs[:-KEEP_REVS]
        self.dirty = True

    def reach(self, rev: str) -> Reach | None:
        return self.reaches.get(rev)

    def put_reach(self, rev: str, reach: Reach) -> None:
        self.reaches[rev] = reach
        self._touch(rev)

    def put_label(self, handover: str, rev: str, label: Label) -> None:
        self.labels[f"{handover} {rev}"] = label
        self._touch(rev)

    def label(self, handover: str, rev: str) -> Label | None:
        return self.labels.get(f"{handover} {rev}")

    def kept(self) -> list[str]:
        return self.revs[::-1]

    def save(self) -> None:
        if not self.dirty:
            return
        keep = set(self.revs)
        reach = {rev: value for rev, value in self.reaches.items() if rev in keep}
        labels = {k: v for k, v in self.labels.items() if k.split(" ")[1] in keep}
        self.write(self.revs, reach, labels)
        self.dirty = False
