"""EngineStatsPoller under MockClock with simulated engines: polls at exact instants, ageing
snapshots, failures, reconfiguration, and :nitro ranking by polled throughput."""

import math
from types import MappingProxyType

import pytest
import trio

from switchyard.actors.engine_stats import EngineStatsPoller, PollStatus, polled, stats_headers
from switchyard.actors.routing.engine_metrics import EngineSnapshot
from switchyard.actors.routing.variants import ThroughputSample
from switchyard.config.load import ConfigError, load_text
from switchyard.config.schema import BackendConfig, BackendType, SimulatedEngine, Simulation
from switchyard.protocol.simulated.engine import MetricsReply
from switchyard.protocol.wires.upstream import Upstream
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
engine_stats: {enabled: true, interval: 15s, timeout: 2s}
backends:
  - name: v
    type: simulated
    models: [m]
    simulation: {engine: {kind: vllm, waiting: 3, running: 1, kv_cache_usage: 0.25,
                          background_tokens_per_second: 80}}
  - name: s
    type: simulated
    models: [m]
    simulation: {engine: {kind: sglang, waiting: 9, total_slots: 64, kv_cache_usage: 0.5,
                          background_tokens_per_second: 50}}
  - name: plain
    type: simulated
    models: [m]
"""


def snapshot_of(config):
    return load_text(config, env={}).snapshot


async def start(nursery, config=CONFIG, scripts=None):
    snapshot = snapshot_of(config)
    upstream = Upstream(snapshot)
    for name, script in (scripts or {}).items():
        upstream.simulated[f"{name}.simulated"].metrics_script.extend(script)
    poller = EngineStatsPoller(snapshot, upstream)
    await nursery.start(poller.run)
    return poller, upstream


def polls(upstream, name, t0):
    return [t - t0 for t, k in upstream.simulated[f"{name}.simulated"].events if k.startswith("metrics")]


async def test_each_engine_is_polled_at_once_and_every_interval(autojump_clock, nursery):
    t0 = trio.current_time()
    poller, upstream = await start(nursery)
    await trio.sleep(50)
    assert polls(upstream, "v", t0) == [0, 15, 30, 45]
    assert polls(upstream, "s", t0) == [0, 15, 30, 45]
    assert polls(upstream, "plain", t0) == []          # no engine declared: never polled
    assert set(poller.view) == {"v", "s"}
    assert poller.status["v"] == PollStatus(url="http://v.simulated/metrics", polls=4, last_poll=t0 + 45,
                                            last_success=t0 + 45)


async def test_snapshots_carry_the_engine_page_and_age(autojump_clock, nursery):
    t0 = trio.current_time()
    poller, _ = await start(nursery)
    await trio.sleep(7)
    assert poller.view["v"] == EngineSnapshot(engine="vllm", waiting=3, running=1, observed_at=t0,
                                              kv_cache_usage=0.25, generation_tokens_total=0.0)
    assert poller.view["s"] == EngineSnapshot(engine="sglang", waiting=9, running=0, observed_at=t0, total_slots=64,
                                              kv_cache_usage=0.5, generation_tokens_total=0.0, gen_throughput=50.0)
    assert poller.age("v", trio.current_time()) == 7
    assert poller.age("plain", trio.current_time()) is None
    assert isinstance(poller.view, MappingProxyType)          # read-only, replaced on every change


async def test_a_failed_poll_keeps_the_old_snapshot_ageing(autojump_clock, nursery):
    t0 = trio.current_time()
    script = [MetricsReply(), MetricsReply(status=500), MetricsReply(body="vllm:num_requests_waiting{ 3\n"),
              MetricsReply(body="<html>gateway</html>\n"), MetricsReply(delay=math.inf), MetricsReply()]
    poller, upstream = await start(nursery, scripts={"v": script})
    errors = []
    for at in (16, 31, 46, 63):
        await trio.sleep_until(t0 + at)
        assert poller.view["v"].observed_at == t0              # the snapshot of the poll at 0, still there
        assert poller.age("v", trio.current_time()) == at
        errors.append(poller.status["v"].last_error)
    assert errors[0] == "HTTP 500"
    assert errors[1].startswith("malformed Prometheus exposition")
    assert errors[2] == "no vLLM or SGLang queue metrics on the page"
    assert errors[3] == "no answer within 2s"
    assert poller.status["v"].last_poll == t0 + 62            # the stalled poll ended at its timeout
    await trio.sleep_until(t0 + 76)
    assert poller.view["v"].observed_at == t0 + 75 and poller.age("v", trio.current_time()) == 1
    assert poller.status["v"] == PollStatus(url="http://v.simulated/metrics", polls=6, failures=4,
                                            last_poll=t0 + 75, last_success=t0 + 75)
    assert polls(upstream, "v", t0) == [0, 15, 30, 45, 60, 75]   # the stall did not shift the cadence


async def test_a_stalled_engine_does_not_delay_the_others(autojump_clock, nursery):
    t0 = trio.current_time()
    cfg = CONFIG.replace("timeout: 2s", "timeout: 10s")
    poller, upstream = await start(nursery, cfg, scripts={"v": [MetricsReply(delay=math.inf)] * 2})
    await trio.sleep(5)
    assert "v" not in poller.view and poller.status.get("v") is None   # its first poll is still out
    assert poller.view["s"].observed_at == t0
    await trio.sleep_until(t0 + 16)
    assert poller.status["v"].failures == 1 and poller.view["s"].observed_at == t0 + 15
    assert polls(upstream, "s", t0) == [0, 15]


async def test_disabled_polls_nothing_and_publishes_nothing(autojump_clock, nursery):
    t0 = trio.current_time()
    poller, upstream = await start(nursery, CONFIG.replace("enabled: true", "enabled: false"))
    await trio.sleep(100)
    assert polls(upstream, "v", t0) == [] and polls(upstream, "s", t0) == []
    assert dict(poller.view) == {} and dict(poller.throughput) == {} and dict(poller.status) == {}


async def test_throughput_from_the_counter_and_from_the_sglang_gauge(autojump_clock, nursery):
    t0 = trio.current_time()
    poller, _ = await start(nursery)
    await trio.sleep(1)
    assert "v" not in poller.throughput                       # one counter sample is no rate yet
    assert poller.throughput["s"] == ThroughputSample(50.0, t0)   # SGLang reports its own gauge
    await trio.sleep_until(t0 + 16)
    assert poller.throughput["v"] == ThroughputSample(80.0, t0 + 15)
    assert poller.throughput_view() is poller.throughput


# 'v' moves its page, 'plain' becomes an engine, the interval shortens
RELOADED = """
engine_stats: {enabled: true, interval: 10s, timeout: 2s}
backends:
  - name: v
    type: simulated
    models: [m]
    engine_stats_url: http://v.simulated/engine/metrics
    simulation: {engine: {kind: vllm, waiting: 3}}
  - name: s
    type: simulated
    models: [m]
    simulation: {engine: {kind: sglang, waiting: 9, total_slots: 64, kv_cache_usage: 0.5,
                          background_tokens_per_second: 50}}
  - name: plain
    type: simulated
    models: [m]
    simulation: {engine: {waiting: 1}}
