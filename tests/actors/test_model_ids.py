"""Alias dispatch and per-backend upstream ids, through the whole gateway (simulated backends)."""

import json
import logging

import pytest
import trio

from tests.actors.test_failover import content_of
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

ALIAS = """
health_checks: {interval: 1h}
backends:
  - name: google
    type: simulated
    models: [gemini-3.1-pro-preview]
    simulation: {latency: 10ms, chunks: 3}
    model_configs:
      - {id: gemini-3.1-pro-preview, aliases: [gemini-3.1-pro]}
"""


def sent_models(app, name):
    return [json.loads(r.content)["model"] for r in app.runtime.upstream.simulated[f"{name}.simulated"].requests]


def events(app, reply):
    trace = app.runtime.traces.get(reply.headers[b"x-continuum-request-id"].decode())
    return [(e["event"], e["model"], e.get("detail")) for e in trace.events]


def chunk_models(reply):
    return [json.loads(e)["model"] for e in reply.events() if e != b"[DONE]"]


# --- alias dispatch ------------------------------------------------------------------

async def test_an_alias_no_backend_serves_is_dispatched_as_its_canonical_id(autojump_clock, caplog):
    caplog.set_level(logging.INFO, logger="switchyard.route")
    async with gateway(ALIAS) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemini-3.1-pro"))
        assert reply.status == 200
        assert sent_models(app, "google") == ["gemini-3.1-pro-preview"]
        assert reply.json()["model"] == "gemini-3.1-pro-preview"   # the id the backend served
        assert [(e, m) for e, m, _ in events(app, reply)] == [
            ("accepted", "gemini-3.1-pro"), ("alias_dispatched", "gemini-3.1-pro-preview"),
            ("selected", "gemini-3.1-pro-preview"), ("completed", "gemini-3.1-pro-preview")]
        assert events(app, reply)[1][2] == {"requested_model": "gemini-3.1-pro"}
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("Dispatching a model alias as the canonical id its backend serves" in m
               and "gemini-3.1-pro" in m and "gemini-3.1-pro-preview" in m for m in lines)


async def test_dispatch_keeps_the_clients_other_parameters_and_streams(autojump_clock):
    async with gateway(ALIAS) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("models/gemini-3.1-pro", stream=True, temperature=0.3, seed=7))
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        sent = json.loads(app.runtime.upstream.simulated["google.simulated"].requests[0].content)
        assert sent["model"] == "gemini-3.1-pro-preview"
        assert sent["temperature"] == 0.3 and sent["seed"] == 7
        assert set(chunk_models(reply)) == {"gemini-3.1-pro-preview"}


async def test_condition_1_a_fuzzy_match_is_not_dispatched_and_404_names_the_request(autojump_clock):
    async with gateway(ALIAS) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemini-3.1-pro-20250101"))
        assert reply.status == 404
        assert "'gemini-3.1-pro-20250101'" in reply.json()["error"]["message"]
        assert sent_models(app, "google") == []


async def test_condition_2_a_glob_backend_with_no_discovered_ids_holds_the_name(autojump_clock):
    # The simulated backend lists only exact names, so a glob-only one discovers nothing.
    cfg = ALIAS + "  - {name: vertex, type: simulated, models: [\"gemini-*\"]}\n"
    async with gateway(cfg) as app:
        assert app.runtime.discovery.view["vertex"] == frozenset()
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemini-3.1-pro"))
        assert reply.status == 404
        assert "'gemini-3.1-pro'" in reply.json()["error"]["message"]
        assert sent_models(app, "google") == []


async def test_condition_3_literal_serving_wins(autojump_clock):
    cfg = ALIAS + "  - {name: local, type: simulated, models: [gemini-3.1-pro], simulation: {latency: 10ms}}\n"
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemini-3.1-pro"))
        assert reply.status == 200
        assert sent_models(app, "local") == ["gemini-3.1-pro"]
        assert sent_models(app, "google") == []
        assert "alias_dispatched" not in [e for e, _, _ in events(app, reply)]


