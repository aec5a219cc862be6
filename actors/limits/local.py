"""The limiter in this worker's memory: exact within one worker, decided by the pure core.

Every count lives in one ``Counters`` keyed by scope (never by config
revision), so a reload that changes the limits keeps the counts in flight.
An admission decides and reserves with no await in between, so two calls
of one worker never both take the last slot.

Budgets are seeded lazily: the first admission that draws on a budget
bucket (an owner's day, week, month or total) asks the ledger for that
owner's settled spend since the bucket began (``UsageQuery(key=..., since=...,
purpose=None)``), once; calls drawing on it meanwhile wait for that one
read. A new period is a new bucket, seeded the same way. If the ledger
cannot answer (within ``SEED_TIMEOUT``), the bucket counts this worker's
spend only and the read is tried again ``SEED_RETRY`` seconds later; when it
succeeds, what this worker settled meanwhile is taken to be in the ledger's
figure already (its records were flushed), so nothing counts twice.

``divided(n)`` is a limiter enforcing 1/n of every limit: a worker's share
of a fleet while the shared store is away (the Redis limiter's fail_open).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Mapping

import trio

from switchyard.actors.ledger.record import StoreUnavailable, UsageQuery
from switchyard.actors.limits.tickets import Admission, Demand, Summary, Ticket, configured
from switchyard.actors.routing import limits as core
from switchyard.actors.routing.budget_periods import Bucket, bucket_of
from switchyard.config.access import ApiKey
from switchyard.config.limits import Budget, Organization
from switchyard.config.schema import Snapshot

log = logging.getLogger("switchyard.limits")

SEED_TIMEOUT = 5.0     # seconds an admission waits for the ledger's figure of a budget bucket
SEED_RETRY = 10.0      # seconds before a failed seed is tried again
PRUNE_EVERY = 60.0     # seconds between sweeps of idle windows, ended leases and old buckets


class LocalLimiter:
    """The ``Limiter`` port in memory.

    ``config`` returns the running Snapshot (read for ``key_view``; a call's
    limits come in its ``Demand``). ``ledger`` is ``LedgerActor.summary``
    (None: budgets start at 0). ``clock`` is monotonic seconds (windows and
    leases), ``wall`` Unix seconds (budget periods). ``origin`` is written on
    every ticket this limiter admits.
    """

    def __init__(self, config: Callable[[], Snapshot], *, ledger: Summary | None = None,
                 clock: Callable[[], float] = trio.current_time, wall: Callable[[], float] = time.time,
                 share: int = 1, origin: str = "local") -> None:
        self.counters = core.Counters(share)
        self.origin = origin
        self._config = config
        self._ledger = ledger
        self._clock = clock
        self._wall = wall
        self._seeding: dict[tuple[str, str, str], trio.Event] = {}
        self._seed_failed: dict[tuple[str, str, str], float] = {}   # bucket -> when its seed last failed
        self._pruned_at = -math.inf

    @property
    def share(self) -> int:
        return self.counters.share

    def divided(self, n: int, *, origin: str | None = None) -> "LocalLimiter":
        """A new limiter enforcing 1/``n`` of every limit, with counters of its own and this one's
        config, ledger and clocks."""
        return LocalLimiter(self._config, ledger=self._ledger, clock=self._clock, wall=self._wall, share=n,
                            origin=origin if origin is not None else f"{self.origin}/{n}")

    async def admit(self, demand: Demand) -> Admission:
        if demand.budgets:
            wall = self._wall()
            for line in demand.budgets:
                await self._seed(line.owner, line.owner_id, bucket_of(line.budget.period, wall))
        now = self._clock()
        if now - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = now
            self.counters.prune(now, self._wall())
        decision = core.decide(self.counters, demand, now, self._wall())
        ticket = None if decision.refusal is not None else Ticket(demand, decision.buckets, now, self.origin)
        return Admission(decision.refusal, decision.requests, decision.tokens, ticket)

    def settle(self, ticket: Ticket, tokens_used: int, cost_usd: float | None) -> None:
        core.settle(self.counters, ticket.demand, ticket.buckets, tokens_used, cost_usd, self._clock())

    async def key_view(self, key: str | ApiKey, organizations: Mapping[str, Organization] | None = None
                       ) -> dict[str, Any]:
        """The key's windows and leases (and its organization's), and what is left of their budgets.

        ``key``: the key itself (a database key), or a key id of the config (``KeyError`` when it has none);
        ``organizations``: those it is judged by (the config's and the database's), else the config's.
        """
        snapshot = self._config()
        key = configured(snapshot, key)
        orgs = snapshot.organizations if organizations is None else organizations
        now, wall = self._clock(), self._wall()
        scopes = {s.kind: s for s in core.scopes_for(snapshot.rate_limiting, orgs, key, None, None)}
        out: dict[str, Any] = {"id": key.id, "organization_id": key.organization_id, "share": self.share}
        out["rate_limit"] = self._scope(scopes.get("key"), now)
        out["budget"] = await self._budget("key", key.id, key.budget, wall)
        if key.organization_id is not None:
            org = orgs.get(key.organization_id)
            out["organization"] = {
                "id": key.organization_id,
                "rate_limit": self._scope(scopes.get("organization"), now),
                "budget": await self._budget("organization", key.organization_id,
                                             org.budget if org is not None else None, wall),
            }
        return out

    def _scope(self, scope: core.Scope | None, now: float) -> dict[str, Any] | None:
        return None if scope is None else core.scope_view(self.counters, scope.kind, scope.name, scope.limit, now)

    async def _budget(self, owner: str, owner_id: str, budget: Budget | None,
                      wall: float) -> dict[str, Any] | None:
        if budget is None:
            return None
        await self._seed(owner, owner_id, bucket_of(budget.period, wall))
        view = core.budget_view(self.counters, owner, owner_id, budget, wall)
        state = self.counters.budgets.get((owner, owner_id, view["bucket"]))
        view["seeded"] = state is not None and state.seeded
        return view

    # --- seeding from the ledger ------------------------------------------------------------

    async def _seed(self, owner: str, owner_id: str, bucket: Bucket) -> None:
        key = (owner, owner_id, bucket.name)
        state = self.counters.budgets.get(key)
        if state is not None and state.seeded:
            return
        if self._ledger is None:
            self.counters.budget(owner, owner_id, bucket).seeded = True
            return
        pending = self._seeding.get(key)
        if pending is not None:         # another call is reading it: wait for that one read
            with trio.move_on_after(SEED_TIMEOUT):
                await pending.wait()
            return
        failed = self._seed_failed.get(key)
        if failed is not None and self._clock() - failed < SEED_RETRY:
            return
        done = self._seeding[key] = trio.Event()
        try:
            totals = await self._read(owner, owner_id, bucket)
        finally:
            del self._seeding[key]
            done.set()
        state = self.counters.budget(owner, owner_id, bucket)
        if totals is None:
            self._seed_failed[key] = self._clock()
            return
        self._seed_failed.pop(key, None)
        usd = float(totals.get("cost") or 0.0)
        tokens = int(totals.get("input_tokens") or 0) + int(totals.get("output_tokens") or 0)
        state.seed_usd = max(0.0, usd - state.spent_usd)
        state.seed_tokens = max(0, tokens - state.spent_tokens)
        state.seeded = True

    async def _read(self, owner: str, owner_id: str, bucket: Bucket) -> dict[str, Any] | None:
        """The ledger's totals of one owner since the bucket began, or None if it cannot say in time."""
        assert self._ledger is not None
        query = UsageQuery(key=owner_id if owner == "key" else None,
                           org=owner_id if owner == "organization" else None,
                           since=bucket.start, purpose=None)
        rows = None
        try:
            with trio.move_on_after(SEED_TIMEOUT):
                rows = await self._ledger(query)
        except StoreUnavailable as exc:
            log.warning("budget of %s %r (%s): the ledger cannot say what was spent (%s); counting this "
                        "worker's spend only, trying again in %gs", owner, owner_id, bucket.name, exc, SEED_RETRY)
            return None
        if rows is None:
            log.warning("budget of %s %r (%s): the ledger did not answer within %gs; counting this worker's "
                        "spend only, trying again in %gs", owner, owner_id, bucket.name, SEED_TIMEOUT, SEED_RETRY)
            return None
        return rows[0] if rows else {}
