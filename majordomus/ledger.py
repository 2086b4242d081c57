"""The ledger the per-task views are carried over by: every record's key and every handover
id a resume resolves, kept in shards by key.
"""

from __future__ import annotations

import collections
import marshal
import zlib
from collections.abc import Callable, Iterable
from typing import Any

LEDGER_SHARDS = 64


def record_key(summary: tuple[Any, ...]) -> str:
    """A record's key in the ledger, from its summary as a tuple: its kind and its id."""
    return f"{summary[0]} {summary[1]}"


def handover_key(handover: str) -> str:
    return record_key(("handover", handover))


def resolving(summary: tuple[Any, ...]) -> tuple[str, ...]:
    """The handover ids a record's summary resolves (a resume's handover and supersedes)."""
    return (summary[5], *summary[6]) if summary[0] == "resume" else ()


def _shard_of(key: str) -> str:
    return _shard_name(_shard_number(key))


def _shard_number(key: str) -> int:
    return zlib.crc32(key.encode()) % LEDGER_SHARDS


def _shard_name(number: int) -> str:
    return f"ledger {number}"


class Ledger:
    """Every record's key and every handover id a resume resolves, kept to carry the views
    over exactly: a copy of a record, or a resume of another task's handover, is told
    apart from a new record. Sharded by key: a change loads and rewrites only the shards
    of the keys it concerns (a handover id goes with its handover's key)."""

    def __init__(self, part: Callable[[str], bytes | None]) -> None:
        self._part = part
        self._shards: dict[str, tuple[set[str], collections.Counter[str]]] = {}
        self._changed: set[str] = set()

    def _shard(
        self, key: str, *, change: bool = False
    ) -> tuple[set[str], collections.Counter[str]]:
        name = _shard_of(key)
        shard = self._shards.get(name)
        if shard is None:
            data = self._part(name)
            keys, resolved = marshal.loads(data) if data else ((), ())
            shard = self._shards[name] = (set(keys), collections.Counter(resolved))
        if change:
            self._changed.add(name)
        return shard

    def has(self, key: str) -> bool:
        return key in self._shard(key)[0]

    def add(self, key: str) -> None:
        self._shard(key, change=True)[0].add(key)

    def discard(self, key: str) -> None:
        self._shard(key, change=True)[0].discard(key)

    def resolve(self, handover: str, count: int) -> None:
        self._shard(handover_key(handover), change=True)[1][handover] += count

    def is_resolved(self, handover: str) -> bool:
        return self._shard(handover_key(handover))[1][handover] > 0

    def changed_parts(self) -> dict[str, bytes | None]:
        return {name: _shard_bytes(*self._shards[name]) for name in self._changed}

    @staticmethod
    def built(keys: Iterable[str], resolved: Iterable[str]) -> dict[str, bytes | None]:
        # Keys by shard number first (one set per shard, not one per key made and dropped).
        numbered: dict[int, set[str]] = collections.defaultdict(set)
        for key in keys:
            numbered[_shard_number(key)].add(key)
        shards = {_shard_name(n): (k, collections.Counter[str]()) for n, k in numbered.items()}
        for handover in resolved:
            name = _shard_of(handover_key(handover))
            if name not in shards:
                shards[name] = (set(), collections.Counter())
            shards[name][1][handover] += 1
        return {name: _shard_bytes(*shard) for name, shard in shards.items()}


def _shard_bytes(keys: set[str], resolved: collections.Counter[str]) -> bytes | None:
    if not keys and not +resolved:
        return None
    return marshal.dumps((tuple(sorted(keys)), tuple(sorted((+resolved).elements()))))
