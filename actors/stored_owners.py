"""StoredOwners: which backend created which stored response, per API key, for every worker and instance.

Two places, looked up in order: this worker's own memory
(``response_owners.ResponseOwners``: what it relayed itself), then the
shared store (an ``OwnerStore``, ``actors/ports.py``, filled by
``protocol/stores/response_owners.py``: the usage ledger's SQLite file or
PostgreSQL), where every worker writes what it relays. Without a store
(``usage.ledger: memory``) the memory is the map.

The request path never waits on a store that is away longer than the
store's own short deadline (every call to it fails within its lock, connect
and statement timeouts: ``protocol/stores/response_owners.py``), and then
only once. Rows are written like ledger records (``owner_writes.py``): told,
written in the background in order, retried with backoff while the store is
away, bounded; a create or a delete never waits for its row. Until a row is
written the worker's queue answers for it. A lookup the worker cannot answer
asks the store while it answers: an id another worker relayed a moment ago
may still be on its way there, so a miss is asked again after 50, 100 and
200 ms before it counts as unknown. While the store is away (or when the
lookup itself fails) the lookup fails at once with
``StoredResponsesUnavailable``: a clear 503, never an id wrongly said to be
unknown. No timer of ours bounds a wait on the store: its own deadlines do,
the same in production and under a test's virtual clock. ``run`` hosts the
writer and prunes the store by the bounds every ``PRUNE_EVERY``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, Protocol, TypeVar

import trio

from switchyard.actors.errors import StoredResponsesUnavailable
from switchyard.actors.owner_writes import Op, OwnerWrites
from switchyard.actors.ports import Found, OwnerStore
from switchyard.actors.response_owners import ResponseOwners, storable_id
from switchyard.config.stored_responses import StoredResponses

log = logging.getLogger("switchyard.responses")

PRUNE_EVERY = 60.0    # seconds between prunes of the store
MISS_RETRIES = (0.05, 0.1, 0.2)   # seconds before a store's miss is asked again (another worker's row in flight)
STORE_CALLS = 4       # store calls in flight at once (worker threads)

R = TypeVar("R")


class ToThread(Protocol):
    """trio.to_thread.run_sync's shape: (fn, *args, limiter=), answering what ``fn`` returns."""

    def __call__(self, fn: Callable[..., R], /, *args: Any, limiter: trio.CapacityLimiter) -> Awaitable[R]: ...


class StoredOwners:
    name = "stored_responses"

    def __init__(self, policy: StoredResponses, store: OwnerStore | None, *, clock: Callable[[], float] = time.time,
                 to_thread: ToThread = trio.to_thread.run_sync) -> None:
        """``clock`` is the wall clock the store's ages are measured by (shared by processes and restarts)."""
        self.memory = ResponseOwners(policy)
        self.store = store
        self._clock = clock
        self._to_thread = to_thread
        self._calls = trio.CapacityLimiter(STORE_CALLS)
        self._opened = False
        self.writes = OwnerWrites(store, self._store_call, lambda: self.policy.max_entries) \
            if store is not None else None
        self.pruned = 0       # rows the prunes deleted

    @property
    def policy(self) -> StoredResponses:
        return self.memory.policy

    @property
    def store_up(self) -> bool:
        return self.writes is not None and self.writes.store_up

    def reconfigure(self, policy: StoredResponses) -> None:
        self.memory.reconfigure(policy)

    # --- lookups -------------------------------------------------------------

    async def lookup(self, owner: str, response_id: str) -> Found:
        """Memory first, then this worker's rows still on their way, then the store while it answers."""
        now = trio.current_time()
        mine = self.memory.backend_of(owner, response_id, now)
        if mine is not None or self.store is None or self.writes is None or not storable_id(response_id):
            return Found(mine, mine is None and self.memory.known_to_other(owner, response_id, now))
        queued = self.writes.pending(owner, response_id)
        if queued is not None:   # this worker's own change, not in the store yet
            return Found(queued.backend, self.memory.known_to_other(owner, response_id, now))
        found = await self._ask(owner, response_id)
        for pause in MISS_RETRIES:
            if found.backend is not None or found.other:
                break
            await trio.sleep(pause)
            found = await self._ask(owner, response_id)
        return Found(found.backend, found.other or self.memory.known_to_other(owner, response_id, now))

    async def _ask(self, owner: str, response_id: str) -> Found:
        assert self.store is not None and self.writes is not None
        if not self.writes.store_up:
            raise self._unavailable()
        policy = self.policy
        try:
            return await self._store_call(self.store.lookup, owner, response_id, self._clock() - policy.max_age,
                                          policy.max_entries)
        except Exception as exc:   # within the store's own deadline
            self.writes.failed(exc, "look up")
            raise self._unavailable() from None

    async def backend_of(self, owner: str, response_id: str) -> str | None:
        return (await self.lookup(owner, response_id)).backend

    def _unavailable(self) -> StoredResponsesUnavailable:
        name = self.store.name if self.store is not None else "shared"
        return StoredResponsesUnavailable(
            f"Which backend holds this stored response is kept in the {name} store (usage.ledger), which is not "
            f"answering; retry shortly")

    # --- changes -------------------------------------------------------------

    async def remember(self, owner: str, response_id: str, backend: str) -> None:
        """Note the id now, and tell the store (never waited for)."""
        self.memory.remember(owner, response_id, backend, trio.current_time())
        if self.writes is not None and storable_id(response_id):
            await self.writes.tell(Op(owner, response_id, backend, self._clock()))

    async def forget(self, owner: str, response_id: str) -> None:
        """A deleted response: gone from memory and this worker's answers at once, from the store as soon
        as the writer gets to it."""
        self.memory.forget(owner, response_id)
        if self.writes is not None and storable_id(response_id):
            await self.writes.tell(Op(owner, response_id, None, self._clock()))

    async def prune(self) -> int:
        """Delete the store's rows past the bounds now; how many went (0 when the store is away or failed)."""
        if self.store is None or self.writes is None or not self.writes.store_up:
            return 0
        policy = self.policy
        try:
            gone = await self._store_call(self.store.prune, self._clock() - policy.max_age, policy.max_entries)
        except Exception as exc:
            self.writes.failed(exc, "prune")
            return 0
        self.pruned += gone or 0
        return gone or 0

    # --- the actor -----------------------------------------------------------

    async def open(self) -> None:
        """Connect to the store (it raises when it cannot be used): before the Runtime starts anything."""
        if self.store is not None and not self._opened:
            await self._to_thread(self.store.open, limiter=self._calls)
            self._opened = True

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Host the writer and prune the store every ``PRUNE_EVERY``."""
        await self.open()
        async with trio.open_nursery() as nursery:
            if self.writes is not None:
                nursery.start_soon(self.writes.run)
            task_status.started(self)
            while self.store is not None:
                await self.prune()
                await trio.sleep(PRUNE_EVERY)
            await trio.sleep_forever()

    async def aclose(self) -> None:
        """Write what is queued (while the store answers), then close the store."""
        if self.store is not None and self._opened:
            if self.writes is not None:
                await self.writes.flush()
            self._opened = False
            await self._to_thread(self.store.close, limiter=self._calls)

    async def _store_call(self, fn: Callable[..., R], *args: Any) -> R:
        """One blocking store call in a worker thread (a cancel waits for it: a write is never half-known)."""
        return await self._to_thread(fn, *args, limiter=self._calls)
