"""RedisLimiter against a real Redis (``tests/redis.py``): the script's rules, exactness under
concurrency, budgets seeded from a real ledger, and what happens when Redis goes away.

Redis ``TIME`` cannot be mocked: most tests give the limiter a ``clock`` whose
value the script takes as "now" (so instants are exact and a slow machine
cannot let a window refill mid-test); ``test_redis_time_is_the_clock_by_default``
runs the production path on Redis's own clock with one short real wait.
Budget periods use the real wall clock (a counter's TTL is two periods past
its bucket, on Redis's clock).
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable

import pytest
import trio

from switchyard.actors.ledger.actor import LedgerActor
from switchyard.actors.ledger.record import LedgerRecord, UsageQuery
from switchyard.actors.limits.local import LocalLimiter
from switchyard.actors.limits.tickets import Admission
from switchyard.actors.ports import Limiter
from switchyard.actors.routing import limits as core
from switchyard.config.limits import OnUnavailable, State
from switchyard.config.load import load_text
from switchyard.config.schema import Snapshot
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores import redis_script
from switchyard.protocol.stores.memory import MemoryStore
from switchyard.protocol.stores.redis_limits import FALLBACK_ORIGIN, ORIGIN, UNAVAILABLE, RedisLimiter
from switchyard.protocol.stores.redis_script import budget_key, lease_key, rate_key
from tests import redis

redis_server, redis_url = redis.redis_server, redis.redis_url   # the fixtures this module uses

WALL = time.time()   # budget periods: real (a counter's TTL runs on Redis's clock), fixed within the run
SLACK = 0.25         # seconds a loaded CI machine may add to an operation_timeout


def snapshot(per_key: str = "{requests_per_minute: 100}", key_extra: str = "", org_budget: str = "",
             extra: str = "") -> Snapshot:
    text = f"""
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [m]
rate_limiting:
  per_key: {per_key}
{extra}
api_keys:
  - id: team-a
    key: team-a-secret-0123456789
    organization_id: acme
{key_extra}
organizations:
  - id: acme
{org_budget}
"""
    return load_text(text, env={}).snapshot


def demand(snap: Snapshot, call_id: str, tokens: int = 100, worst_usd: float = 0.0, model: str = "m",
           ip: str = "10.0.0.1") -> core.Demand:
    key = snap.api_keys.keys[0]
    return core.Demand(call_id, core.scopes_for(snap.rate_limiting, snap.organizations, key, ip, model), tokens,
                       core.budgets_for(snap.organizations, key, worst_usd, tokens))


class Clock:
    """The "now" handed to the script: moved by the test, never by time passing."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def start(nursery: trio.Nursery, url: str, snap: Snapshot, *, clock: Callable[[], float] | None = None,
                timeout: float = 2.0, on_unavailable: str = "fail_open", workers: int = 1,
                ledger: Any = None) -> RedisLimiter:
    state = State(redis_url=url, operation_timeout=timeout, on_unavailable=OnUnavailable(on_unavailable),
                  fleet_workers=workers)
    limiter = RedisLimiter(state, lambda: snap, ledger=None if ledger is None else ledger.summary, clock=clock,
                           wall=lambda: WALL)
    await nursery.start(limiter.run)
    return limiter


async def admit_all(limiter: Limiter, demands: list[core.Demand]) -> list[Admission]:
    out: list[Admission] = []

    async def one(d: core.Demand) -> None:
        out.append(await limiter.admit(d))

    async with trio.open_nursery() as n:
        for d in demands:
            n.start_soon(one, d)
    return out


def admitted(results: list[Admission]) -> list[Admission]:
    return [a for a in results if a.refusal is None]


async def ledger_of(tmp_path, records: list[LedgerRecord] = ()) -> tuple[LedgerActor, MemoryStore]:
    store = MemoryStore()
    actor = LedgerActor(store, UsageConfig(), tmp_path / "spill.jsonl")
    await actor.open()
    store.write(list(records))
    return actor, store


def rec(n: int, cost: float, key: str = "team-a", tokens: int = 50) -> LedgerRecord:
    return LedgerRecord(request_id=f"req-{n}", time=WALL - 1, key_id=key, organization_id="acme", endpoint="chat",
                        model="m", served_model="m", backend="a", attempts=1, status=200, error_code=None,
                        input_tokens=tokens, output_tokens=tokens, cost=cost, record_id=f"rec-{n}")