"""


async def test_reconfigure_adds_drops_restarts_and_disables(autojump_clock, nursery):
    t0 = trio.current_time()
    poller, upstream = await start(nursery)
    await trio.sleep(20)
    snapshot = snapshot_of(RELOADED)
    upstream.sync_simulated(snapshot)
    poller.reconfigure(snapshot)
    assert "v" not in poller.view and "v" not in poller.throughput   # another address: another engine
    assert poller.view["s"].observed_at == t0 + 15                     # kept across the reload
    await trio.sleep_until(t0 + 41)
    # a new interval restarts every loop: all are polled at the reload, then on the new cadence
    assert polls(upstream, "s", t0) == [0, 15, 20, 30, 40]
    assert polls(upstream, "v", t0) == [0, 15, 20, 30, 40]
    assert polls(upstream, "plain", t0) == [20, 30, 40]
    assert poller.status["v"].url == "http://v.simulated/engine/metrics"
    assert poller.view["plain"].waiting == 1
    gone = snapshot_of(RELOADED.replace("enabled: true", "enabled: false"))
    poller.reconfigure(gone)
    await trio.sleep(60)
    assert polls(upstream, "s", t0)[-1] == 40
    assert dict(poller.view) == {} and dict(poller.status) == {} and dict(poller.throughput) == {}


async def test_a_removed_backend_is_forgotten_even_mid_poll(autojump_clock, nursery):
    t0 = trio.current_time()
    poller, upstream = await start(nursery, scripts={"v": [MetricsReply(), MetricsReply(delay=1)]})
    await trio.sleep_until(t0 + 15.5)                              # the second poll of 'v' is out
    poller.reconfigure(snapshot_of(CONFIG.replace("  - name: v\n", "  - name: v\n    enabled: false\n")))
    await trio.sleep(30)
    assert set(poller.view) == {"s"} and set(poller.status) == {"s"}
    assert polls(upstream, "v", t0) == [0, 15]                     # the one cut short, then none


def backend(type_, **kw):
    return BackendConfig(name="b", type=type_, url=kw.pop("url", "http://gpu-1:8000/v1"), **kw)


def test_which_backends_are_polled():
    assert polled(backend(BackendType.VLLM)) and polled(backend(BackendType.SGLANG))
    assert not polled(backend(BackendType.VLLM, enabled=False))
    assert not polled(backend(BackendType.OPENAI)) and not polled(backend(BackendType.GENERIC))
    assert polled(backend(BackendType.GENERIC, engine_stats_url="http://gpu-1:8000/metrics"))
    assert not polled(backend(BackendType.SIMULATED, url="http://b.simulated", simulation=Simulation()))
    assert polled(backend(BackendType.SIMULATED, url="http://b.simulated",
                          simulation=Simulation(engine=SimulatedEngine())))


def test_simulated_engine_settings_are_checked_by_path():
    cfg = """
