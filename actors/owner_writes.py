"""The stored-response owner rows on their way to the shared store: told like ledger records, never waited on.

A create (``remember``) or a delete (``forget``) is queued as an ``Op`` and
the writer task takes everything queued in one turn and applies it in one
transaction (``OwnerStore.apply``); the request path does not wait. Until an
op is in the store, ``pending`` answers for it, so the worker that queued it
never contradicts itself. A store that fails is logged once and marked away;
the writer tries the same ops again after 0.5 s, 1 s, 2 s ... 30 s (at once
after a failed lookup) while new ones queue, and logs its return. A batch the
store refuses while it still takes an empty transaction (an op it cannot
take) is applied one op at a time, and an op it refuses twice is dropped with
one log line: it never holds back the rest. The queue is bounded by the
map's own bound (``stored_responses.max_entries``): past it a new op is
dropped and counted (its id stays in this worker's memory). Rows still
queued when the worker stops with the store away are counted and said.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Awaitable, Callable

import trio
from attrs import frozen

log = logging.getLogger("switchyard.responses")

FIRST_RETRY = 0.5   # seconds to the first retry of a store that failed; doubles ...
MAX_RETRY = 30.0    # ... up to this


@frozen
class Op:
    owner: str
    response_id: str
    backend: str | None   # None: forget the row
    created: float        # wall clock, Unix seconds


StoreCall = Callable[..., Awaitable[Any]]   # runs a blocking store method in a worker thread


class OwnerWrites:
    def __init__(self, store: Any, call: StoreCall, bound: Callable[[], int]) -> None:
        self.store = store
        self._call = call
        self._bound = bound
        self._queue: deque[Op] = deque()
        self._latest: dict[tuple[str, str], Op] = {}   # (owner, response id) -> its newest op still queued
        self._wake = trio.Event()
        self._turn = trio.Lock()
        self._running = False        # the writer task runs
        self.store_up = True         # until a call fails
        self._down_since: float | None = None
        self._retry = trio.Event()   # a failed call asks the writer to try the store again (after its backoff)
        self._probe_now = False      # ... at once, without the backoff
        # counters, for the metrics
        self.failures = 0            # store calls that failed (writes, lookups, prunes)
        self.written = 0             # ops the store took
        self.dropped = 0             # ops dropped: past the queue's bound, or refused by a store that answers

    @property
    def queued(self) -> int:
        return len(self._queue)

    def pending(self, owner: str, response_id: str) -> Op | None:
        """The newest op for the pair that the store does not have yet."""
        return self._latest.get((owner, response_id))

    async def tell(self, op: Op) -> None:
        """Queue ``op`` for the writer; returns at once (in place only when no writer runs)."""
        if len(self._queue) >= self._bound():
            self.dropped += 1
            if self.dropped & (self.dropped - 1) == 0:   # at 1, 2, 4, 8 ... drops
                log.warning("stored responses: %d owner row(s) dropped so far: stored_responses.max_entries "
                            "are queued already while the %s store is away", self.dropped, self.store.name)
            return
        self._queue.append(op)
        self._latest[(op.owner, op.response_id)] = op
        self._wake.set()
        if not self._running:   # no writer task (a Runtime that was never started): written in place
            await self._take_turn()

    def failed(self, exc: BaseException, what: str) -> None:
        """A store call failed: the store is away until the writer's next try succeeds (at once when a lookup
        or a prune failed: one failure of the moment must not hold this worker's rows back for 30 s)."""
        self.failures += 1
        if what != "write":
            self._probe_now = True
        if self.store_up:
            log.warning("stored responses: the %s store failed (%s: %s); this worker's memory answers and "
                        "lookups it cannot answer are refused until it is back", self.store.name, what,
                        _reason(exc))
            self.store_up = False
            self._down_since = trio.current_time()
        self._retry.set()
        self._wake.set()

    async def run(self) -> None:
        """Apply what is queued, in order, for ever; while the store is away, retry with backoff."""
        self._running = True
        try:
            await self._run()
        finally:
            self._running = False

    async def _run(self) -> None:
        delay = FIRST_RETRY
        while True:
            if not self._queue and (self.store_up or not self._retry.is_set()):
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            if not self.store_up:
                if self._probe_now:   # a lookup failed: know at once whether the store is really away
                    self._probe_now = False
                else:
                    await trio.sleep(delay)
                    delay = min(delay * 2, MAX_RETRY)
            if await self._take_turn():
                delay = FIRST_RETRY

    async def _take_turn(self) -> bool:
        """One try: everything queued in one transaction (an empty one as the probe of an idle outage);
        True if the store took it. One at a time: the writer, a closing flush, a write in place."""
        async with self._turn:
            batch = list(self._queue)
            try:
                await self._call(self.store.apply, batch)
            except Exception as exc:
                if batch and await self._answers():   # the store is fine: an op of the batch is the trouble
                    await self._one_by_one(batch)
                    return True
                self.failed(exc, "write")
                return False
            self._settled(batch, len(batch))
            return True

    async def _answers(self) -> bool:
        """Whether the store takes a write at all (an empty transaction): a failed batch is one op's fault
        only then; a store that is away costs one deadline here, not one an op."""
        try:
            await self._call(self.store.apply, [])
        except Exception:
            return False
        return True

    async def _one_by_one(self, batch: list[Op]) -> None:
        """The batch failed while the store takes writes: each op alone, twice if need be; an op it still
        refuses is dropped with one log line, never holding back the others."""
        taken = 0
        for op in batch:
            for attempt in (1, 2):
                try:
                    await self._call(self.store.apply, [op])
                except Exception as exc:
                    if attempt == 2:
                        self.dropped += 1
                        log.error("stored responses: the %s store refused the owner row of %s while it took "
                                  "writes (%s); dropped", self.store.name, op.response_id, _reason(exc))
                else:
                    taken += 1
                    break
        self._settled(batch, taken)

    def _settled(self, batch: list[Op], taken: int) -> None:
        """``batch`` (the queue's first ops, in order: only appends happened meanwhile) is done; ``taken`` of
        them are in the store."""
        for op in batch:
            self._queue.popleft()
            key = (op.owner, op.response_id)
            if self._latest.get(key) is op:
                del self._latest[key]
        self.written += taken
        self._retry = trio.Event()
        if not self.store_up:
            log.info("stored responses: the %s store is back after %.1fs", self.store.name,
                     trio.current_time() - (self._down_since or trio.current_time()))
            self.store_up = True
            self._down_since = None

    async def flush(self) -> None:
        """Everything queued written, while the store answers (the Runtime is closing); what the store cannot
        take now is lost with this worker's memory: counted and said."""
        if self._queue and self.store_up:
            await self._take_turn()
        if self._queue:
            self.dropped += len(self._queue)
            log.warning("stored responses: %d owner row(s) not written: the %s store is away as this worker "
                        "stops; the ids they name are unknown to the other workers", len(self._queue),
                        self.store.name)
            self._queue.clear()
            self._latest.clear()


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
