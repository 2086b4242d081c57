"""Object ids end to end in one string, as a read of many notes holds them: a set of them,
the runs they are shared out in, a notes tree's (annotated object, note blob) pairs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator


class BlobIds(Collection[str]):
    """Object ids held as one sorted string: 100,000 of them in 4 MB and one allocation,
    not 100,000 small objects kept alive among everything a read builds and lets go."""

    def __init__(self, ids: Iterable[str]) -> None:
        self._ids = "".join(sorted(set(ids)))

    def __len__(self) -> int:
        return len(self._ids) // 40

    def __iter__(self) -> Iterator[str]:
        return ids(self._ids)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str) or len(item) != 40:
            return False
        joined, low, high = self._ids, 0, len(self._ids) // 40
        while low < high:
            middle = (low + high) // 2
            found = joined[middle * 40 : middle * 40 + 40]
            if found == item:
                return True
            if found < item:
                low = middle + 1
            else:
                high = middle
        return False


def ids(joined: str) -> Iterator[str]:
    """The object ids of a string of them end to end."""
    return (joined[at : at + 40] for at in range(0, len(joined), 40))


def run(joined: str, count: int, k: int) -> list[str]:
    """The k-th of `count` runs, as even as can be, of the object ids of a string of them."""
    total = len(joined) // 40
    start, end = total * k // count, total * (k + 1) // count
    return [joined[at : at + 40] for at in range(start * 40, end * 40, 40)]


def pairs(flat: str) -> Iterator[tuple[str, str]]:
    """(annotated object, note blob) from the notes of a tree as `ReadCache.trees` keeps
    them: each commit's id then its note blob's, end to end."""
    return ((flat[at : at + 40], flat[at + 40 : at + 80]) for at in range(0, len(flat), 80))
