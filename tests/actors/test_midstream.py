"""Mid-stream recovery: a committed stream that breaks continues elsewhere, never truncated."""

import json

import pytest
import trio

from tests.actors.test_failover import content_of, times
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TEXT = "one two three four five six seven eight"

CONFIG = """
health_checks: {interval: 1h}
timeouts:
  request:
    streaming: {first_byte: 5s, chunk_interval: 2s, total: 60s}
fallback:
  enabled: true
  fallback_chains: {big: [small]}
streaming:
  mid_stream_fallback: {min_accumulated_tokens: MIN}
backends:
  - name: a
    type: simulated
    models: [big]
    simulation: {latency: 1s, tokens_per_second: 2, chunks: 8, text: "TEXT", failure: {FAILURE}}
  - name: b
    type: simulated
    models: [small]
    simulation: {latency: 500ms, tokens_per_second: 4, chunks: 8, text: "BTEXT", supports_prefill: PREFILL}
"""


def config(failure="stall_after_chunk: 3", min_tokens=2, prefill="true", b_text=TEXT, extra=""):
    return (CONFIG.replace("FAILURE", failure).replace("MIN", str(min_tokens)).replace("BTEXT", b_text)
            .replace("TEXT", TEXT).replace("PREFILL", prefill) + extra)


def route_changes(reply):
    return [json.loads(e) for e in reply.events() if b"route_change" in e]


async def test_stall_detected_at_last_chunk_plus_interval_and_continued_by_prefill(autojump_clock):
    async with gateway(config()) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.status == 200
        assert content_of(reply) == TEXT
        assert reply.events()[-1] == b"[DONE]"
        # a: chunks at 1.0, 1.5, 2.0 then silence; chunk_interval 2 s -> b dialed at 4.0
        assert times(app, "b", "request", t0) == [4.0]
        assert times(app, "b", "prefill_continued", t0) == [4.5]  # recorded once its latency passed
        assert route_changes(reply) == []


async def test_restart_below_min_tokens_suppresses_what_the_client_has(autojump_clock):
    async with gateway(config(min_tokens=50)) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert content_of(reply) == TEXT
        sim_b = app.runtime.upstream.simulated["b.simulated"]
        assert sim_b.count("prefill_continued") == 0 and route_changes(reply) == []


async def test_refused_prefill_is_learned_and_never_surfaced(autojump_clock):
    async with gateway(config(prefill="false")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert content_of(reply) == TEXT
        assert b"prefill" not in reply.body
        assert ("b", "small") in app.runtime.pool.no_prefill
        assert app.runtime.upstream.simulated["b.simulated"].count("prefill_unsupported") == 1


async def test_unalignable_restart_emits_explicit_route_change(autojump_clock):
    other = "alpha beta gamma delta epsilon zeta eta theta"
    async with gateway(config(min_tokens=50, b_text=other)) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        [marker] = route_changes(reply)
        assert marker["route_change"]["discard_previous_output"] is True
        assert marker["route_change"]["model"] == "small"
        after = reply.body.split(b"route_change", 1)[1]
        assert other.split()[0].encode() in after  # the new answer from its beginning
        assert reply.events()[-1] == b"[DONE]"


async def test_in_band_error_event_mid_stream_is_recovered(autojump_clock):
    async with gateway(config(failure="error_event_after_chunk: 2")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert content_of(reply) == TEXT
        assert b"simulated in-band error" not in reply.body


async def test_reset_mid_stream_is_recovered(autojump_clock):
    async with gateway(config(failure="reset_after_chunk: 4")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert content_of(reply) == TEXT


async def test_cut_stream_without_finish_is_recovered_not_presented_as_success(autojump_clock):
    async with gateway(config(failure="truncate_after_chunk: 5")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert content_of(reply) == TEXT and reply.events()[-1] == b"[DONE]"


async def test_stream_without_done_but_finished_is_complete_not_failed_over(autojump_clock):
    async with gateway(config(failure="omit_done: true")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert content_of(reply) == TEXT and reply.events()[-1] == b"[DONE]"
        assert app.runtime.upstream.simulated["b.simulated"].count("request") == 0


async def test_mid_stream_disabled_ends_with_error_event(autojump_clock):
    cfg = config().replace("  enabled: true\n", "  enabled: true\n  mid_stream_enabled: false\n", 1)
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert json.loads(reply.events()[-1])["error"]["details"]["timeout"] == "chunk_interval"
        assert b"[DONE]" not in reply.body


async def test_same_model_first_continues_on_a_sibling(autojump_clock):
    cfg = config().replace("models: [small]", "models: [big]").replace(
        "{min_accumulated_tokens: 2}", "{min_accumulated_tokens: 2, same_model_first: true}").replace(
        "fallback_chains: {big: [small]}", "fallback_chains: {}")
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert content_of(reply) == TEXT


async def test_tool_call_deltas_not_lost_across_a_switch(autojump_clock):
    cfg = config(failure="reset_after_chunk: 3, tool_call: true").replace(
        'text: "' + TEXT + '", supports_prefill: true', "failure: {tool_call: true}")
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        args, names = "", []
        for e in reply.events():
            if e == b"[DONE]":
                continue
            for c in json.loads(e).get("choices", []):
                for tc in c.get("delta", {}).get("tool_calls") or []:
                    args += tc.get("function", {}).get("arguments") or ""
                    if tc.get("function", {}).get("name"):
                        names.append(tc["function"]["name"])
        assert json.loads(args) == {"city": "Paris"}
        assert names == ["get_weather"]
        assert reply.events()[-1] == b"[DONE]"


async def test_prompt_style_sends_partial_answer_and_continuation_prompt(autojump_clock):
    cfg = config().replace("{min_accumulated_tokens: 2}", "{min_accumulated_tokens: 2, continuation_style: prompt}")
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.events()[-1] == b"[DONE]"
        [hop] = app.runtime.upstream.simulated["b.simulated"].requests
        messages = json.loads(hop.content)["messages"]
        assert messages[-2] == {"role": "assistant", "content": "one two three"}
        assert messages[-1]["role"] == "user" and messages[-1]["content"].startswith("Continue from where you left off")


async def test_mid_stream_recovery_skips_a_backend_spoken_to_through_a_translation(autojump_clock):
    cfg = config().replace("""  - name: b
    type: simulated
    models: [small]""", """  - name: b
    type: anthropic
    url: http://b.simulated
    models: [small]""")
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert b"[DONE]" not in reply.body and json.loads(reply.events()[-1])["error"]
        assert app.runtime.upstream.simulated["b.simulated"].count("request") == 0
