"""Rate limits and budgets with real processes: ``switchyard serve --workers 2`` instances sharing a real Redis
(``tests/redis.py``), driven by real clients on 127.0.0.1.

What only a fleet shows: a key's limits hold across six workers in three
processes (one window, not one per worker), a budget never overspends under
parallel calls (the instances' SQLite ledgers total at most its limit), a
Redis that goes away mid-load costs no hung call and is used again by itself
when it is back, and a Redis restarted empty keeps the spend (reseeded from
the ledger).

Windows are GCRA (docs: a burst of L at once, then one every period/L), so
"exactly L of a burst" holds for a burst faster than one emission interval;
a slower burst (a loaded machine) may also get the refills of the time it
took, which the tests allow for and no more. The fault tests use a Redis of
their own, so the instances the other tests share never see an outage.
"""

from __future__ import annotations

import json
import math
import queue
import signal
import sqlite3
import ssl
import threading
from collections import Counter
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import attrs
import httpx
import pytest
import trio

from switchyard.actors.routing.limits import token_reservation
from switchyard.actors.routing.token_estimate import estimate_tokens
from tests import redis as redis_fixture
from tests.e2e.support import backend, gateway_config
from tests.e2e.test_ledger_e2e import once_each, serve, sqlite_records

redis_server, redis_url = redis_fixture.redis_server, redis_fixture.redis_url

ADMIN_TOKEN = "limits-e2e-admin-token-0123"
MESSAGES = [{"role": "user", "content": "hi"}]
INSTANCES = ("a", "b", "c")
WORKERS = 2
SLOW = 3.0          # seconds the slow backend takes: a burst's admitted calls are all still in flight after it
START_BOUND = 60    # seconds instances may take to serve on a busy two-core machine
SLACK = 2.0         # seconds a call may take on a loaded machine beyond its Redis bound
PRICE = 1000.0      # USD per 1M tokens, input and output: a call of ~13 tokens costs ~0.013 USD
# Every process of these tests shares two cores: six workers, Redis and the clients. At the start of a
# burst Redis itself waits for a core: measured, the first batch of a burst went 58-77 ms without an
# answer while nothing else was answered either (no worker-side delay to discount), past
# state.operation_timeout's default of 50 ms, and that worker rightly took it for an outage and decided
# on its local share (fail_open), which is not exact across the fleet. These tests are about the shared
# counters: a roomier bound. (The benchmark measures the default on a machine not oversubscribed.)
BUSY_TIMEOUT = "1s"
TLS = ssl.create_default_context()   # one for every client: building one per client costs ~30 ms


def secret(key_id: str) -> str:
    return f"sk-{key_id}-0123456789abcdef"


