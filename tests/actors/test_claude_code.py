"""Claude Code as it is: its default request (thinking on, context_management with its beta) and its tool
loop, on a native anthropic backend and on a chat one (MockClock)."""

from __future__ import annotations

import json

import attrs
import pytest

from tests.actors.test_anthropic_backend import sent, sim
from tests.clients import recorded
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

NATIVE = """
health_checks: {interval: 1h}
usage: {ledger: memory}
backends:
  - name: claude
    type: anthropic
    url: http://claude.simulated
    api_key: sk-ant-test
    models: [claude-sonnet-4-5]
    simulation: {latency: 10ms, chunks: 3}
"""
CHAT = """
health_checks: {interval: 1h}
usage: {ledger: memory}
backends:
  - {name: chat, type: simulated, models: [claude-sonnet-4-5], simulation: {latency: 10ms, chunks: 3}}
"""
CLEAR_TOOL_USES = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000},
                   "keep": {"type": "tool_uses", "value": 3}}


def events(reply) -> list[dict]:
    return [json.loads(block.split(b"data: ", 1)[1]) for block in reply.body.split(b"\n\n") if b"data: " in block]


def error_of(reply) -> tuple[int, str]:
    body = reply.json()
    return reply.status, body["error"]["message"]


async def test_claude_codes_default_request_reaches_a_native_backend_with_its_context_management(autojump_clock):
    claude_code = recorded("claude-code-2.1.197-default-thinking")
    async with gateway(NATIVE) as app:
        reply = await request(app, "POST", claude_code.path, claude_code.body, claude_code.headers)
        out, headers = sent(app), sim(app).requests[-1].headers
    assert reply.status == 200, reply.body
    assert events(reply)[-1]["type"] == "message_stop"
    assert out["context_management"] == {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    assert "context-management-2025-06-27" in headers["anthropic-beta"]


async def test_claude_codes_default_request_is_served_by_a_chat_backend_which_never_sees_earlier_thinking(
        autojump_clock):
    """A thinking edit asks a chat backend for nothing it does not already do: accepted, not sent."""
    claude_code = recorded("claude-code-2.1.197-default-thinking")
    async with gateway(CHAT) as app:
        reply = await request(app, "POST", claude_code.path, claude_code.body, claude_code.headers)
        out = json.loads(app.runtime.upstream.simulated["chat.simulated"].requests[-1].content)
    assert reply.status == 200, reply.body
    assert "context_management" not in out


async def test_a_tool_result_clearing_edit_is_relayed_to_a_native_backend(autojump_clock):
    claude_code = recorded("claude-code-2.1.197-default-thinking")
    claude_code.body["context_management"]["edits"].append(CLEAR_TOOL_USES)
    async with gateway(NATIVE) as app:
        reply = await request(app, "POST", claude_code.path, claude_code.body, claude_code.headers)
        out = sent(app)
    assert reply.status == 200 and out["context_management"]["edits"][1] == CLEAR_TOOL_USES


async def test_a_tool_result_clearing_edit_is_refused_on_a_chat_backend_naming_it(autojump_clock):
    claude_code = recorded("claude-code-2.1.197-default-thinking")
    claude_code.body["context_management"]["edits"].append(CLEAR_TOOL_USES)
    async with gateway(CHAT) as app:
        reply = await request(app, "POST", claude_code.path, claude_code.body, claude_code.headers)
        asked = app.runtime.upstream.simulated["chat.simulated"].count("request")
    status, message = error_of(reply)
    assert status == 400 and message.startswith("context_management.edits.1: a 'clear_tool_uses_20250919' context "
                                                "edit")
    assert asked == 0


@pytest.mark.parametrize("value, path, rule", [
    ({"edits": {"type": "clear_thinking_20251015"}}, "context_management.edits", "must be an array, got an object"),
    ({"edits": [{"keep": "all"}]}, "context_management.edits.0.type", "must be a string, got null"),
    ({"edits": [], "trigger": 5}, "context_management.trigger", "Extra inputs are not permitted"),
    ("all", "context_management", "must be an object, got a string"),
])
async def test_a_malformed_context_management_is_a_400_naming_its_path(autojump_clock, value, path, rule):
    claude_code = recorded("claude-code-2.1.197-default-thinking")
    claude_code.body["context_management"] = value
    async with gateway(NATIVE) as app:
        reply = await request(app, "POST", claude_code.path, claude_code.body, claude_code.headers)
    assert error_of(reply) == (400, f"{path}: {rule}")


async def test_claude_code_completes_a_tool_loop_in_its_default_setup(autojump_clock):
    """Turn 1 asks (thinking on, context_management, its tools); the backend calls a tool; turn 2 sends the
    assistant's turn back as it came (its signed thinking first) with the tool's result, and is answered."""
    claude_code = recorded("claude-code-2.1.197-default-thinking")
    claude_code.body["tools"] = recorded("claude-code-2.1.197-tool-result-turn").body["tools"]
    async with gateway(NATIVE) as app:
        backend = sim(app)
        backend.script.append(attrs.evolve(backend.simulation, failure=attrs.evolve(
            backend.simulation.failure, tool_call=True)))
        first = await request(app, "POST", claude_code.path, {**claude_code.body, "stream": False},
                              claude_code.headers)
        answer = first.json()
        assert first.status == 200 and answer["stop_reason"] == "tool_use"
        assert [b["type"] for b in answer["content"]] == ["thinking", "tool_use"]
        follow = {**claude_code.body, "messages": [
            *claude_code.body["messages"], {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": answer["content"][1]["id"],
                                          "content": "done"}]}]}
        second = await request(app, "POST", claude_code.path, follow, claude_code.headers)
    assert second.status == 200, second.body
    assert [e["type"] for e in events(second)][-1] == "message_stop"