backends:
  - name: a
    type: simulated
    models: [m]
    simulation: {engine: {kind: tgi, waiting: -1, kv_cache_usage: 1.5, total_slots: 8, extra: 1}}
"""
    with pytest.raises(ConfigError) as caught:
        load_text(cfg, env={})
    assert caught.value.errors == [
        "backends[0].simulation.engine.kind: must be one of vllm, sglang, got 'tgi'",
        "backends[0].simulation.engine.waiting: must be at least 0, got -1",
        "backends[0].simulation.engine.kv_cache_usage: must be at most 1, got 1.5",
        "backends[0].simulation.engine.total_slots: only an sglang engine reports it (vLLM exports no such metric)",
        "backends[0].simulation.engine.extra: unknown key",
    ]
    engine = snapshot_of(cfg.replace("{kind: tgi, waiting: -1, kv_cache_usage: 1.5, total_slots: 8, extra: 1}",
                                     "{kind: sglang, total_slots: 8}")).backends[0].simulation.engine
    assert engine == SimulatedEngine(kind="sglang", total_slots=8)
    assert snapshot_of(cfg.replace("{engine: {kind: tgi, waiting: -1, kv_cache_usage: 1.5, total_slots: 8, "
                                   "extra: 1}}", "{engine: }")).backends[0].simulation.engine is None


def test_the_key_goes_only_to_the_backends_own_origin():
    b = backend(BackendType.VLLM, api_key="sk-engine")
    assert stats_headers(b, "http://gpu-1:8000/metrics") == [("authorization", "Bearer sk-engine")]
    assert stats_headers(b, "http://exporter:9400/metrics") == []
    assert stats_headers(b, "https://gpu-1:8000/metrics") == []
    https = backend(BackendType.VLLM, api_key="k", url="https://gpu-1/v1")
    assert stats_headers(https, "https://gpu-1:443/metrics") == [("authorization", "Bearer k")]


# --- through the running gateway ---------------------------------------------------------------

NITRO = """
health_checks: {interval: 1h}
engine_stats: {enabled: true, interval: 5s}
proxy: {variant_suffixes: {enabled: true}}
backends:
  - name: a
    type: simulated
    models: [m]
    simulation: {latency: 10ms, chunks: 3, engine: {background_tokens_per_second: 80}}
  - name: b
    type: simulated
    models: [m]
    simulation: {latency: 10ms, chunks: 3}
  - name: c
    type: simulated
    models: [m]
    simulation: {latency: 10ms, chunks: 3, engine: {background_tokens_per_second: 200}}