def chat(model: str = "demo", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": MESSAGES, **extra}


def fleet_config(data_dir: Path, redis: str, keys: list[dict[str, Any]], **state: Any) -> dict[str, Any]:
    """One instance's config: ``demo`` (fast, priced) and ``slow`` (``SLOW`` seconds) on simulated backends,
    its SQLite ledger in ``data_dir``, the shared Redis (``state`` overrides the fleet's defaults), and
    ``keys`` (each key's secret from its id)."""
    priced = {"id": "demo", "metadata": {"pricing": {"input_tokens": PRICE, "output_tokens": PRICE}}}
    config = gateway_config({**backend("sim"), "model_configs": [priced]},
                            {**backend("sim-slow", latency=f"{SLOW}s"), "models": ["slow"]},
                            health_checks={"interval": "1h"})
    config["server"] = {**config["server"], "data_dir": str(data_dir), "shutdown_drain_timeout": "5s"}
    config["usage"] = {"ledger": "sqlite", "flush_interval": "100ms"}
    config["admin"] = {"token": ADMIN_TOKEN}
    config["state"] = {"redis_url": redis, "fleet_workers": len(INSTANCES) * WORKERS,
                       "operation_timeout": BUSY_TIMEOUT, **state}
    config["api_keys"] = [{"key": secret(k["id"]), **k} for k in keys]
    return config


@attrs.frozen
class Instance:
    name: str
    url: str
    proc: trio.Process
    root: Path
    log: Path

    @property
    def ledger(self) -> Path:
        return self.root / "data" / "usage.db"


@asynccontextmanager
async def fleet(root: Path, configs: dict[str, dict[str, Any]],
                workers: int = WORKERS) -> AsyncIterator[list[Instance]]:
    """One ``serve`` (tests/e2e/test_ledger_e2e.py) per config, started together and yielded once every
    worker of every instance serves; all stopped on exit."""
    up: dict[str, Instance] = {}
    ready = trio.Event()
    leave = trio.Event()

    async def one(name: str, config: dict[str, Any]) -> None:
        async with serve(root / name, config, workers=workers) as (proc, url, log):
            up[name] = Instance(name, url, proc, root / name, log)
            if len(up) == len(configs):
                ready.set()
            await leave.wait()

    async with trio.open_nursery() as nursery:
        for name, config in configs.items():
            nursery.start_soon(one, name, config)
        with trio.fail_after(START_BOUND):
            await ready.wait()
        try:
            yield [up[name] for name in configs]
        finally:
            leave.set()


# --- the fleet most tests share: three instances of two workers, one key per test ------------------------

SHARED_KEYS = [
    {"id": "rpm", "rate_limit": {"requests_per_minute": 100}},
    {"id": "tpm", "rate_limit": {"tokens_per_minute": 100 * token_reservation(chat("slow", max_tokens=40), None)}},
    {"id": "conc", "rate_limit": {"max_concurrent": 5}},
]


@pytest.fixture(scope="module")
def shared_fleet(redis_server: redis_fixture.RedisServer,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Instance]]:
    """Three instances of two workers on the session's Redis for the whole module (a start costs seconds).
    pytest-trio's fixtures live for one test, so a trio loop in a thread of its own holds them."""
    root = tmp_path_factory.mktemp("fleet")
    configs = {name: fleet_config(root / name / "data", redis_server.url, SHARED_KEYS) for name in INSTANCES}
    started: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    async def hold() -> None:
        async with fleet(root, configs) as instances:
            started.put(instances)
            await trio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)

    def run() -> None:
        try:
            trio.run(hold)
        except BaseException as exc:   # reported to the fixture's thread
            started.put(exc)

    redis_server.start()
    thread = threading.Thread(target=run, name="limits-e2e-fleet", daemon=True)
    thread.start()
    try:
        got = started.get(timeout=START_BOUND + 30)
        if isinstance(got, BaseException):
            raise got
        yield got
    finally:
        stop.set()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the shared fleet did not stop within 60 s"


@pytest.fixture
def private_redis() -> Iterator[redis_fixture.RedisServer]:
    """A Redis of the test's own, to stop and start: the shared fleet's never goes away."""
    server = redis_fixture.RedisServer()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


# --- clients ----------------------------------------------------------------------------------------------

@attrs.define
class Reply:
    status: int
    headers: httpx.Headers
    body: dict[str, Any]
    sent: float       # trio time the request went
    arrived: float    # ... and the answer came

    @property
    def error(self) -> dict[str, Any]:
        return self.body.get("error") or {}


@attrs.define
class Burst:
    """``n`` calls at once, spread round-robin over instances, each on a connection opened beforehand (one
    client each: httpx's pool with hundreds of connections is slower than the gateway it measures)."""

    urls: list[str]
    key: str
    n: int
    body: dict[str, Any]
    replies: list[Reply] = attrs.Factory(list)
    started: trio.Event = attrs.Factory(trio.Event)   # set when the calls go (every connection is open)
    go: float = 0.0

    async def run(self) -> list[Reply]:
        clients = [httpx.AsyncClient(base_url=self.urls[i % len(self.urls)], timeout=30, verify=TLS,
                                     headers={"authorization": f"Bearer {secret(self.key)}"})
                   for i in range(self.n)]
        try:
            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(client.get, "/health")
            async def one(client: httpx.AsyncClient) -> None:
                await self.started.wait()
                sent = trio.current_time()
                response = await client.post("/v1/chat/completions", json=self.body)
                self.replies.append(Reply(response.status_code, response.headers, response.json(), sent,
                                          trio.current_time()))

            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(one, client)
                await trio.sleep(0.05)
                self.go = trio.current_time()
                self.started.set()
        finally:
            for client in clients:
                await client.aclose()
        return self.replies

    def decided_within(self, latency: float) -> float:
        """Seconds from the start to the last decision at the latest: a refusal is decided before it
        arrives, an admission ``latency`` (the backend's) before it does."""
        return max(r.arrived - (latency if r.status == 200 else 0.0) for r in self.replies) - self.go