def assert_close(got: Any, want: Any, path: str = "") -> None:
    """Equal, floats to 1e-9 (a nested view: pytest.approx takes one level only)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for k in want:
            assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, float):
        assert got == pytest.approx(want, abs=1e-9), path
    else:
        assert got == want, path


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


# --- keys ------------------------------------------------------------------------------------

def test_every_key_is_in_the_one_hash_tag_and_names_are_percent_encoded():
    keys = [rate_key("model", "org:x/m", "requests_per_minute"), lease_key("key", "a{b}"),
            budget_key("organization", "acme", "2026-03"), redis_script.INFLIGHT, redis_script.CALLS + "c"]
    assert all(k.startswith("sy:{sy}:") for k in keys)
    assert rate_key("model", "a:b", "requests_per_minute") != rate_key("model", "a", "b:requests_per_minute")
    assert rate_key("model", "org:x/m", "requests_per_minute") == "sy:{sy}:rl:model:org%3Ax%2Fm:requests_per_minute"
    assert lease_key("key", "a{b}") == "sy:{sy}:cc:key:a%7Bb%7D"


def test_a_missing_redis_server_fails_the_test_naming_ci_run(monkeypatch):
    monkeypatch.setattr(redis, "BINARY", "/nonexistent/redis-server")
    monkeypatch.setattr(redis.shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match=r"\.ci/run.*redis-server"):
        redis.redis_binary()


# --- the script's rules ----------------------------------------------------------------------

async def test_requests_per_minute_is_a_burst_of_the_limit_then_one_every_emission_interval(nursery, redis_url):
    snap = snapshot("{requests_per_minute: 60}")
    clock = Clock()
    limiter = await start(nursery, redis_url, snap, clock=clock)
    for i in range(60):
        assert (await limiter.admit(demand(snap, f"c{i}"))).refusal is None
    refused = await limiter.admit(demand(snap, "c60"))
    assert refused.refusal is not None and refused.refusal.dimension == "requests_per_minute"
    assert refused.refusal.retry_after == pytest.approx(1.0)
    assert refused.requests == core.Quota(60, 0, pytest.approx(60.0))
    clock.now += 0.999
    assert (await limiter.admit(demand(snap, "c61"))).refusal is not None
    clock.now += 0.001
    later = await limiter.admit(demand(snap, "c62"))
    assert later.refusal is None and later.ticket.origin == ORIGIN and later.ticket.admitted_at == clock.now
    assert (await limiter.admit(demand(snap, "c63"))).refusal is not None


WALKS = {
    # concurrency and budgets bind most
    "leases_and_budgets": dict(
        per_key="{requests_per_second: 3, requests_per_minute: 40, tokens_per_minute: 40000, max_concurrent: 6}",
        key_extra="    budget: {limit_usd: 9.0, limit_tokens: 150000}",
        org_budget="    budget: {limit_usd: 8.0, period: week}",
        extra="  global: {requests_per_minute: 60}\n  per_model: {m: {tokens_per_minute: 30000}}"),
    # the windows bind most
    "windows": dict(
        per_key="{requests_per_minute: 30, tokens_per_minute: 20000}",
        key_extra="    budget: {limit_tokens: 400000}",
        extra="  global: {requests_per_second: 2}\n  per_model: {m: {tokens_per_minute: 16000}}\n"
              "  per_organization: {requests_per_minute: 25}"),
}


@pytest.mark.parametrize("walk", sorted(WALKS))
async def test_the_script_decides_as_the_local_limiter_does_step_by_step(nursery, redis_url, walk):
    """The same random walk of admissions, settles and instants through Redis and through the
    LocalLimiter on the pure core: the same refusals (to the message), quotas and budgets.
    Tokens used stay within the reservation here: past it, the committed core charges from the stored
    TAT even once that is in the past (and not at all once pruned), the script from max(TAT, now)."""
    snap = snapshot(**WALKS[walk])
    clock = Clock()
    limiter = await start(nursery, redis_url, snap, clock=clock)
    local = LocalLimiter(lambda: snap, clock=clock, wall=lambda: WALL)
    rng = random.Random(19)
    held: list[tuple[Any, Any]] = []
    refusals: set[tuple[str, str]] = set()
    for step in range(400):
        clock.now += rng.choice([0.0, 0.0, 0.0, 0.05, 0.3, 1.0, 2.5])
        if held and rng.random() < 0.4:
            a, b = held.pop(rng.randrange(len(held)))
            used, cost = rng.randrange(0, a.demand.tokens + 1), rng.choice([None, rng.random() * 0.2])
            limiter.settle(a, used, cost)
            local.settle(b, used, cost)
            assert await limiter.flush()
            continue
        d = demand(snap, f"c{step}", tokens=rng.randrange(50, 2500), worst_usd=rng.random() * 0.3)
        got, want = await limiter.admit(d), await local.admit(d)
        assert got.refusal == want.refusal, step
        assert (got.requests, got.tokens) == (want.requests, want.tokens), step
        if got.ticket is not None:
            held.append((got.ticket, want.ticket))
        else:
            refusals.add((got.refusal.scope, got.refusal.dimension))
    redis_view, local_view = await limiter.key_view("team-a"), await local.key_view("team-a")
    assert redis_view.pop("store") == "redis"
    assert_close(redis_view, local_view)
    assert len(refusals) >= 3 and limiter.disagreements == 0, refusals


async def test_redis_time_is_the_clock_by_default(nursery, redis_url):
    snap = snapshot("{requests_per_second: 4}")
    limiter = await start(nursery, redis_url, snap)   # no clock: the script reads Redis TIME
    first = [await limiter.admit(demand(snap, f"c{i}")) for i in range(4)]
    assert all(a.refusal is None for a in first)
    assert abs(first[0].ticket.admitted_at - time.time()) < 5   # Unix seconds, from Redis
    refused = await limiter.admit(demand(snap, "c4"))
    assert refused.refusal is not None and 0 < refused.refusal.retry_after <= 0.25
    await trio.sleep(refused.refusal.retry_after + 0.01)
    assert (await limiter.admit(demand(snap, "c5"))).refusal is None


async def test_a_refusal_changes_nothing_in_any_scope_or_budget(nursery, redis_url):
    snap = snapshot("{requests_per_minute: 100, tokens_per_minute: 10000, max_concurrent: 5}",
                    key_extra="    budget: {limit_usd: 1.0}",
                    extra="  per_model: {m: {requests_per_minute: 1}}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    first = await limiter.admit(demand(snap, "c1", worst_usd=0.1))
    before = await limiter.key_view("team-a")
    refused = await limiter.admit(demand(snap, "c2", worst_usd=0.1))
    assert (refused.refusal.scope, refused.refusal.dimension) == ("model", "requests_per_minute")
    assert refused.ticket is None and refused.requests == first.requests and refused.tokens == first.tokens
    assert await limiter.key_view("team-a") == before


async def test_the_refusal_reported_is_the_first_in_order_budget_before_scopes(nursery, redis_url):
    snap = snapshot("{requests_per_minute: 1}", key_extra="    budget: {limit_usd: 0.1}",
                    extra="  global: {requests_per_minute: 1}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    assert (await limiter.admit(demand(snap, "c1", worst_usd=0.05))).refusal is None
    both = await limiter.admit(demand(snap, "c2", worst_usd=0.2))   # over budget and over both rates
    assert (both.refusal.scope, both.refusal.dimension) == ("key", "budget_usd")
    rates = await limiter.admit(demand(snap, "c3", worst_usd=0.01))
    assert (rates.refusal.scope, rates.refusal.dimension) == ("global", "requests_per_minute")


async def test_a_token_reservation_larger_than_the_limit_is_refused_saying_so(nursery, redis_url):
    snap = snapshot("{tokens_per_minute: 1000}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    refused = await limiter.admit(demand(snap, "c1", tokens=1001))
    assert refused.refusal.dimension == "tokens_per_minute" and refused.refusal.retry_after is None
    assert "more than the whole limit of 1000" in refused.refusal.message
    assert (await limiter.admit(demand(snap, "c2", tokens=1000))).refusal is None


async def test_settle_gives_unused_tokens_back_and_charges_tokens_beyond_the_reservation(nursery, redis_url):
    snap = snapshot("{tokens_per_minute: 6000}")
    clock = Clock()
    limiter = await start(nursery, redis_url, snap, clock=clock)
    a = await limiter.admit(demand(snap, "c1", tokens=3000))
    assert a.tokens.remaining == 3000
    limiter.settle(a.ticket, 1000, None)
    assert await limiter.flush()
    b = await limiter.admit(demand(snap, "c2", tokens=1000))
    assert b.tokens.remaining == 4000   # 2000 given back, 1000 more reserved
    limiter.settle(b.ticket, 2500, None)   # 1500 past its reservation: charged
    assert await limiter.flush()
    assert (await limiter.key_view("team-a"))["rate_limit"]["windows"]["tokens_per_minute"]["remaining"] == 2500


async def test_tokens_used_past_the_reservation_are_charged_from_now_once_the_window_refilled(nursery, redis_url):
    snap = snapshot("{tokens_per_minute: 6000}")
    clock = Clock()
    limiter = await start(nursery, redis_url, snap, clock=clock)
    a = await limiter.admit(demand(snap, "c1", tokens=1000))   # TAT: now + 10 s
    clock.now += 20.0                                          # the window is full again
    limiter.settle(a.ticket, 4000, None)                       # 3000 past the reservation
    assert await limiter.flush()
    window = (await limiter.key_view("team-a"))["rate_limit"]["windows"]["tokens_per_minute"]
    assert (window["remaining"], window["reset"]) == (3000, pytest.approx(30.0))


async def test_a_lease_ends_at_settle_or_ten_minutes_after_admission(nursery, redis_url):
    snap = snapshot("{max_concurrent: 2}")
    clock = Clock()
    limiter = await start(nursery, redis_url, snap, clock=clock)
    a, b = await limiter.admit(demand(snap, "c1")), await limiter.admit(demand(snap, "c2"))
    full = await limiter.admit(demand(snap, "c3"))
    assert (full.refusal.dimension, full.refusal.retry_after) == ("max_concurrent", None)
    limiter.settle(a.ticket, 0, None)
    assert await limiter.flush()
    assert (await limiter.admit(demand(snap, "c4"))).refusal is None
    clock.now += core.LEASE_SECONDS - 0.001
    assert (await limiter.admit(demand(snap, "c5"))).refusal is not None
    clock.now += 0.001   # b's lease (and c4's, admitted at the same instant) have expired
    assert (await limiter.admit(demand(snap, "c6"))).refusal is None
    assert b.ticket is not None


async def test_a_crashed_instances_budget_reservation_is_given_back_ten_minutes_after_admission(nursery,
                                                                                             redis_url):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0}")
    clock = Clock()
    crashed = await start(nursery, redis_url, snap, clock=clock)
    assert (await crashed.admit(demand(snap, "c1", worst_usd=0.9))).refusal is None   # and never settles
    other = await start(nursery, redis_url, snap, clock=clock)
    assert (await other.admit(demand(snap, "c2", worst_usd=0.2))).refusal.dimension == "budget_usd"
    clock.now += core.LEASE_SECONDS
    assert (await other.admit(demand(snap, "c3", worst_usd=0.2))).refusal is None
    assert (await other.key_view("team-a"))["budget"]["reserved_usd"] == pytest.approx(0.2)


# --- exact under concurrency -----------------------------------------------------------------

async def test_300_concurrent_admissions_against_100_a_minute_admit_exactly_100(nursery, redis_url):
    snap = snapshot("{requests_per_minute: 100}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    results = await admit_all(limiter, [demand(snap, f"c{i}") for i in range(300)])
    assert len(admitted(results)) == 100
    assert {a.refusal.dimension for a in results if a.refusal} == {"requests_per_minute"}
    assert limiter.fallback_admissions == 0


async def test_tokens_per_minute_admits_exactly_what_fits_under_concurrency(nursery, redis_url):
    snap = snapshot("{tokens_per_minute: 10000}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    results = await admit_all(limiter, [demand(snap, f"c{i}", tokens=300) for i in range(300)])
    assert len(admitted(results)) == 33   # 33 x 300 = 9900 <= 10000 < 34 x 300


async def test_max_concurrent_admits_exactly_the_limit_under_concurrency(nursery, redis_url):
    snap = snapshot("{max_concurrent: 10}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    results = await admit_all(limiter, [demand(snap, f"c{i}") for i in range(300)])
    ok = admitted(results)
    assert len(ok) == 10
    for a in ok[:3]:
        limiter.settle(a.ticket, 10, None)
    assert await limiter.flush()
    assert len(admitted(await admit_all(limiter, [demand(snap, f"d{i}") for i in range(50)]))) == 3


async def test_200_parallel_calls_never_spend_past_the_budget(nursery, redis_url, tmp_path):
    """Each call reserves its worst case, runs a while, and settles to a real cost at most that;
    the ledger's settled total stays within the budget, and the budget is used up."""
    snap = snapshot("{max_concurrent: 1000}", key_extra="    budget: {limit_usd: 1.0, limit_tokens: 40000}")
    ledger, store = await ledger_of(tmp_path)
    nursery.start_soon(ledger.run)
    limiter = await start(nursery, redis_url, snap, clock=Clock(), ledger=ledger)
    rng = random.Random(7)
    spent: list[float] = []

    async def call(i: int) -> None:
        a = await limiter.admit(demand(snap, f"c{i}", tokens=400, worst_usd=0.05))
        if a.refusal is not None:
            assert a.refusal.dimension in ("budget_usd", "budget_tokens")
            return
        await trio.sleep(rng.random() * 0.05)
        cost, tokens = rng.uniform(0.01, 0.05), rng.randrange(100, 400)
        ledger.record(rec(i, cost, tokens=tokens // 2))
        spent.append(cost)
        limiter.settle(a.ticket, tokens // 2 * 2, cost)

    async with trio.open_nursery() as n:
        for i in range(200):
            n.start_soon(call, i)
    assert await limiter.flush()
    await ledger.flush()
    total = store.summary(UsageQuery(key="team-a", purpose=None))[0]
    assert total["cost"] <= 1.0 + 1e-9 and total["input_tokens"] + total["output_tokens"] <= 40000
    assert len(spent) >= 20   # 20 worst cases fit at once; settling below them lets more in
    view = (await limiter.key_view("team-a"))["budget"]
    assert view["spent_usd"] == pytest.approx(sum(spent)) and view["reserved_usd"] == pytest.approx(0.0)


async def test_two_limiters_sharing_one_redis_admit_exactly_the_limit_together(nursery, redis_url):
    snap = snapshot("{requests_per_minute: 100, max_concurrent: 60}")
    clock = Clock()
    one = await start(nursery, redis_url, snap, clock=clock)
    two = await start(nursery, redis_url, snap, clock=clock)
    results: dict[str, list[Admission]] = {}

    async def worker(name: str, limiter: RedisLimiter) -> None:
        results[name] = await admit_all(limiter, [demand(snap, f"{name}-{i}") for i in range(150)])

    async with trio.open_nursery() as n:
        n.start_soon(worker, "one", one)
        n.start_soon(worker, "two", two)
    assert len(admitted(results["one"])) + len(admitted(results["two"])) == 60   # max_concurrent first
    for a in admitted(results["one"]) + admitted(results["two"]):
        (one if a.ticket.demand.call_id.startswith("one") else two).settle(a.ticket, 0, None)
    assert await one.flush() and await two.flush()
    more = await admit_all(one, [demand(snap, f"more-{i}") for i in range(100)])
    assert len(admitted(more)) == 40   # the rest of the 100 a minute
    assert one.fallback_admissions == two.fallback_admissions == 0


# --- budgets seeded from the ledger ----------------------------------------------------------

async def test_a_budget_counter_is_seeded_from_the_ledgers_spend_in_its_bucket(nursery, redis_url, tmp_path):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0, limit_tokens: 1000}")
    ledger, _ = await ledger_of(tmp_path, [rec(1, 0.5), rec(2, 0.3),
                                           rec(3, 5.0, key="team-b"),
                                           LedgerRecord(**{**rec(4, 9.0).to_dict(), "time": 0.0})])   # long ago
    limiter = await start(nursery, redis_url, snap, clock=Clock(), ledger=ledger)
    refused = await limiter.admit(demand(snap, "c1", tokens=10, worst_usd=0.25))
    assert refused.refusal.dimension == "budget_usd" and "0.8 spent or reserved" in refused.refusal.message
    assert (await limiter.admit(demand(snap, "c2", tokens=10, worst_usd=0.2))).refusal is None
    view = (await limiter.key_view("team-a"))["budget"]
    assert (view["spent_usd"], view["spent_tokens"], view["reserved_usd"]) == (pytest.approx(0.8), 200,
                                                                             pytest.approx(0.2))
    assert view["seeded"] is True and limiter.seeds == 1


async def test_limiters_seeding_together_never_double_count(nursery, redis_url, tmp_path):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0}")
    ledger, _ = await ledger_of(tmp_path, [rec(1, 0.5)])
    limiters = [await start(nursery, redis_url, snap, clock=Clock(), ledger=ledger) for _ in range(3)]
    async with trio.open_nursery() as n:
        for i, limiter in enumerate(limiters):
            for j in range(5):
                n.start_soon(limiter.admit, demand(snap, f"c{i}-{j}", worst_usd=0.01))
    assert sum(limiter.seeds for limiter in limiters) == 1
    view = (await limiters[0].key_view("team-a"))["budget"]
    assert view["spent_usd"] == pytest.approx(0.5) and view["reserved_usd"] == pytest.approx(0.15)


async def test_redis_restarted_empty_keeps_the_spend(nursery, redis_server, redis_url, tmp_path):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0}")
    ledger, _ = await ledger_of(tmp_path)
    nursery.start_soon(ledger.run)
    limiter = await start(nursery, redis_url, snap, clock=Clock(), ledger=ledger, timeout=0.5)
    for i in range(8):
        a = await limiter.admit(demand(snap, f"c{i}", worst_usd=0.2))
        assert a.refusal is None
        ledger.record(rec(i, 0.1))
        limiter.settle(a.ticket, 100, 0.1)
    assert await limiter.flush()
    await ledger.flush()
    redis_server.stop()
    redis_server.start()   # empty
    await limiter.admit(demand(snap, "probe", worst_usd=0.0))   # finds the old connection gone
    await until(lambda: limiter.available)
    refused = await limiter.admit(demand(snap, "c8", worst_usd=0.25))
    assert refused.refusal is not None and refused.refusal.dimension == "budget_usd"
    assert (await limiter.admit(demand(snap, "c9", worst_usd=0.2))).refusal is None
    view = (await limiter.key_view("team-a"))["budget"]
    assert view["spent_usd"] == pytest.approx(0.8) and view["seeded"] is True


