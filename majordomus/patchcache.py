"""The patch cache: the stable patch ids of the commits records were written on lately."""

from __future__ import annotations

from pathlib import Path

from majordomus.cachefile import CacheFile


class PatchCache(CacheFile):
    """Commit id -> its stable patch id ("" for a commit with none), for the commits records
    were written on lately: consecutive records on one commit compute it once."""

    FORMAT = "patches:commit->patch-id-stable"
    KEEP = 256

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.ids: dict[str, str] = {}
        loaded = self.load()
        if loaded is not None and len(loaded) == 1 and isinstance(loaded[0], dict):
            self.ids = loaded[0]

    def get(self, commit: str) -> str | None:
        return self.ids.get(commit)

    def put(self, commit: str, patch: str) -> None:
        self.ids.pop(commit, None)
        self.ids[commit] = patch  # newest last: the oldest go first
        self.write(dict(list(self.ids.items())[-self.KEEP :]))