async def burst(instances: list[Instance], key: str, n: int, body: dict[str, Any]) -> Burst:
    b = Burst([i.url for i in instances], key, n, body)
    with trio.fail_after(60):
        await b.run()
    return b


def admin(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=10, verify=TLS,
                             headers={"authorization": f"Bearer {ADMIN_TOKEN}"})


async def key_view(url: str, key: str) -> dict[str, Any]:
    """GET /admin/keys/{key} on a fresh connection (so either worker of the instance may answer)."""
    async with admin(url) as http:
        response = await http.get(f"/admin/keys/{key}")
    assert response.status_code == 200, response.text
    return response.json()


def assert_rate_refusal(reply: Reply, kind: str, *limits: int, cost: int = 1) -> None:
    """A rate_limiting 429 as OpenAI sends it: its type, a Retry-After, and the key's x-ratelimit-* headers
    (the limit one of ``limits``: the key's, or a worker's share of it; less left than the call's ``cost``)."""
    assert reply.status == 429, (reply.status, reply.body)
    assert (reply.error.get("type"), reply.error.get("code")) == (kind, "rate_limit_exceeded"), reply.body
    assert int(reply.headers["retry-after"]) >= 1
    assert int(reply.headers[f"x-ratelimit-limit-{kind}"]) in limits, reply.headers
    assert 0 <= int(reply.headers[f"x-ratelimit-remaining-{kind}"]) < cost, reply.headers
    assert reply.headers[f"x-ratelimit-reset-{kind}"]
    assert reply.headers["x-continuum-request-id"]


def assert_exact_window(b: Burst, kind: str, limit: int, cost: int = 1) -> None:
    """One window for the whole fleet: ``limit // cost`` calls admitted (plus the GCRA refills of the time the
    burst took, if it took longer than one emission interval), the k-th admission told that ``limit - k*cost``
    (plus those refills) were left (no two workers judged on the same count), every other call refused
    with the key's headers."""
    took = b.decided_within(SLOW)
    interval = 60.0 * cost / limit          # seconds until one more call's worth comes back
    refills = math.floor(took / interval)
    refilled = math.floor(took * limit / 60.0)
    fits = limit // cost
    admitted = [r for r in b.replies if r.status == 200]
    assert len(b.replies) == b.n
    assert fits <= len(admitted) <= fits + refills, (len(admitted), f"decided within {took:.3f}s")
    told = sorted((int(r.headers[f"x-ratelimit-remaining-{kind}"]) for r in admitted), reverse=True)
    for k, left in enumerate(told, start=1):
        assert limit - k * cost <= left <= limit - k * cost + refilled, (k, told, f"decided within {took:.3f}s")
    if refills == 0:   # within one emission interval: exactly ``fits``, each told a count of its own
        assert len(admitted) == fits and len(set(told)) == fits, (told, f"decided within {took:.3f}s")
    for reply in b.replies:
        if reply.status != 200:
            assert_rate_refusal(reply, kind, limit, cost=cost)


# --- 1, 2: exact windows across the fleet ----------------------------------------------------------------

async def test_three_instances_of_two_workers_admit_exactly_a_keys_requests_per_minute(shared_fleet, redis_url):
    """300 calls at once over three instances: 100 through (their backend is slow, so none has ended),
    each told a different number left, from 99 down to 0; 200 refused as ``requests`` with Retry-After."""
    b = await burst(shared_fleet, "rpm", 300, chat("slow"))
    assert_exact_window(b, "requests", 100)


