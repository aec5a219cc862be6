"""Prompt-caching breakpoints on calls to a native anthropic backend (the in-process Messages simulator, which
keeps a simulated prompt cache), and the ledger's price of cache writes and reads, under MockClock."""

import json

import pytest

from switchyard.actors.ledger.record import UsageQuery
from switchyard.config.load import load_text
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
health_checks: {interval: 1h}
retry: {max_attempts: 1}
usage: {ledger: memory}
prefix_routing: {anthropic_cache_control_injection: INJECTION}
backends:
  - name: claude
    type: anthropic
    url: http://claude.simulated
    models: [claude-x, claude-y]
    simulation: {latency: 10ms, chunks: 2}
    model_configs:
      - {id: claude-x, metadata: {pricing: {input_tokens: 3.0, output_tokens: 15.0, cache_write_input_tokens: 3.75,
                                            cache_read_input_tokens: 0.3}}}
  - name: plain
    type: simulated
    models: [plain-x]
    simulation: {latency: 10ms, chunks: 2}
"""
MARK = {"type": "ephemeral"}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
TURNS = [{"role": "system", "content": "You answer from the handbook. " * 50},
         {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
         {"role": "user", "content": "What is the refund policy?"}]
MESSAGES = "/anthropic/v1/messages"
VERSION = [(b"anthropic-version", b"2023-06-01")]


def config(injection="true"):
    return CONFIG.replace("INJECTION", injection)


def sent(app, host="claude.simulated") -> dict:
    return json.loads(app.runtime.upstream.simulated[host].requests[-1].content)


def marks(body) -> int:
    return json.dumps(body).count('"cache_control"')


async def records(app):
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose=None), 1000)


async def test_a_chat_call_gets_marks_on_system_tools_and_the_stable_prefix(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", messages=TURNS, tools=TOOLS))
        assert reply.status == 200, reply.body
        out = sent(app)
    assert out["system"][-1]["cache_control"] == MARK and out["tools"][-1]["cache_control"] == MARK
    assert out["messages"][1]["content"][-1]["cache_control"] == MARK   # "Hello.": before the final user turn
    assert "cache_control" not in json.dumps(out["messages"][2]) and marks(out) == 3


async def test_a_messages_clients_own_marks_are_kept_and_counted_within_four(autojump_clock):
    body = {"model": "claude-x", "max_tokens": 50,
            "system": [{"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": t, "cache_control": MARK}
                                                      for t in ("a", "b")]},
                         {"role": "assistant", "content": "ok"}, {"role": "user", "content": "c"}]}
    async with gateway(config()) as app:
        reply = await request(app, "POST", MESSAGES, body, headers=VERSION)
        assert reply.status == 200, reply.body   # the simulator refuses a fifth mark, as Anthropic does
        out = sent(app)
    assert out["system"] == body["system"] and out["messages"][0] == body["messages"][0]
    assert out["messages"][1]["content"] == [{"type": "text", "text": "ok", "cache_control": MARK}]
    assert marks(out) == 4


async def test_other_backend_types_never_get_marks(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("plain-x", messages=TURNS, tools=TOOLS))
        assert reply.status == 200
        assert marks(sent(app, "plain.simulated")) == 0


@pytest.mark.parametrize("injection, model, expected", [
    ("{models: [claude-x]}", "claude-x", 3), ("{models: [claude-x]}", "claude-y", 0),
    ("{backends: [claude]}", "claude-y", 3), ("false", "claude-x", 0)])
async def test_marks_follow_the_backends_and_models_named(autojump_clock, injection, model, expected):
    async with gateway(config(injection)) as app:
        await request(app, "POST", "/v1/chat/completions", chat(model, messages=TURNS, tools=TOOLS))
        assert marks(sent(app)) == expected


async def test_a_reload_applies_to_the_next_call(autojump_clock):
    async with gateway(config()) as app:
        await request(app, "POST", "/v1/chat/completions", chat("claude-x", messages=TURNS))
        assert marks(sent(app)) == 2
        app.runtime.apply(load_text(config("false")).snapshot)
        await request(app, "POST", "/v1/chat/completions", chat("claude-x", messages=TURNS))
        assert marks(sent(app)) == 0


async def test_cache_writes_and_reads_are_priced_at_the_models_cache_rates(autojump_clock):
    async with gateway(config()) as app:
        for _ in range(2):
            reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", messages=TURNS))
            assert reply.status == 200
        first, second = sorted(await records(app), key=lambda r: r.time)
    assert first.cache_write_tokens > 0 and first.cached_tokens == 0
    assert second.cached_tokens == first.cache_write_tokens and second.cache_write_tokens == 0
    for rec, rate in ((first, 3.75), (second, 0.3)):
        cached = rec.cache_write_tokens + rec.cached_tokens
        expected = ((rec.input_tokens - cached) * 3.0 + cached * rate + rec.output_tokens * 15.0) / 1e6
        assert rec.cost == pytest.approx(expected, rel=1e-12)
    assert second.cost < first.cost
