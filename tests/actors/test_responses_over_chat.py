"""/v1/responses on a backend that speaks only Chat Completions (the reverse bridge), under MockClock:
an anthropic backend on the in-process Messages simulator, beside a simulated OpenAI backend."""

from __future__ import annotations

import json

import pytest

from switchyard.config.schema import SimulatedFailure, Simulation
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
health_checks: {enabled: false}
selection_strategy: RoundRobin
retry: {max_attempts: 3}
backends:
  - name: claude
    type: anthropic
    url: http://claude.simulated
    api_key: sk-ant-test
    models: [claude-x]
    simulation: {latency: 1s, tokens_per_second: 2, chunks: 3}
"""
WITH_OPENAI = CONFIG + """
  - name: oai
    type: simulated
    models: [claude-x]
    simulation: {latency: 1s, chunks: 3}
"""
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def claude(app):
    return app.runtime.upstream.simulated["claude.simulated"]


def oai(app):
    return app.runtime.upstream.simulated["oai.simulated"]


def sse(reply):
    out = []
    for block in reply.body.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines.get("event"), json.loads(lines["data"])))
    return out


async def test_a_model_only_a_chat_backend_serves_is_answered_as_a_response(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/responses",
                              {"model": "claude-x", "input": "hi", "instructions": "Be brief.",
                               "max_output_tokens": 50})
        assert reply.status == 200
        body = reply.json()
        assert body["object"] == "response" and body["status"] == "completed" and body["model"] == "claude-x"
        assert body["output"][0]["content"][0]["text"].startswith("Hello from claude")
        assert body["usage"]["input_tokens"] > 0 and body["usage"]["output_tokens"] > 0
        [sent] = claude(app).requests
        assert sent.url.path == "/v1/messages"
        messages = json.loads(sent.content)
        assert messages["system"] == "Be brief." and messages["max_tokens"] == 50


async def test_a_streamed_call_is_the_responses_event_stream(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "hi", "stream": True})
        events = sse(reply)
        assert [name for name, _ in events[:2]] == ["response.created", "response.in_progress"]
        assert events[-1][0] == "response.completed" and events[-1][1]["response"]["usage"]["output_tokens"] > 0
        assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
        text = "".join(data["delta"] for name, data in events if name == "response.output_text.delta")
        assert text.startswith("Hello from claude")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_call_is_a_function_call_item(autojump_clock, stream):
    async with gateway(CONFIG) as app:
        claude(app).script.append(Simulation(latency=1, chunks=3, failure=SimulatedFailure(tool_call=True)))
        reply = await request(app, "POST", "/v1/responses",
                              {"model": "claude-x", "input": "weather?", "tools": [WEATHER], "stream": stream})
        response = sse(reply)[-1][1]["response"] if stream else reply.json()
        [call] = [item for item in response["output"] if item["type"] == "function_call"]
        assert call["name"] == "get_weather" and json.loads(call["arguments"])
        sent = json.loads(claude(app).requests[0].content)
        assert sent["tools"][0]["name"] == "get_weather"


async def test_a_failure_before_the_first_byte_fails_over_from_a_responses_backend_to_a_chat_one(autojump_clock):
    async with gateway(WITH_OPENAI) as app:
        oai(app).script.extend([Simulation(latency=1, chunks=3, failure=SimulatedFailure(status=503))] * 5)
        reply = await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "hi", "stream": True},
                              headers=[(b"x-backend", b"oai")])
        events = sse(reply)
        assert events[-1][0] == "response.completed"
        assert oai(app).count("status:503") >= 1 and len(claude(app).requests) == 1


async def test_a_pin_to_a_chat_backend_is_taken(autojump_clock):
    async with gateway(WITH_OPENAI) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "hi"},
                              headers=[(b"x-backend", b"claude")])
        assert reply.status == 200 and len(claude(app).requests) == 1 and oai(app).requests == []


async def test_a_bridged_response_is_not_retrievable(autojump_clock):
    async with gateway(CONFIG) as app:
        created = (await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "hi"})).json()
        reply = await request(app, "GET", f"/v1/responses/{created['id']}")
        assert reply.status == 404 and reply.json()["error"]["code"] == "not_found"
        assert len(claude(app).requests) == 1


@pytest.mark.parametrize(("field", "value", "param"), [
    ("tools", [{"type": "file_search"}], "tools[0].type"),
    ("background", True, "background"),
])
async def test_what_a_chat_backend_cannot_carry_is_a_400_naming_it_before_any_io(autojump_clock, field, value,
                                                                                   param):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "hi", field: value})
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["param"] == param and error["code"] == "unsupported_request_parameter"
        assert "claude" in error["message"] and claude(app).requests == []


async def test_a_stored_response_cannot_be_continued_on_a_chat_backend(autojump_clock):
    """The id is this key's (stored by a Responses backend for another model), but the model asked for
    now is served only by a chat backend, which keeps no responses: a 400 naming the field."""
    other_model = CONFIG + """
  - name: oai
    type: simulated
    models: [gpt-x]
    simulation: {latency: 1s, chunks: 3}
"""
    async with gateway(other_model) as app:
        first = (await request(app, "POST", "/v1/responses", {"model": "gpt-x", "input": "hi"})).json()
        reply = await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "more",
                                                             "previous_response_id": first["id"]})
        assert reply.status == 400
        error = reply.json()["error"]
        assert (error["param"], error["code"]) == ("previous_response_id", "unsupported_request_parameter")
        assert "claude" in error["message"] and claude(app).requests == []


async def test_the_same_field_goes_to_a_backend_with_the_responses_api(autojump_clock):
    async with gateway(WITH_OPENAI) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "hi", "background": True},
                              headers=[(b"x-backend", b"oai")])
        assert reply.status == 200 and claude(app).requests == []


async def test_the_backends_request_extensions_reach_its_chat_body(autojump_clock):
    config = CONFIG + "    request_extensions: {body: {defaults: {top_k: 7}}}\n"
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "claude-x", "input": "hi"})
        assert reply.status == 200
        assert json.loads(claude(app).requests[0].content)["top_k"] == 7