async def test_three_instances_of_two_workers_admit_exactly_a_keys_tokens_per_minute(shared_fleet, redis_url):
    """Each call reserves its input estimate plus max_tokens; the key allows 100 such reservations a minute."""
    body = chat("slow", max_tokens=40)
    b = await burst(shared_fleet, "tpm", 300, body)
    assert_exact_window(b, "tokens", SHARED_KEYS[1]["rate_limit"]["tokens_per_minute"], token_reservation(body, None))


async def test_max_concurrent_admits_that_many_calls_at_once_across_the_fleet(shared_fleet, redis_url):
    """Five slow calls run at once, the other 295 of the burst are refused while they do, every instance's
    admin view counts the five in flight (the fleet's leases, in Redis), and the slots come back when they end."""
    b = Burst([i.url for i in shared_fleet], "conc", 300, chat("slow"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.run)
        with trio.fail_after(30):
            await b.started.wait()
        with trio.fail_after(SLOW):   # while the admitted calls are still running
            while len(b.replies) < 295:
                await trio.sleep(0.02)
            for instance in shared_fleet:
                assert (await key_view(instance.url, "conc"))["rate_limit"]["in_flight"] == 5
    admitted = [r for r in b.replies if r.status == 200]
    assert b.decided_within(SLOW) < SLOW   # no lease could have ended before the last decision
    assert len(admitted) == 5, Counter(r.status for r in b.replies)
    assert all(r.arrived - r.sent >= SLOW for r in admitted)
    assert max(r.sent for r in admitted) < min(r.arrived for r in admitted)   # all five in flight together
    for reply in (r for r in b.replies if r.status != 200):
        assert reply.status == 429 and reply.error["type"] == "requests", reply.body
        assert "max_concurrent" in reply.error["message"] and int(reply.headers["retry-after"]) >= 1
    with trio.fail_after(5):   # each settle ends its lease (a tell: it reaches Redis just after the answer)
        while (await key_view(shared_fleet[0].url, "conc"))["rate_limit"]["in_flight"]:
            await trio.sleep(0.05)


# --- 3: budgets --------------------------------------------------------------------------------------------

async def test_a_budget_on_a_priced_model_never_overspends_under_200_parallel_calls(tmp_path, redis_url):
    """200 calls at once on a key with 1 USD to spend: each reserves its worst case (input estimate and
    max_tokens at the model's price), settles to its real cost, and the calls past the budget are refused
    with budget_exceeded. Once the instances have drained, their three ledgers hold every call once, and
    what they spent in all is within the budget."""
    limit = 1.0
    keys = [{"id": "budget", "budget": {"limit_usd": limit, "period": "month"}}]
    configs = {name: fleet_config(tmp_path / name / "data", redis_url, keys) for name in INSTANCES}
    async with fleet(tmp_path, configs) as instances:
        b = await burst(instances, "budget", 200, chat(max_tokens=5))
        for instance in instances:
            instance.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            for instance in instances:
                await instance.proc.wait()
    assert all(i.proc.returncode == 0 for i in instances), [i.log.read_text()[-3000:] for i in instances]
    statuses = Counter(r.status for r in b.replies)
    assert set(statuses) == {200, 429}, statuses
    for reply in (r for r in b.replies if r.status == 429):
        assert (reply.error["type"], reply.error["code"]) == ("insufficient_quota", "budget_exceeded"), reply.body
        assert reply.headers["x-should-retry"] == "false" and int(reply.headers["retry-after"]) >= 1
    records = [row for i in instances for row in sqlite_records(i.ledger)]
    once_each(records, {r.headers["x-continuum-request-id"]: r.status for r in b.replies})
    spent = sum(ledger_cost(i.ledger, "budget") for i in instances)
    assert 0 < spent <= limit, spent


def ledger_cost(path: Path, key: str) -> float:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COALESCE(SUM(cost), 0) FROM usage_records WHERE key_id = ?", (key,)).fetchone()[0]


# --- 4, 5: Redis away ----------------------------------------------------------------------------------------

FAULT_TIMEOUT = 0.5   # state.operation_timeout of the fault tests (one instance: less crowded than the fleet)


def fault_config(tmp_path: Path, redis: str, keys: list[dict[str, Any]], **state: Any) -> dict[str, dict[str, Any]]:
    """One instance of two workers, the whole fleet sharing ``redis``."""
    return {"a": fleet_config(tmp_path / "a" / "data", redis, keys, fleet_workers=WORKERS,
                              operation_timeout=f"{FAULT_TIMEOUT}s", **state)}


async def call(url: str, key: str, body: dict[str, Any]) -> Reply:
    """One call on a connection of its own (either worker may take it)."""
    async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS,
                                 headers={"authorization": f"Bearer {secret(key)}"}) as http:
        sent = trio.current_time()
        response = await http.post("/v1/chat/completions", json=body)
        return Reply(response.status_code, response.headers, response.json(), sent, trio.current_time())


