"""End-to-end: /v1/responses on backends that speak only Chat Completions, with the official openai SDK.

The chat-only backend is a ``type: vllm`` backend whose url is a second Switchyard on a real socket
(serving Chat Completions from its simulator), or a native anthropic backend on the in-process Messages
simulator. Gemini and Bedrock are covered in their own e2e files.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import trio
from trio_websocket import open_websocket_url

from switchyard.config.schema import SimulatedFailure, Simulation
from tests.e2e.support import Gateway, backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TEXT = "Hello from sim. The quick brown fox"
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def config(*backends: dict[str, Any]) -> dict[str, Any]:
    cfg = gateway_config(*backends, health_checks={"enabled": False}, retry={"max_attempts": 2})
    cfg["server"]["max_body_bytes"] = 65536
    return cfg


async def chat_only(start_gateway) -> tuple[Gateway, Gateway]:
    """(the gateway under test, the chat server behind its vllm backend)."""
    inner = await start_gateway(gateway_config(backend("sim"), retry={"max_attempts": 1}))
    outer = await start_gateway(config({"name": "local", "type": "vllm", "url": inner.url, "models": ["demo"],
                                        "discovery": False}))
    return outer, inner


def sent(inner: Gateway) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in inner.sim("sim").requests]


async def test_responses_create_is_answered_through_a_chat_only_backend(start_gateway):
    outer, inner = await chat_only(start_gateway)
    with sdk(outer) as client:
        response = await in_thread(client.responses.create, model="demo", input="hi", instructions="Be brief.",
                                   max_output_tokens=40, temperature=0.3, user="u-1", metadata={"k": "v"})
    assert response.object == "response" and response.status == "completed" and response.output_text == TEXT
    assert (response.usage.output_tokens, response.usage.total_tokens) == \
        (5, response.usage.input_tokens + 5)
    assert response.instructions == "Be brief." and response.metadata == {"k": "v"}
    [body] = sent(inner)
    assert [r.url.path for r in inner.sim("sim").requests] == ["/v1/chat/completions"]
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert (body["max_tokens"], body["temperature"], body["user"], body["metadata"]) == (40, 0.3, "u-1", {"k": "v"})


async def test_a_stream_is_the_responses_event_stream_the_sdk_reads(start_gateway):
    outer, inner = await chat_only(start_gateway)

    def consume(client: openai.OpenAI):
        events = list(client.responses.create(model="demo", input="hi", stream=True))
        with client.responses.stream(model="demo", input="hi") as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        return events, deltas, final

    with sdk(outer) as client:
        events, deltas, final = await in_thread(consume, client)
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == TEXT
    assert events[-1].response.usage.output_tokens == 5
    assert "".join(deltas) == TEXT and final.output_text == TEXT
    assert all(b["stream_options"] == {"include_usage": True} for b in sent(inner))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_call_round_trips_as_function_call_items(start_gateway, stream):
    outer, inner = await chat_only(start_gateway)
    inner.sim("sim").script.append(Simulation(latency=0.01, chunks=3, failure=SimulatedFailure(tool_call=True)))

    def consume(client: openai.OpenAI):
        if stream:
            with client.responses.stream(model="demo", input="weather?", tools=[WEATHER],
                                         tool_choice="required") as s:
                first = s.get_final_response()
        else:
            first = client.responses.create(model="demo", input="weather?", tools=[WEATHER], tool_choice="required")
        [call] = [item for item in first.output if item.type == "function_call"]
        history = [{"role": "user", "content": "weather?"}, call.model_dump(exclude_none=True),
                   {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}]
        second = client.responses.create(model="demo", input=history, tools=[WEATHER])
        return call, second

    with sdk(outer) as client:
        call, second = await in_thread(consume, client)
    assert call.name == "get_weather" and json.loads(call.arguments)
    assert second.output_text == TEXT
    first_body, second_body = sent(inner)
    assert first_body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather in a city", "parameters": WEATHER["parameters"],
        "strict": True}}]
    assert first_body["tool_choice"] == "required"
    assert second_body["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.call_id, "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "18C"}]


async def test_a_json_schema_text_format_is_sent_as_response_format(start_gateway):
    outer, inner = await chat_only(start_gateway)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    with sdk(outer) as client:
        response = await in_thread(client.responses.create, model="demo", input="hi",
                                   text={"format": {"type": "json_schema", "name": "place", "schema": schema,
                                                    "strict": True}})
    assert response.text.format.type == "json_schema"
    assert sent(inner)[0]["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "place", "schema": schema, "strict": True}}


async def test_a_hosted_tool_on_a_chat_only_backend_is_a_400_naming_it(start_gateway):
    outer, inner = await chat_only(start_gateway)
    with sdk(outer) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await in_thread(client.responses.create, model="demo", input="hi",
                            tools=[{"type": "code_interpreter", "container": {"type": "auto"}}])
    assert caught.value.body["param"] == "tools[0].type"
    assert caught.value.body["code"] == "unsupported_request_parameter"
    assert inner.sim("sim").requests == []


async def test_the_chat_backends_error_status_reaches_the_client(start_gateway):
    outer, inner = await chat_only(start_gateway)
    inner.sim("sim").script.extend([Simulation(latency=0.01, failure=SimulatedFailure(status=429))] * 5)
    with sdk(outer) as client:
        with pytest.raises(openai.RateLimitError):
            await in_thread(client.responses.create, model="demo", input="hi")


async def test_a_failure_before_the_first_byte_fails_over_to_a_chat_only_backend(start_gateway):
    inner = await start_gateway(gateway_config(backend("sim")))
    oai = backend("oai")
    outer = await start_gateway(config({**oai}, {"name": "local", "type": "vllm", "url": inner.url,
                                                 "models": ["demo"], "discovery": False}))
    outer.sim("oai").script.extend([Simulation(latency=0.01, failure=SimulatedFailure(status=503))] * 3)

    def consume(client: openai.OpenAI):
        with client.responses.stream(model="demo", input="hi", extra_headers={"x-backend": "oai"}) as s:
            return s.get_final_response()

    with sdk(outer) as client:
        final = await in_thread(consume, client)
    assert final.output_text == TEXT and final.status == "completed"
    assert outer.sim("oai").count("status:503") >= 1 and len(inner.sim("sim").requests) == 1


async def test_an_anthropic_backend_answers_the_responses_sdk(start_gateway):
    gw = await start_gateway(config({"name": "claude", "type": "anthropic", "url": "http://claude.simulated",
                                     "api_key": "sk-ant-test", "models": ["claude-x"],
                                     "simulation": {"latency": "10ms", "chunks": 3}}))

    def consume(client: openai.OpenAI):
        whole = client.responses.create(model="claude-x", input=[{"role": "user", "content": [
            {"type": "input_text", "text": "hi"}]}])
        with client.responses.stream(model="claude-x", input="hi") as s:
            final = s.get_final_response()
        return whole, final

    with sdk(gw) as client:
        whole, final = await in_thread(consume, client)
    assert whole.output_text.startswith("Hello from claude") and whole.usage.output_tokens > 0
    assert final.output_text == whole.output_text
    assert [r.url.path for r in gw.app.runtime.upstream.simulated["claude.simulated"].requests] == \
        ["/v1/messages"] * 2


async def test_the_websocket_mode_reaches_a_chat_only_backend(start_gateway):
    outer, inner = await chat_only(start_gateway)
    url = outer.url.replace("http://", "ws://") + "/v1/responses"
    async with open_websocket_url(url) as ws:
        await ws.send_message(json.dumps({"type": "response.create", "model": "demo", "input": "hi"}))
        events = []
        with trio.fail_after(10):
            while not events or events[-1]["type"] not in ("response.completed", "error"):
                events.append(json.loads(await ws.get_message()))
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["output"][0]["content"][0][
        "text"] == TEXT
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert len(inner.sim("sim").requests) == 1


async def test_the_websocket_mode_chains_turns_on_a_chat_only_backend(start_gateway):
    # a chat backend stores nothing, whatever `store` says: the socket keeps the conversation
    outer, inner = await chat_only(start_gateway)
    url = outer.url.replace("http://", "ws://") + "/v1/responses"
    finals = []
    async with open_websocket_url(url) as ws:
        for text in ("one", "two"):
            event = {"type": "response.create", "model": "demo", "input": text}
            if finals:
                event["previous_response_id"] = finals[-1]["response"]["id"]
            await ws.send_message(json.dumps(event))
            with trio.fail_after(10):
                while True:
                    message = json.loads(await ws.get_message())
                    if message["type"] in ("response.completed", "error"):
                        finals.append(message)
                        break
    assert [f["type"] for f in finals] == ["response.completed"] * 2
    second = json.loads(inner.sim("sim").requests[-1].content)["messages"]
    assert [(m["role"], m["content"]) for m in second] == [("user", "one"), ("assistant", TEXT), ("user", "two")]
