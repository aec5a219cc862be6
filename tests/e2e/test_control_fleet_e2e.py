"""Database keys across a fleet: ``switchyard serve --workers 2`` instances on one real PostgreSQL ledger
(``tests/postgres.py``) and one Redis (``tests/redis.py``), driven by the official ``openai`` SDK (and httpx
for the load) on 127.0.0.1.

What only a fleet shows (docs/keys.md, "A fleet"): a key made, revoked or
rotated through one instance applies on every worker of every other within
about a second; the database going away costs no call of a known key and
hangs nothing, refuses changes with a 503 naming the store and is used again
by itself when it is back; an instance on PostgreSQL without
``SWITCHYARD_CONTROL_SECRET`` keeps no database keys and says why; a key's
budget crossing 80 % on every worker at once is one alert (docs/alerts.md,
"Once for the fleet").

Three instances are shared by the module's tests (a start costs seconds).
Each test reaches every worker on purpose, on connections pinned to it
(``control_fleet.pin``).
"""

from __future__ import annotations

import functools
import ssl
from contextlib import AsyncExitStack
from typing import Any, Callable, Iterator

import httpx
import openai
import psycopg
import pytest
import trio

from switchyard.protocol.stores.control import DEADLINE as STORE_DEADLINE
from tests import postgres
from tests import redis as redis_fixture
from tests.e2e.control_fleet import (
    ADMIN_HEADERS,
    ALERTS_INTERVAL,
    CALL_TIMEOUT,
    CHAT,
    CONFIG_KEY,
    ENV,
    FLUSH,
    INSTANCES,
    MESSAGES,
    PROPAGATION,
    WORKERS,
    Fleet,
    Instance,
    Shot,
    Stores,
    Worker,
    admin,
    connection,
    create_key,
    first_and_last,
    known_everywhere,
    paced,
    pin,
    pin_fleet,
    raw_call,
    ready,
    sdk,
    sdk_answer,
    sdk_call,
    shoot,
    start,
    stayed,
    stop,
)
from tests.webhooks import Receiver, listening

pg_server = postgres.pg_server
redis_server = redis_fixture.redis_server

FLEET_SECRET = "control-fleet-e2e-" + "0123456789abcdef" * 3
RATE = 200            # calls per second with the key across the fleet while it is revoked
LOADERS = 4           # clients making them, per instance
GRACE = 2             # seconds of a rotation's grace
RECOVER_BOUND = 20.0  # seconds for every worker to take a change again once the database is back
TLS = ssl.create_default_context()   # one for every client: building one per client costs ~30 ms
# The budget alert: each worker makes BUDGET_CALLS calls of the simulated backend's CALL_TOKENS tokens (8 of
# prompt, 1 of reply), 162 of BUDGET_TOKENS in all: 81 %, and 80 % is only reached with every call recorded
# (17 are 153). Each call reserves 12 (11 estimated, 1 of max_tokens) until it is settled, which rides with
# its worker's next admission: the last admissions find 6 x 2 x 9 settled and 6 x 12 reserved, 180 (198
# even were no settle in yet), which the budget admits.
BUDGET_CALLS = 3
CALL_TOKENS = 9
BUDGET_TOKENS = 200
ALERT_BOUND = ALERTS_INTERVAL + FLUSH + 2.0   # seconds from the last call's answer to the webhook's POST
QUIET = 2 * ALERTS_INTERVAL + 0.5   # seconds without a claim tried: every worker has claimed what was due
AFTER = 3.0                         # seconds more the webhook is watched: every worker evaluated again


