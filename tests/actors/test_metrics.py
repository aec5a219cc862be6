"""GET /metrics: per-call and HTTP metrics at exact virtual instants, drops, polling, bounded labels."""

import pytest
import trio

from switchyard.actors.routing.engine_metrics import EngineSnapshot
from switchyard.protocol.serving import call_metrics
from switchyard.protocol.simulated.engine import MetricsReply
from tests.actors.test_failover import BASE, backend
from tests.actors.test_midstream import config as midstream_config
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CHAT = "/v1/chat/completions"
NO_CHAIN = BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {}")
TOKEN = "test-admin-token-0123456789"
ADMIN = f"admin: {{token: {TOKEN}}}\n"


def value(app, name, **labels):
    """A sample's value from the app's own registry (0 when the series does not exist)."""
    return app.runtime.metrics.registry.get_sample_value(name, labels) or 0.0


def calls(app, model, backend, status):
    return value(app, "switchyard_requests_total", route=CHAT, model=model, backend=backend, status=status)


def hist(app, name, le=None, **labels):
    if le is None:
        return (value(app, name + "_count", route=CHAT, **labels), value(app, name + "_sum", route=CHAT, **labels))
    return value(app, name + "_bucket", route=CHAT, le=le, **labels)


async def post(app, model="big", **kw):
    stream = kw.pop("stream", False)
    return await request(app, "POST", CHAT, chat(model, stream=stream), **kw)


# --- per call: counts, latency, time to first token ---------------------------------------

async def test_latency_and_first_token_are_observed_at_exact_instants(autojump_clock):
    async with gateway(BASE + backend("a", "big", "{latency: 100ms, tokens_per_second: 10, chunks: 4}")) as app:
        assert (await post(app, stream=True)).status == 200    # first chunk at 0.1, [DONE] at 0.4
        assert (await post(app)).status == 200                 # buffered: the whole body at 0.4
        assert calls(app, "big", "a", "200") == 2
        count, total = hist(app, "switchyard_request_duration_seconds", model="big")
        assert count == 2 and total == pytest.approx(0.8)
        count, total = hist(app, "switchyard_time_to_first_token_seconds", model="big", backend="a")
        assert count == 2 and total == pytest.approx(0.5)
        ttft = "switchyard_time_to_first_token_seconds"
        assert hist(app, ttft, "0.05", model="big", backend="a") == 0
        assert hist(app, ttft, "0.1", model="big", backend="a") == 1     # the stream's first event
        assert hist(app, ttft, "0.25", model="big", backend="a") == 1
        assert hist(app, ttft, "0.5", model="big", backend="a") == 2     # the buffered body
        assert hist(app, "switchyard_request_duration_seconds", "0.25", model="big") == 0
        assert hist(app, "switchyard_request_duration_seconds", "0.5", model="big") == 2