# --- Redis away --------------------------------------------------------------------------------

async def test_redis_stopped_mid_load_fail_open_enforces_the_local_share_and_recovers(nursery, redis_server,
                                                                                    redis_url, caplog):
    caplog.set_level(logging.WARNING, logger="switchyard.limits")
    snap = snapshot("{requests_per_minute: 100}")
    # a stopped server refuses at once; the bound is roomy so a loaded machine makes no second outage
    limiter = await start(nursery, redis_url, snap, timeout=0.2, workers=2)
    before = admitted(await admit_all(limiter, [demand(snap, f"a{i}") for i in range(20)]))
    assert len(before) == 20 and all(a.ticket.origin == ORIGIN for a in before)
    redis_server.stop()
    waits: list[float] = []

    async def timed(i: int) -> Admission:
        t0 = time.monotonic()
        a = await limiter.admit(demand(snap, f"b{i}"))
        waits.append(time.monotonic() - t0)
        return a

    results = [await timed(i) for i in range(100)]
    ok = admitted(results)
    # 100 a minute / 2 workers, 20 of whose 100 (12 s of the window) Redis had admitted: 40 of 50 left
    assert len(ok) == 40 and all(a.ticket.origin == FALLBACK_ORIGIN for a in ok)
    assert max(waits) <= 0.2 + SLACK
    assert (limiter.outages, limiter.fallback_admissions) == (1, 100)
    for a in before + ok:
        limiter.settle(a.ticket, 10, None)   # never waits, Redis or not
    redis_server.start()
    await until(lambda: limiter.available)
    back = await limiter.admit(demand(snap, "c0"))
    assert back.refusal is None and back.ticket.origin == ORIGIN
    lines = [r.getMessage() for r in caplog.records if r.name == "switchyard.limits"]
    assert sum("is unavailable" in line for line in lines) == 1, lines
    assert sum("is back after" in line for line in lines) == 1, lines


