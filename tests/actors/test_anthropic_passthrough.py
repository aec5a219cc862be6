"""Messages clients on a native anthropic backend get their own body sent (the passthrough), under MockClock."""

import copy

import pytest

from tests.actors.test_anthropic_backend import CONFIG, TWO, sent, sim
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

MESSAGES = "/anthropic/v1/messages"
VERSION = [(b"anthropic-version", b"2023-06-01")]
THINKING = {"type": "enabled", "budget_tokens": 1024}
WEATHER = {"name": "get_weather", "description": "Weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
           "cache_control": {"type": "ephemeral"}}
SYSTEM = [{"type": "text", "text": "You know the weather.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
# A tool loop with extended thinking: the assistant's turn starts with its signed thinking block.
LOOP = [
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?",
                                  "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should call the tool.", "signature": "EqQBCkYIARgCKkD\u00e9sig=="},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}]},
]
PDF = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
       "title": "report"}

OPENAI_ONLY = """
health_checks: {interval: 1h}
backends:
  - name: spare
    type: simulated
    models: [claude-x]
"""


def loop(**extra):
    return {"model": "claude-x", "max_tokens": 100, "system": SYSTEM, "tools": [WEATHER], "thinking": THINKING,
            "messages": copy.deepcopy(LOOP), **extra}


def with_document(**extra):
    return {"model": "claude-x", "max_tokens": 100, **extra,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Summarize."}, PDF]}]}


async def test_cache_control_and_thinking_signatures_reach_the_native_backend_byte_equal(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, loop(service_tier="standard_only"), headers=VERSION)
        assert reply.status == 200, reply.body
        out = sent(app)
        assert out["messages"] == LOOP and out["system"] == SYSTEM and out["tools"] == [WEATHER]
        assert out["thinking"] == THINKING and out["service_tier"] == "standard_only"
        assert "I should call the tool." in sim(app).requests[-1].content.decode()   # as sent, not re-encoded


async def test_a_tool_result_turn_with_extended_thinking_succeeds_through_the_passthrough(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, loop(), headers=VERSION)
        assert reply.status == 200, reply.body
        assert reply.json()["type"] == "message" and sim(app).count("invalid") == 0


async def test_the_simulator_refuses_a_thinking_tool_loop_without_its_thinking_block(autojump_clock):
    # A chat client cannot send the signed block back: Anthropic (and the simulator) refuse the turn.
    chat = {"model": "claude-x", "thinking": THINKING, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"}]}
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat)
        assert reply.status == 400 and "must start with a thinking block" in reply.body.decode()


async def test_policy_managed_fields_are_applied_on_the_passthrough(autojump_clock):
    config = "request_params: {limits: {max_tokens: {max: 20}, temperature: {max: 0.5}}}\n" + CONFIG
    async with gateway(config) as app:
        reply = await request(app, "POST", MESSAGES, loop(temperature=0.9, top_k=3, stream=True), headers=VERSION)
        assert reply.status == 200, reply.body
        out = sent(app)
        assert out["max_tokens"] == 20 and out["temperature"] == 0.5 and out["top_k"] == 3
        assert out["stream"] is True and out["messages"] == LOOP   # still the client's own body


async def test_the_sampling_rule_of_anthropic_version_2026_10_21_holds_on_the_passthrough(autojump_clock):
    config = CONFIG.replace("models: [claude-x]", "models: [claude-x]\n    anthropic_version: 2026-10-21")
    async with gateway(config) as app:
        reply = await request(app, "POST", MESSAGES, loop(temperature=0.9, top_p=0.5))
        assert reply.status == 200, reply.body
        assert not {"temperature", "top_p", "top_k"} & set(sent(app)) and sent(app)["messages"] == LOOP


async def test_the_backends_body_extensions_are_merged_into_the_passthrough(autojump_clock):
    config = CONFIG + "    request_extensions: {body: {overrides: {service_tier: standard_only}, " \
                      "defaults: {metadata: {user_id: ops}}}}\n"
    async with gateway(config) as app:
        reply = await request(app, "POST", MESSAGES, loop(service_tier="auto"), headers=VERSION)
        assert reply.status == 200, reply.body
        assert sent(app)["service_tier"] == "standard_only" and sent(app)["metadata"] == {"user_id": "ops"}
        assert sent(app)["messages"] == LOOP


async def test_the_chat_translation_is_used_when_a_global_prompt_applies(autojump_clock):
    async with gateway(CONFIG + "global_prompts: {default: Be kind.}\n") as app:
        reply = await request(app, "POST", MESSAGES, loop(), headers=VERSION)
        out = sent(app)
        assert "Be kind." in str(out["system"]) and "cache_control" not in str(out["messages"])
        # the translation cannot carry the thinking block back, so the backend refuses the tool loop
        assert reply.status == 400 and sim(app).count("invalid") == 1


async def test_a_document_block_is_accepted_on_a_native_backend(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, with_document(), headers=VERSION)
        assert reply.status == 200, reply.body
        assert sent(app)["messages"][0]["content"][1] == PDF


async def test_a_document_block_is_refused_on_a_non_native_backend(autojump_clock):
    async with gateway(OPENAI_ONLY) as app:
        reply = await request(app, "POST", MESSAGES, with_document(), headers=VERSION)
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith("messages.0.content.1: a 'document' block can be sent only to a native "
                                           "anthropic backend")
        assert sim(app, "spare.simulated").count("request") == 0


async def test_a_non_native_backend_is_passed_over_for_content_chat_cannot_carry(autojump_clock):
    async with gateway(TWO) as app:
        image = {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}}
        body = {"model": "claude-x", "max_tokens": 100, "messages": [
            {"role": "user", "content": "Draw it."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "draw", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "done"}, image]}]}]}
        reply = await request(app, "POST", MESSAGES, body, headers=[*VERSION, (b"x-backend", b"spare")])
        assert reply.status == 200, reply.body
        assert sent(app)["messages"][2]["content"][0]["content"][1] == image
        assert sim(app, "spare.simulated").count("request") == 0


async def test_content_chat_cannot_carry_is_refused_when_the_native_attempt_is_translated(autojump_clock):
    async with gateway(CONFIG + "global_prompts: {default: Be kind.}\n") as app:
        reply = await request(app, "POST", MESSAGES, with_document(), headers=VERSION)
        assert reply.status == 400 and "messages.0.content.1" in reply.json()["error"]["message"]
        assert sim(app).count("request") == 0


async def test_the_thinking_blocks_signature_reaches_the_messages_client(autojump_clock):
    ask = {"model": "claude-x", "max_tokens": 100, "thinking": THINKING,
           "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    async with gateway(CONFIG) as app:
        buffered = await request(app, "POST", MESSAGES, ask, headers=VERSION)
        [thinking] = [b for b in buffered.json()["content"] if b["type"] == "thinking"]
        assert thinking["signature"] == "sig_sim"
        streamed = await request(app, "POST", MESSAGES, {**ask, "stream": True}, headers=VERSION)
        assert b'"type": "signature_delta", "signature": "sig_sim"' in streamed.body \
            or b'"type":"signature_delta","signature":"sig_sim"' in streamed.body