async def on_redis(url: str, key: str, bound: float = 15.0) -> dict[str, Any]:
    """Wait until GET /admin/keys/{key} answers from Redis eight times in a row, each on a new connection
    (both workers, all but surely); the last view."""
    in_a_row = 0
    with trio.fail_after(bound):
        while in_a_row < 8:
            view = await key_view(url, key)
            in_a_row = in_a_row + 1 if view.get("store") == "redis" else 0
            if not in_a_row:
                await trio.sleep(0.1)
    return view


def said_per_pid(log: Path, text: str) -> Counter[int]:
    """How many times each process logged a message containing ``text``."""
    said: Counter[int] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and text in line:
            said[json.loads(line)["pid"]] += 1
    return said


async def test_redis_stopped_mid_load_fails_open_to_each_workers_share_and_no_call_hangs(tmp_path, private_redis):
    """Calls keep coming while Redis is killed: every one is answered (200, or a 429 of the key's window)
    within the bound, each worker logs the outage once and then enforces its share of the limit (1/2: the
    fleet is two workers) on its own; when Redis is back every worker uses it again by itself, having
    claimed in it what its share admitted, so over the minute the fleet lets exactly the key's limit
    through: what the shares admitted and what the fresh shared window admits after add up to it."""
    keys = [{"id": "load", "rate_limit": {"requests_per_minute": 120}},
            {"id": "share", "rate_limit": {"requests_per_minute": 40}}]
    async with fleet(tmp_path, fault_config(tmp_path, private_redis.url, keys)) as [instance]:
        url = instance.url
        replies: list[Reply] = []

        async def load() -> None:
            deadline = trio.current_time() + 3.0
            while trio.current_time() < deadline:
                replies.append(await call(url, "load", chat()))
                await trio.sleep(0.02)

        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(load)
            await trio.sleep(1.0)
            await trio.to_thread.run_sync(private_redis.stop)
            stopped = trio.current_time()
        assert {r.status for r in replies} <= {200, 429}, Counter(r.status for r in replies)
        assert any(r.status == 200 and r.sent > stopped for r in replies)   # served, on the local shares
        assert max(r.arrived - r.sent for r in replies) <= FAULT_TIMEOUT + SLACK
        for reply in (r for r in replies if r.status == 429):
            assert_rate_refusal(reply, "requests", 120, 60)   # the shared window, or a worker's half
        view = await key_view(url, "load")
        assert (view["store"], view["share"]) == ("local share (Redis unavailable)", WORKERS), view

        began = trio.current_time()
        away = await burst([instance], "share", 60, chat())   # each worker: 20 a minute of its own
        assert {r.status for r in away.replies} == {200, 429}
        assert 20 <= sum(r.status == 200 for r in away.replies) <= 40, Counter(r.status for r in away.replies)
        assert all(r.headers["x-ratelimit-limit-requests"] == "20" for r in away.replies)

        await trio.to_thread.run_sync(private_redis.start)   # empty, as after a crash
        await on_redis(url, "share")
        back = await burst([instance], "share", 60, chat())
        on_shares = sum(r.status == 200 for r in away.replies)
        # GCRA: the window frees one call every 60/40 s after the first; the shares' calls are charged as
        # of their own instants, so what the minute has freed since the away burst began fits too
        refilled = int((trio.current_time() - began) / 1.5)
        assert 40 - on_shares <= sum(r.status == 200 for r in back.replies) <= 40 - on_shares + refilled, \
            (Counter(r.status for r in back.replies), on_shares, refilled)
        assert all(r.headers["x-ratelimit-limit-requests"] == "40" for r in back.replies)
    unavailable = said_per_pid(instance.log, "is unavailable")
    assert unavailable and set(unavailable.values()) == {1}, unavailable   # once per worker and outage
    assert said_per_pid(instance.log, "is back after").keys() == unavailable.keys()