async def test_a_window_used_up_in_redis_is_used_up_in_the_local_share(nursery, redis_server, redis_url):
    snap = snapshot("{requests_per_minute: 100}")
    limiter = await start(nursery, redis_url, snap, timeout=0.2, workers=4)
    assert len(admitted(await admit_all(limiter, [demand(snap, f"a{i}") for i in range(100)]))) == 100
    redis_server.stop()   # an outage right after the burst: no fresh share of 25 on top of the 100
    assert admitted(await admit_all(limiter, [demand(snap, f"b{i}") for i in range(30)])) == []
    assert limiter.fallback_admissions == 30


async def test_the_local_share_of_a_budget_is_of_what_redis_had_neither_spent_nor_reserved(nursery, redis_server,
                                                                                          redis_url):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0}")
    limiter = await start(nursery, redis_url, snap, timeout=0.2, workers=2)
    held = admitted(await admit_all(limiter, [demand(snap, f"a{i}", worst_usd=0.1) for i in range(6)]))
    assert len(held) == 6   # 0.6 USD reserved in Redis, still in flight
    redis_server.stop()
    # 0.4 USD left, this worker's half 0.2: two calls of 0.1, not the 1.0 / 2 of a fresh share
    local = admitted([await limiter.admit(demand(snap, f"b{i}", worst_usd=0.1)) for i in range(5)])
    assert len(local) == 2 and all(a.ticket.origin == FALLBACK_ORIGIN for a in local)


