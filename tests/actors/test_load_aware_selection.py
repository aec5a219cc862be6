"""The live-signal selection terms on the request path, at exact virtual instants: engine load with
its dead band and freshness, the admission gate, usage weight windows and observed quota."""

import json
import re

import pytest
import trio
import trio.testing

from switchyard.config.schema import SimulatedEngine
from switchyard.protocol.simulated.engine import MetricsReply
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

ENGINES = """
health_checks: {interval: 1h}
engine_stats: {enabled: true, interval: 15s}
routing:
  engine_load: {enabled: true, balance_abs_threshold: 64, balance_rel_threshold: 1.5}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2,
     engine: {kind: vllm, waiting: 100, kv_cache_usage: 0.3}}}
  - {name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2,
     engine: {kind: vllm, waiting: 10, kv_cache_usage: 0.3}}}
"""


def served_by(reply) -> str:
    return re.search(r"Hello from (\w+)", reply.json()["choices"][0]["message"]["content"]).group(1)


async def picks(app, n=4) -> set[str]:
    return {served_by(await request(app, "POST", "/v1/chat/completions", chat())) for _ in range(n)}


def script(app, backend, *pages):
    app.runtime.upstream.simulated[f"{backend}.simulated"].metrics_script.extend(pages)


async def test_traffic_shifts_to_the_idle_engine_once_the_dead_band_is_crossed(autojump_clock):
    async with gateway(ENGINES) as app:
        # the first poll ran at start: a waits 100, b 10 -> spread 90 > 64 and ratio 10 > 1.5
        assert await picks(app) == {"b"}
        # next poll (t=15): a waits 50 -> spread 40, inside the dead band: the strategy rotates again
        script(app, "a", SimulatedEngine(waiting=50, kv_cache_usage=0.3))
        await trio.sleep(15)
        assert await picks(app) == {"a", "b"}
        decisions = app.runtime.pool.engine_load_decisions
        assert decisions[("a", "outranked")] == 4 and decisions[("b", "applied")] == 4
        assert decisions[("a", "dead_band")] == 4


async def test_a_snapshot_older_than_interval_times_max_staleness_counts_as_absent(autojump_clock):
    async with gateway(ENGINES) as app:
        t0 = trio.current_time()
        script(app, "a", *[MetricsReply(status=500)] * 10)   # every later poll of a fails: its snapshot ages
        await trio.sleep_until(t0 + 44.9)
        assert await picks(app, 3) == {"b"}            # 45 s window (15 s x 3): still fresh
        await trio.sleep_until(t0 + 45.1)
        assert await picks(app, 4) == {"a", "b"}       # stale: a keeps the base score, no ranking
        assert app.runtime.pool.engine_load_decisions[("a", "stale")] >= 1


ADMISSION = """
health_checks: {interval: 1h}
engine_stats: {enabled: true, interval: 15s}
routing:
  engine_load: {admission: {enabled: true, kv_usage_threshold: 0.9}}
fallback: {enabled: true, fallback_chains: {demo: [spare]}}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2,
     engine: {kind: vllm, waiting: 5, kv_cache_usage: 0.95}}}
  - {name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2,
     engine: {kind: vllm, waiting: 5, kv_cache_usage: 0.99}}}
  - {name: c, type: simulated, models: [spare], simulation: {latency: 10ms, chunks: 2}}
"""


async def test_admission_gate_closes_on_saturated_engines_and_opens_when_they_drain(autojump_clock):
    async with gateway(ADMISSION) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        # every engine of demo is over 0.9: the chain takes over like backend_unhealthy
        assert reply.status == 200 and reply.headers[b"x-fallback-model"] == b"spare"
        script(app, "b", SimulatedEngine(waiting=5, kv_cache_usage=0.5))
        await trio.sleep(15)
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        # one engine has room again: the gate opens (it never picks; the strategy still does)
        assert reply.status == 200 and b"x-fallback-model" not in reply.headers


