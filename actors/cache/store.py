"""Where cached answers live: the per-worker memory store, one ``CacheStore`` (``actors/ports.py``).

A store maps a key (the digest of ``key.py``) to an entry's bytes for a
TTL. ``memory`` is this worker's: least recently used first out once
``max_entries`` or ``max_bytes`` would be passed, expired entries dropped
when met (a lookup) or when room is made; time is Trio's clock, so tests
move it with ``autojump_clock``. The Redis store (shared by the fleet) is
``protocol/stores/redis_cache.py``; a store that fails raises
``StoreFailed`` and the call goes on uncached.
"""

from __future__ import annotations

from collections import OrderedDict

import trio


class StoreFailed(Exception):
    """The store could not be asked (Redis away or too slow): the call runs uncached."""


class MemoryCacheStore:
    """LRU by ``max_entries`` and ``max_bytes`` (counted as key + value bytes), each entry its own TTL."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, tuple[float, bytes]] = OrderedDict()   # key -> (expires at, value)
        self._bytes = 0
        self.evictions = 0
        self.expirations = 0
        self.vectors = None   # the semantic index stays this worker's own

    @property
    def stored_bytes(self) -> int:
        return self._bytes

    @property
    def entries(self) -> int:
        return len(self._entries)

    async def get(self, key: bytes) -> bytes | None:
        found = self._entries.get(key)
        if found is None:
            return None
        expires, value = found
        if trio.current_time() >= expires:
            self._drop(key)
            self.expirations += 1
            return None
        self._entries.move_to_end(key)
        return value

    async def put(self, key: bytes, value: bytes, ttl: float) -> None:
        size = len(key) + len(value)
        if size > self.max_bytes:
            return
        if key in self._entries:
            self._drop(key)
        now = trio.current_time()
        self._entries[key] = (now + ttl, value)
        self._bytes += size
        self._make_room(now)

    async def delete(self, key: bytes) -> None:
        if key in self._entries:
            self._drop(key)

    async def aclose(self) -> None:
        """Nothing to let go of: the entries go with the worker."""

    def _make_room(self, now: float) -> None:
        if len(self._entries) <= self.max_entries and self._bytes <= self.max_bytes:
            return
        for key in [k for k, (expires, _) in self._entries.items() if now >= expires]:
            self._drop(key)
            self.expirations += 1
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
            self.evictions += 1

    def _drop(self, key: bytes) -> None:
        _, value = self._entries.pop(key)
        self._bytes -= len(key) + len(value)
