"""LocalLimiter: the in-memory limiter on trio's clock, its budgets seeded lazily from a real ledger.

The ledger is a real LedgerActor over a MemoryStore, its reads run on the
event loop (``on_the_loop``) so the virtual instants asserted do not drift.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from switchyard.actors.ledger.actor import LedgerActor
from switchyard.actors.ledger.record import LedgerRecord
from switchyard.actors.limits import local as local_module
from switchyard.actors.limits.local import SEED_RETRY, SEED_TIMEOUT, LocalLimiter
from switchyard.actors.limits.tickets import Admission, Ticket
from switchyard.actors.ports import Limiter
from switchyard.actors.routing import limits as core
from switchyard.config.load import load_text
from switchyard.config.schema import Snapshot
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores.memory import MemoryStore

START = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.timezone.utc).timestamp()
MONTH_START = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp()

CONFIG = """
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [m]
rate_limiting:
  per_key: {requests_per_minute: 60, tokens_per_minute: 6000, max_concurrent: 2}
api_keys:
  - id: team-a
    key: team-a-secret-0123456789
    organization_id: acme
    budget: {limit_usd: 1.0, limit_tokens: 100000}
organizations:
  - id: acme
    budget: {limit_usd: 5.0, period: week}
"""


def snapshot(text: str = CONFIG) -> Snapshot:
    return load_text(text, env={}).snapshot


def wall() -> float:
    return START + trio.current_time()


async def on_the_loop(fn: Callable[..., Any], *args: Any, limiter: trio.CapacityLimiter) -> Any:
    async with limiter:
        return fn(*args)


def rec(n: int, cost: float | None, t: float = START - 3600, key: str = "team-a", org: str | None = "acme",
        tokens: int = 100) -> LedgerRecord:
    return LedgerRecord(request_id=f"req-{n}", time=t, key_id=key, organization_id=org, endpoint="chat",
                        model="m", served_model="m", backend="a", attempts=1, status=200, error_code=None,
                        input_tokens=tokens, output_tokens=tokens, cost=cost, record_id=f"rec-{n}")


async def ledger(tmp_path, records: list[LedgerRecord] = (), opened: bool = True, to_thread=on_the_loop):
    store = MemoryStore()
    actor = LedgerActor(store, UsageConfig(), tmp_path / "spill.jsonl", to_thread=to_thread)
    if opened:
        await actor.open()
        store.write(list(records))
    return actor, store


def demand_of(snap: Snapshot, worst_usd: float = 0.0, tokens: int = 100, call_id: str = "c") -> core.Demand:
    key = snap.api_keys.keys[0]
    scopes = core.scopes_for(snap.rate_limiting, snap.organizations, key, "10.0.0.1", "m")
    return core.Demand(call_id, scopes, tokens, core.budgets_for(snap.organizations, key, worst_usd, tokens))


_n = iter(range(1_000_000))


def fresh(d: core.Demand) -> core.Demand:
    import attrs
    return attrs.evolve(d, call_id=f"call-{next(_n)}")


async def test_the_local_limiter_fills_the_limiter_port():
    limiter: Limiter = LocalLimiter(snapshot)
    admission = await limiter.admit(demand_of(snapshot()))
    assert isinstance(admission, Admission) and admission.admitted


async def test_an_admission_returns_a_ticket_settle_takes_back(autojump_clock):
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, wall=wall)
    await trio.sleep(5)
    d = demand_of(snap, worst_usd=0.25)
    admission = await limiter.admit(d)
    assert admission.ticket == Ticket(d, ("2026-03", "2026-W11"), 5.0, "local")
    assert admission.requests == core.Quota(limit=60, remaining=59, reset=1.0)
    assert admission.tokens == core.Quota(limit=6000, remaining=5900, reset=pytest.approx(1.0))
    limiter.settle(admission.ticket, tokens_used=40, cost_usd=0.05)
    state = limiter.counters.budgets[("key", "team-a", "2026-03")]
    assert (state.spent_usd, state.reserved_usd, state.spent_tokens) == (0.05, 0.0, 40)
    assert limiter.counters.live_leases("key", "team-a", trio.current_time()) == {}


async def test_windows_run_on_trio_s_clock(autojump_clock):
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, wall=wall)
    d = demand_of(snap, tokens=1)
    for _ in range(60):
        limiter.settle((await limiter.admit(fresh(d))).ticket, 1, None)   # ends at once: no slot held
    refused = await limiter.admit(fresh(d))
    assert refused.refusal.dimension == "requests_per_minute"
    assert refused.refusal.retry_after == pytest.approx(1.0, abs=1e-6)
    assert refused.ticket is None
    await trio.sleep(1.0)
    assert (await limiter.admit(fresh(d))).admitted


async def test_a_lease_not_settled_ends_ten_minutes_after_admission(autojump_clock):
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, wall=wall)
    d = demand_of(snap, tokens=1)
    assert (await limiter.admit(fresh(d))).admitted and (await limiter.admit(fresh(d))).admitted
    assert (await limiter.admit(fresh(d))).refusal.dimension == "max_concurrent"
    await trio.sleep(599.9)
    assert (await limiter.admit(fresh(d))).refusal.dimension == "max_concurrent"
    await trio.sleep(0.1)
    assert (await limiter.admit(fresh(d))).admitted


async def test_a_budget_is_seeded_from_the_ledger_on_first_use(autojump_clock, tmp_path):
    records = [rec(1, 0.5), rec(2, 0.3),
               rec(3, 9.0, t=MONTH_START - 1),          # last month: another bucket
               rec(4, 9.0, key="team-b", org=None),     # another key
               rec(5, None)]                            # unpriced: tokens only
    actor, _ = await ledger(tmp_path, records)
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, ledger=actor.summary, wall=wall)
    assert (await limiter.admit(demand_of(snap, worst_usd=0.2))).admitted      # 0.8 + 0.2 <= 1.0
    state = limiter.counters.budgets[("key", "team-a", "2026-03")]
    assert (state.seed_usd, state.seed_tokens, state.seeded) == (pytest.approx(0.8), 600, True)
    refusal = (await limiter.admit(demand_of(snap, worst_usd=0.01, call_id="d"))).refusal
    assert (refusal.scope, refusal.name, refusal.dimension) == ("key", "team-a", "budget_usd")


async def test_an_organization_budget_is_seeded_with_its_organization_s_spend(autojump_clock, tmp_path):
    records = [rec(1, 2.0, key="team-b"), rec(2, 2.5, key="team-c"),
               rec(3, 7.0, key="team-d", t=dt.datetime(2026, 3, 8, 23, tzinfo=dt.timezone.utc).timestamp())]
    actor, _ = await ledger(tmp_path, records)
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, ledger=actor.summary, wall=wall)
    refusal = (await limiter.admit(demand_of(snap, worst_usd=0.75))).refusal    # 4.5 + 0.75 > 5.0
    assert (refusal.scope, refusal.name, refusal.dimension, refusal.limit) == \
        ("organization", "acme", "budget_usd", 5.0)
    assert limiter.counters.budgets[("organization", "acme", "2026-W11")].seed_usd == 4.5


async def test_calls_arriving_together_seed_a_bucket_with_one_ledger_read(autojump_clock, tmp_path):
    reads = []

    async def slow(fn, *args, limiter):
        if fn.__name__ == "summary":
            reads.append(fn.__name__)
            await trio.sleep(1.0)
        return fn(*args)
    actor, _ = await ledger(tmp_path, [rec(1, 0.5)], to_thread=slow)
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, ledger=actor.summary, wall=wall)
    admitted = []

    async def call(i: int) -> None:
        refusal = (await limiter.admit(demand_of(snap, worst_usd=0.2, call_id=f"c{i}"))).refusal
        admitted.append(refusal.dimension if refusal else "admitted")
    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(call, i)
    assert reads == ["summary", "summary"]      # one per bucket: the key's month, the organization's week
    assert sorted(admitted) == ["admitted"] * 2 + ["budget_usd"] * 3    # 0.5 seeded: two of 0.2 fit in 1.0


async def test_a_ledger_that_cannot_answer_leaves_local_counts_and_is_asked_again_later(
        autojump_clock, tmp_path, caplog):
    actor, store = await ledger(tmp_path, opened=False)       # not open: every read is StoreUnavailable
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, ledger=actor.summary, wall=wall)
    first = await limiter.admit(demand_of(snap, worst_usd=0.4, tokens=10))
    assert first.admitted
    assert "the ledger cannot say what was spent" in caplog.text
    limiter.settle(first.ticket, 10, 0.4)
    await actor.open()
    store.write([rec(1, 0.4, t=START), rec(2, 0.3, t=START - 60)])   # the settled call, and one before it
    await trio.sleep(SEED_RETRY - 1)
    await limiter.admit(demand_of(snap, worst_usd=0.0, tokens=1, call_id="d"))
    assert not limiter.counters.budgets[("key", "team-a", "2026-03")].seeded      # not asked again yet
    await trio.sleep(1)
    await limiter.admit(demand_of(snap, worst_usd=0.0, tokens=1, call_id="e"))
    state = limiter.counters.budgets[("key", "team-a", "2026-03")]
    assert state.seeded and state.seed_usd == pytest.approx(0.3)     # the 0.4 settled here is not counted twice
    assert core.budget_view(limiter.counters, "key", "team-a", snap.api_keys.keys[0].budget,
                            wall())["spent_usd"] == pytest.approx(0.7)


async def test_a_ledger_read_holds_an_admission_no_longer_than_the_seed_timeout(autojump_clock, tmp_path):
    async def hung(fn, *args, limiter):
        if fn.__name__ == "summary":    # the store opens; its reads never answer
            await trio.sleep_forever()
        return fn(*args)
    actor, _ = await ledger(tmp_path, to_thread=hung)
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, ledger=actor.summary, wall=wall)
    before = trio.current_time()
    assert (await limiter.admit(demand_of(snap, worst_usd=0.1))).admitted
    assert trio.current_time() - before == pytest.approx(2 * SEED_TIMEOUT)    # the key's bucket, the organization's


async def test_without_a_ledger_budgets_start_at_zero(autojump_clock):
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, wall=wall)
    assert (await limiter.admit(demand_of(snap, worst_usd=1.0))).admitted
    assert limiter.counters.budgets[("key", "team-a", "2026-03")].seeded


async def test_divided_enforces_one_nth_of_every_limit_with_counters_of_its_own(autojump_clock):
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, wall=wall)
    share = limiter.divided(3)
    assert (share.share, share.origin) == (3, "local/3")
    d = demand_of(snap, tokens=1)
    results = []
    for _ in range(21):
        admission = await share.admit(fresh(d))
        results.append(admission.admitted)
        if admission.ticket is not None:
            assert admission.ticket.origin == "local/3"
            share.settle(admission.ticket, 1, None)
    assert results == [True] * 20 + [False]          # 60 a minute / 3
    assert limiter.counters.tat == {}                 # the whole limiter saw nothing
    assert (await limiter.admit(fresh(d))).admitted


async def test_the_key_view_shows_windows_leases_and_budgets_left(autojump_clock, tmp_path):
    actor, _ = await ledger(tmp_path, [rec(1, 0.25)])
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, ledger=actor.summary, wall=wall)
    await limiter.admit(demand_of(snap, worst_usd=0.5, tokens=600))
    view = await limiter.key_view("team-a")
    assert view["id"] == "team-a" and view["organization_id"] == "acme" and view["share"] == 1
    assert view["rate_limit"] == {
        "windows": {"requests_per_minute": {"limit": 60, "remaining": 59, "reset": 1.0},
                    "tokens_per_minute": {"limit": 6000, "remaining": 5400, "reset": pytest.approx(6.0)}},
        "in_flight": 1, "max_concurrent": 2}
    budget = view["budget"]
    assert (budget["bucket"], budget["spent_usd"], budget["reserved_usd"], budget["left_usd"], budget["seeded"]) == \
        ("2026-03", 0.25, 0.5, 0.25, True)
    org = view["organization"]
    assert (org["id"], org["rate_limit"], org["budget"]["bucket"], org["budget"]["left_usd"]) == \
        ("acme", None, "2026-W11", 4.25)


async def test_the_key_view_of_an_unknown_key_is_a_key_error():
    with pytest.raises(KeyError):
        await LocalLimiter(snapshot).key_view("nobody")


async def test_a_reload_keeps_the_counts_in_flight(autojump_clock):
    running = [snapshot()]
    limiter = LocalLimiter(lambda: running[0], wall=wall)
    d = demand_of(running[0], tokens=1)
    first = await limiter.admit(fresh(d))
    await limiter.admit(fresh(d))
    running[0] = snapshot(CONFIG.replace("max_concurrent: 2", "max_concurrent: 3"))
    raised = demand_of(running[0], tokens=1)
    assert (await limiter.admit(fresh(raised))).admitted           # the two in flight still count: 3rd of 3
    assert (await limiter.admit(fresh(raised))).refusal.dimension == "max_concurrent"
    limiter.settle(first.ticket, 1, None)                           # admitted under the old limits: settles
    assert (await limiter.admit(fresh(raised))).admitted
    assert (await limiter.key_view("team-a"))["rate_limit"]["in_flight"] == 3


async def test_idle_state_is_swept_as_time_passes(autojump_clock):
    snap = snapshot()
    limiter = LocalLimiter(lambda: snap, wall=wall)
    await limiter.admit(demand_of(snap, tokens=1))
    await trio.sleep(local_module.PRUNE_EVERY + 601)
    await wait_all_tasks_blocked()
    await limiter.admit(core.Demand("x", (), 0))
    assert limiter.counters.tat == {} and limiter.counters.leases == {}
