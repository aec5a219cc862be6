"""A circuit judges the backend, not one caller (``circuit_breaker.min_callers``), at exact virtual instants.

Tenant A loops on a request the simulated backend answers 500 (``failure.when_body_contains``); tenant B
sends requests it serves. Retries are on without jitter: a failing call tries at +0, +0.2 and +0.5 s
and ends at +0.6 s (100 ms latency each); a good one ends at +0.1 s. With the default ``min_callers``
(2) a circuit opens only if the route is still failing without its worst caller's failures.
"""

import httpx
import pytest
import trio

from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backend saw

KEY_A = b"sk-tenant-a-0123456789abcdef"
KEY_B = b"sk-tenant-b-0123456789abcdef"
KEYS = """
api_keys:
  - {id: tenant-a, key: sk-tenant-a-0123456789abcdef}
  - {id: tenant-b, key: sk-tenant-b-0123456789abcdef}
"""
CONFIG = """
health_checks: {interval: 1h}
retry: {jitter: false}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation: {latency: 100ms, chunks: 2, failure: {status: 500, when_body_contains: crash-me}}
"""
CRASH = chat(messages=[{"role": "user", "content": "crash-me"}])
FINE = chat()


def tenant(identity: str, name: str) -> dict:
    """How tenant ``name`` ("a" or "b") is told apart: its API key, or its client address."""
    if identity == "keys":
        return {"headers": [(b"authorization", b"Bearer " + (KEY_A if name == "a" else KEY_B))]}
    return {"client": ("10.0.0.1" if name == "a" else "10.0.0.2", 40000)}


async def loop(app, until: float, ends: list, who: dict) -> None:
    """Send the crashing request back to back until ``until`` or an answer other than the backend's 500;
    note (start, status, end) of each."""
    while trio.current_time() < until:
        began = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", CRASH, **who)
        ends.append((began, reply.status, reply.ended_at))
        if reply.status != 500:
            return


@pytest.mark.parametrize("identity", ["keys", "addresses"])
async def test_one_tenants_crashing_request_never_opens_the_circuit_for_another(autojump_clock, identity):
    async with gateway((KEYS if identity == "keys" else "") + CONFIG) as app:
        t0 = trio.current_time()
        a_calls: list = []
        b_calls: list = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop, app, t0 + 20, a_calls, tenant(identity, "a"))
            for i in range(20):   # B: one call a second, 50 ms after A's loop began
                await trio.sleep_until(t0 + 0.05 + i)
                reply = await request(app, "POST", "/v1/chat/completions", FINE, **tenant(identity, "b"))
                b_calls.append((reply.status, reply.ended_at - t0))
        assert b_calls == [(200, pytest.approx(0.15 + i)) for i in range(20)]   # every one served at once
        # A sees its own errors, each call after its three tries, back to back: 34 calls, 102 failures
        assert [(b - t0, s, e - t0) for b, s, e in a_calls] == \
            [(pytest.approx(0.6 * i), 500, pytest.approx(0.6 * i + 0.6)) for i in range(34)]
        assert app.runtime.health.view.circuit("sim", "demo").state.value == "closed"
        a = "key tenant-a" if identity == "keys" else "ip 10.0.0.1"
        assert app.runtime.health.window("sim", "demo").tally == ((a, 102),)


async def test_a_stray_failure_of_another_tenant_never_opens_the_circuit_for_everyone(autojump_clock):
    """B's call at 5.05 loses its connection after sending (B's own failure, its only one), while A loops: what
    is left without A's failures is one failure, and B's retry is served."""
    async with gateway(KEYS + CONFIG) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]
        serve, fine = sim.handle_async_request, []

        async def reset_once(req):
            if b"crash-me" not in await req.aread():
                fine.append(trio.current_time())
                if len(fine) == 6:
                    raise httpx.ReadError("connection reset by peer")
            return await serve(req)
        sim.handle_async_request = reset_once
        t0 = trio.current_time()
        a_calls: list = []
        b_calls: list = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop, app, t0 + 10, a_calls, tenant("keys", "a"))
            for i in range(10):   # B: one call a second, 50 ms after A's loop began
                await trio.sleep_until(t0 + 0.05 + i)
                reply = await request(app, "POST", "/v1/chat/completions", FINE, **tenant("keys", "b"))
                b_calls.append((reply.status, reply.ended_at - t0))
        assert fine[5] - t0 == pytest.approx(5.05)                   # the reset try; its retry is served
        assert b_calls == [(200, pytest.approx(0.15 + i + (0.1 if i == 5 else 0))) for i in range(10)]
        assert [(b - t0, s, e - t0) for b, s, e in a_calls] == \
            [(pytest.approx(0.6 * i), 500, pytest.approx(0.6 * i + 0.6)) for i in range(17)]
        assert app.runtime.health.view.circuit("sim", "demo").state.value == "closed"
        assert app.runtime.health.window("sim", "demo").tally == (("key tenant-a", 51), ("key tenant-b", 1))


