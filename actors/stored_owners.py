"""StoredOwners: which backend created which stored response, per API key, for every worker and instance.

Two places, looked up in order: this worker's own memory
(``response_owners.ResponseOwners``: what it relayed itself), then the
shared store (``OwnerStore``, filled by ``protocol/stores/response_owners.py``:
the usage ledger's SQLite file or PostgreSQL), where every worker writes what
it relays. Without a store (``usage.ledger: memory``) the memory is the map.

The create path tells and waits only for what a client can race: the row is
written (in a worker thread, off the event loop) before the answer that names
the id leaves, bounded by ``WRITE_WAIT``; a write that takes longer goes on in
the background. A store that fails is logged and counted, never fails a call:
the worker's memory still answers, and a lookup the store cannot answer is
an unknown id. ``run`` prunes the store by the bounds every ``PRUNE_EVERY``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, Protocol

import trio
from attrs import frozen

from switchyard.actors.response_owners import ResponseOwners
from switchyard.config.stored_responses import StoredResponses

log = logging.getLogger("switchyard.responses")

WRITE_WAIT = 2.0      # seconds a create waits, at most, for its owner row before its answer goes out
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

    def remember(self, owner: str, response_id: str, backend: str, created: float) -> None: ...

    def lookup(self, owner: str, response_id: str, since: float, max_entries: int) -> Found:
        """The id as this owner and others hold it: rows created after ``since`` and within the newest
        ``max_entries`` only."""
        ...

    def forget(self, owner: str, response_id: str) -> None: ...

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
        self._nursery: trio.Nursery | None = None
        self._opened = False
        self.store_up = store is not None
        self.failures = 0     # store calls that failed
        self.pruned = 0       # rows the prunes deleted

    @property
    def policy(self) -> StoredResponses:
        return self.memory.policy

    def reconfigure(self, policy: StoredResponses) -> None:
        self.memory.reconfigure(policy)

    # --- lookups -------------------------------------------------------------

    async def lookup(self, owner: str, response_id: str) -> Found:
        """Memory first; the store only for an id this worker does not hold."""
        now = trio.current_time()
        mine = self.memory.backend_of(owner, response_id, now)
        if mine is not None or self.store is None:
            return Found(mine, mine is None and self.memory.known_to_other(owner, response_id, now))
        policy = self.policy
        found = await self._call("look up", self.store.lookup, owner, response_id, self._clock() - policy.max_age,
                                 policy.max_entries)
        return found if found is not None else Found(None, self.memory.known_to_other(owner, response_id, now))

    async def backend_of(self, owner: str, response_id: str) -> str | None:
        return (await self.lookup(owner, response_id)).backend

    # --- changes -------------------------------------------------------------

    async def remember(self, owner: str, response_id: str, backend: str) -> None:
        """Note the id now; return once the store has it too, or after ``WRITE_WAIT`` (the write goes on)."""
        self.memory.remember(owner, response_id, backend, trio.current_time())
        if self.store is None:
            return
        write = (self.store.remember, owner, response_id, backend, self._clock())
        if self._nursery is None:   # not running (a Runtime that was never started): write in place
            await self._call("write", *write)
            return
        done = trio.Event()

        async def written() -> None:
            try:
                await self._call("write", *write)
            finally:
                done.set()

        self._nursery.start_soon(written)
        with trio.move_on_after(WRITE_WAIT) as waited:
            await done.wait()
        if waited.cancelled_caught:
            log.warning("stored response %s: its owner row took longer than %gs to write; answered without "
                        "waiting for it", response_id, WRITE_WAIT)

    async def forget(self, owner: str, response_id: str) -> None:
        """A deleted response: gone from memory and, before this returns, from the store."""
        self.memory.forget(owner, response_id)
        if self.store is not None:
            await self._call("forget", self.store.forget, owner, response_id)

    async def prune(self) -> int:
        """Delete the store's rows past the bounds now; how many went (0 when the store failed)."""
        if self.store is None:
            return 0
        policy = self.policy
        gone = await self._call("prune", self.store.prune, self._clock() - policy.max_age, policy.max_entries)
        self.pruned += gone or 0
        return gone or 0

    # --- the actor -----------------------------------------------------------

    async def open(self) -> None:
        """Connect to the store (it raises when it cannot be used): before the Runtime starts anything."""
        if self.store is not None and not self._opened:
            await self._to_thread(self.store.open, limiter=self._calls)
            self._opened = True

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Host the background writes and prune the store every ``PRUNE_EVERY``."""
        await self.open()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started(self)
                while self.store is not None:
                    await self.prune()
                    await trio.sleep(PRUNE_EVERY)
                await trio.sleep_forever()
        finally:
            self._nursery = None

    async def aclose(self) -> None:
        if self.store is not None and self._opened:
            self._opened = False
            await self._to_thread(self.store.close, limiter=self._calls)

    async def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """One store call in a worker thread; None when it failed (logged once an outage, and counted)."""
        assert self.store is not None
        try:
            result = await self._to_thread(fn, *args, limiter=self._calls)
        except Exception as exc:
            self.failures += 1
            if self.store_up:
                log.warning("stored responses: the %s store failed (%s: %s); this worker's memory answers until "
                            "it is back", self.store.name, what, exc)
            self.store_up = False
            return None
        if not self.store_up:
            log.info("stored responses: the %s store is back", self.store.name)
            self.store_up = True
        return result