@pytest.fixture(scope="module")
def fleet(pg_server: postgres.PgServer, redis_server: redis_fixture.RedisServer,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Three instances of two workers on one PostgreSQL database and the session's Redis, one control secret,
    their alerts' webhook on a port held open for the module, for the module."""
    if not pg_server.running:
        pg_server.start()
    redis_server.resume()
    redis_server.start()
    database = pg_server.create_database()
    root = tmp_path_factory.mktemp("control-fleet")
    instances: list[Instance] = []
    hook = listening()
    try:
        stores = Stores(pg_server.url(database), redis_server.url, f"http://127.0.0.1:{hook.getsockname()[1]}/hook")
        for name in INSTANCES:
            instances.append(start(root, name, stores, FLEET_SECRET))
        trio.run(ready, instances)
        yield Fleet(instances, stores, root, hook)
    finally:
        for instance in instances:
            stop(instance)
        hook.close()
        if not pg_server.running:
            pg_server.start()
        pg_server.drop_database(database)


# --- the rules ---------------------------------------------------------------------------------------------

async def test_a_key_created_on_one_instance_answers_on_every_worker_of_another_within_2_s(fleet):
    one, _, three = fleet.instances
    async with AsyncExitStack() as stack:
        workers = await pin(stack, three)
        created = await create_key(one, metadata={"test": "created"})
        made = trio.current_time()
        answered: dict[str, float] = {}
        shown: dict[str, Any] = {}

        async def until_answered(worker: Worker) -> None:
            while (got := await sdk_answer(worker, created["secret"], chat=False))[0] != 200:
                await trio.sleep(0.02)
            answered[worker.name] = round(trio.current_time() - made, 3)
            shown[worker.name] = got[2]["data"]

        with trio.fail_after(PROPAGATION * 5):
            async with trio.open_nursery() as nursery:
                for worker in workers:
                    nursery.start_soon(until_answered, worker)
        again = [await sdk_call(worker, created["secret"]) for worker in workers for _ in range(3)]
        stayed(workers)
    assert created["source"] == "database" and created["secret"].startswith("syk_")
    assert len(answered) == WORKERS and max(answered.values()) < PROPAGATION, answered
    assert again == [(200, None)] * 3 * WORKERS
    assert [(d["id"], d["source"], d["prefix"]) for d in shown.values()] == \
        [(created["id"], "database", created["secret"][:12])] * WORKERS, shown


async def test_a_key_revoked_on_one_instance_is_refused_by_every_worker_of_every_instance_within_2_s_under_load(
        fleet):
    """About ``RATE`` chat calls a second with the key spread over the instances (on connections of whichever
    worker takes them), and every worker asked ``GET /v1/key`` ten times a second on a connection pinned to
    it. A chat client refused drops its connection: the server closes one whose POST was refused before its
    body had all arrived, without ``Connection: close``, and a next call sent on it would fail with a
    disconnect instead of its answer."""
    one, two, _ = fleet.instances
    created = await create_key(one, metadata={"test": "revoked"})
    secret = created["secret"]
    shots: list[Shot] = []
    async with AsyncExitStack() as stack:
        workers = await pin_fleet(stack, fleet)
        await known_everywhere(workers, created["id"], secret)
        end = [float("inf")]

        def over() -> bool:
            return trio.current_time() >= end[0]

        async def load(instance: Instance, delay: float, period: float) -> None:
            def opened() -> httpx.AsyncClient:
                return httpx.AsyncClient(base_url=instance.url, timeout=CALL_TIMEOUT, verify=TLS)

            async def step() -> None:
                nonlocal http
                call = functools.partial(raw_call, http, "POST", "/v1/chat/completions", secret, CHAT)
                if (await shoot(shots, instance.name, "chat", call)).status == 401:
                    await http.aclose()
                    http = opened()

            http = opened()
            try:
                await trio.sleep(delay)
                await paced(period, over, step)
            finally:
                await http.aclose()

        async with trio.open_nursery() as nursery:
            loaders = [instance for instance in fleet.instances for _ in range(LOADERS)]
            period = len(loaders) / RATE
            for j, instance in enumerate(loaders):   # spread over the period, not all at once
                nursery.start_soon(load, instance, period * j / len(loaders), period)
            for worker in workers:
                nursery.start_soon(paced, 0.1, over, functools.partial(
                    shoot, shots, worker.name, "key", functools.partial(raw_call, worker.http, "GET", "/v1/key",
                                                                        secret)))
            began = trio.current_time()
            await trio.sleep(1.0)
            sent = trio.current_time()
            reply = await admin(two, "POST", f"/admin/keys/{created['id']}/revoke")
            answered = trio.current_time()
            end[0] = answered + PROPAGATION + 1.0
        stayed(workers)
    assert reply.status_code == 200 and reply.json()["status"] == "revoked", reply.text
    summary = f"last 200, first 401 per instance, seconds from the revoke's answer: {first_and_last(shots, answered)}"
    odd = [s for s in shots if (s.status, s.code) not in ((200, None), (401, "key_revoked"))]
    late = [s for s in shots if s.started > answered + PROPAGATION and s.status != 401]
    assert not odd, [(s.worker, s.what, round(s.started - answered, 3), s.status, s.code) for s in odd[:10]]
    assert not late, (summary, [(s.worker, s.what, round(s.started - answered, 3), s.status) for s in late[:10]])
    for worker in workers:   # every worker served the key before the revoke, and refused it after
        mine = [s for s in shots if s.worker == worker.name]
        assert any(s.status == 200 and s.started < sent for s in mine), (worker.name, summary)
        assert any(s.status == 401 for s in mine), (worker.name, summary)
    rate = len([s for s in shots if s.started < sent]) / (sent - began)
    assert rate >= RATE * 0.75, f"only {rate:.0f} calls a second went before the revoke"


async def test_a_rotated_keys_old_secret_stops_at_the_end_of_its_grace_on_every_worker(fleet):
    one = fleet.instances[0]
    created = await create_key(one, metadata={"test": "rotated"})
    old = created["secret"]
    shots: list[Shot] = []
    async with AsyncExitStack() as stack:
        workers = await pin_fleet(stack, fleet)
        await known_everywhere(workers, created["id"], old)
        sent = trio.current_time()
        reply = await admin(one, "POST", f"/admin/keys/{created['id']}/rotate", {"grace_seconds": GRACE})
        answered = trio.current_time()
        assert reply.status_code == 200, reply.text
        new = reply.json()["secret"]

        async def both(worker: Worker) -> None:
            for what, secret in (("old", old), ("new", new)):
                await shoot(shots, worker.name, what, functools.partial(sdk_call, worker, secret, chat=False))

        def past_for(name: str) -> Callable[[], bool]:
            """Until this worker has refused the old secret once past the grace and the propagation (each
            refusal of a worker may wait: refused keys from one address are slowed past five a minute)."""
            return lambda: trio.current_time() > answered + GRACE + PROPAGATION + 0.5 and any(
                s.worker == name and s.what == "old" and s.started > answered + GRACE + PROPAGATION for s in shots)

        with trio.fail_after(GRACE + PROPAGATION + CALL_TIMEOUT):
            async with trio.open_nursery() as nursery:
                for worker in workers:
                    nursery.start_soon(paced, 0.1, past_for(worker.name), functools.partial(both, worker))
        last = [await sdk_call(worker, new) for worker in workers]   # a chat call too
        stayed(workers)
    page = reply.json()
    assert page["previous_secret"]["prefix"] == old[:12] and page["prefix"] == new[:12] != old[:12]
    olds = [s for s in shots if s.what == "old"]
    news = [s for s in shots if s.what == "new"]
    assert [(s.worker, round(s.started - answered, 3), s.status, s.code) for s in news if s.status != 200] == []
    assert last == [(200, None)] * len(workers)
    in_grace = [s for s in olds if s.started < sent + GRACE - 0.25]
    past = [s for s in olds if s.started > answered + GRACE + PROPAGATION]
    assert [(s.worker, round(s.started - sent, 3), s.status, s.code) for s in in_grace if s.status != 200] == []
    assert [(s.worker, round(s.started - answered, 3), s.status, s.code) for s in past
            if (s.status, s.code) != (401, "invalid_api_key")] == [], first_and_last(olds, answered + GRACE)
    for worker in workers:
        assert any(s.worker == worker.name for s in in_grace) and any(s.worker == worker.name for s in past)


async def test_the_database_stopped_mid_load_keeps_known_keys_working_refuses_changes_and_recovers(
        fleet, pg_server):
    """Every worker is asked on its own connection whether it takes a change again: a revoke (no body, so a 503
    keeps the connection), each of a spare key of its own."""
    one, _, three = fleet.instances
    # made first: a view holding the key (known_everywhere) holds them too
    spares = [(await create_key(one, metadata={"test": "spare"}))["id"] for _ in range(len(fleet.instances) * WORKERS)]
    created = await create_key(one, metadata={"test": "outage"})
    shots: list[Shot] = []
    refusals: list[tuple[str, float, httpx.Response]] = []
    recovered: dict[str, float] = {}
    try:
        async with AsyncExitStack() as stack:
            workers = await pin_fleet(stack, fleet)
            await known_everywhere(workers, created["id"], created["secret"])
            done = trio.Event()
            async with trio.open_nursery() as nursery:
                for worker in workers:
                    nursery.start_soon(paced, 0.1, done.is_set, functools.partial(
                        shoot, shots, worker.name, "chat", functools.partial(sdk_call, worker, created["secret"])))
                await trio.sleep(0.5)
                await trio.to_thread.run_sync(pg_server.stop)
                stopped = trio.current_time()
                for instance in fleet.instances:
                    for _ in range(2):
                        began = trio.current_time()
                        reply = await admin(instance, "POST", "/admin/keys", {"metadata": {"test": "refused"}})
                        refusals.append((instance.name, trio.current_time() - began, reply))
                await trio.sleep_until(stopped + 3.0)
                await trio.to_thread.run_sync(pg_server.start)
                back = trio.current_time()

                async def until_accepted(worker: Worker, spare: str) -> None:
                    while (await worker.http.post(f"/admin/keys/{spare}/revoke", headers=ADMIN_HEADERS)
                           ).status_code != 200:
                        await trio.sleep(0.1)
                    recovered[worker.name] = round(trio.current_time() - back, 3)

                with trio.move_on_after(RECOVER_BOUND):
                    async with trio.open_nursery() as admins:
                        for worker, spare in zip(workers, spares, strict=True):
                            admins.start_soon(until_accepted, worker, spare)
                done.set()
            after = await create_key(three, metadata={"test": "after"})
            made_after = [await sdk_call(worker, after["secret"]) for worker in workers]
            stayed(workers)
    finally:
        if not pg_server.running:
            await trio.to_thread.run_sync(pg_server.start)
    during = [s for s in shots if stopped <= s.started <= back]
    assert {s.worker for s in during} == {w.name for w in workers}   # every worker was called while it was away
    assert [(s.worker, round(s.started - stopped, 3), s.status, s.code) for s in shots if s.status != 200] == []
    slowest = max(s.took for s in shots)
    assert slowest < STORE_DEADLINE, f"a call took {slowest:.2f} s"
    # each within the store's deadline (the first on an instance may wait it out to learn the store is away)
    assert [(name, reply.status_code, reply.json().get("error", {}).get("code"), took < STORE_DEADLINE + 1.0)
            for name, took, reply in refusals] == \
        [(name, 503, "control_plane_unavailable", True) for name in ("one", "one", "two", "two", "three", "three")], \
        [(name, round(took, 3), reply.text) for name, took, reply in refusals]
    assert all("store (postgresql)" in reply.json()["error"]["message"] for _, _, reply in refusals), \
        refusals[0][2].text
    assert sorted(recovered) == sorted(w.name for w in workers), \
        f"workers taking changes {RECOVER_BOUND} s after the database came back: {recovered}"
    assert made_after == [(200, None)] * len(workers)


async def test_a_budget_alert_at_80_percent_is_delivered_exactly_once_while_all_six_workers_cross_it_together(
        fleet):
    """A key's budget goes from nothing to 81 % in one burst of calls on every worker at once: the webhook gets
    one POST, of 80 %, and nothing more while every worker evaluates it again. That each of the six workers saw
    it due, and only one sent it, is told by the claims: each one tried is an ``INSERT ... ON CONFLICT DO
    NOTHING`` on the alerts table, which draws a seq whether its row was made or not (PostgreSQL)."""
    receiver = Receiver()
    began = trio.current_time()
    first = await trio.to_thread.run_sync(claims_tried, fleet.stores.ledger)
    spent: list[tuple[str, int, int | None]] = []
    async with trio.open_nursery() as nursery:
        await receiver.start(nursery, fleet.webhook)
        created = await create_key(fleet.instances[0], metadata={"test": "alert"},   # total: no period ends
                                   budget={"limit_tokens": BUDGET_TOKENS, "period": "total"})
        secret = created["secret"]
        async with AsyncExitStack() as stack:
            workers = await pin_fleet(stack, fleet)
            await known_everywhere(workers, created["id"], secret, chat=False)
            before = await claims_once_quiet(fleet.stores.ledger, first, began)

            async def calls(worker: Worker) -> None:
                for _ in range(BUDGET_CALLS):
                    spent.append((worker.name, *await budget_call(worker, secret)))

            async with trio.open_nursery() as burst:
                for worker in workers:
                    burst.start_soon(calls, worker)
            burst_done = trio.current_time()
            stayed(workers)
        with trio.move_on_after(ALERT_BOUND):
            while not receiver.got:
                await trio.sleep(0.05)
        await trio.sleep(AFTER)
        got = list(receiver.got)
        after = await trio.to_thread.run_sync(claims_tried, fleet.stores.ledger)
        listed = [await admin(instance, "GET", f"/admin/alerts?owner_id={created['id']}")
                  for instance in fleet.instances]
        nursery.cancel_scope.cancel()
    assert sorted(spent) == sorted((w.name, 200, CALL_TOKENS) for w in workers for _ in range(BUDGET_CALLS))
    total = len(spent) * CALL_TOKENS
    assert BUDGET_TOKENS * 0.8 <= total < BUDGET_TOKENS
    assert [(path, body["event"], body["owner_id"], body["threshold"]) for _, path, _, body in got] == \
        [("/hook", "budget.threshold", created["id"], 0.8)], got
    assert got[0][0] - burst_done < ALERT_BOUND, f"the POST came {got[0][0] - burst_done:.2f} s after the burst"
    body = got[0][3]
    assert (body["owner"], body["bucket"], body["unit"], body["limit_tokens"]) == \
        ("key", "total:total", "tokens", BUDGET_TOKENS), body
    assert body["spent_tokens"] == total, body
    assert after - before == len(workers), f"{after - before} claims tried for {len(workers)} workers"
    for reply in listed:
        assert reply.status_code == 200, reply.text
        assert [(a["event"], a["threshold"], a["status"], a["attempts"], a["last_error"])
                for a in reply.json()["alerts"]] == [("budget.threshold", 0.8, "delivered", 1, None)], reply.text


def claims_tried(ledger: str) -> int:
    """The claims tried on the fleet's alerts table so far (the last seq its sequence drew)."""
    with psycopg.connect(ledger, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SELECT pg_sequence_last_value(pg_get_serial_sequence('alerts', 'seq')::regclass)"
                           ).fetchone()
    return int(row[0] or 0) if row else 0


async def claims_once_quiet(ledger: str, first: int, since: float) -> int:
    """The claims tried once none was for ``QUIET`` seconds (``first`` was read at ``since``): a key revoked
    just before (by another test) is claimed by each worker a round after its view has the revocation."""
    tried, changed = first, since
    while True:
        now = await trio.to_thread.run_sync(claims_tried, ledger)
        if now != tried:
            tried, changed = now, trio.current_time()
        if trio.current_time() - changed >= QUIET:
            return tried
        await trio.sleep(0.1)


async def budget_call(worker: Worker, secret: str) -> tuple[int, int | None]:
    """A chat call with a reply of one token at most (its reservation must fit the budget beside the others'):
    (status, the tokens its answer counts)."""
    try:
        with trio.fail_after(CALL_TIMEOUT + 1):
            answer = await sdk(worker, secret).chat.completions.create(model="demo", messages=MESSAGES, max_tokens=1)
    except openai.APIStatusError as exc:
        return exc.status_code, None
    return 200, answer.usage.total_tokens if answer.usage else None


async def test_an_instance_on_postgresql_without_the_control_secret_keeps_no_database_keys_and_says_why(fleet):
    created = await create_key(fleet.instances[0], metadata={"test": "elsewhere"})
    lone = start(fleet.root, "no-secret", fleet.stores, None, workers=1)
    try:
        await ready([lone], workers=1)
        refused = await admin(lone, "POST", "/admin/keys", {"metadata": {"test": "refused"}})
        async with AsyncExitStack() as stack:
            http, ports = connection(lone.url)
            stack.push_async_callback(http.aclose)
            worker = Worker(lone.name, lone.url, http, ports)
            config_key = await sdk_call(worker, CONFIG_KEY)
            database_key = await sdk_call(worker, created["secret"], chat=False)
    finally:
        await trio.to_thread.run_sync(stop, lone)
    error = refused.json()["error"]
    assert (refused.status_code, error["code"]) == (503, "control_plane_unavailable"), refused.text
    assert ENV in error["message"], error
    assert config_key == (200, None)
    assert database_key == (401, "invalid_api_key")
