"""Budget counters that are missing in Redis (first use of a bucket, or a Redis that restarted empty)
are seeded from the ledger's settled spend, with a set-if-absent script: instances seeding together
never double count, and one worker reads the ledger once per counter however many calls wait for it."""

from __future__ import annotations

import logging
import math
import uuid
from typing import Any, Awaitable, Callable

import trio

from switchyard.actors.ledger.record import StoreUnavailable, UsageQuery
from switchyard.actors.limits.tickets import Summary
from switchyard.actors.routing import limits as core
from switchyard.actors.routing.budget_periods import Bucket, bucket_expiry
from switchyard.protocol.stores.redis_script import budget_key

log = logging.getLogger("switchyard.limits")

SEED_TIMEOUT = 2.0       # seconds an admission waits for the ledger's figure of a budget bucket
SEED_RETRY = 10.0        # seconds before a bucket whose seed failed is tried again


class Seeder:
    """Seeds budget counters; ``op`` runs a limiter script (raising RedisUnavailable), ``ledger`` is
    ``LedgerActor.summary`` (None: budgets start at 0)."""

    def __init__(self, op: Callable[..., Awaitable[Any]], ledger: Summary | None,
                 timeout: float = SEED_TIMEOUT) -> None:
        self._op = op
        self._ledger = ledger
        self._seed_timeout = timeout
        self._seeding: dict[str, trio.Event] = {}
        self._seed_failed: dict[str, float] = {}   # budget key -> trio time its seed last failed
        self._me = uuid.uuid4().hex[:12]           # who seeded a counter (for a person reading Redis)
        self.seeds = 0                             # counters this worker seeded

    async def seed(self, lines: list[tuple[core.BudgetLine, Bucket]], wall: float) -> bool:
        """Seed each missing counter from the ledger (one read per counter however many calls
        wait for it); False if one could not be (the ledger did not answer)."""
        for line, bucket in lines:
            key = budget_key(line.owner, line.owner_id, bucket.name)
            pending = self._seeding.get(key)
            if pending is not None:
                with trio.move_on_after(self._seed_timeout):
                    await pending.wait()
            failed = self._seed_failed.get(key)
            if failed is not None and trio.current_time() - failed < SEED_RETRY:
                return False
            if pending is not None:
                continue
            done = self._seeding[key] = trio.Event()
            try:
                totals = await self.read(line.owner, line.owner_id, bucket)
                if totals is None:
                    self._seed_failed[key] = trio.current_time()
                    return False
                self._seed_failed.pop(key, None)
                usd = float(totals.get("cost") or 0.0)
                tokens = int(totals.get("input_tokens") or 0) + int(totals.get("output_tokens") or 0)
                expiry = bucket_expiry(bucket)   # as a TTL: Redis's clock need not agree with ours
                ttl = "" if expiry is None else str(max(1, math.ceil(expiry - wall)))
                wrote = await self._op("seed", [key], [repr(usd), str(tokens), ttl, self._me])
                self.seeds += int(wrote == 1)
            finally:
                del self._seeding[key]
                done.set()
        return True

    async def read(self, owner: str, owner_id: str, bucket: Bucket) -> dict[str, Any] | None:
        """The ledger's totals of one owner since the bucket began, or None if it cannot say in time."""
        if self._ledger is None:
            return {}
        query = UsageQuery(key=owner_id if owner == "key" else None,
                           org=owner_id if owner == "organization" else None, since=bucket.start, purpose=None)
        rows = None
        try:
            with trio.move_on_after(self._seed_timeout):
                rows = await self._ledger(query)
        except StoreUnavailable as exc:
            log.warning("budget of %s %r (%s): the ledger cannot say what was spent (%s); its calls go to "
                        "state.on_unavailable, the ledger is asked again in %gs", owner, owner_id, bucket.name,
                        exc, SEED_RETRY)
            return None
        if rows is None:
            log.warning("budget of %s %r (%s): the ledger did not answer within %gs; its calls go to "
                        "state.on_unavailable, the ledger is asked again in %gs", owner, owner_id, bucket.name,
                        self._seed_timeout, SEED_RETRY)
            return None
        return rows[0] if rows else {}
