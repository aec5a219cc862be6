"""StoredOwners: which backend created which stored response, per API key, for every worker and instance.

Two places, looked up in order: this worker's own memory
(``response_owners.ResponseOwners``: what it relayed itself), then the
shared store (``OwnerStore``, filled by ``protocol/stores/response_owners.py``:
the usage ledger's SQLite file or PostgreSQL), where every worker writes what
it relays. Without a store (``usage.ledger: memory``) the memory is the map.

The request path never waits on a store that is away. Rows are written like
ledger records (``owner_writes.py``): queued, written in the background in
order, retried with backoff while the store is away, bounded. While the store
answers, a create waits for its row at most ``WRITE_WAIT`` (the store's short
deadline), so another worker finds the id as soon as it reaches the client;
while it is away a create does not wait at all. A lookup the memory cannot
answer asks the store under the same deadline, and while the store is away
(or once it misses the deadline) fails at once with
``StoredResponsesUnavailable``: a clear 503, never an id wrongly said to be
unknown. ``run`` hosts the writer and prunes the store by the bounds every
``PRUNE_EVERY``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, Protocol, Sequence

import trio
from attrs import frozen

from switchyard.actors.errors import StoredResponsesUnavailable
from switchyard.actors.owner_writes import Op, OwnerWrites
from switchyard.actors.response_owners import ResponseOwners, storable_id
from switchyard.config.stored_responses import StoredResponses

log = logging.getLogger("switchyard.responses")

WRITE_WAIT = 0.5      # seconds: the store's short deadline; a create waits at most this for its row, a lookup
                      # for its answer (a healthy store takes milliseconds)
PRUNE_EVERY = 60.0    # seconds between prunes of the store
STORE_CALLS = 4       # store calls in flight at once (worker threads)

ToThread = Callable[..., Awaitable[Any]]   # trio.to_thread.run_sync's shape


@frozen
class Found:
    backend: str | None   # the caller's: the backend that created the id for this owner
    other: bool           # another owner holds the id


class OwnerStore(Protocol):
    """The shared map's store; blocking methods, run in worker threads. Each may raise (``StoreUnavailable``)."""

    name: str

    def open(self) -> None: ...

    def apply(self, ops: Sequence[Op]) -> None:
        """Remember and forget, in order, in one transaction."""
        ...

    def lookup(self, owner: str, response_id: str, since: float, max_entries: int) -> Found:
        """The id as this owner and others hold it: rows created after ``since`` and within the newest
        ``max_entries`` only."""
        ...

    def prune(self, before: float, max_entries: int) -> int: ...

    def close(self) -> None: ...


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
        self.lookup_failures = 0   # lookups the store failed or did not answer within WRITE_WAIT

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
        """Memory first; the store only for an id this worker does not hold, and only while it answers."""
        now = trio.current_time()
        mine = self.memory.backend_of(owner, response_id, now)
        if mine is not None or self.store is None or self.writes is None or not storable_id(response_id):
            return Found(mine, mine is None and self.memory.known_to_other(owner, response_id, now))
        if not self.writes.store_up:
            raise self._unavailable()
        policy = self.policy
        found: Found | None = None
        with trio.move_on_after(WRITE_WAIT):
            try:
                found = await self._lookup_call(owner, response_id, self._clock() - policy.max_age,
                                                policy.max_entries)
            except Exception as exc:
                self.lookup_failures += 1
                self.writes.failed(exc, "look up")
                raise self._unavailable() from None
        if found is None:   # the store did not answer in time: away until the writer's retry says otherwise
            self.lookup_failures += 1
            self.writes.failed(TimeoutError(f"no answer within {WRITE_WAIT:g}s"), "look up")
            raise self._unavailable()
        return Found(found.backend, found.other or self.memory.known_to_other(owner, response_id, now))

    async def backend_of(self, owner: str, response_id: str) -> str | None:
        return (await self.lookup(owner, response_id)).backend

    def _unavailable(self) -> StoredResponsesUnavailable:
        name = self.store.name if self.store is not None else "shared"
        return StoredResponsesUnavailable(
            f"Which backend holds this stored response is kept in the {name} store (usage.ledger), which is not "
            f"answering; retry shortly")

    # --- changes -------------------------------------------------------------

    async def remember(self, owner: str, response_id: str, backend: str) -> None:
        """Note the id now; while the store answers, return once it has the row too (at most WRITE_WAIT)."""
        self.memory.remember(owner, response_id, backend, trio.current_time())
        if self.writes is not None and storable_id(response_id):
            await self.writes.tell(Op(owner, response_id, backend, self._clock()), WRITE_WAIT)

    async def forget(self, owner: str, response_id: str) -> None:
        """A deleted response: gone from memory at once and, while the store answers, from the store before
        this returns (at most WRITE_WAIT; else as soon as it is back)."""
        self.memory.forget(owner, response_id)
        if self.writes is not None and storable_id(response_id):
            await self.writes.tell(Op(owner, response_id, None, self._clock()), WRITE_WAIT)

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
        """Write what is queued (while the store answers, within WRITE_WAIT), then close the store."""
        if self.store is not None and self._opened:
            if self.writes is not None:
                await self.writes.flush(WRITE_WAIT)
            self._opened = False
            await self._to_thread(self.store.close, limiter=self._calls)

    async def _store_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One blocking store call in a worker thread (a cancel waits for it: a write is never half-known)."""
        return await self._to_thread(fn, *args, limiter=self._calls)

    async def _lookup_call(self, *args: Any) -> Any:
        """A lookup for the request path: a caller past its deadline abandons the thread (the limiter's slot
        comes back when it ends)."""
        assert self.store is not None
        return await self._to_thread(self.store.lookup, *args, limiter=self._calls, abandon_on_cancel=True)