async def test_condition_4_no_backend_serves_the_canonical_id_so_404_names_the_alias(autojump_clock):
    cfg = ALIAS.replace("models: [gemini-3.1-pro-preview]", "models: [gemini-2.0-flash]")
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemini-3.1-pro"))
        assert reply.status == 404
        err = reply.json()["error"]
        assert err["code"] == "model_not_found" and "'gemini-3.1-pro'" in err["message"]
        assert "preview" not in err["message"]


async def test_no_healthy_backend_after_dispatch_names_the_clients_model(autojump_clock):
    cfg = ALIAS.replace("health_checks: {interval: 1h}",
                        "health_checks: {unhealthy_threshold: 1, warmup_check_interval: 100ms}").replace(
        "simulation: {latency: 10ms, chunks: 3}", "simulation: {latency: 10ms, health_status: 500}")
    async with gateway(cfg) as app:
        await trio.sleep(0.1)
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemini-3.1-pro"))
        assert reply.status == 503
        err = reply.json()["error"]
        assert err["code"] == "no_healthy_backends"
        assert "'gemini-3.1-pro'" in err["message"] and "preview" not in err["message"]


FALLBACK = """
health_checks: {interval: 1h}
fallback:
  enabled: true
  fallback_chains: {CHAINS}
backends:
  - name: google
    type: simulated
    models: [gemini-3.1-pro-preview]
    simulation: {latency: 10ms, failure: {status: 503}}
    model_configs:
      - {id: gemini-3.1-pro-preview, aliases: [gemini-3.1-pro]}
  - {name: small, type: simulated, models: [small], simulation: {latency: 10ms}}
  - {name: tiny, type: simulated, models: [tiny], simulation: {latency: 10ms}}
"""


async def test_fallback_chains_are_looked_up_by_the_canonical_id_and_an_alias_chain_warns(autojump_clock, caplog):
    caplog.set_level(logging.INFO, logger="switchyard.route")
    chains = "gemini-3.1-pro: [tiny], gemini-3.1-pro-preview: [small]"
    async with gateway(FALLBACK.replace("CHAINS", chains)) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemini-3.1-pro"))
        assert reply.status == 200
        assert sent_models(app, "small") == ["small"]
        assert sent_models(app, "tiny") == []
        assert reply.headers[b"x-fallback-original-model"] == b"gemini-3.1-pro"
        assert reply.headers[b"x-fallback-model"] == b"small"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and "fallback chain" in r.getMessage()]
    assert len(warnings) == 1 and "gemini-3.1-pro" in warnings[0]


# --- upstream ids -----------------------------------------------------------------------

UPSTREAM = """
health_checks: {interval: 1h}
retry: {max_attempts: 2, initial_delay: 1s, jitter: false}
backends:
  - name: vllm
    type: simulated
    models: [gemma4]
    simulation: {latency: 10ms, chunks: 3, SIM}
    model_configs:
      - {id: gemma4, upstream_id: gemma-4-26b-a4b-it-fp8}
"""
EXTERNAL = "  - {name: external, type: simulated, models: [gemma4], simulation: {latency: 10ms, chunks: 3}}\n"
WIRE = "gemma-4-26b-a4b-it-fp8"


