"""The response cache in Redis (``response_cache.store: redis``): one cache for every worker and instance.

Each entry is one string key, ``switchyard:cache:<digest>``, written with
``SET ... PX <ttl>`` so Redis expires it itself; its size bound is Redis's
own (``maxmemory`` and its eviction policy), so evictions and bytes are
Redis's to report (``INFO``), not this worker's. It speaks over the
gateway's own Redis connections (``redis_wire.py``, the URL of
``state.redis_url``); each lookup or store is bounded by
``response_cache.timeout``, and any failure is a ``StoreFailed``: the call
goes on uncached, never fails for the cache. The semantic cache's vectors
travel beside the entries (``redis_vectors.py``).
"""

from __future__ import annotations

from typing import Callable

import trio
from coredis.exceptions import RedisError

from switchyard.actors.cache.store import StoreFailed
from switchyard.config.response_cache import ResponseCacheConfig
from switchyard.protocol.stores.redis_vectors import RedisVectorFeed
from switchyard.protocol.stores.redis_wire import Address, RedisWire

PREFIX = b"switchyard:cache:"


class RedisCacheStore:
    def __init__(self, url: str, settings: Callable[[], ResponseCacheConfig]) -> None:
        self.wire = RedisWire(Address(url))
        self.settings = settings
        self.evictions = 0      # Redis evicts by its own policy: not seen here
        self.vectors = RedisVectorFeed(self.wire, settings)   # the semantic cache's, on the same connections
        self.expirations = 0

    @property
    def stored_bytes(self) -> int | None:
        return None

    @property
    def entries(self) -> int | None:
        return None

    async def get(self, key: bytes) -> bytes | None:
        reply = await self._call("GET", PREFIX + key.hex().encode())
        if reply is None or isinstance(reply, bytes):
            return reply
        if isinstance(reply, str):   # the wire decodes a value that is UTF-8
            return reply.encode()
        raise StoreFailed(f"Redis GET answered a {type(reply).__name__}")

    async def put(self, key: bytes, value: bytes, ttl: float) -> None:
        await self._call("SET", PREFIX + key.hex().encode(), value, "PX", max(1, round(ttl * 1000)))

    async def delete(self, key: bytes) -> None:
        await self._call("DEL", PREFIX + key.hex().encode())

    async def _call(self, command: str, *args: object) -> object:
        timeout = self.settings().timeout
        with trio.move_on_after(timeout):
            try:
                return await self.wire.call(command, *args)
            except (RedisError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise StoreFailed(f"Redis {command}: {exc}") from None
        raise StoreFailed(f"Redis {command}: no answer within response_cache.timeout ({timeout:g}s)")

    async def aclose(self) -> None:
        await self.wire.aclose()
