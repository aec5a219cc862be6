"""The semantic cache's vectors in Redis (``response_cache.store: redis``): how the fleet shares its entries.

Debian's Redis 7 has no vector search, so Redis only carries the vectors:
each entry stored by any worker is appended to one stream,
``switchyard:semantic`` (``XADD ... MAXLEN ~ max_entries``), with its
namespace, its answer's key, its expiry (wall-clock milliseconds) and its
vector (float32, little-endian, base64). Every worker reads the stream
(``XREAD BLOCK``, ``actors/cache/shared.py``) into its own in-process
index, so a lookup never waits for Redis: it is one matrix product in the
worker's memory. The answers themselves are the exact cache's entries
(``redis_cache.py``), which Redis expires; a row whose answer is gone is
dropped from the index when a lookup finds it missing.
"""

from __future__ import annotations

import base64
import logging
import time
from typing import Any, Callable

import numpy as np
import trio
from coredis.exceptions import RedisError

from switchyard.actors.cache.store import StoreFailed
from switchyard.actors.ports import SharedVector
from switchyard.config.response_cache import ResponseCacheConfig
from switchyard.protocol.stores.redis_wire import RedisWire

log = logging.getLogger("switchyard.cache")

STREAM = b"switchyard:semantic"
BATCH = 512   # entries one read brings at most


class RedisVectorFeed:
    def __init__(self, wire: RedisWire, settings: Callable[[], ResponseCacheConfig]) -> None:
        self.wire = wire
        self.settings = settings

    async def publish(self, entry: SharedVector, max_entries: int) -> None:
        expires = round((time.time() + entry.ttl) * 1000)
        vector = base64.b64encode(np.asarray(entry.vector, dtype="<f4").tobytes())
        await self._call(self.settings().timeout, "XADD", STREAM, "MAXLEN", "~", max_entries, "*",
                         b"ns", entry.namespace.hex().encode(), b"key", entry.answer_key.hex().encode(),
                         b"exp", expires, b"vec", vector)

    async def read(self, after: str, wait: float) -> tuple[str, list[SharedVector]]:
        reply = await self._call(wait + self.settings().timeout, "XREAD", "COUNT", BATCH,
                                 "BLOCK", max(1, round(wait * 1000)), "STREAMS", STREAM, after)
        if reply is None:
            return after, []   # nothing new within the wait
        try:
            entries = _entries(reply)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise StoreFailed(f"Redis XREAD answered what is not a stream of vectors: {exc}") from None
        now = time.time()
        out = []
        for position, fields in entries:
            after = position   # past it whatever it holds: one entry that cannot be read never stops the rest
            try:
                left = int(fields["exp"]) / 1000 - now
                if left > 0:
                    vector = np.frombuffer(base64.b64decode(fields["vec"]), dtype="<f4").tolist()
                    out.append(SharedVector(bytes.fromhex(fields["ns"]), bytes.fromhex(fields["key"]), vector,
                                            left))
            except (ValueError, TypeError, KeyError) as exc:   # binascii.Error is a ValueError
                log.warning("semantic cache: stream entry %s skipped, it is not a vector entry (%s)", position, exc)
        return after, out

    async def _call(self, timeout: float, command: str, *args: object) -> Any:
        with trio.move_on_after(timeout):
            try:
                return await self.wire.call(command, *args)
            except (RedisError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise StoreFailed(f"Redis {command}: {exc}") from None
        raise StoreFailed(f"Redis {command}: no answer within {timeout:g}s")


def _entries(reply: Any) -> list[tuple[str, dict[str, str]]]:
    """XREAD's reply (RESP2: [[stream, [[id, [field, value, ...]], ...]]]) as (id, fields) pairs, text."""
    [[_, rows]] = reply
    out = []
    for position, flat in rows:
        values = [v.decode() if isinstance(v, bytes) else str(v) for v in flat]
        out.append((position.decode() if isinstance(position, bytes) else str(position),
                    dict(zip(values[::2], values[1::2], strict=True))))
    return out