async def test_redis_stopped_fail_closed_refuses_with_rate_limiter_unavailable_at_once(nursery, redis_server,
                                                                                     redis_url):
    snap = snapshot("{requests_per_minute: 100}")
    limiter = await start(nursery, redis_url, snap, timeout=0.2, on_unavailable="fail_closed")
    assert (await limiter.admit(demand(snap, "a"))).refusal is None
    redis_server.stop()
    for i in range(20):
        t0 = time.monotonic()
        a = await limiter.admit(demand(snap, f"b{i}"))
        assert time.monotonic() - t0 <= 0.2 + SLACK
        assert a.ticket is None and (a.refusal.scope, a.refusal.dimension) == ("state", UNAVAILABLE)
        assert "fail_closed" in a.refusal.message
    assert limiter.unavailable_refusals == 20 and limiter.outages == 1
    unlimited = await limiter.admit(core.Demand("free", (), 10))   # nothing to check: no Redis needed
    assert unlimited.refusal is None


async def test_a_hung_redis_never_holds_an_admission_past_operation_timeout(nursery, redis_server, redis_url):
    snap = snapshot("{requests_per_minute: 1000, max_concurrent: 1}")
    limiter = await start(nursery, redis_url, snap, timeout=0.05, on_unavailable="fail_closed")
    warm = await limiter.admit(demand(snap, "warm"))   # a connection is open
    limiter.settle(warm.ticket, 0, None)
    assert await limiter.flush()
    redis_server.pause()
    t0 = time.monotonic()
    lost = await limiter.admit(demand(snap, "lost"))   # sent; its answer will come too late
    assert time.monotonic() - t0 <= 0.05 + SLACK
    assert lost.refusal.dimension == UNAVAILABLE
    redis_server.resume()
    await until(lambda: limiter.available)
    assert await limiter.flush()
    view = await limiter.key_view("team-a")
    assert view["rate_limit"]["in_flight"] == 0   # Redis ran the lost admission, then its release