async def test_when_both_tenants_calls_fail_the_circuit_opens_once_they_fail_without_the_worst(autojump_clock):
    async with gateway(KEYS + CONFIG) as app:
        t0 = trio.current_time()
        a_calls: list = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop, app, t0 + 1.25, a_calls, tenant("keys", "a"))
            await trio.sleep_until(t0 + 1.05)
            assert app.runtime.health.view.circuit("sim", "demo").state.value == "closed"   # A's 5 failures
            b = await request(app, "POST", "/v1/chat/completions", CRASH, **tenant("keys", "b"))
        c = app.runtime.health.view.circuit("sim", "demo")
        # B's third failure, at 1.65, leaves 3 failures of 3 calls without A's 8: the circuit opens
        assert c.state.value == "open" and c.opened_at == pytest.approx(t0 + 1.65)
        assert (c.failures, c.suspects) == (11, {"key tenant-a"})
        assert (b.status, b.ended_at - t0) == (500, pytest.approx(1.65))
        # A's third call (from 1.2) fails twice; its last retry, due at 1.7, finds the circuit open
        assert [(s, e - t0) for _, s, e in a_calls] == [(500, pytest.approx(0.6)), (500, pytest.approx(1.2)),
                                                         (500, pytest.approx(1.7))]
        await trio.sleep_until(t0 + 2)
        reply = await request(app, "POST", "/v1/chat/completions", FINE, **tenant("keys", "b"))
        assert reply.status == 503 and reply.json()["error"]["code"] == "no_healthy_backends"


async def poll(app, until: float, ends: list, who: dict) -> None:
    """Send the crashing request back to back until ``until``, 100 ms apart after a 503 (no route); note
    (start, status, end) of each."""
    while trio.current_time() < until:
        began = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", CRASH, **who)
        ends.append((began, reply.status, reply.ended_at))
        if reply.status == 503:
            await trio.sleep(0.1)


async def test_a_suspects_failed_probes_keep_no_one_else_waiting(autojump_clock):
    """The circuit opened at 1.65 with A a suspect (as above); from 2.05 B sends requests the backend serves,
    while A keeps polling with its crashing one. A wins the first probes, at 3.7 and 3.9: each fails, proves
    nothing, and leaves the circuit open with its cooldown over. B's call at 4.05 is the next probe: served,
    and it closes the circuit. A's failures alone never open it again."""
    async with gateway(KEYS + CONFIG) as app:
        t0 = trio.current_time()
        a_calls: list = []
        b_calls: list = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll, app, t0 + 10, a_calls, tenant("keys", "a"))
            await trio.sleep_until(t0 + 1.05)
            assert (await request(app, "POST", "/v1/chat/completions", CRASH, **tenant("keys", "b"))).status == 500
            assert app.runtime.health.view.circuit("sim", "demo").suspects == {"key tenant-a"}
            for i in range(8):
                await trio.sleep_until(t0 + 2.05 + i)
                reply = await request(app, "POST", "/v1/chat/completions", FINE, **tenant("keys", "b"))
                b_calls.append((reply.status, reply.ended_at - t0))
        assert b_calls == [(503, pytest.approx(2.05)), (503, pytest.approx(3.05))] + \
            [(200, pytest.approx(4.15 + i)) for i in range(6)]
        after = [(s, e - t0) for b, s, e in a_calls if b - t0 > 3.65]   # A's calls once the cooldown was over
        assert after[0] == (500, pytest.approx(4.3))   # tried at 3.7 and 3.9 (probes), and at 4.2 (closed)
        assert {s for s, _ in after} == {500}           # A keeps getting its own errors, and only them
        assert app.runtime.health.view.circuit("sim", "demo").state.value == "closed"


async def test_a_refused_connection_counts_for_every_caller(autojump_clock):
    async with gateway(CONFIG) as app:   # no key, no client address: one anonymous caller
        sim = app.runtime.upstream.simulated["sim.simulated"]

        async def refuse(req):
            raise httpx.ConnectError("connection refused")
        sim.handle_async_request = refuse
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", FINE)
        assert reply.status == 502 and reply.json()["error"]["code"] == "upstream_connection_error"
        c = app.runtime.health.view.circuit("sim", "demo")
        # three refused tries (at 0, 0.1 and 0.3: nothing waits for an answer) open the circuit; nobody's
        # failures are left out (they are every caller's), so there is no suspect
        assert c.state.value == "open" and c.opened_at == pytest.approx(t0 + 0.3)
        assert c.suspects == frozenset()


async def test_a_connection_that_breaks_after_the_request_was_sent_is_the_callers_own(autojump_clock):
    async with gateway(CONFIG) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]

        async def reset(req):
            raise httpx.ReadError("connection reset by peer")
        sim.handle_async_request = reset
        for _ in range(3):
            assert (await request(app, "POST", "/v1/chat/completions", FINE)).status == 502
        c = app.runtime.health.view.circuit("sim", "demo")
        assert (c.state.value, c.failures) == ("closed", 9)
        assert app.runtime.health.window("sim", "demo").tally == (("anonymous", 9),)
