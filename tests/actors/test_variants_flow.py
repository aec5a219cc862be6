"""Model variant suffixes on /v1/chat/completions under MockClock: resolution, the ranking of
:nitro and :floor, the refusals of :thinking and :online, headers, the response model, the metric."""

import json

import pytest
import trio

from switchyard.actors.routing.variants import ThroughputSample
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
health_checks: {interval: 1h, unhealthy_threshold: 1, warmup_check_interval: 100ms}
proxy: {variant_suffixes: {enabled: ENABLED}}
fallback:
  enabled: true
  fallback_chains: {m: [other]}
backends:
  - name: a
    type: simulated
    models: [m, llama3:8b, x:nitro, nemo]
    simulation: {latency: 10ms, chunks: 3A_HEALTH}
    model_configs:
      - {id: m, metadata: {pricing: {input_tokens: 3, output_tokens: 15}}}
      - {id: nemo, metadata: {thinking: {pattern: unterminated_start, end_marker: '</think>'}}}
  - name: b
    type: simulated
    models: [m, x, other]
    simulation: {latency: 10ms, chunks: 3}
    model_configs:
      - {id: m, upstream_id: org/m-instruct, metadata: {pricing: {input_tokens: 0.5, output_tokens: 1.5}}}
  - name: c
    type: simulated
    models: [m]
    simulation: {latency: 10ms, chunks: 3}
"""


def config(enabled=True, a_health=""):
    return CONFIG.replace("ENABLED", "true" if enabled else "false").replace("A_HEALTH", a_health)


def sent(app, name):
    return [json.loads(r.content) for r in app.runtime.upstream.simulated[f"{name}.simulated"].requests
            if r.url.path.endswith("/chat/completions")]


def served_by(app):
    return {n: len(sent(app, n)) for n in "abc"}


async def post(app, model, stream=False, **extra):
    return await request(app, "POST", "/v1/chat/completions", chat(model, stream=stream, **extra))


def variant_headers(reply):
    return (reply.headers.get(b"x-continuum-model-variant"), reply.headers.get(b"x-continuum-model-variant-applied"))


async def test_floor_prefers_the_lowest_price_and_rewrites_the_model(autojump_clock):
    async with gateway(config()) as app:
        for _ in range(4):
            reply = await post(app, "m:floor")
            assert reply.status == 200 and reply.json()["model"] == "m:floor"
            assert variant_headers(reply) == (b"floor", b"true")
        assert served_by(app) == {"a": 0, "b": 4, "c": 0}   # 'c' has no price: never a :floor target
        # the backend got the base id (its upstream id here), never the suffix
        assert {p["model"] for p in sent(app, "b")} == {"org/m-instruct"}


async def test_floor_streams_the_requested_name_in_every_chunk(autojump_clock):
    async with gateway(config()) as app:
        reply = await post(app, "m:floor", stream=True)
        assert reply.status == 200 and variant_headers(reply) == (b"floor", b"true")
        events = [json.loads(e) for e in reply.events() if e != b"[DONE]"]
        assert events and {e["model"] for e in events} == {"m:floor"}
        assert reply.events()[-1] == b"[DONE]"


async def test_nitro_without_engine_stats_falls_back_to_the_strategy(autojump_clock):
    async with gateway(config()) as app:
        for _ in range(3):
            reply = await post(app, "m:nitro")
            assert reply.status == 200 and reply.json()["model"] == "m:nitro"
            assert variant_headers(reply) == (b"nitro", b"false")
        assert served_by(app) == {"a": 1, "b": 1, "c": 1}   # round robin as usual
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'continuum_model_variant_requests_total{applied="false",variant="nitro"} 3.0' in metrics
        assert 'continuum_model_variant_requests_total{applied="true",variant="nitro"} 0.0' in metrics


async def test_nitro_prefers_the_fastest_fresh_engine(autojump_clock):
    async with gateway(config()) as app:
        now = trio.current_time()
        app.runtime.throughput = {"a": ThroughputSample(80.0, now), "c": ThroughputSample(200.0, now),
                                  "b": ThroughputSample(999.0, now - 60)}   # stale: no data
        for _ in range(3):
            reply = await post(app, "m:nitro", stream=True)
            assert reply.status == 200 and variant_headers(reply) == (b"nitro", b"true")
            assert {json.loads(e)["model"] for e in reply.events() if e != b"[DONE]"} == {"m:nitro"}
        assert served_by(app) == {"a": 0, "b": 0, "c": 3}
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'continuum_model_variant_requests_total{applied="true",variant="nitro"} 3.0' in metrics


async def test_ranking_runs_after_health_and_never_widens(autojump_clock):
    # 'b' is the cheapest but unhealthy: :floor picks among what health left ('a'), never 'b'
    cfg = config().replace("models: [m, x, other]\n    simulation: {latency: 10ms, chunks: 3}",
                           "models: [m, x, other]\n    simulation: {latency: 10ms, chunks: 3, health_status: 500}")
    async with gateway(cfg) as app:
        await trio.sleep(0.2)
        for _ in range(2):
            reply = await post(app, "m:floor")
            assert reply.status == 200 and variant_headers(reply) == (b"floor", b"true")
        assert served_by(app) == {"a": 2, "b": 0, "c": 0}


async def test_floor_without_any_price_is_not_applied(autojump_clock):
    cfg = config().replace("metadata: {pricing: {input_tokens: 3, output_tokens: 15}}", "metadata: {}") \
        .replace(", metadata: {pricing: {input_tokens: 0.5, output_tokens: 1.5}}", "")
    async with gateway(cfg) as app:
        reply = await post(app, "m:floor")
        assert reply.status == 200 and variant_headers(reply) == (b"floor", b"false")
        assert reply.json()["model"] == "m:floor"


async def test_full_name_first_and_ollama_tags(autojump_clock):
    async with gateway(config()) as app:
        # literally served names route as themselves: no variant, no rewrite
        for name in ("x:nitro", "llama3:8b"):
            reply = await post(app, name)
            assert reply.status == 200 and reply.json()["model"] == name
            assert variant_headers(reply) == (None, None)
        assert [p["model"] for p in sent(app, "a")] == ["x:nitro", "llama3:8b"]
        # a suffix on a tagged base is still a variant
        reply = await post(app, "llama3:8b:floor")
        assert reply.status == 200 and reply.json()["model"] == "llama3:8b:floor"
        assert sent(app, "a")[-1]["model"] == "llama3:8b"
        assert variant_headers(reply) == (b"floor", b"false")   # no price for llama3:8b


async def test_unknown_words_and_bases_are_unknown_models(autojump_clock):
    async with gateway(config()) as app:
        for name in ("m:cheap", "m:free", "nope:nitro", "llama3:70b"):
            for stream in (False, True):
                reply = await post(app, name, stream=stream)
                assert reply.status == 404, name
                err = reply.json()["error"]
                assert err["code"] == "model_not_found" and f"'{name}'" in err["message"]


async def test_thinking_sets_the_effort_on_a_thinking_model(autojump_clock):
    async with gateway(config()) as app:
        reply = await post(app, "nemo:thinking")
        assert reply.status == 200 and reply.json()["model"] == "nemo:thinking"
        assert variant_headers(reply) == (b"thinking", b"true")
        reply = await post(app, "nemo:thinking", stream=True, reasoning_effort="low")
        assert reply.status == 200
        assert [(p["model"], p["reasoning_effort"]) for p in sent(app, "a")] == [("nemo", "high"), ("nemo", "low")]


async def test_thinking_and_online_refusals(autojump_clock):
    async with gateway(config()) as app:
        for name, word in (("m:thinking", "thinking"), ("m:online", "online"), ("nemo:online", "online")):
            for stream in (False, True):
                reply = await post(app, name, stream=stream)
                assert reply.status == 404
                assert reply.headers[b"content-type"] == b"application/json"   # not a stream: no byte went out
                err = reply.json()["error"]
                assert err["type"] == "invalid_request_error" and err["code"] == "unsupported_model_variant"
                assert f"'{name}'" in err["message"] and f":{word}" in err["message"]
        assert served_by(app) == {"a": 0, "b": 0, "c": 0}   # never answered as the base
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'continuum_model_variant_requests_total{applied="false",variant="online"} 4.0' in metrics
        assert 'continuum_model_variant_requests_total{applied="false",variant="thinking"} 2.0' in metrics


async def test_switch_off_leaves_suffixes_unknown(autojump_clock):
    async with gateway(config(enabled=False)) as app:
        reply = await post(app, "m:floor")
        assert reply.status == 404 and reply.json()["error"]["code"] == "model_not_found"
        assert (await post(app, "x:nitro")).status == 200


async def test_chain_hop_does_not_inherit_the_suffix(autojump_clock):
    # every backend of 'm' is down: the chain model 'other' answers as itself, the variant not applied
    cfg = """