async def test_spend_settled_while_redis_was_away_counts_in_the_shared_budget(nursery, redis_server,
                                                                             redis_url, tmp_path):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0}")
    limiter = await start(nursery, redis_url, snap, timeout=0.05)
    assert (await limiter.admit(demand(snap, "seed", worst_usd=0.0))).refusal is None   # counter in Redis
    redis_server.pause()
    local = await limiter.admit(demand(snap, "c1", worst_usd=0.5))
    assert local.ticket.origin == FALLBACK_ORIGIN
    limiter.settle(local.ticket, 100, 0.4)
    assert limiter.queued_settles >= 1
    redis_server.resume()
    await until(lambda: limiter.available)
    assert await limiter.flush()
    assert (await limiter.key_view("team-a"))["budget"]["spent_usd"] == pytest.approx(0.4)
    assert (await limiter.admit(demand(snap, "c2", worst_usd=0.7))).refusal.dimension == "budget_usd"


async def test_a_cancelled_admission_gives_back_what_it_may_hold(nursery, redis_server, redis_url):
    snap = snapshot("{max_concurrent: 1}")
    limiter = await start(nursery, redis_url, snap, timeout=2.0)
    warm = await limiter.admit(demand(snap, "warm"))
    limiter.settle(warm.ticket, 0, None)
    assert await limiter.flush()
    redis_server.pause()
    with trio.move_on_after(0.1):
        await limiter.admit(demand(snap, "gone"))   # the client left while the script was on its way
    redis_server.resume()
    assert await limiter.flush(5.0)
    assert (await limiter.key_view("team-a"))["rate_limit"]["in_flight"] == 0
    assert (await limiter.admit(demand(snap, "next"))).refusal is None


