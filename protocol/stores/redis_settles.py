"""The Redis limiter's settles: a tell on the request path, a queue here, and script calls of up to
SETTLE_BATCH settles each, SETTLE_LANES at once, while Redis is available. While it is away the queue
keeps them (up to SETTLE_QUEUE; past it the oldest are dropped, and counted) until it is back.

Settles ride with admissions: the next admission script call takes what is queued and applies it
first (``ride``), so a call's settle costs no script call of its own while admissions keep coming. A
settle waits RIDE_WAIT for one before it is sent alone. An admission carrying settles is read to its end
(or its bound) even when its caller leaves: cut off, its settles would go back to the queue though
Redis ran them (``redis_batch.Batches._alone``).

A settle whose first try's answer was lost may be applied twice when it is retried: its spend then
counts twice (the safe side: a budget is never overspent by it), never its release.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Awaitable, Callable

import trio

from switchyard.actors.limits.tickets import Ticket
from switchyard.protocol.stores.redis_ops import RedisUnavailable, is_script_error
from switchyard.protocol.stores.redis_script import batch, settle_part

log = logging.getLogger("switchyard.limits")

SETTLE_BATCH = 256       # settles (or claims) one script call applies at most
SETTLE_LANES = 2         # settle script calls in flight at once
SETTLE_QUEUE = 100_000   # settles kept while Redis is away; past it the oldest are dropped (and counted)
RIDE_WAIT = 0.005        # seconds a settle waits for an admission to ride with before it is sent alone

Settle = tuple[Ticket, int, "float | None"]   # the ticket, tokens used, cost in USD (None: unpriced)


class Settles:
    """``send(script, keys, args)`` runs a script (raising RedisUnavailable); ``now()`` is the scripts' "now"
    argument; ``available()`` says whether Redis is; ``fault(exc)`` is told when it stops answering."""

    def __init__(self, send: Callable[..., Awaitable[Any]], now: Callable[[], str],
                 available: Callable[[], bool], fault: Callable[[RedisUnavailable], None]) -> None:
        self._send = send
        self._now = now
        self._available = available
        self._fault = fault
        self._queue: deque[Settle] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._lanes = trio.Semaphore(SETTLE_LANES)
        self._sending = 0
        self.settled = 0    # settles Redis applied
        self.dropped = 0    # settles dropped: the queue was full while Redis was away
        self.failed = 0     # settles Redis refused (a script error): not retried

    @property
    def queued(self) -> int:
        """Settles not yet applied: queued or on their way."""
        return len(self._queue) + self._sending

    def tell(self, item: Settle) -> None:
        if len(self._queue) >= SETTLE_QUEUE:
            self._queue.popleft()
            self.dropped += 1
        self._queue.append(item)
        self._lot.unpark()

    def wake(self) -> None:
        """Redis is back: send what waited."""
        self._lot.unpark_all()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                if not self._queue or not self._available():
                    await self._lot.park()
                    continue
                if len(self._queue) < SETTLE_BATCH:
                    await trio.sleep(RIDE_WAIT)   # an admission meanwhile takes them along
                    if not self._queue:
                        continue
                await self._lanes.acquire()
                items = self._take()
                if items:
                    nursery.start_soon(self._lane, items)
                else:
                    self._lanes.release()

    async def drain(self) -> None:
        """Apply everything queued now, in this task (after an outage, before Redis decides again);
        RedisUnavailable if Redis fails on the way (what was not applied stays queued)."""
        while self._queue:
            await self._apply(self._take())

    def _take(self) -> list[Settle]:
        items: list[Settle] = []
        while self._queue and len(items) < SETTLE_BATCH:
            items.append(self._queue.popleft())
        self._sending += len(items)
        return items

    def riding(self) -> bool:
        """Whether the next admission script call takes settles along (``ride``)."""
        return bool(self._queue) and self._available()

    def ride(self) -> tuple[list[Settle], list[str], list[tuple[list[str], list[str]]]]:
        """Take what is queued (at most SETTLE_BATCH) to ride with an admission script call: the settles,
        and the count and parts that call carries for them. ``rode`` must be told how it went."""
        items = self._take() if self.riding() else []
        return items, [str(len(items))], [settle_part(*item) for item in items]

    def rode(self, items: list[Settle], replies: list[Any] | None) -> None:
        """The script call ``items`` rode with answered (its settle replies), or did not (None: they go
        back to the front of the queue; applied twice at worst, which counts their spend twice, never
        their release)."""
        self._sending -= len(items)
        if replies is None:
            self._queue.extendleft(reversed(items))
            if items:
                self._lot.unpark()
        else:
            self._count(items, replies)

    async def _lane(self, items: list[Settle]) -> None:
        try:
            await self._apply(items)
        except RedisUnavailable as exc:
            self._fault(exc)
        finally:
            self._lanes.release()

    async def _apply(self, items: list[Settle]) -> None:
        """One script call for ``items`` (taken with _take); if Redis did not answer they go back to the
        front of the queue and RedisUnavailable is raised."""
        try:
            keys, args = batch([self._now(), str(len(items))], [settle_part(*item) for item in items])
            try:
                replies = await self._send("settle", keys, args)
            except RedisUnavailable as exc:
                if not is_script_error(exc):
                    self._queue.extendleft(reversed(items))
                    raise
                replies = [str(exc)] * len(items)
            self._count(items, replies)
        finally:
            self._sending -= len(items)

    def _count(self, items: list[Settle], replies: list[Any]) -> None:
        for item, reply in zip(items, replies, strict=False):
            if isinstance(reply, str):
                self.failed += 1
                log.error("rate limits: Redis refused the settle of call %s (%s); dropped",
                          item[0].demand.call_id, reply)
            else:
                self.settled += 1