health_checks: {interval: 1h, unhealthy_threshold: 1, warmup_check_interval: 100ms}
proxy: {variant_suffixes: {enabled: true}}
fallback:
  enabled: true
  fallback_chains: {m: [other]}
backends:
  - name: a
    type: simulated
    models: [m]
    simulation: {latency: 10ms, chunks: 3, health_status: 500}
    model_configs:
      - {id: m, metadata: {pricing: {input_tokens: 3, output_tokens: 15}}}
  - name: b
    type: simulated
    models: [other]
    simulation: {latency: 10ms, chunks: 3}
    model_configs:
      - {id: other, metadata: {pricing: {input_tokens: 1, output_tokens: 1}}}
"""
    async with gateway(cfg) as app:
        await trio.sleep(0.2)
        for stream in (False, True):
            reply = await post(app, "m:floor", stream=stream)
            assert reply.status == 200, reply.body
            models = [reply.json()["model"]] if not stream else \
                [json.loads(e)["model"] for e in reply.events() if e != b"[DONE]"]
            assert set(models) == {"other"}
            assert reply.headers[b"x-fallback-original-model"] == b"m:floor"
            assert variant_headers(reply) == (b"floor", b"false")
        assert [p["model"] for p in sent(app, "b")] == ["other", "other"]


async def test_variant_of_an_alias_dispatches_the_canonical_id(autojump_clock):
    cfg = config().replace("- {id: m, metadata: {pricing: {input_tokens: 3, output_tokens: 15}}}",
                           "- {id: m, aliases: [mm], metadata: {pricing: {input_tokens: 3, output_tokens: 15}}}")
    async with gateway(cfg) as app:
        await trio.sleep(0.2)   # discovery done: the alias dispatches
        reply = await post(app, "mm:floor")
        assert reply.status == 200 and reply.json()["model"] == "mm:floor"
        assert variant_headers(reply) == (b"floor", b"true")
        assert [p["model"] for p in sent(app, "b")] == ["org/m-instruct"]