async def test_calls_are_counted_by_the_status_the_client_got(autojump_clock):
    config = NO_CHAIN + backend("a", "big", "{latency: 100ms, failure: {status: 503}}") + \
        backend("b", "small", "{latency: 1s, chunks: 2}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        failed = await post(app)
        assert failed.status == 503
        assert calls(app, "big", "a", "503") == 1
        assert value(app, "switchyard_time_to_first_token_seconds_count",
                     route=CHAT, model="big", backend="a") == 0   # an error is no first token
        t1 = trio.current_time()
        gone = await post(app, "small", stream=True, disconnect_at=t1 + 0.5)
        assert gone.status == 0
        assert calls(app, "small", "b", "client_disconnected") == 1
        assert hist(app, "switchyard_request_duration_seconds", model="small") == (1, pytest.approx(0.5))
        assert (await post(app, "nope")).status == 404                # never routed, never listed
        assert calls(app, "other", "none", "404") == 1
        assert (await post(app, "small")).status == 200
        assert calls(app, "small", "b", "200") == 1
        assert value(app, "switchyard_retries_total", backend="a", model="big") == 1
        assert failed.ended_at - t0 == pytest.approx(1.2)             # failed at 0.1, retried at 1.1, failed again
        assert hist(app, "switchyard_request_duration_seconds", model="big") == (1, pytest.approx(1.2))
        http = {(r, s): value(app, "switchyard_http_requests_total", route=r, method="POST", status=s)
                for r, s in [(CHAT, "503"), (CHAT, "client_disconnected"), (CHAT, "404"), (CHAT, "200")]}
        assert http == {(CHAT, "503"): 1, (CHAT, "client_disconnected"): 1, (CHAT, "404"): 1, (CHAT, "200"): 1}


async def test_retry_and_fallback_hop_are_counted(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 100ms, failure: {status: 503}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        reply = await post(app)
        assert reply.status == 200 and reply.json()["model"] == "small"
        assert calls(app, "big", "b", "200") == 1                      # the model asked for; the backend that answered
        assert value(app, "switchyard_retries_total", backend="a", model="big") == 1
        assert value(app, "switchyard_fallbacks_total", reason="status", from_model="big", to_model="small") == 1
        assert value(app, "streaming_fallback_total", reason="fallback_chain") == 0   # before any byte went out
        # retry at 1.1, second failure at 1.2, b answers at 1.3
        assert hist(app, "switchyard_time_to_first_token_seconds", model="big", backend="b") == \
            (1, pytest.approx(1.3))


async def test_first_byte_timeout_is_counted_by_kind(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 0s, failure: {stall_before_first_byte: true}}") + \
        backend("b", "big", "{latency: 100ms, chunks: 2}")
    async with gateway(config) as app:
        reply = await post(app, stream=True)
        assert reply.status == 200
        assert value(app, "switchyard_timeouts_total", backend="a", kind="first_byte") == 1
        assert value(app, "switchyard_fallbacks_total", reason="timeout", from_model="big", to_model="big") == 1
        assert hist(app, "switchyard_time_to_first_token_seconds", model="big", backend="b") == \
            (1, pytest.approx(5.1))


async def test_mid_stream_fallback_to_the_chain(autojump_clock):
    async with gateway(midstream_config()) as app:
        reply = await post(app, stream=True)
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        assert value(app, "streaming_fallback_total", reason="fallback_chain") == 1
        assert value(app, "streaming_fallback_total", reason="same_model_sibling") == 0
        assert value(app, "switchyard_timeouts_total", backend="a", kind="chunk_interval") == 1
        assert value(app, "switchyard_fallbacks_total", reason="timeout", from_model="big", to_model="small") == 1
        assert calls(app, "big", "b", "200") == 1
        # a's first event at 1.0 is the first token, whoever finished the answer
        assert hist(app, "switchyard_time_to_first_token_seconds", model="big", backend="a") == (1, 1.0)


async def test_mid_stream_hop_to_a_sibling(autojump_clock):
    cfg = midstream_config().replace("models: [small]", "models: [big]").replace(
        "{min_accumulated_tokens: 2}", "{min_accumulated_tokens: 2, same_model_first: true}").replace(
        "fallback_chains: {big: [small]}", "fallback_chains: {}")
    async with gateway(cfg) as app:
        assert (await post(app, stream=True)).status == 200
        assert value(app, "streaming_fallback_total", reason="same_model_sibling") == 1
        assert value(app, "streaming_fallback_total", reason="fallback_chain") == 0


async def test_a_stream_cut_after_it_started_is_a_200_and_a_stream_error(autojump_clock):
    cfg = midstream_config().replace("  enabled: true\n", "  enabled: true\n  mid_stream_enabled: false\n", 1)
    async with gateway(cfg) as app:
        reply = await post(app, stream=True)
        assert reply.status == 200 and b"[DONE]" not in reply.body
        assert calls(app, "big", "a", "200") == 1
        assert value(app, "switchyard_stream_errors_total", route=CHAT, model="big", backend="a") == 1
        assert value(app, "streaming_fallback_total", reason="fallback_chain") == 0


# --- HTTP level ---------------------------------------------------------------------------

async def test_every_route_is_counted_with_bounded_labels(autojump_clock):
    async with gateway(ADMIN + BASE + backend("a", "big")) as app:
        auth = [(b"authorization", f"Bearer {TOKEN}".encode())]
        for method, path, headers, status in [
                ("GET", "/v1/models", [], 200), ("GET", "/v1/models/big", [], 200),
                ("GET", "/v1/models/nope", [], 404), ("GET", "/nowhere/x1", [], 404),
                ("GET", "/nowhere/x2", [], 404), ("GET", "/admin/config", auth, 200),
                ("GET", "/admin/backends", [], 401), ("BREW", "/v1/models", [], 405), ("GET", "/health", [], 200)]:
            assert (await request(app, method, path, headers=headers)).status == status, path

        def http(route, status, method="GET"):
            return value(app, "switchyard_http_requests_total", route=route, method=method, status=status)
        assert http("/v1/models", "200") == 1
        assert http("/v1/models/{model}", "200") == 1 and http("/v1/models/{model}", "404") == 1
        assert http("other", "404") == 2
        assert http("/admin/*", "200") == 1 and http("/admin/*", "401") == 1
        assert http("/v1/models", "405", method="other") == 1
        assert http("/health", "200") == 1
        assert value(app, "switchyard_http_requests_in_flight") == 0


async def test_in_flight_gauge_covers_a_running_stream(autojump_clock):
    async with gateway(BASE + backend("a", "big", "{latency: 1s, tokens_per_second: 1, chunks: 3}")) as app:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, app)
            await trio.sleep(0.5)
            scraped = (await request(app, "GET", "/metrics")).body.decode()
            assert "switchyard_http_requests_in_flight 2.0" in scraped   # the call and this scrape
        assert value(app, "switchyard_http_requests_in_flight") == 0
        assert value(app, "switchyard_http_requests_total", route="/metrics", method="GET", status="200") == 1


# --- labels stay bounded ------------------------------------------------------------------

async def test_model_labels_are_names_the_gateway_routes_or_lists(autojump_clock, monkeypatch):
    config = "circuit_breaker: {min_callers: 1}\n" + \
        NO_CHAIN.replace("interval: 1h", "interval: 1h, unhealthy_threshold: 1") + \
        backend("a", "big", "{latency: 10ms, failure: {status: 500}}")
    async with gateway(config) as app:
        await post(app)                                  # opens a's circuit
        assert (await post(app)).status == 503          # no healthy backend: never dialed, still listed
        assert calls(app, "big", "none", "503") == 1
        metrics = app.runtime.metrics
        assert metrics.model_label("big:nitro", routed=False) == "big:nitro"  # a variant of a listed model
        assert metrics.model_label("big:fast", routed=False) == "other"       # no such variant
        assert metrics.model_label("x" * 201, routed=True) == "other"
        monkeypatch.setattr(call_metrics, "MODEL_LABEL_LIMIT", len(metrics._models) + 2)
        assert metrics.model_label("routed-1", routed=True) == "routed-1"
        assert metrics.model_label("routed-2", routed=True) == "routed-2"
        assert metrics.model_label("routed-3", routed=True) == "other"        # the set is full
        assert metrics.model_label("routed-1", routed=False) == "routed-1"    # a label stays one
        assert metrics.model_label("unknown", routed=False) == "other"


async def test_a_routed_model_name_that_is_not_clean_text_is_never_a_label(autojump_clock):
    """A backend serving every name lets any name be routed; one no exposition can encode counts as other."""
    async with gateway(NO_CHAIN + backend("a", "big", "{latency: 10ms}")) as app:
        assert app.runtime.metrics.model_label("big\ud800", routed=True) == "other"
        assert app.runtime.metrics.model_label("big\x00", routed=True) == "other"


async def test_metrics_answer_even_with_a_label_value_utf8_cannot_encode(autojump_clock, caplog):
    """Whatever lets one through, /metrics never fails on it: the value is written with U+FFFD."""
    async with gateway(NO_CHAIN + backend("a", "big", "{latency: 10ms}")) as app:
        metrics = app.runtime.metrics
        metrics.retries.labels("a", "big\ud800").inc()
        reply = await request(app, "GET", "/metrics")
    assert reply.status == 200
    assert 'switchyard_retries_total{backend="a",model="big\ufffd"} 1.0' in reply.body.decode()
    assert any("UTF-8 cannot encode" in r.getMessage() for r in caplog.records)


# --- scrape-time counters -----------------------------------------------------------------

ENGINE = """
engine_stats: {enabled: true, interval: 15s, timeout: 2s}
backends:
  - name: v
    type: simulated
    models: [m]
    simulation: {engine: {kind: vllm, waiting: 3, running: 1, kv_cache_usage: 0.25}}
"""


async def test_drops_polls_and_routing_decisions_are_read_at_scrape_time(autojump_clock):
    async with gateway(ENGINE) as app:
        rt = app.runtime
        t0 = trio.current_time()
        rt.upstream.simulated["v.simulated"].metrics_script.append(MetricsReply(status=500))
        await trio.sleep_until(t0 + 20)                 # polled at 0 (at start) and 15, which failed
        quota = rt.quota
        for _ in range(quota.mailbox.inbox.statistics().max_buffer_size + 3):
            quota.mailbox.tell(("v", [], 0.0))      # nothing consumes while this task runs
        rt.pool.engine_load_decisions[("v", "applied")] += 2
        scraped = (await request(app, "GET", "/metrics")).body.decode()
        assert 'engine_stats_poll_failures_total{backend="v"} 1.0' in scraped
        assert 'engine_stats_age_seconds{backend="v"} 20.0' in scraped
        assert isinstance(rt.engine_stats.view["v"], EngineSnapshot)
        assert quota.mailbox.dropped >= 2   # the actor may take one message straight off the channel
        assert f'actor_mailbox_dropped_total{{actor="quota"}} {quota.mailbox.dropped}.0' in scraped
        assert 'routing_engine_load_decisions_total{backend="v",reason="applied"} 2.0' in scraped
        for name in ("routing_usage_weight_decisions_total", "routing_quota_aware_decisions_total",
                     "fallback_dial_bound_saturated_total", "client_ref_rejected_total", "dedup_requests_total"):
            assert f"# TYPE {name} counter" in scraped


async def test_each_runtime_has_its_own_registry(autojump_clock):
    async with gateway(BASE + backend("a", "big")) as one, gateway(BASE + backend("a", "big")) as two:
        assert (await post(one)).status == 200
        assert calls(one, "big", "a", "200") == 1 and calls(two, "big", "a", "200") == 0
        assert one.runtime.metrics.registry is not two.runtime.metrics.registry


async def test_a_failing_listener_never_fails_the_call(autojump_clock):
    async with gateway(BASE + backend("a", "big")) as app:
        def broken(trace):
            raise RuntimeError("metrics bug")
        app.runtime.traces.listener = broken
        assert (await post(app)).status == 200


async def test_a_deduplicated_follower_is_a_call_without_a_backend(autojump_clock):
    config = "dedup: {enabled: true, max_entries: 4}\n" + BASE + backend("a", "big", "{latency: 1s, chunks: 2}")
    async with gateway(config) as app:
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(post, app)
        assert calls(app, "big", "a", "200") == 1 and calls(app, "big", "none", "200") == 1
        assert hist(app, "switchyard_request_duration_seconds", model="big") == (2, pytest.approx(2.0))
        assert hist(app, "switchyard_time_to_first_token_seconds", model="big", backend="a") == (1, 1.0)
        assert 'dedup_requests_total{role="followed"} 1.0' in (await request(app, "GET", "/metrics")).body.decode()