async def test_upstream_id_is_sent_and_the_public_id_restored_buffered(autojump_clock):
    async with gateway(UPSTREAM.replace(", SIM", "")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemma4", temperature=0.5))
        assert reply.status == 200
        sent = json.loads(app.runtime.upstream.simulated["vllm.simulated"].requests[0].content)
        assert sent["model"] == WIRE and sent["temperature"] == 0.5
        assert reply.json()["model"] == "gemma4"
        assert WIRE.encode() not in reply.body


async def test_upstream_id_is_sent_and_the_public_id_restored_in_every_chunk(autojump_clock):
    async with gateway(UPSTREAM.replace(", SIM", "")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemma4", stream=True))
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        assert sent_models(app, "vllm") == [WIRE]
        models = chunk_models(reply)
        assert len(models) == 4 and set(models) == {"gemma4"}   # 3 content chunks and the final one
        assert WIRE.encode() not in reply.body


async def test_no_upstream_id_means_the_clients_bytes_go_untouched(autojump_clock):
    async with gateway(UPSTREAM.replace(", SIM", "") + EXTERNAL) as app:
        body = b'{"model":  "gemma4", "messages": [{"role": "user", "content": "hi"}]}'
        app.runtime.pool.picker.pick = lambda healthy, ctx: next(b for b in healthy if b.name == "external")
        reply = await request(app, "POST", "/v1/chat/completions", body)
        assert reply.status == 200
        assert app.runtime.upstream.simulated["external.simulated"].requests[0].content == body


async def test_each_attempt_is_rewritten_for_its_own_backend(autojump_clock):
    cfg = UPSTREAM.replace("SIM", "failure: {status: 503}") + EXTERNAL
    for stream in (False, True):
        async with gateway(cfg) as app:
            app.runtime.pool.picker.pick = lambda healthy, ctx: min(healthy, key=lambda b: b.name != "vllm")
            reply = await request(app, "POST", "/v1/chat/completions", chat("gemma4", stream=stream))
            assert reply.status == 200
            assert sent_models(app, "vllm") == [WIRE, WIRE]       # the retry is rewritten again
            assert sent_models(app, "external") == ["gemma4"]     # the sibling has no upstream id
            models = chunk_models(reply) if stream else [reply.json()["model"]]
            assert set(models) == {"gemma4"}


async def test_a_mid_stream_continuation_keeps_the_rewrite_and_the_restore(autojump_clock):
    cfg = """
health_checks: {interval: 1h}
timeouts:
  request:
    streaming: {first_byte: 5s, chunk_interval: 2s, total: 60s}
fallback: {enabled: true}
streaming:
  mid_stream_fallback: {min_accumulated_tokens: 2, same_model_first: true}
backends:
  - name: a
    type: simulated
    models: [gemma4]
    simulation: {latency: 1s, tokens_per_second: 2, chunks: 8, text: "TEXT", failure: {stall_after_chunk: 3}}
    model_configs:
      - {id: gemma4, upstream_id: gemma-a}
  - name: b
    type: simulated
    models: [gemma4]
    simulation: {latency: 500ms, tokens_per_second: 4, chunks: 8, text: "TEXT"}
    model_configs:
      - {id: gemma4, upstream_id: gemma-b}
""".replace("TEXT", "one two three four five six seven eight")
    async with gateway(cfg) as app:
        app.runtime.pool.picker.pick = lambda healthy, ctx: min(healthy, key=lambda b: b.name)
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemma4", stream=True))
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        assert content_of(reply) == "one two three four five six seven eight"
        assert sent_models(app, "a") == ["gemma-a"]
        assert sent_models(app, "b") == ["gemma-b"]
        assert set(chunk_models(reply)) == {"gemma4"}


async def test_discovered_upstream_ids_route_under_the_public_id(autojump_clock):
    # A backend that lists no models and discovers only its upstream id still serves the public one.
    cfg = """
health_checks: {interval: 1h}
backends:
  - name: vllm
    type: simulated
    simulation: {latency: 10ms}
    model_configs:
      - {id: gemma4, upstream_id: gemma-4-26b-a4b-it-fp8}
"""
    async with gateway(cfg) as app:
        sim = app.runtime.upstream.simulated["vllm.simulated"]
        sim.models = (WIRE,)
        await app.runtime.discovery.refresh_all()
        assert app.runtime.discovery.view["vllm"] == frozenset({"gemma4"})
        reply = await request(app, "POST", "/v1/chat/completions", chat("gemma4"))
        assert reply.status == 200 and reply.json()["model"] == "gemma4"
        assert sent_models(app, "vllm") == [WIRE]
        reply = await request(app, "POST", "/v1/chat/completions", chat(WIRE))
        assert reply.status == 404   # the upstream id is no routing name
