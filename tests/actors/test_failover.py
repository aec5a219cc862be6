"""Budgets, retries and fallback at exact virtual instants (autojump_clock, simulated backends)."""

import json

import pytest
import trio

from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

BASE = """
health_checks: {interval: 1h}
retry: {max_attempts: 3, initial_delay: 1s, backoff_multiplier: 2, jitter: false}
timeouts:
  connection: 3s
  request:
    standard: {first_byte: 5s, total: 20s}
    streaming: {first_byte: 5s, chunk_interval: 2s, total: 30s}
fallback:
  enabled: true
  fallback_chains: {big: [small]}
backends:
"""


def backend(name, model, sim="{}", extra=""):
    return f"  - {{name: {name}, type: simulated, models: [{model}], simulation: {sim}{extra}}}\n"


def sims(app):
    return app.runtime.upstream.simulated


def times(app, name, kind, t0):
    return [round(t - t0, 6) for t, k in sims(app)[f"{name}.simulated"].events if k == kind]


def content_of(reply):
    text = ""
    for e in reply.events():
        if e == b"[DONE]":
            continue
        obj = json.loads(e)
        for c in obj.get("choices", []):
            text += c.get("delta", {}).get("content") or ""
    return text


# --- budgets -----------------------------------------------------------------

async def test_first_byte_fires_at_exact_instant_and_moves_to_sibling(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 0s, failure: {stall_before_first_byte: true}}") + \
        backend("b", "big", "{latency: 100ms, chunks: 2}")
    async with gateway(config.replace("selection_strategy", "x")) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.status == 200
        assert times(app, "a", "request", t0) == [0] and times(app, "a", "cancelled", t0) == [5]
        assert times(app, "b", "request", t0) == [5]
        assert reply.chunks[0][0] - t0 == 5.1


