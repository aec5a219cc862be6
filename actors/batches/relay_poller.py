"""The relayed batches' poller: each open relayed batch is asked of its provider, whether or not a client asks.

A relayed batch's ledger records are written when the gateway first sees
it ended (``BatchRelay.refresh``); without this actor that would wait for
its client to look. Every worker sweeps at start (a batch that ended while
the gateway was down gets its records then), then every
``max(30 s, 10 × batches.poll_interval)``: providers rate-limit batch reads,
and a batch takes minutes to hours, so a tighter loop would spend the
backend's request budget to learn nothing. Up to ``OPEN_MAX`` batches a
sweep, the oldest first, ``AT_ONCE`` at a time. Workers sweeping the same
batch together are safe: the end is written once (``BatchStore.update_open``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import trio

from switchyard.actors.batches.records import Batch
from switchyard.actors.batches.relay import BatchRelay
from switchyard.actors.errors import GatewayError
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.schema import Snapshot

log = logging.getLogger("switchyard.batches")

FLOOR = 30.0       # seconds between two sweeps, at least
FACTOR = 10        # ... else this many batches.poll_interval
OPEN_MAX = 1000    # relayed batches asked of per sweep, the oldest first
AT_ONCE = 4        # provider requests of one sweep in flight together


class RelayPoller:
    name = "batch_relay_poller"

    def __init__(self, relay: BatchRelay, current: Callable[[], Snapshot]) -> None:
        self.relay = relay
        self.current = current      # the running revision, read afresh each sweep
        self.sweeps = 0
        self.failures = 0           # refreshes that failed (logged), since start

    def interval(self) -> float:
        return max(FLOOR, FACTOR * self.current().batches.poll_interval)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self.sweep()
            await trio.sleep(self.interval())

    async def sweep(self) -> int:
        """Refresh every open relayed batch (up to ``OPEN_MAX``); how many were asked of."""
        snapshot = self.current()
        try:
            batches = await trio.to_thread.run_sync(self.relay.store.relayed_open, OPEN_MAX,
                                                    limiter=self.relay.limiter)
        except StoreUnavailable as exc:
            log.warning("relayed batches: the store cannot say which are open (%s)", exc)
            return 0
        at_once = trio.CapacityLimiter(AT_ONCE)
        async with trio.open_nursery() as nursery:
            for batch in batches:
                nursery.start_soon(self._refresh, snapshot, batch, at_once)
        self.sweeps += 1
        return len(batches)

    async def _refresh(self, snapshot: Snapshot, batch: Batch, at_once: trio.CapacityLimiter) -> None:
        async with at_once:
            try:
                await self.relay.refresh(snapshot, batch)
            except (GatewayError, StoreUnavailable) as exc:
                self.failures += 1
                log.warning("relayed batch %s on %s: %s", batch.id, batch.backend,
                            exc.message if isinstance(exc, GatewayError) else exc)
