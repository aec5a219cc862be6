"""RedisLimiter: the Limiter port on counters every worker and instance shares, in Redis or Valkey.

An admission is decided by a script that checks and reserves every scope and budget of the call
atomically (``limits.lua``: GCRA, leases, budgets, with Redis ``TIME`` as the fleet's one clock).
Admissions that arrive while one script call is on its way go together in the next (``redis_batch``):
one call's round trip at low load, one per batch under load. The script returns the state each call
was decided on: the pure core (``actors/routing/limits.py``) decides a refusal again on it here, and
applies an admitted call's reservation to it, so refusals, their messages and the quota headers are the
local limiter's to the word. Settle is a tell
(``redis_settles``); budget counters missing in Redis are seeded from the ledger (``redis_seed``).

Every Redis operation is bounded (``redis_ops``: ``state.operation_timeout`` plus the worker's own loop
lag; an admission's wait is extended while the worker itself runs late, up to a cap). When one fails,
the outage is logged once and counted, and admissions go to ``on_unavailable``: fail_open, a
LocalLimiter enforcing 1/``fleet_workers`` of every limit, going on from the shared windows and budgets
Redis last showed, never from a fresh share; fail_closed, a refusal (503 ``rate_limiter_unavailable``).
A probe tries Redis again with backoff. When it answers, before Redis decides again, the calls the
local share admitted are claimed in it (their rate windows charged at their own instants; those in
flight take their leases and budget reservations) and the queued settles are applied: the fleet's
windows and budgets then hold what was admitted on either side.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Mapping

import trio

from switchyard.actors.limits.local import LocalLimiter
from switchyard.actors.limits.tickets import Admission, Demand, Refusal, Summary, Ticket, configured
from switchyard.actors.routing import limits as core
from switchyard.config.access import ApiKey
from switchyard.config.limits import OnUnavailable, Organization, State
from switchyard.config.schema import Snapshot
from switchyard.protocol.stores.redis_batch import Batches
from switchyard.protocol.stores.redis_ops import RedisUnavailable, Scripts, where
from switchyard.protocol.stores.redis_script import (
    CALLS,
    FALLBACK_ORIGIN,
    ORIGIN,
    Plan,
    batch,
    claim_part,
    settles_anything,
)
from switchyard.protocol.stores.redis_seed import SEED_TIMEOUT, Seeder
from switchyard.protocol.stores.redis_settles import SETTLE_BATCH, SETTLE_LANES, Settles
from switchyard.protocol.stores.redis_view import shared_view
from switchyard.protocol.stores.redis_wire import Address, RedisWire

log = logging.getLogger("switchyard.limits")

SEED_ROUNDS = 3          # admission scripts one call may run while its budget counters are being seeded
FIRST_PROBE = 0.1        # seconds from an outage to the first probe; doubles ...
MAX_PROBE = 5.0          # ... up to this
ADMIT_BATCH = 64         # admissions one script call decides at most
ADMIT_LANES = 2          # admission script calls in flight at once
RECONCILE_ROUNDS = 4     # claim-and-replay rounds after an outage before Redis decides again
CAP_SECONDS = 1.0        # the most an admission waits for Redis while its worker runs late ...
CAP_TIMES = 20           # ... or this many operation_timeouts, if more
BORROWED_MOST = 100_000  # calls of the local share kept for their claim; past it the oldest are dropped
UNAVAILABLE = "rate_limiter_unavailable"   # the refusal's dimension under fail_closed (a 503)


class Borrowed:
    """A call the local share admitted while Redis was away: what Redis must be told when it is back."""

    __slots__ = ("ticket", "admitted", "used")

    def __init__(self, ticket: Ticket, admitted: float) -> None:
        self.ticket = ticket
        self.admitted = admitted            # when (_local_time)
        self.used: int | None = None        # tokens its settle reported; None while in flight


class RedisLimiter:
    """The ``Limiter`` port on Redis (``state.redis_url``); an actor: ``run`` it in a nursery.

    ``config`` returns the running Snapshot (``key_view`` reads it; a call's
    limits come in its Demand). ``ledger`` is ``LedgerActor.summary`` (None:
    budgets start at 0). ``clock``: None uses Redis ``TIME``; a function's
    value is passed as the script's "now" instead (tests, at exact instants).
    ``wall`` is Unix seconds for the budget periods.
    """

    name = "limits"

    def __init__(self, state: State, config: Callable[[], Snapshot], *, ledger: Summary | None = None,
                 clock: Callable[[], float] | None = None,
                 wall: Callable[[], float] = time.time, seed_timeout: float = SEED_TIMEOUT) -> None:
        if not state.redis_url:
            raise ValueError("RedisLimiter needs state.redis_url (a redis:// or rediss:// URL)")
        self.state = state
        self.where = where(state.redis_url)
        self.timeout = state.operation_timeout
        # the most one operation may take however late this worker runs (its callers' waits are extended
        # only while the worker itself is behind); a batch in flight is given that long
        self._cap = max(CAP_SECONDS, CAP_TIMES * self.timeout)
        self.fail_open = state.on_unavailable is OnUnavailable.FAIL_OPEN
        self.fallback = LocalLimiter(config, ledger=ledger, wall=wall, share=state.fleet_workers,
                                     origin=FALLBACK_ORIGIN)
        self._config = config
        self._clock = clock
        self._wall = wall
        self._scripts = Scripts(RedisWire(Address(state.redis_url)), state.operation_timeout)
        self._seeder = Seeder(self._scripts.op, ledger, seed_timeout)
        self._running = False
        self._down_since: float | None = None   # trio time the current outage began
        self._outage = trio.Event()             # set when one begins: the probe wakes
        self._settles = Settles(self._send_settles, self._now, lambda: self.available, self._fault)
        self._admissions: Batches[Plan] = Batches(self._send_admissions, self._lost, most=ADMIT_BATCH,
                                                  lanes=ADMIT_LANES, others=self._settles.riding)
        self._borrowed: dict[str, Borrowed] = {}   # calls the local share admitted, not yet claimed in Redis
        # budget bucket -> when Redis ran the admission whose state was mirrored (its now, its place in its batch)
        self._mirrored: dict[tuple[str, str, str], tuple[float, int]] = {}
        # counters, for the metrics
        self.outages = 0                # times Redis became unavailable
        self.failures = 0               # operations that failed or timed out
        self.fallback_admissions = 0    # admissions decided by the local share (fail_open)
        self.unavailable_refusals = 0   # admissions refused because Redis was away (fail_closed)
        self.claimed = 0                # calls of the local share claimed in Redis after an outage
        self.disagreements = 0          # refusals of the script the core would have admitted

    @property
    def available(self) -> bool:
        return self._running and self._down_since is None

    @property
    def seeds(self) -> int:
        """Budget counters this limiter seeded from the ledger."""
        return self._seeder.seeds

    @property
    def admission_script_calls(self) -> int:
        """Admission script calls sent (each decides a batch)."""
        return self._admissions.batches

    @property
    def admissions_sent(self) -> int:
        """Admissions those script calls carried."""
        return self._admissions.items

    @property
    def queued_settles(self) -> int:
        return self._settles.queued

    @property
    def settled(self) -> int:
        """Settles Redis applied."""
        return self._settles.settled

    @property
    def settles_dropped(self) -> int:
        """Settles dropped: the queue was full while Redis was away."""
        return self._settles.dropped

    @property
    def settles_failed(self) -> int:
        """Settles Redis refused (a script error): not retried."""
        return self._settles.failed

    # --- the actor --------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the connections (closed when it ends), the settle workers and
        the probe. A Redis that cannot be reached at start is an outage like any other."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._scripts.run)
            try:
                nursery.start_soon(self._probe)
                nursery.start_soon(self._admissions.run)
                nursery.start_soon(self._settles.run)
                self._running = True
                try:
                    await self._scripts.load(ADMIT_LANES + SETTLE_LANES)
                except RedisUnavailable as exc:
                    self._fault(exc)
                task_status.started(self)
                await trio.sleep_forever()
            finally:
                self._running = False

    async def flush(self, timeout: float = 1.0) -> bool:
        """Wait (at most ``timeout``) until every admission on its way has its answer and every queued
        settle has run; False if some have not (Redis is away). The drain calls it so a stopping
        worker's last settles (and the releases of admissions nobody waited for) are not lost."""
        with trio.move_on_after(timeout):
            # noqa below: a bounded poll during a drain over three sources (settle queue, admissions, availability)
            while (self.queued_settles or self._admissions.waiting) and self.available:  # noqa: ASYNC110
                await trio.sleep(0.005)
        return self.queued_settles == 0

    # --- admission --------------------------------------------------------------------------

    async def admit(self, demand: Demand) -> Admission:
        if not demand.scopes and not demand.budgets:
            return Admission(None, None, None, Ticket(demand, (), 0.0, ORIGIN))
        if not self.available:
            return await self._unavailable(demand)
        wall = self._wall()
        plan = Plan(demand, wall)
        for _ in range(SEED_ROUNDS):
            asked = trio.current_time()
            try:
                place, reply = await self._admissions.ask(plan, self._scripts.bound(), self._cap,
                                                          self._scripts.answering)
            except trio.TooSlowError:
                waited = (trio.current_time() - asked) * 1000
                self._fault(RedisUnavailable(f"no answer to an admission in {waited:.0f} ms, nor to anything else "
                                        f"within {self._scripts.bound_text()}"))
                return await self._unavailable(demand)
            except RedisUnavailable as exc:
                self._fault(exc)
                return await self._unavailable(demand)
            if reply[0] == "error":
                self.failures += 1
                log.error("rate limits: the admission script failed on call %s (%s); decided as Redis were "
                          "unavailable", demand.call_id, reply[1])
                return await self._unavailable(demand)
            if reply[0] != "seed":
                return self._decided(demand, plan, reply, (float(reply[1]), place), wall)
            if not await self._seeder.seed([plan.budgets[int(i) - 1] for i in reply[1:]], wall):
                return await self._unavailable(demand)
        log.warning("rate limits: the budget counters of call %s were gone again right after they were "
                    "seeded (is Redis evicting keys? set maxmemory-policy noeviction)", demand.call_id)
        return await self._unavailable(demand)

    async def _send_admissions(self, plans: list[Plan]) -> list[Any]:
        """One script call for ``plans``, with the queued settles riding along (applied first); each
        reply with its place in the batch (the script ran them in that order at one "now")."""
        settles, count, parts = self._settles.ride()
        replies = None
        try:
            keys, args = batch([self._now(), str(core.LEASE_SECONDS), CALLS, *count],
                               parts + [plan.part() for plan in plans])
            admitted, replies = await self._scripts.op("admit", keys, args, bound=self._cap)
        finally:   # not answered (failed, timed out or cancelled): the settles go back to the queue
            self._settles.rode(settles, replies)
        return list(enumerate(admitted))

    def _lost(self, plan: Plan, answer: tuple[int, Any] | None) -> None:
        """An admission the script may have made though its caller does not hold it (its batch failed,
        or the caller left or timed out first): give back whatever it reserved."""
        if answer is None or answer[1][0] == "ok":
            self._release(plan)

    def _decided(self, demand: Demand, plan: Plan, reply: list[Any], order: tuple[float, int],
                 wall: float) -> Admission:
        """The admission as the core would make it on the state the script decided on: the quotas
        after it and the ticket; for a refusal the core decides again, for the same refusal (and
        message). ``order`` says when Redis ran it (its now, its place in its batch)."""
        now = order[0]
        if reply[0] == "ok":   # the script checked what decide would: only its reservation is left to apply
            counters = plan.counters(reply, leases=False)
            requests, tokens = core.admitted(counters, demand, plan.buckets, now)
            self._mirror(plan, counters, order)
            return Admission(None, requests, tokens, Ticket(demand, plan.bucket_names, now, ORIGIN))
        counters = plan.counters(reply)
        decision = core.decide(counters, demand, now, wall)
        self._mirror(plan, counters, order)
        refusal = decision.refusal
        if refusal is None:   # Redis decides
            self.disagreements += 1
            log.warning("rate limits: the Redis script refused call %s but the core would admit it; Redis decides",
                        demand.call_id)
            refusal = Refusal("global", "", "requests_per_second", 0.0, 1.0, "refused by the shared rate limiter")
        return Admission(refusal, decision.requests, decision.tokens, None)

    def _mirror(self, plan: Plan, shared: core.Counters, order: tuple[float, int]) -> None:
        """Carry the shared state Redis just showed (after this decision) into the local share, so
        that an outage, or an answer later than operation_timeout on a busy worker, does not hand
        every worker a fresh share on top of what Redis already admitted: a window used up in Redis
        is used up in each share, and a budget's share is of what was neither spent nor reserved.

        A window keeps the further ahead of the two (the share's own calls from an earlier outage
        are not in Redis); a budget takes Redis's spent + reserved as what the ledger had, and drops
        the share's own settled spend once no settle waits to reach Redis (it is in Redis's then).
        Leases are not carried: they end with calls this worker does not see.
        """
        now = order[0]
        local = trio.current_time()
        mine = self.fallback.counters
        for key, tat in shared.tat.items():
            if tat > now:
                mine.tat[key] = max(mine.tat.get(key, 0.0), local + (tat - now))
        for line, bucket in plan.budgets:
            key = (line.owner, line.owner_id, bucket.name)
            seen = shared.budgets.get(key)
            if seen is not None and self._mirrored.get(key, (-math.inf, 0)) <= order:
                self._mirrored[key] = order   # answers may be read in another order than Redis ran them
                state = mine.budget(line.owner, line.owner_id, bucket)
                state.seed_usd = seen.spent_usd + seen.reserved_usd
                state.seed_tokens = seen.spent_tokens + seen.reserved_tokens
                state.seeded = True
                if not self.queued_settles:
                    state.spent_usd, state.spent_tokens = 0.0, 0

    async def _unavailable(self, demand: Demand) -> Admission:
        if self.fail_open:
            self.fallback_admissions += 1
            admission = await self.fallback.admit(demand)
            if admission.ticket is not None:
                self._borrowed[demand.call_id] = Borrowed(admission.ticket, self._local_time())
                if len(self._borrowed) > BORROWED_MOST:
                    del self._borrowed[next(iter(self._borrowed))]
            return admission
        self.unavailable_refusals += 1
        return Admission(Refusal("state", "redis", UNAVAILABLE, 0.0, 1.0,
                                 "rate limits and budgets cannot be checked: the shared limiter "
                                 f"({self.where}) is unavailable and state.on_unavailable is fail_closed"),
                         None, None, None)

    def _local_time(self) -> float:
        """The clock a local share's call is aged by (the test clock when one is given)."""
        return trio.current_time() if self._clock is None else float(self._clock())

    def _now(self) -> str:
        return "" if self._clock is None else repr(float(self._clock()))

    # --- settling ---------------------------------------------------------------------------

    def settle(self, ticket: Ticket, tokens_used: int, cost_usd: float | None) -> None:
        """Queue the settle (never waits). A ticket of the local share is settled there too, and
        in Redis: its spend counts in the shared budget, and whatever Redis may hold for it (its
        claim after an outage, or an admission whose answer was lost) is given back."""
        if ticket.origin == self.fallback.origin:
            self.fallback.settle(ticket, tokens_used, cost_usd)
            borrowed = self._borrowed.get(ticket.demand.call_id)
            if borrowed is not None:
                borrowed.used = tokens_used
        if not settles_anything(ticket.demand):
            return
        self._settles.tell((ticket, tokens_used, cost_usd))

    async def _send_settles(self, script: str, keys: list[str], args: list[str]) -> Any:
        return await self._scripts.op(script, keys, args, bound=self._cap)

    def _release(self, plan: Plan) -> None:
        """Queue a settle that gives back everything ``plan`` reserves (nothing used, nothing spent),
        for an admission that may have been applied though it was not admitted here."""
        if settles_anything(plan.demand):
            self.settle(Ticket(plan.demand, plan.bucket_names, 0.0, ORIGIN), 0, None)

    # --- back from an outage -------------------------------------------------------------------

    async def _reconcile(self) -> None:
        """Before Redis decides again: claim in it what the local share admitted meanwhile (rate
        windows charged as of each call's instant; calls still in flight take their leases and budget
        reservations) and apply the settles queued, until nothing is left; so Redis does not admit on
        top of calls it never saw. Raises RedisUnavailable if Redis fails on the way (the outage goes on)."""
        for _ in range(RECONCILE_ROUNDS):
            if not self._borrowed and not self._settles.queued:
                return
            await self._claim()
            await self._settles.drain()

    async def _claim(self) -> None:
        """Claim every call of the local share not yet claimed (one script call per SETTLE_BATCH).
        A call that settled more than a minute ago is dropped unclaimed: no window still holds it."""
        now = self._local_time()
        window = core.PERIOD_SECONDS["requests_per_minute"]
        for call_id in [k for k, b in self._borrowed.items() if b.used is not None and now - b.admitted >= window]:
            del self._borrowed[call_id]
        calls = list(self._borrowed.items())
        for start in range(0, len(calls), SETTLE_BATCH):
            part = calls[start:start + SETTLE_BATCH]
            keys, args = batch([self._now(), str(core.LEASE_SECONDS)],
                               [claim_part(b.ticket, now - b.admitted, b.used) for _, b in part])
            self.claimed += int(await self._scripts.op("claim", keys, args, bound=self._cap))
            for call_id, _ in part:
                self._borrowed.pop(call_id, None)

    # --- faults -----------------------------------------------------------------------------

    def _fault(self, exc: RedisUnavailable) -> None:
        self.failures += 1
        if self._down_since is not None:
            return
        self._down_since = trio.current_time()
        self.outages += 1
        if self.fail_open:
            then = (f"fail_open: each worker enforces 1/{self.state.fleet_workers} of every limit locally "
                    f"until it is back")
        else:
            then = "fail_closed: limited calls are refused (503 rate_limiter_unavailable) until it is back"
        log.warning("rate limits: Redis at %s is unavailable (%s); %s", self.where, exc, then)
        self._outage.set()

    async def _probe(self) -> None:
        """While Redis is away, try it again (loading the scripts) after 0.1 s, 0.2 s ... 5 s; the first
        answer ends the outage."""
        while True:
            await self._outage.wait()
            delay = FIRST_PROBE
            while self._down_since is not None:
                await trio.sleep(delay)
                try:
                    await self._scripts.load(ADMIT_LANES + SETTLE_LANES)
                    await self._reconcile()
                except RedisUnavailable:
                    delay = min(delay * 2, MAX_PROBE)
                    continue
                down = trio.current_time() - self._down_since
                self._down_since = None
                self._outage = trio.Event()
                if self._borrowed:   # admitted locally during the last reconcile round: claimed late
                    try:
                        await self._claim()
                    except RedisUnavailable as exc:
                        self._fault(exc)
                log.warning("rate limits: Redis at %s is back after %.1fs; limits are shared again (%d call(s) "
                            "of the local share claimed in it so far)", self.where, down, self.claimed)
                self._settles.wake()

    # --- admin --------------------------------------------------------------------------------

    async def key_view(self, key: str | ApiKey, organizations: Mapping[str, Organization] | None = None
                       ) -> dict[str, Any]:
        """As LocalLimiter.key_view, from the shared counters (``store``: redis), or from the local
        share while Redis is away. ``KeyError`` for a key id the config does not have."""
        snapshot = self._config()
        key = configured(snapshot, key)
        if self.available:
            try:
                return await shared_view(self._scripts.op, self._seeder.seed, self._now(), snapshot, key, self._wall(),
                                         organizations)
            except RedisUnavailable as exc:
                self._fault(exc)
        out = await self.fallback.key_view(key, organizations)
        out["store"] = "local share (Redis unavailable)"
        return out
