"""RedisLimiter: the Limiter port on counters every worker and instance shares, in Redis or Valkey.

One script call per admission checks and reserves every scope and budget of
the call atomically (``limits.lua``: GCRA, leases, budgets, with Redis
``TIME`` as the fleet's one clock); the script returns the state it decided
on, and the pure core (``actors/routing/limits.py``) decides again on that
state here, so refusals, their messages and the quota headers are the local
limiter's to the word. Settle is a tell: it queues, and workers in this
limiter's nursery run one script call per settle, off the request path.

Budget counters missing in Redis (first use of a bucket, or a Redis that
restarted empty) are seeded from the ledger's settled spend with a
set-if-absent script, so instances seeding together never double count.

Every Redis operation is bounded by ``state.operation_timeout``. When one
fails, the outage is logged once and counted, admissions go to
``on_unavailable`` (fail_open: a LocalLimiter enforcing 1/``fleet_workers``
of every limit, going on from the shared windows and budgets Redis last
showed, never from a fresh share; fail_closed: a refusal, 503
``rate_limiter_unavailable``)
without touching Redis, settles wait in a bounded queue, and a probe tries
Redis again with backoff; the first answer switches back and replays the
queued settles. A call that settles after an outage adds its spend to the
shared budget (if its counter is still there), so spend made on the local
shares is not lost.

A settle whose first try's answer was lost may be applied twice when it is
retried: its spend then counts twice (the safe side: a budget is never
overspent by it), never its release.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections import deque
from typing import Any, Callable
from urllib.parse import urlsplit

import coredis
import coredis.exceptions
import trio

from switchyard.actors.ledger.record import StoreUnavailable, UsageQuery
from switchyard.actors.limits.local import LocalLimiter, Summary
from switchyard.actors.limits.port import Admission, Demand, Refusal, Ticket
from switchyard.actors.routing import limits as core
from switchyard.config.limits import OnUnavailable, State
from switchyard.config.schema import Snapshot
from switchyard.protocol.stores.redis_script import (
    CALLS,
    RATE_DIMENSIONS,
    SCRIPTS,
    Keys,
    Plan,
    budget_key,
    budget_state,
    lease_key,
    rate_key,
    settle_args,
    settles_anything,
)

log = logging.getLogger("switchyard.limits")

ORIGIN = "redis"               # on the tickets this limiter admits in Redis
FALLBACK_ORIGIN = "redis-fallback"   # ... and on those its local share admits while Redis is away

SEED_TIMEOUT = 2.0       # seconds an admission waits for the ledger's figure of a budget bucket
SEED_RETRY = 10.0        # seconds before a bucket whose seed failed is tried again
SEED_ROUNDS = 3          # admission scripts one call may run while its budget counters are being seeded
FIRST_PROBE = 0.1        # seconds from an outage to the first probe; doubles ...
MAX_PROBE = 5.0          # ... up to this
PROBE_TIMEOUT = 1.0      # a probe may take longer than an operation: it may have to connect first
SETTLERS = 8             # settle scripts in flight at once
SETTLE_QUEUE = 100_000   # settles kept while Redis is away; past it the oldest are dropped (and counted)
UNAVAILABLE = "rate_limiter_unavailable"   # the refusal's dimension under fail_closed (a 503)

class Unavailable(Exception):
    """Redis did not answer in time, or answered with an error."""


def where(url: str) -> str:
    """host:port/db of a Redis URL: never its credentials."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class RedisLimiter:
    """The ``Limiter`` port on Redis (``state.redis_url``); an actor: ``run`` it in a nursery.

    ``config`` returns the running Snapshot (``key_view`` reads it; a call's
    limits come in its Demand). ``ledger`` is ``LedgerActor.summary`` (None:
    budgets start at 0). ``client`` replaces the client built from
    ``state.redis_url`` (a ``coredis.RedisCluster``, say: every key is in one
    slot). ``clock``: None uses Redis ``TIME``; a function's value is passed
    as the script's "now" instead (tests, at exact instants). ``wall`` is
    Unix seconds for the budget periods.
    """

    name = "limits"

    def __init__(self, state: State, config: Callable[[], Snapshot], *, ledger: Summary | None = None,
                 client: Any = None, clock: Callable[[], float] | None = None,
                 wall: Callable[[], float] = time.time, seed_timeout: float = SEED_TIMEOUT) -> None:
        if client is None:
            if not state.redis_url:
                raise ValueError("RedisLimiter needs state.redis_url (a redis:// or rediss:// URL)")
            client = coredis.Redis.from_url(state.redis_url, decode_responses=True)
        self.state = state
        self.where = where(state.redis_url) if state.redis_url else repr(client)
        self.timeout = state.operation_timeout
        self.fail_open = state.on_unavailable is OnUnavailable.FAIL_OPEN
        self.fallback = LocalLimiter(config, ledger=ledger, wall=wall, share=state.fleet_workers,
                                     origin=FALLBACK_ORIGIN)
        self._client = client
        self._config = config
        self._ledger = ledger
        self._clock = clock
        self._wall = wall
        self._seed_timeout = seed_timeout
        self._scripts: dict[str, Any] = {}
        self._running = False
        self._down_since: float | None = None   # trio time the current outage began
        self._outage = trio.Event()             # set when one begins: the probe wakes
        self._settles: deque[tuple[Ticket, int, float | None]] = deque()
        self._settle_lot = trio.lowlevel.ParkingLot()
        self._settling = 0
        self._seeding: dict[str, trio.Event] = {}
        self._mirrored: dict[tuple[str, str, str], float] = {}   # budget bucket -> Redis time of the state mirrored
        self._seed_failed: dict[str, float] = {}   # budget key -> trio time its seed last failed
        self._me = uuid.uuid4().hex[:12]           # who seeded a counter (for a person reading Redis)
        # counters, for the metrics
        self.outages = 0                # times Redis became unavailable
        self.failures = 0               # operations that failed or timed out
        self.fallback_admissions = 0    # admissions decided by the local share (fail_open)
        self.unavailable_refusals = 0   # admissions refused because Redis was away (fail_closed)
        self.settled = 0                # settle scripts Redis ran
        self.settles_dropped = 0        # settles dropped: the queue was full while Redis was away
        self.settles_failed = 0         # settles Redis refused (a script error): not retried
        self.seeds = 0                  # budget counters this limiter seeded from the ledger
        self.disagreements = 0          # admissions where the script and the core decided apart

    @property
    def available(self) -> bool:
        return self._running and self._down_since is None

    @property
    def queued_settles(self) -> int:
        return len(self._settles) + self._settling

    # --- the actor --------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the client (its connections live in this task's nursery), the settle workers and
        the probe. A Redis that cannot be reached at start is an outage like any other."""
        async with self._client:
            self._scripts = {name: self._client.register_script(text) for name, text in SCRIPTS.items()}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._probe)
                for _ in range(SETTLERS):
                    nursery.start_soon(self._settler)
                self._running = True
                try:
                    await self._load()
                except Unavailable as exc:
                    self._fault(exc)
                task_status.started(self)
                try:
                    await trio.sleep_forever()
                finally:
                    self._running = False

    async def flush(self, timeout: float = 1.0) -> bool:
        """Wait (at most ``timeout``) until every queued settle has run; False if some have not
        (Redis is away). The drain calls it so a stopping worker's last settles are not lost."""
        with trio.move_on_after(timeout):
            while self.queued_settles and self.available:
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
        try:
            for _ in range(SEED_ROUNDS):
                reply = await self._op("admit", plan.keys.keys,
                                       [self._now(), plan.call, str(core.LEASE_SECONDS), plan.spec, plan.record,
                                        CALLS])
                if reply[0] != "seed":
                    return self._decided(demand, plan, reply, wall)
                if not await self._seed([plan.budgets[int(i) - 1] for i in reply[1:]], wall):
                    return await self._unavailable(demand)
            log.warning("rate limits: the budget counters of call %s were gone again right after they were "
                        "seeded (is Redis evicting keys? set maxmemory-policy noeviction)", demand.call_id)
            return await self._unavailable(demand)
        except Unavailable as exc:
            self._fault(exc)
            self._release(plan)   # the script may have run though its answer never came
            return await self._unavailable(demand)
        except trio.Cancelled:
            self._release(plan)   # the caller left while the script ran: give back what it may hold
            raise

    def _decided(self, demand: Demand, plan: Plan, reply: list[Any], wall: float) -> Admission:
        """The core's decision on the state the script decided on: the same refusal (and message),
        the quotas after it, and the ticket."""
        now = float(reply[1])
        counters = plan.counters(reply)
        decision = core.decide(counters, demand, now, wall)
        self._mirror(plan, counters, now)
        admitted = reply[0] == "ok"
        refusal = decision.refusal
        if (refusal is None) != admitted:
            self.disagreements += 1
            log.warning("rate limits: the Redis script %s call %s but the core would %s it; Redis decides",
                        "admitted" if admitted else "refused", demand.call_id,
                        "refuse" if admitted else "admit")
            if admitted:
                refusal = None
            else:
                refusal = Refusal("global", "", "requests_per_second", 0.0, 1.0,
                                  "refused by the shared rate limiter")
        ticket = Ticket(demand, decision.buckets, now, ORIGIN) if refusal is None else None
        return Admission(refusal, decision.requests, decision.tokens, ticket)

    def _mirror(self, plan: Plan, shared: core.Counters, now: float) -> None:
        """Carry the shared state Redis just showed (after this decision) into the local share, so
        that an outage, or an answer later than operation_timeout on a busy worker, does not hand
        every worker a fresh share on top of what Redis already admitted: a window used up in Redis
        is used up in each share, and a budget's share is of what was neither spent nor reserved.

        A window keeps the further ahead of the two (the share's own calls from an earlier outage
        are not in Redis); a budget takes Redis's spent + reserved as what the ledger had, and drops
        the share's own settled spend once no settle waits to reach Redis (it is in Redis's then).
        Leases are not carried: they end with calls this worker does not see.
        """
        local = trio.current_time()
        mine = self.fallback.counters
        for key, tat in shared.tat.items():
            if tat > now:
                mine.tat[key] = max(mine.tat.get(key, 0.0), local + (tat - now))
        for line, bucket in plan.budgets:
            key = (line.owner, line.owner_id, bucket.name)
            seen = shared.budgets.get(key)
            if seen is not None and self._mirrored.get(key, -math.inf) <= now:
                self._mirrored[key] = now   # answers may be read in another order than Redis ran them
                state = mine.budget(line.owner, line.owner_id, bucket)
                state.seed_usd = seen.spent_usd + seen.reserved_usd
                state.seed_tokens = seen.spent_tokens + seen.reserved_tokens
                state.seeded = True
                if not self.queued_settles:
                    state.spent_usd, state.spent_tokens = 0.0, 0

    async def _unavailable(self, demand: Demand) -> Admission:
        if self.fail_open:
            self.fallback_admissions += 1
            return await self.fallback.admit(demand)
        self.unavailable_refusals += 1
        return Admission(Refusal("state", "redis", UNAVAILABLE, 0.0, 1.0,
                                 "rate limits and budgets cannot be checked: the shared limiter "
                                 f"({self.where}) is unavailable and state.on_unavailable is fail_closed"),
                         None, None, None)

    def _now(self) -> str:
        return "" if self._clock is None else repr(float(self._clock()))

    # --- seeding budget counters from the ledger ----------------------------------------------

    async def _seed(self, lines: list[tuple[core.BudgetLine, core.Bucket]], wall: float) -> bool:
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
                totals = await self._read(line.owner, line.owner_id, bucket)
                if totals is None:
                    self._seed_failed[key] = trio.current_time()
                    return False
                self._seed_failed.pop(key, None)
                usd = float(totals.get("cost") or 0.0)
                tokens = int(totals.get("input_tokens") or 0) + int(totals.get("output_tokens") or 0)
                expiry = core.bucket_expiry(bucket)   # as a TTL: Redis's clock need not agree with ours
                ttl = "" if expiry is None else str(max(1, math.ceil(expiry - wall)))
                wrote = await self._op("seed", [key], [repr(usd), str(tokens), ttl, self._me])
                self.seeds += int(wrote == 1)
            finally:
                del self._seeding[key]
                done.set()
        return True

    async def _read(self, owner: str, owner_id: str, bucket: core.Bucket) -> dict[str, Any] | None:
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

    # --- settling ---------------------------------------------------------------------------

    def settle(self, ticket: Ticket, tokens_used: int, cost_usd: float | None) -> None:
        """Queue the settle (never waits). A ticket of the local share is settled there too, and
        in Redis: its spend counts in the shared budget, and whatever Redis may have reserved for it
        (an admission whose answer was lost) is given back."""
        if ticket.origin == self.fallback.origin:
            self.fallback.settle(ticket, tokens_used, cost_usd)
        if not settles_anything(ticket.demand):
            return
        if len(self._settles) >= SETTLE_QUEUE:
            self._settles.popleft()
            self.settles_dropped += 1
        self._settles.append((ticket, tokens_used, cost_usd))
        self._settle_lot.unpark()

    def _release(self, plan: Plan) -> None:
        """Queue a settle that gives back everything ``plan`` reserves (nothing used, nothing spent),
        for an admission that may have been applied though it was not admitted here."""
        if settles_anything(plan.demand):
            self.settle(Ticket(plan.demand, plan.bucket_names, 0.0, ORIGIN), 0, None)

    async def _settler(self) -> None:
        while True:
            if not self._settles or not self.available:
                await self._settle_lot.park()
                continue
            item = self._settles.popleft()
            self._settling += 1
            try:
                keys, args = settle_args(*item, self._now())
                await self._op("settle", keys, args)
            except Unavailable as exc:
                if self._is_script_error(exc):
                    self.settles_failed += 1
                    log.error("rate limits: Redis refused a settle of call %s (%s); dropped",
                              item[0].demand.call_id, exc)
                else:
                    self._settles.appendleft(item)
                    self._fault(exc)
            else:
                self.settled += 1
            finally:
                self._settling -= 1

    @staticmethod
    def _is_script_error(exc: Unavailable) -> bool:
        cause = exc.__cause__
        return isinstance(cause, coredis.exceptions.ResponseError) and str(cause).startswith(("ERR", "WRONGTYPE"))

    # --- faults -----------------------------------------------------------------------------

    async def _op(self, script: str, keys: list[str], args: list[str], *, timeout: float | None = None) -> Any:
        """One script call, bounded: its reply, or Unavailable."""
        limit = self.timeout if timeout is None else timeout
        with trio.move_on_after(limit):
            try:
                return await self._scripts[script](keys=keys, args=args)
            except (coredis.exceptions.RedisError, OSError) as exc:
                raise Unavailable(_reason(exc)) from exc
        raise Unavailable(f"no answer within {limit * 1000:g} ms (state.operation_timeout)")

    async def _load(self) -> None:
        """Load every script (a Redis that restarted has none): the first calls after an outage then
        need no NOSCRIPT round trips within their operation_timeout. The probe of a Redis that is away."""
        with trio.move_on_after(max(self.timeout, PROBE_TIMEOUT)):
            try:
                for script in self._scripts.values():
                    await self._client.script_load(script.script)
                return
            except (coredis.exceptions.RedisError, OSError) as exc:
                raise Unavailable(_reason(exc)) from exc
        raise Unavailable(f"no answer within {max(self.timeout, PROBE_TIMEOUT) * 1000:g} ms")

    def _fault(self, exc: Unavailable) -> None:
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
                    await self._load()
                except Unavailable:
                    delay = min(delay * 2, MAX_PROBE)
                    continue
                down = trio.current_time() - self._down_since
                self._down_since = None
                self._outage = trio.Event()
                log.warning("rate limits: Redis at %s is back after %.1fs; limits are shared again%s", self.where,
                            down, f" ({len(self._settles)} queued settle(s) replayed)" if self._settles else "")
                self._settle_lot.unpark_all()

    # --- admin --------------------------------------------------------------------------------

    async def key_view(self, key_id: str) -> dict[str, Any]:
        """As LocalLimiter.key_view, from the shared counters (``store``: redis), or from the local
        share while Redis is away. Raises ``KeyError`` for a key id the config does not have."""
        snapshot = self._config()
        key = next((k for k in snapshot.api_keys.keys if k.id == key_id), None)
        if key is None:
            raise KeyError(key_id)
        if self.available:
            try:
                return await self._view(snapshot, key)
            except Unavailable as exc:
                self._fault(exc)
        out = await self.fallback.key_view(key_id)
        out["store"] = "local share (Redis unavailable)"
        return out

    async def _view(self, snapshot: Snapshot, key: Any) -> dict[str, Any]:
        wall = self._wall()
        scopes = {s.kind: s for s in core.scopes_for(snapshot.rate_limiting, snapshot.organizations, key, None, None)}
        org = snapshot.organizations.get(key.organization_id) if key.organization_id is not None else None
        owners = [("key", key.id, key.budget), ("organization", key.organization_id, org.budget if org else None)]
        lines = [(owner, owner_id, budget, core.bucket_of(budget.period, wall))
                 for owner, owner_id, budget in owners if budget is not None and owner_id is not None]
        shown = [s for s in (scopes.get("key"), scopes.get("organization")) if s is not None]
        keys = Keys()
        tats = [(s, d, keys.add(rate_key(s.kind, s.name, d))) for s in shown for d in RATE_DIMENSIONS
                if getattr(s.limit, d) is not None]
        leases = [(s, keys.add(lease_key(s.kind, s.name))) for s in shown if s.limit.max_concurrent is not None]
        budgets = [(line, keys.add(budget_key(line[0], line[1], line[3].name))) for line in lines]
        spec = json.dumps({"t": [i for *_, i in tats], "l": [i for _, i in leases], "b": [i for _, i in budgets]})
        for attempt in range(2):
            reply = await self._op("view", keys.keys, [self._now(), spec])
            pos = 1 + len(tats) + len(leases)
            missing = []
            for line, _ in budgets:
                if reply[pos] == "":
                    missing.append(line)
                    pos += 1
                else:
                    pos += 4
            if not missing or attempt or not await self._seed(
                    [(core.BudgetLine(o, i, b, 0.0, 0), bucket) for o, i, b, bucket in missing], wall):
                break
        now = float(reply[0])
        c = core.Counters()
        pos = 1
        for s, d, _ in tats:
            if reply[pos] != "":
                c.tat[(s.kind, s.name, d)] = float(reply[pos])
            pos += 1
        for s, _ in leases:
            c.leases[(s.kind, s.name)] = {f"held-{j}": math.inf for j in range(int(reply[pos]))}
            pos += 1
        seeded: dict[tuple[str, str], bool] = {}
        for (owner, owner_id, _, bucket), _ in budgets:
            if reply[pos] == "":
                seeded[(owner, owner_id)] = False
                pos += 1
                continue
            c.budgets[(owner, owner_id, bucket.name)] = budget_state(reply[pos:pos + 4])
            seeded[(owner, owner_id)] = True
            pos += 4

        def scope(kind: str) -> dict[str, Any] | None:
            s = scopes.get(kind)
            return None if s is None else core.scope_view(c, s.kind, s.name, s.limit, now)

        def budget(owner: str, owner_id: str, b: Any) -> dict[str, Any] | None:
            if b is None:
                return None
            view = core.budget_view(c, owner, owner_id, b, wall)
            view["seeded"] = seeded.get((owner, owner_id), False)
            return view

        out: dict[str, Any] = {"id": key.id, "organization_id": key.organization_id, "share": 1, "store": "redis",
                               "rate_limit": scope("key"), "budget": budget("key", key.id, key.budget)}
        if key.organization_id is not None:
            out["organization"] = {"id": key.organization_id, "rate_limit": scope("organization"),
                                   "budget": budget("organization", key.organization_id,
                                                    org.budget if org is not None else None)}
        return out