async def test_redis_hung_with_fail_closed_answers_503_rate_limiter_unavailable_within_the_bound(tmp_path,
                                                                                             private_redis):
    """A Redis that stops answering (SIGSTOP: connections open, nothing comes back): a limited call gets
    503 rate_limiter_unavailable within operation_timeout, never waits longer; once Redis answers again
    the calls go through by themselves."""
    keys = [{"id": "closed", "rate_limit": {"requests_per_minute": 10_000}}]
    config = fault_config(tmp_path, private_redis.url, keys, on_unavailable="fail_closed")
    async with fleet(tmp_path, config) as [instance]:
        url = instance.url
        assert (await call(url, "closed", chat())).status == 200
        private_redis.pause()
        replies: list[Reply] = []

        async def one() -> None:
            replies.append(await call(url, "closed", chat()))

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(one)
        for _ in range(5):
            await one()
        for reply in replies:
            assert reply.status == 503, reply.body
            assert reply.error["code"] == "rate_limiter_unavailable", reply.body
            assert reply.arrived - reply.sent <= FAULT_TIMEOUT + SLACK
        private_redis.resume()
        with trio.fail_after(15):   # the probe tries again after 0.1 s, 0.2 s ... 5 s
            while (await call(url, "closed", chat())).status != 200:
                await trio.sleep(0.1)
        await on_redis(url, "closed")


async def test_redis_restarted_empty_keeps_the_spend(tmp_path, private_redis):
    """Ten calls spend part of a budget; Redis restarts with nothing in it. The budget's counter is seeded
    again from the ledger (what GET /admin/keys shows spent is the ledger's sum), so a call whose worst
    case fits the whole budget but not what is left is refused, and one that fits what is left is not."""
    limit = 0.2
    keys = [{"id": "spend", "budget": {"limit_usd": limit, "period": "month"}}]
    async with fleet(tmp_path, fault_config(tmp_path, private_redis.url, keys)) as [instance]:
        url = instance.url
        for _ in range(10):
            assert (await call(url, "spend", chat(max_tokens=10))).status == 200
        with trio.fail_after(10):   # every record written, every settle in Redis
            while len(sqlite_records(instance.ledger)) < 10 or \
                    (await key_view(url, "spend"))["budget"]["spent_usd"] != \
                    pytest.approx(ledger_cost(instance.ledger, "spend")):
                await trio.sleep(0.1)
        spent = ledger_cost(instance.ledger, "spend")
        assert spent > 0

        await trio.to_thread.run_sync(private_redis.stop)
        await trio.to_thread.run_sync(private_redis.start)   # empty
        with trio.fail_after(15):
            while True:
                view = await on_redis(url, "spend")
                if view["budget"]["seeded"]:
                    break
        assert view["budget"]["spent_usd"] == pytest.approx(spent), view
        assert view["budget"]["reserved_usd"] == 0

        big, small = chat(max_tokens=100), chat(max_tokens=10)
        assert limit - spent < worst_usd(big) <= limit   # refused only because of what was spent before
        refused = await call(url, "spend", big)
        assert refused.status == 429 and refused.error["code"] == "budget_exceeded", refused.body
        assert worst_usd(small) <= limit - spent
        assert (await call(url, "spend", small)).status == 200


def worst_usd(body: dict[str, Any]) -> float:
    """The most a call on ``demo`` can cost: its input estimate and max_tokens at PRICE."""
    return (estimate_tokens(body, image_tokens=1000) + body["max_tokens"]) * PRICE / 1_000_000