async def test_admission_gate_without_a_chain_is_a_retryable_503(autojump_clock):
    async with gateway(ADMISSION.replace("fallback: {enabled: true, fallback_chains: {demo: [spare]}}\n", "")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 503 and reply.json()["error"]["code"] == "engines_saturated"


async def test_a_candidate_without_fresh_data_always_admits(autojump_clock):
    config = ADMISSION.replace("kv_cache_usage: 0.99}}}", "kv_cache_usage: 0.99}}}").replace(
        "  - {name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2,\n"
        "     engine: {kind: vllm, waiting: 5, kv_cache_usage: 0.99}}}\n",
        "  - {name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}}\n")
    async with gateway(config) as app:
        assert await picks(app, 4) == {"a", "b"}


USAGE = """
health_checks: {interval: 1h}
routing:
  usage_weight: {enabled: true, weight: 0.2, staleness_interval: 60s}
backends:
  - {name: a, type: simulated, models: [demo], provider_tpm: 100, simulation: {latency: 10ms, chunks: 2}}
  - {name: b, type: simulated, models: [demo], provider_tpm: 100, simulation: {latency: 10ms, chunks: 2}}
"""


async def test_usage_weight_prefers_the_backend_with_more_quota_left_until_the_window_rolls(autojump_clock):
    async with gateway(USAGE) as app:
        t0 = trio.current_time()
        window = app.runtime.pool.signals.meter.interval
        await trio.sleep_until((t0 // window + 1) * window)     # start at a window boundary
        first = served_by(await request(app, "POST", "/v1/chat/completions", chat()))  # tie: the strategy picks
        other = ({"a", "b"} - {first}).pop()
        # `first` spent tokens in this window: the other now has strictly more left
        assert served_by(await request(app, "POST", "/v1/chat/completions", chat())) == other
        decisions = app.runtime.pool.usage_weight_decisions
        assert decisions[(other, "applied")] == 1 and decisions[(first, "no_differentiation")] == 1
        # a new window starts from zero for both
        await trio.sleep_until((t0 // window + 2) * window)
        assert app.runtime.pool.signals.meter.used(first, trio.current_time()).tokens == 0


QUOTA = """
health_checks: {interval: 1h}
routing:
  usage_weight: {enabled: true}
  quota_aware: {enabled: true, ttl: 45s}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2, response_headers:
     {x-ratelimit-limit-tokens: 1000, x-ratelimit-remaining-tokens: 900}}}
  - {name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2, response_headers:
     {x-ratelimit-limit-tokens: 1000, x-ratelimit-remaining-tokens: 100}}}
"""


async def test_observed_quota_ranks_without_declarations_and_expires_after_its_ttl(autojump_clock):
    async with gateway(QUOTA) as app:
        for pin in (b"a", b"b"):            # one answer from each, so both have been observed
            await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-backend", pin)])
        await trio.testing.wait_all_tasks_blocked()   # the observer takes its mailbox
        assert set(app.runtime.quota.view) == {"a", "b"}
        assert await picks(app, 3) == {"a"}   # a has 90 % of its tokens left, b 10 %
        assert app.runtime.pool.quota_decisions[("a", "observed_used")] >= 3
        t_last = trio.current_time()
        await trio.sleep_until(t_last + 45.5)
        # both snapshots are past the TTL: the next pick counts them stale and the strategy decides
        await request(app, "POST", "/v1/chat/completions", chat())
        assert app.runtime.pool.quota_decisions[("b", "stale")] == 1


async def test_admin_stats_show_engine_snapshots_and_quota_against_their_windows(autojump_clock):
    config = ENGINES.replace(
        "engine: {kind: vllm, waiting: 100, kv_cache_usage: 0.3}}}",
        "engine: {kind: vllm, waiting: 100, kv_cache_usage: 0.3}, response_headers: {x-ratelimit-limit-requests: 50, "
        "x-ratelimit-remaining-requests: 40, x-ratelimit-remaining-tokens: 7}}}",
    ).replace("routing:\n", "routing:\n  quota_aware: {enabled: true, ttl: 45s}\n  usage_weight: {enabled: true}\n")
    config += "admin: {token: admin-token-0123456789}\n"
    auth = [(b"authorization", b"Bearer admin-token-0123456789")]
    async with gateway(config) as app:
        t0 = trio.current_time()
        await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-backend", b"a")])
        await trio.sleep_until(t0 + 10)
        stats = (await request(app, "GET", "/admin/stats/backends", headers=auth)).json()
        a = {b["name"]: b for b in stats["backends"]}["a"]
        engine = a["engine_stats"]
        assert engine["snapshot"]["waiting"] == 100 and engine["freshness_window"] == 45
        assert engine["snapshot"]["age"] == 10 and engine["snapshot"]["fresh"] is True
        q = a["quota"]
        assert q["requests_ratio"] == 0.8 and q["tokens_ratio"] is None   # a remaining without its limit
        assert q["headers"]["x-ratelimit-remaining-tokens"] == "7" and q["ttl"] == 45 and q["fresh"] is True
        assert a["usage_window"]["requests"] == 1
        one = await request(app, "GET", "/admin/backends/b/engine-stats", headers=auth)
        assert one.status == 200 and one.json()["engine_stats"]["snapshot"]["waiting"] == 10
        assert one.json()["quota"] is None
        missing = await request(app, "GET", "/admin/backends/nope/engine-stats", headers=auth)
        assert missing.status == 404 and missing.json()["error"]["code"] == "backend_not_found"


async def test_streams_are_metered_without_showing_the_client_a_usage_chunk_it_did_not_ask_for(autojump_clock):
    async with gateway(USAGE) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True), headers=[(b"x-backend", b"a")])
        sent = app.runtime.upstream.simulated["a.simulated"].requests[-1]
        assert json.loads(sent.content)["stream_options"] == {"include_usage": True}
        assert not any(b'"usage"' in e for e in reply.events())      # the client's stream, as it asked
        assert reply.events()[-1] == b"[DONE]"
        used = app.runtime.pool.signals.meter.used("a", trio.current_time())
        assert used.requests == 1 and used.tokens > 0
        # a client that asks for usage gets its chunk, and the same metering
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat(stream=True, stream_options={"include_usage": True}), headers=[(b"x-backend", b"a")])
        assert any(b'"usage"' in e for e in reply.events())
        assert app.runtime.pool.signals.meter.used("a", trio.current_time()).requests == 2


async def test_a_burst_spreads_because_attempts_in_flight_count_as_spent(autojump_clock):
    config = USAGE.replace("provider_tpm: 100", "provider_rpm: 10").replace("latency: 10ms", "latency: 1s")
    async with gateway(config) as app:
        await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-backend", b"a")])
        served = []

        async def one():
            served.append(served_by(await request(app, "POST", "/v1/chat/completions", chat())))
        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(one)
        # without counting the burst's own attempts, all six would go to b (a had spent one request)
        assert served.count("a") >= 2 and served.count("b") >= 3


async def test_a_pin_to_a_saturated_engine_is_given_up_like_an_unhealthy_one(autojump_clock):
    config = ADMISSION.replace("kv_cache_usage: 0.99}}}", "kv_cache_usage: 0.2}}}")
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-backend", b"a")])
        assert reply.status == 200   # a is over the threshold, so the pin is given up; b has room, so no refusal
        trace = app.runtime.traces.get(reply.headers[b"x-continuum-request-id"].decode())
        given_up = [e for e in trace.events if e["event"] == "pin_unavailable"]
        assert given_up and given_up[0]["detail"] == {"reason": "engines_saturated"}