"""


def served_by(app):
    return {n: len(app.runtime.upstream.simulated[f"{n}.simulated"].requests) for n in "abc"}


async def test_nitro_ranks_by_polled_throughput(autojump_clock):
    async with gateway(NITRO) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("m:nitro"))
        assert reply.headers[b"x-continuum-model-variant-applied"] == b"false"   # one counter sample: no rate
        await trio.sleep_until(t0 + 5.5)
        assert app.runtime.throughput is app.runtime.engine_stats.throughput
        rates = {n: s.tokens_per_second for n, s in app.runtime.throughput.items()}
        # 'a' also streamed the first request's 3 pieces between the polls at 0 and 5
        assert rates == {"a": 80.0 + 3 / 5, "c": 200.0}
        before = served_by(app)
        for _ in range(3):
            reply = await request(app, "POST", "/v1/chat/completions", chat("m:nitro"))
            assert reply.status == 200 and reply.headers[b"x-continuum-model-variant-applied"] == b"true"
        after = served_by(app)
        assert {n: after[n] - before[n] for n in "abc"} == {"a": 0, "b": 0, "c": 3}


async def test_simulated_page_counts_streamed_tokens_and_open_streams(autojump_clock):
    # four pieces 10 s apart: at 0.01, 10.01, 20.01 and 30.01
    cfg = """
engine_stats: {enabled: true, interval: 5s}
backends:
  - name: a
    type: simulated
    models: [m]
    simulation: {latency: 10ms, chunks: 4, tokens_per_second: 0.1, engine: {waiting: 2}}
"""
    async with gateway(cfg) as app:
        t0 = trio.current_time()
        poller = app.runtime.engine_stats
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request, app, "POST", "/v1/chat/completions", chat("m", stream=True))
            await trio.sleep_until(t0 + 5.5)
            a = poller.view["a"]
            assert (a.waiting, a.running, a.generation_tokens_total) == (2, 1, 1.0)   # one stream open
            await trio.sleep_until(t0 + 15.5)
            assert poller.view["a"].generation_tokens_total == 2.0
            assert poller.throughput["a"] == ThroughputSample(1 / 5, t0 + 15)   # one token between 10 and 15
        await trio.sleep_until(t0 + 35.5)
        a = poller.view["a"]
        assert (a.running, a.generation_tokens_total) == (0, 4.0)
        page = app.runtime.upstream.simulated["a.simulated"].engine_page(SimulatedEngine())
        assert 'vllm:generation_tokens_total{engine="0",model_name="m"} 4.0' in page


async def test_runtime_apply_reconfigures_the_poller(autojump_clock):
    async with gateway(NITRO) as app:
        t0 = trio.current_time()
        await trio.sleep(6)
        assert set(app.runtime.throughput) == {"a", "c"}
        app.runtime.apply(snapshot_of(NITRO.replace("engine_stats: {enabled: true, interval: 5s}",
                                                    "engine_stats: {enabled: false}")))
        assert dict(app.runtime.throughput) == {} and dict(app.runtime.engine_stats.view) == {}
        await trio.sleep(30)
        sim = app.runtime.upstream.simulated["c.simulated"]
        assert [t - t0 for t, k in sim.events if k.startswith("metrics")] == [0, 5]


async def test_a_page_with_impossible_counts_fails_that_poll_and_nothing_else(autojump_clock, nursery):
    t0 = trio.current_time()
    bad = MetricsReply(body='vllm:num_requests_waiting{a="1"} 1e308\nvllm:num_requests_waiting{a="2"} 1e308\n')
    poller, upstream = await start(nursery, scripts={"v": [bad] * 10})
    await trio.sleep(31)
    assert polls(upstream, "s", t0) == [0, 15, 30]       # the other engine keeps its cadence
    assert polls(upstream, "v", t0) == [0, 15, 30]
    assert poller.status["v"].failures == 3 and "malformed" in poller.status["v"].last_error
