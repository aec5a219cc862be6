"""Fallback never degrades silently: routes lacking what the request needs are skipped."""

import pytest
import trio

from tests.actors.test_failover import BASE, times
from tests.actors.test_midstream import config as midstream_config
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {big: [small, medium]}") + """
  - {name: a, type: simulated, models: [big], simulation: {latency: 10ms, failure: {status: 503}}}
  - name: b
    type: simulated
    models: [small]
    simulation: {latency: 10ms, chunks: 2}
    model_configs:
      - {id: small, metadata: {capabilities: [chat], limits: {context_window: 50}}}
  - name: c
    type: simulated
    models: [medium]
    simulation: {latency: 10ms, chunks: 2}
    model_configs:
      - {id: medium, metadata: {capabilities: [chat, tool, vision], limits: {context_window: 100000}}}
"""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


async def test_fallback_target_lacking_tools_is_skipped(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", tools=TOOLS))
        assert reply.status == 200 and reply.json()["model"] == "medium"
        assert app.runtime.upstream.simulated["b.simulated"].count("request") == 0


async def test_fallback_target_with_too_small_context_window_is_skipped(autojump_clock):
    long = chat("big", messages=[{"role": "user", "content": "x" * 400}])
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", long)
        assert reply.json()["model"] == "medium"


async def test_fallback_target_without_vision_is_skipped(autojump_clock):
    image = chat("big", messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", image)
        assert reply.json()["model"] == "medium"


async def test_target_without_metadata_is_assumed_able(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.json()["model"] == "small"  # a short plain chat fits small


async def test_no_capable_route_left_fails_closed(autojump_clock):
    config = CONFIG.replace("fallback_chains: {big: [small, medium]}", "fallback_chains: {big: [small]}")
    async with gateway(config) as app:
        t0 = 0
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", tools=TOOLS))
        assert reply.status == 503
        error = reply.json()["error"]
        assert error["code"] == "route_capability_unavailable"
        assert error["details"]["skipped"] == [{"backend": "b", "model": "small", "missing": ["tools"]}]
        assert error["details"]["cause"]["code"] == "simulated_503"  # the backend's own error, kept
        assert times(app, "b", "request", t0) == []


async def test_metadata_saying_no_prefill_goes_straight_to_restart(autojump_clock):
    cfg = midstream_config().rstrip("\n") + \
        "\n    model_configs:\n      - {id: small, metadata: {supports_assistant_prefill: false}}\n"
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.events()[-1] == b"[DONE]"
        sim = app.runtime.upstream.simulated["b.simulated"]
        assert sim.count("prefill_unsupported") == 0 and sim.count("prefill_continued") == 0


async def test_chain_model_reached_before_any_dial_is_still_gated(autojump_clock):
    config = CONFIG.replace("interval: 1h", "interval: 1h, unhealthy_threshold: 1").replace(
        "simulation: {latency: 10ms, failure: {status: 503}}", "simulation: {health_status: 500}")
    async with gateway(config) as app:
        await trio.sleep(0.01)  # a's first health check fails: it is out before any call
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", tools=TOOLS))
        assert reply.json()["model"] == "medium"
        assert app.runtime.upstream.simulated["b.simulated"].count("request") == 0


async def test_metadata_files_gate_fallback_targets_too(autojump_clock, tmp_path):
    meta = tmp_path / "models.yaml"
    meta.write_text("models:\n  - id: small\n    metadata: {capabilities: [chat]}\n")
    config = f"model_metadata_file: {meta}\n" + CONFIG.replace(
        "    model_configs:\n      - {id: small, metadata: {capabilities: [chat], limits: {context_window: 50}}}\n", "")
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", tools=TOOLS))
        assert reply.json()["model"] == "medium"
        assert app.runtime.upstream.simulated["b.simulated"].count("request") == 0
