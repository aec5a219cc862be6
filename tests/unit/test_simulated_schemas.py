"""Every answer of the simulated backends passes the published schemas, on every door they serve.

The schemas are vendored in ``tests/data/schemas`` (sources in its README):
OpenAI's OpenAPI spec for every OpenAI door, Open Responses' for the
Responses objects and events, Anthropic's (through its SDKs) for messages and
their stream events. Each answer is checked buffered and streamed, event by
event, straight from the simulator; ``tests/actors/test_demo_schemas.py``
checks the same through the gateway.

Two places where OpenAI's spec is narrower than OpenAI's API, and the
simulator follows the API: a Response that has not finished carries
``"usage": null`` (the spec types ``usage`` as an object; Open Responses
requires the key and allows null), and a streamed text completion's chunks
carry ``"finish_reason": null`` until the last (the spec has no chunk schema
for completions: the stream reuses the buffered one). And an embedding asked
for in ``base64`` is a string (the spec types it as numbers only): it is
checked decoded.
"""

from __future__ import annotations

import base64
import json
import struct
import time
from typing import Any

import httpx
import pytest

from switchyard.config.schema import SimulatedFailure, Simulation
from switchyard.protocol.simulated.anthropic import SimulatedAnthropicTransport
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.simulated.responses import LOGPROBS_INCLUDE, ResponsesTurn, script_responses
from tests.published_schemas import event_problems, problems

FAST = Simulation(latency=0.0, tokens_per_second=0, chunks=4)
TOOL = Simulation(latency=0.0, tokens_per_second=0, chunks=4, failure=SimulatedFailure(tool_call=True))
EMPTY = Simulation(latency=0.0, tokens_per_second=0, chunks=4, failure=SimulatedFailure(empty_reply=True))
USER = [{"role": "user", "content": "hi"}]
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TURNS = {"plain": ResponsesTurn(), "reasoning": ResponsesTurn(reasoning="Think first."),
         "refusal": ResponsesTurn(refusal=True), "incomplete": ResponsesTurn(incomplete="max_output_tokens"),
         "failed": ResponsesTurn(failed="server_error")}


def sse(response: httpx.Response) -> list[dict[str, Any]]:
    data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"]


