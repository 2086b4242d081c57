"""The read cache: which notes each notes tree holds, and each note blob's summaries."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from majordomus.cachefile import SUMMARY_FIELDS, CacheFile
from majordomus.records import Summarised, Summary

BlobEntry = Summarised | str  # (summaries, invalid records) or why unreadable
OddTuple = tuple[str, str, str]  # an entry of a notes tree that is no note: path, kind, id


def plain_entry(entry: BlobEntry) -> Any:
    """A read-cache entry as marshal can write it (it knows no named tuples)."""
    return entry if isinstance(entry, str) else (tuple(map(tuple, entry[0])), entry[1])


def blob_entry(value: Any) -> BlobEntry:
    """A read-cache entry back from `plain_entry`'s form."""
    return value if isinstance(value, str) else (tuple(map(Summary._make, value[0])), value[1])


class ReadCache(CacheFile):
    """Notes tree id -> the notes it holds, each the commit's id then the blob's, end to end
    in one string (100,000 notes: one object, not 300,000); blob id -> the summaries of
    its records and how many are invalid, or why it is unreadable. A missing object is
    never an entry: a fetch can bring it."""

    FORMAT = (
        "frames:trees:(commit+blob)*,odd:tree->(path,kind,id)*;"
        f"blobs:(({SUMMARY_FIELDS})*,invalid)|reason*"
    )
    FRAME_ENTRIES = 4096  # blob entries per frame

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.trees: dict[str, str] = {}
        # Notes tree id -> the entries in it that are no note (`notestree.OddEntry`, as
        # plain tuples), for the trees with any.
        self.odd: dict[str, tuple[OddTuple, ...]] = {}
        self._blobs: dict[str, BlobEntry] | None = {}
        # Blob -> its entry as `plain_entry` gives it, for the entries put in that form
        # (by helpers): a save writes those as they came.
        self._plain: dict[str, Any] = {}
        self._frames: Iterator[Any] = iter(())
        self.dirty = False
        loaded = self.load_frames()
        if loaded is None:
            return
        try:
            (trees, odd), self._frames = loaded
            if not isinstance(trees, dict):
                raise TypeError(trees)
            if not isinstance(odd, dict):
                raise TypeError(odd)
        except (ValueError, TypeError):
            return
        self.trees, self.odd, self._blobs = trees, odd, None

    @property
    def blobs(self) -> dict[str, BlobEntry]:
        """The blob entries, loaded when first asked for: a command that needs only the
        trees' listings (which notes sit on which commits) never makes 100,000 summaries."""
        if self._blobs is None:
            blobs: dict[str, BlobEntry] = {}
            try:
                for frame in self._frames:
                    blobs.update((blob, blob_entry(value)) for blob, value in frame.items())
            except (ValueError, TypeError, IndexError, KeyError, AttributeError, EOFError):
                blobs = {}  # summaries cut short: the notes are parsed again, the trees kept
            self._blobs, self._frames = blobs, iter(())
        return self._blobs

    def put_tree(self, tree: str, notes: str, odd: Iterable[OddTuple] = ()) -> None:
        self.trees[tree] = notes
        entries = tuple((path, kind, oid) for path, kind, oid in odd)
        if entries:
            self.odd[tree] = entries
        self.dirty = True

    def put_blob(self, blob: str, entry: BlobEntry) -> None:
        self.blobs[blob] = entry
        self._plain.pop(blob, None)
        self.dirty = True

    def put_plain(self, blob: str, value: Any) -> None:
        """An entry in the form `plain_entry` gives it (as a helper sent it)."""
        self.blobs[blob] = blob_entry(value)
        self._plain[blob] = value
        self.dirty = True

    def save(self, trees: Iterable[str], blobs: Iterable[str]) -> bool:
        """Keep only what the current refs use, and write it if anything changed. Whether
        the file holds it (so that it can be loaded again rather than read afresh)."""
        if not self.dirty:
            return True
        keep_trees = {t: self.trees[t] for t in trees if t in self.trees}
        keep_odd = {t: self.odd[t] for t in keep_trees if t in self.odd}
        self.dirty = False
        written = self.write_frames((keep_trees, keep_odd), self._blob_frames(blobs))
        self._plain = {}  # written: the entries are held once
        return written

    def _blob_frames(self, blobs: Iterable[str]) -> Iterator[dict[str, Any]]:
        frame: dict[str, Any] = {}
        plain = self._plain
        for blob in blobs:
            if blob in plain:
                frame[blob] = plain[blob]
                if len(frame) == self.FRAME_ENTRIES:
                    yield frame
                    frame = {}
                continue
            value = self.blobs.get(blob)
            if value is not None:
                frame[blob] = plain_entry(value)
                if len(frame) == self.FRAME_ENTRIES:
                    yield frame
                    frame = {}
        if frame:
            yield frame