async def test_first_byte_counts_until_first_data_event_not_headers(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {}") + \
        backend("a", "big", "{latency: 0s, failure: {stall_before_first_byte: true}}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.status == 504 and reply.ended_at - t0 == 5
        assert reply.json()["error"]["details"] == {"timeout": "first_byte", "timeout_ms": 5000}
        assert reply.json()["error"]["type"] == "timeout"


async def test_chunk_interval_fires_at_last_chunk_plus_interval(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {}") + \
        backend("a", "big", "{latency: 1s, tokens_per_second: 2, chunks: 6, failure: {stall_after_chunk: 3}}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        data_times = [t - t0 for t, c in reply.chunks if b'"content"' in c]
        assert data_times == [1.0, 1.5, 2.0]
        assert reply.ended_at - t0 == 4.0  # last chunk at 2.0 + chunk_interval 2s
        error = json.loads(reply.events()[-1])["error"]
        assert error["details"] == {"timeout": "chunk_interval", "timeout_ms": 2000}
        assert b"[DONE]" not in reply.body


async def test_total_limit_ends_the_attempt(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {}").replace(
        "total: 30s", "total: 3s").replace("streaming_fallback_budget_multiplier", "x") + \
        backend("a", "big", "{latency: 0s, tokens_per_second: 1, chunks: 10}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.ended_at - t0 == 3
        assert json.loads(reply.events()[-1])["error"]["details"]["timeout"] == "total"


async def test_fallback_budget_is_shared_by_all_attempts(autojump_clock):
    config = BASE.replace("connection: 3s", "connection: 3s\n  streaming_fallback_budget_multiplier: 1").replace(
        "total: 30s", "total: 8s") + \
        backend("a", "big", "{latency: 0s, failure: {stall_before_first_byte: true}}") + \
        backend("b", "small", "{latency: 0s, failure: {stall_before_first_byte: true}}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        # a: 0..5 (first_byte); small is a fallback hop: first_byte 5 x 1.5 = 7.5, but the
        # call budget (8 s x 1) ends at 8
        assert times(app, "b", "request", t0) == [5]
        assert reply.ended_at - t0 == 8
        assert reply.json()["error"]["details"] == {"timeout": "fallback_budget", "timeout_ms": 8000}


# --- retries -----------------------------------------------------------------

async def test_retry_gap_honours_retry_after(autojump_clock):
    from switchyard.config.schema import SimulatedFailure, Simulation

    config = BASE + backend("a", "big", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        sim = sims(app)["a.simulated"]
        sim.script.append(Simulation(latency=0.1, chunks=2, failure=SimulatedFailure(status=429, retry_after=3)))
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200
        assert times(app, "a", "request", t0) == [0, 3.1]


async def test_retry_after_beyond_budget_moves_on_at_once(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 100ms, failure: {status: 429, retry_after: 999}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200
        assert times(app, "a", "request", t0) == [0]
        assert times(app, "b", "request", t0) == [0.1]
        assert reply.headers[b"x-fallback-model"] == b"small"


async def test_500_retried_on_same_backend_with_backoff(autojump_clock):
    from switchyard.config.schema import SimulatedFailure, Simulation

    config = BASE + backend("a", "big", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        sim = sims(app)["a.simulated"]
        fail = Simulation(latency=0.1, failure=SimulatedFailure(status=500))
        sim.script.extend([fail, fail])
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200
        # 0 -> fails at 0.1, waits 1 s; 1.1 -> fails at 1.2, waits 2 s; 3.2 succeeds
        assert times(app, "a", "request", t0) == [0, 1.1, 3.2]


async def test_persistent_503_moves_to_next_chain_model_after_two_tries(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 100ms, failure: {status: 503}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200
        assert times(app, "a", "request", t0) == [0, 1.1]
        assert times(app, "b", "request", t0) == [1.2]
        assert reply.json()["model"] == "small"
        assert reply.headers[b"x-fallback-original-model"] == b"big"
        assert reply.headers[b"x-fallback-attempts"] == b"3"


async def test_replay_disabled_backend_never_sees_a_request_twice(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {}") + \
        backend("a", "big", "{latency: 100ms, failure: {status: 500}}", ", replay: disabled")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 500
        assert times(app, "a", "request", t0) == [0]


async def test_context_length_400_moves_to_next_model_never_same(autojump_clock):
    config = BASE + \
        backend("a", "big", "{latency: 100ms, failure: {status: 400, error_code: context_length_exceeded}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200 and reply.json()["model"] == "small"
        assert times(app, "a", "request", t0) == [0]


async def test_content_filter_400_passed_through_not_retried(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 100ms, failure: {status: 400, error_code: content_filter}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 400 and reply.json()["error"]["code"] == "content_filter"
        assert times(app, "a", "request", t0) == [0] and times(app, "b", "request", t0) == []


async def test_empty_reply_retry_moves_to_next_model(autojump_clock):
    config = BASE.replace("fallback_chains:", "empty_reply_retry: {enabled: true}\n  fallback_chains:") + \
        backend("a", "big", "{latency: 100ms, failure: {empty_reply: true}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200 and reply.json()["choices"][0]["message"]["content"]


async def test_unknown_model_on_chain_when_primary_unhealthy(autojump_clock):
    config = BASE.replace("interval: 1h", "interval: 1h, unhealthy_threshold: 1") + \
        backend("a", "big", "{health_status: 500}") + backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        await trio.sleep(0.01)
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200 and reply.json()["model"] == "small"
        assert times(app, "a", "request", t0) == []


# --- dial bounds ---------------------------------------------------------------

async def test_dial_bound_queues_fifo_and_times_out_on_time(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}",
                          "fallback_chains: {big: [small]}\n"
                          "  fallback_policy: {max_concurrent_dials_per_backend: 1}") + \
        backend("a", "big", "{latency: 0s, failure: {status: 400, error_code: context_length_exceeded}}") + \
        backend("b", "small", "{latency: 2s, chunks: 1}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        replies = {}

        async def one(i):
            await trio.sleep(i * 0.01)
            replies[i] = await request(app, "POST", "/v1/chat/completions", chat("big"))
        async with trio.open_nursery() as n:
            for i in range(3):
                n.start_soon(one, i)
        # permits are held until b's headers (2 s after each dial): first at 0, second
        # queued until 2, third waits 3 s (timeouts.connection) and gives up at 3.02
        assert times(app, "b", "request", t0) == [0, 2]
        assert replies[0].status == 200 and replies[1].status == 200
        assert replies[2].status == 400  # the preserved upstream failure
        assert replies[2].ended_at - t0 == 3.02
        assert app.runtime.pool.dial_saturated["b"] == 1


# --- client disconnects --------------------------------------------------------

async def test_disconnect_during_retry_wait_cancels_everything(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 100ms, failure: {status: 500}}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"), disconnect_at=t0 + 0.5)
        await trio.sleep(10)
        assert reply.status == 0
        assert times(app, "a", "request", t0) == [0]


async def test_disconnect_while_queued_for_dial_permit(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}",
                          "fallback_chains: {big: [small]}\n"
                          "  fallback_policy: {max_concurrent_dials_per_backend: 1}") + \
        backend("a", "big", "{latency: 0s, failure: {status: 400, error_code: context_length_exceeded}}") + \
        backend("b", "small", "{latency: 2s, chunks: 1}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        async with trio.open_nursery() as n:
            n.start_soon(request, app, "POST", "/v1/chat/completions", chat("big"))
            await trio.sleep(0.01)
            n.start_soon(lambda: request(app, "POST", "/v1/chat/completions", chat("big"),
                                         disconnect_at=t0 + 1))
        assert times(app, "b", "request", t0) == [0]


async def test_dial_bound_saturation_is_exported_as_a_metric(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}",
                          "fallback_chains: {big: [small]}\n"
                          "  fallback_policy: {max_concurrent_dials_per_backend: 1}") + \
        backend("a", "big", "{latency: 0s, failure: {status: 400, error_code: context_length_exceeded}}") + \
        backend("b", "small", "{latency: 5s, chunks: 1}")
    async with gateway(config) as app:
        async with trio.open_nursery() as n:
            for _ in range(2):
                n.start_soon(request, app, "POST", "/v1/chat/completions", chat("big"))
        reply = await request(app, "GET", "/metrics")
        assert reply.status == 200 and reply.headers[b"content-type"].startswith(b"text/plain")
        assert b'fallback_dial_bound_saturated_total{backend="b"} 1.0' in reply.body


async def test_no_retry_into_a_circuit_that_opened(autojump_clock):
    config = "circuit_breaker: {min_callers: 1}\n" + \
        BASE.replace("interval: 1h", "interval: 1h, unhealthy_threshold: 1") + \
        backend("a", "big", "{latency: 100ms, failure: {status: 500}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200 and reply.json()["model"] == "small"
        # the first failure opened a's circuit (2 s cooldown): the retry that would be due at
        # 1.1 cannot go there, so the call moves on at once instead of waiting for nothing
        assert times(app, "a", "request", t0) == [0]
        assert times(app, "b", "request", t0) == [0.1]
        assert app.runtime.health.view.circuit("a", "big").state.value == "open"