async def post(transport: httpx.AsyncBaseTransport, path: str, body: dict[str, Any] | None = None,
               method: str = "POST", **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(transport=transport, base_url="http://a.simulated",
                                 headers={"anthropic-version": "2023-06-01"}) as client:
        response = await client.request(method, path, json=body, **kwargs)
        await response.aread()
        return response


def openai_view(response: dict[str, Any]) -> dict[str, Any]:
    """The Response as OpenAI's spec types it: without the ``usage: null`` of an unfinished one (module doc)."""
    return {k: v for k, v in response.items() if not (k == "usage" and v is None)}


def response_problems(response: dict[str, Any]) -> list[str]:
    return problems("openai", "Response", openai_view(response)) + \
        problems("openresponses", "ResponseResource", response)


def event_problems_both(event: dict[str, Any]) -> list[str]:
    view = {**event, "response": openai_view(event["response"])} if "response" in event else event
    return event_problems("openai", view) + event_problems("openresponses", event)


@pytest.mark.parametrize("sim", [FAST, TOOL, EMPTY], ids=["text", "tool_call", "empty"])
@pytest.mark.parametrize("turn", list(TURNS), ids=list(TURNS))
async def test_a_response_object_and_every_event_pass_openais_and_open_responses_schemas(sim, turn):
    body = {"model": "demo", "input": "hi", "tools": [WEATHER], "include": [LOGPROBS_INCLUDE], "top_logprobs": 2}
    transport = SimulatedTransport("a", sim, ("demo",))
    script_responses(transport, TURNS[turn], TURNS[turn])
    buffered = (await post(transport, "/v1/responses", body)).json()
    events = sse(await post(transport, "/v1/responses", {**body, "stream": True}))
    assert response_problems(buffered) == []
    assert [(e["type"], p) for e in events for p in event_problems_both(e)] == []
    assert events[-1]["type"] in ("response.completed", "response.incomplete", "response.failed")


async def test_a_response_echoes_what_was_asked_and_says_when_it_completed():
    body = {"model": "demo", "input": "hi", "tools": [WEATHER, {**WEATHER, "name": "lax", "strict": False}],
            "presence_penalty": 0.5, "frequency_penalty": -0.25, "top_logprobs": 3, "temperature": 0.2,
            "top_p": 0.9, "max_tool_calls": 2, "service_tier": "auto", "safety_identifier": "user-1",
            "prompt_cache_key": "chat-7", "truncation": "auto", "store": False, "max_output_tokens": 64}
    before = int(time.time())
    reply = (await post(SimulatedTransport("a", FAST, ("demo",)), "/v1/responses", body)).json()
    assert before <= reply["created_at"] <= reply["completed_at"] <= int(time.time())
    assert {k: reply[k] for k in ("presence_penalty", "frequency_penalty", "top_logprobs", "temperature", "top_p",
                                  "max_tool_calls", "safety_identifier", "prompt_cache_key", "truncation",
                                  "store", "max_output_tokens", "background", "service_tier")} == {
        "presence_penalty": 0.5, "frequency_penalty": -0.25, "top_logprobs": 3, "temperature": 0.2, "top_p": 0.9,
        "max_tool_calls": 2, "safety_identifier": "user-1", "prompt_cache_key": "chat-7", "truncation": "auto",
        "store": False, "max_output_tokens": 64, "background": False, "service_tier": "default"}
    assert [(t["name"], t["strict"]) for t in reply["tools"]] == [("get_weather", True), ("lax", False)]


async def test_a_background_response_and_every_stored_route_pass_the_schemas():
    transport = SimulatedTransport("a", FAST, ("demo",))
    done = (await post(transport, "/v1/responses", {"model": "demo", "input": [
        {"role": "user", "content": "hi"}, {"type": "message", "role": "assistant", "content": "hello"}]})).json()
    running = (await post(transport, "/v1/responses", {"model": "demo", "input": "hi", "background": True})).json()
    assert running["status"] == "in_progress" and running["completed_at"] is None and running["background"] is True
    assert response_problems(running) == []
    retrieved = (await post(transport, f"/v1/responses/{done['id']}", method="GET")).json()
    assert response_problems(retrieved) == [] and retrieved == done
    replayed = sse(await post(transport, f"/v1/responses/{done['id']}?stream=true", method="GET"))
    assert [p for e in replayed for p in event_problems_both(e)] == []
    listing = (await post(transport, f"/v1/responses/{done['id']}/input_items", method="GET")).json()
    assert problems("openai", "ResponseItemList", listing) == [] and len(listing["data"]) == 2
    cancelled = (await post(transport, f"/v1/responses/{running['id']}/cancel")).json()
    assert cancelled["status"] == "cancelled" and response_problems(cancelled) == []


async def test_a_compaction_passes_both_schemas():
    body = {"model": "demo", "input": [{"type": "message", "role": "user", "content": "Launch on Tuesday."},
                                       {"type": "message", "role": "assistant", "content": "Understood."}]}
    reply = (await post(SimulatedTransport("a", FAST, ("demo",)), "/v1/responses/compact", body)).json()
    assert problems("openai", "CompactResource", reply) == []
    assert problems("openresponses", "CompactResource", reply) == []


async def test_response_ids_stay_unique_when_requests_are_answered_at_once():
    """Ids key the stored responses: two requests in flight together never share one."""
    import trio

    transport, ids = SimulatedTransport("a", Simulation(latency=0.01, chunks=2), ("demo",)), []

    async def one() -> None:
        ids.append((await post(transport, "/v1/responses", {"model": "demo", "input": "hi"})).json()["id"])
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(one)
    assert len(set(ids)) == 3


@pytest.mark.parametrize("sim", [FAST, TOOL, EMPTY], ids=["text", "tool_call", "empty"])
@pytest.mark.parametrize("extra", [{}, {"n": 2, "logprobs": True, "top_logprobs": 2}], ids=["plain", "n_logprobs"])
async def test_a_chat_completion_and_its_chunks_pass_openais_schema(sim, extra):
    transport = SimulatedTransport("a", sim, ("demo",))
    body = {"model": "demo", "messages": USER, **extra}
    buffered = (await post(transport, "/v1/chat/completions", body)).json()
    chunks = sse(await post(transport, "/v1/chat/completions",
                            {**body, "stream": True, "stream_options": {"include_usage": True}}))
    assert problems("openai", "CreateChatCompletionResponse", buffered) == []
    assert [p for c in chunks for p in problems("openai", "CreateChatCompletionStreamResponse", c)] == []
    assert chunks[-1]["usage"] is not None


@pytest.mark.parametrize("prompt", ["hi", ["one", "two"]], ids=["one", "two_prompts"])
async def test_a_text_completion_and_its_chunks_pass_openais_schema(prompt):
    transport = SimulatedTransport("a", FAST, ("demo",))
    buffered = (await post(transport, "/v1/completions", {"model": "demo", "prompt": prompt})).json()
    chunks = sse(await post(transport, "/v1/completions", {"model": "demo", "prompt": prompt, "stream": True,
                                                           "stream_options": {"include_usage": True}}))
    assert problems("openai", "CreateCompletionResponse", buffered) == []
    last = max(i for i, c in enumerate(chunks) if c["choices"])
    for i, chunk in enumerate(chunks):   # finish_reason is null until the last chunk (module doc)
        shown = chunk if i == last or not chunk["choices"] else \
            {**chunk, "choices": [{**c, "finish_reason": "stop"} for c in chunk["choices"]]}
        assert problems("openai", "CreateCompletionResponse", shown) == [], i


@pytest.mark.parametrize("encoding", ["float", "base64"])
async def test_embeddings_pass_openais_schema(encoding):
    reply = (await post(SimulatedTransport("a", FAST, ("demo",)), "/v1/embeddings",
                        {"model": "demo", "input": ["a", "b"], "encoding_format": encoding})).json()
    for item in reply["data"] if encoding == "base64" else ():   # a string of float32s (module doc)
        raw = base64.b64decode(item["embedding"])
        item["embedding"] = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    assert problems("openai", "CreateEmbeddingResponse", reply) == []


@pytest.mark.parametrize("model, extra", [("dall-e-2", {"response_format": "url"}), ("dall-e-3", {}),
                                          ("gpt-image-1", {"n": 2, "quality": "low"})])
async def test_images_pass_openais_schema(model, extra):
    transport = SimulatedTransport("a", FAST, ("demo",))
    generated = (await post(transport, "/v1/images/generations", {"model": model, "prompt": "a fox", **extra})).json()
    png = base64.b64decode(generated["data"][0].get("b64_json") or generated["data"][0]["url"].split(",")[1])
    edited = (await post(transport, "/v1/images/edits", None, data={"model": model, "prompt": "a fox"},
                         files={"image": ("fox.png", png, "image/png")})).json()
    assert problems("openai", "ImagesResponse", generated) == []
    assert problems("openai", "ImagesResponse", edited) == []


ANTHROPIC_CASES = {
    "text": ({}, FAST), "tool_use": ({}, TOOL), "empty": ({}, EMPTY),
    "thinking": ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, FAST),
    "stop_sequence": ({"stop_sequences": ["quick"]}, FAST), "max_tokens": ({"max_tokens": 2}, FAST),
}


@pytest.mark.parametrize("case", list(ANTHROPIC_CASES))
async def test_an_anthropic_message_and_every_stream_event_pass_anthropics_schema(case):
    extra, sim = ANTHROPIC_CASES[case]
    transport = SimulatedAnthropicTransport("c", sim, ("claude",))
    body = {"model": "claude", "max_tokens": 100, "messages": USER, **extra}
    message = (await post(transport, "/v1/messages", body)).json()
    events = sse(await post(transport, "/v1/messages", {**body, "stream": True}))
    assert problems("anthropic", "Message", message) == []
    assert [(e["type"], p) for e in events for p in event_problems("anthropic", e)] == []
    assert [e["type"] for e in events][:2] == ["message_start", "ping"] and events[-1]["type"] == "message_stop"