# --- batches, a busy worker, and what the local share admitted ----------------------------------

async def test_concurrent_admissions_go_to_redis_together_in_few_script_calls(nursery, redis_url):
    snap = snapshot("{requests_per_minute: 100}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    results = await admit_all(limiter, [demand(snap, f"c{i}") for i in range(300)])
    assert len(admitted(results)) == 100
    # the first in each free lane goes alone; the rest wait for a lane and go 64 at a time
    assert limiter.admissions_sent == 300 and limiter.admission_script_calls <= 2 + -(-298 // 64)


async def test_a_worker_busy_with_its_own_requests_does_not_take_itself_for_a_slow_redis(nursery, redis_url):
    snap = snapshot("{requests_per_minute: 100000}")
    limiter = await start(nursery, redis_url, snap, timeout=0.05)

    async def busy() -> None:   # the worker's own requests: the loop stalls 80 ms at a time
        while True:
            end = time.perf_counter() + 0.08
            while time.perf_counter() < end:
                pass
            await trio.sleep(0.02)

    nursery.start_soon(busy)
    await trio.sleep(0.3)   # the loop's lag is seen
    results = [await limiter.admit(demand(snap, f"c{i}")) for i in range(40)]
    assert all(a.ticket is not None and a.ticket.origin == ORIGIN for a in results)
    assert limiter.outages == 0


async def test_the_local_shares_calls_in_flight_take_their_budget_in_redis_when_it_is_back(nursery, redis_server,
                                                                                          redis_url):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0}")
    limiter = await start(nursery, redis_url, snap, clock=Clock(), timeout=0.05)
    assert (await limiter.admit(demand(snap, "seed", worst_usd=0.0))).refusal is None   # counter in Redis
    redis_server.pause()
    local = await limiter.admit(demand(snap, "c1", worst_usd=0.5))
    assert local.ticket.origin == FALLBACK_ORIGIN
    redis_server.resume()
    await until(lambda: limiter.available)
    assert limiter.claimed == 1
    view = (await limiter.key_view("team-a"))["budget"]
    assert view["reserved_usd"] == pytest.approx(0.5)   # Redis holds what the share admitted
    assert (await limiter.admit(demand(snap, "c2", worst_usd=0.6))).refusal.dimension == "budget_usd"
    limiter.settle(local.ticket, 100, 0.4)
    assert await limiter.flush()
    view = (await limiter.key_view("team-a"))["budget"]
    assert (view["spent_usd"], view["reserved_usd"]) == (pytest.approx(0.4), pytest.approx(0.0))
    assert (await limiter.admit(demand(snap, "c3", worst_usd=0.6))).refusal is None


async def test_the_local_shares_admissions_count_in_the_shared_window_when_redis_is_back(nursery, redis_server,
                                                                                        redis_url):
    snap = snapshot("{requests_per_minute: 100, max_concurrent: 1000}")
    limiter = await start(nursery, redis_url, snap, clock=Clock(), timeout=0.2, workers=2)
    assert (await limiter.admit(demand(snap, "warm"))).refusal is None
    redis_server.pause()
    local = admitted([await limiter.admit(demand(snap, f"b{i}")) for i in range(60)])
    assert len(local) == 49 and limiter.outages == 1   # half of the 99 Redis left
    for a in local[:20]:
        limiter.settle(a.ticket, 0, None)   # 20 end during the outage, 29 are still in flight
    redis_server.resume()
    await until(lambda: limiter.available)
    assert limiter.claimed == 49
    assert (await limiter.key_view("team-a"))["rate_limit"]["in_flight"] == 1 + 29
    # b0, sent before Redis froze, was run when it woke (its lease given back, its request counted): the
    # minute has 100 - 1 - 1 - 49 = 49 left in Redis, for every worker
    assert len(admitted(await admit_all(limiter, [demand(snap, f"c{i}") for i in range(80)]))) == 49


async def test_the_local_shares_admissions_long_past_still_fill_the_shared_window_when_redis_is_back(
        nursery, redis_server, redis_url):
    """A claim replays the share's calls at their own instants, each one emission interval after the
    one before: a chain whose early steps are already in the past must still be counted whole (their
    sum reaches into the future), however long ago the calls were."""
    clock = Clock()
    snap = snapshot("{requests_per_minute: 40}")   # one call every 1.5 s
    limiter = await start(nursery, redis_url, snap, clock=clock, timeout=0.2, workers=2)
    assert (await limiter.admit(demand(snap, "warm"))).refusal is None   # Redis: TAT 1001.5
    redis_server.pause()
    local = len(admitted([await limiter.admit(demand(snap, f"b{i}")) for i in range(30)]))
    assert 0 < local <= 20 and limiter.outages == 1
    clock.now += 5.0   # the share's calls are 5 s old when Redis is back: each step alone is in the past
    redis_server.resume()
    await until(lambda: limiter.available)
    assert limiter.claimed == local
    # b0, sent before Redis froze, was run when it woke (+1.5), and each claimed call adds 1.5: the
    # window's TAT is 1003 + 1.5 x local, and a call is admitted while TAT - now <= 60 - 1.5
    expected = int((1005.0 + 58.5 - (1003.0 + 1.5 * local)) / 1.5) + 1
    assert len(admitted([await limiter.admit(demand(snap, f"c{i}")) for i in range(40)])) == expected


async def test_the_shared_limiters_health_is_in_prometheus_at_scrape_time(nursery, redis_server, redis_url):
    from prometheus_client import CollectorRegistry, generate_latest

    from switchyard.protocol.serving.store_metrics import LIMITER, CountersCollector, counters_of

    snap = snapshot("{requests_per_minute: 100}")
    limiter = await start(nursery, redis_url, snap, timeout=0.2)
    registry = CollectorRegistry()
    registry.register(CountersCollector(LIMITER, lambda: counters_of(limiter, LIMITER)))

    def scraped() -> dict[str, float]:
        lines = generate_latest(registry).decode().splitlines()
        return {n: float(v) for n, v in (line.split(" ") for line in lines if not line.startswith("#"))}

    assert (await limiter.admit(demand(snap, "a"))).refusal is None
    up = scraped()
    assert up["rate_limit_store_up"] == 1.0 and up["rate_limit_admission_scripts_total"] == 1.0
    redis_server.stop()
    await limiter.admit(demand(snap, "b"))
    down = scraped()
    assert (down["rate_limit_store_up"], down["rate_limit_store_outages_total"]) == (0.0, 1.0)
    assert down["rate_limit_fallback_admissions_total"] == 1.0 and down["rate_limit_store_failures_total"] >= 1
    assert {"rate_limit_claimed_calls_total", "rate_limit_settles_queued",
            "rate_limit_settles_dropped_total"} <= set(down)


def test_a_gateway_without_redis_never_imports_the_redis_client():
    """coredis (and beartype under it) is a sixth of a worker's imports: only a config with Redis pays it."""
    import subprocess
    import sys

    code = ("import sys, switchyard.protocol.serving.cli, switchyard.protocol.serving.wiring; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('coredis', 'beartype')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
