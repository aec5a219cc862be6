"""What a client of the demo sees passes the published schemas, and the Open Responses checks (MockClock).

The demo config (``config/demo.yaml``) plus a native anthropic simulated
backend, driven through the gateway: every OpenAI door's answer, buffered and
streamed, is validated against ``tests/data/schemas`` (see
``tests/unit/test_simulated_schemas.py`` for the simulators alone, the
Anthropic one included); ``demo:online``'s answer carries ``url_citation``
annotations from the demo's simulated web search.

The Open Responses compliance suite (github.com/openresponses/openresponses,
``src/lib/compliance-tests.ts``, 17 checks) runs in Bun against a live server
(``tests/perf/openresponses_compliance.py`` runs it against the demo); its
HTTP checks are made here in pytest: each answer parses as a
``ResponseResource`` (every streamed event as its event), and then
``basic-response``, ``system-prompt``, ``image-input``, ``multi-turn`` and
``assistant-phase`` want a completed response with output,
``streaming-response`` events ending completed, ``tool-calling`` a
``function_call`` item (buffered and streamed), ``compact-response`` a
``response.compaction`` holding a ``compaction`` item, ``compact-missing-model``
a 400; ``previous_response_id`` and a function call's round trip continue a
stored response. Its websocket checks are the websocket door's
(tests/e2e/test_responses_ws_e2e.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Reply, gateway, request
from tests.published_schemas import event_problems, problems

DEMO = (Path(__file__).parents[2] / "config" / "demo.yaml").read_text() + """
  - name: claude
    type: anthropic
    url: http://claude.simulated
    models: [claude-x]
    simulation: {latency: 50ms, chunks: 4}
"""
USER = [{"type": "message", "role": "user", "content": "Say hello in exactly 3 words."}]
WEATHER = {"type": "function", "name": "get_weather", "description": "Get the current weather for a location",
           "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                          "required": ["location"]}}
PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAA"
         "AAAElFTkSuQmCC")


def events(reply: Reply) -> list[dict[str, Any]]:
    """The JSON data of each SSE block (after its ``event:`` line, when it has one)."""
    found = [line[6:] for block in reply.body.split(b"\n\n") for line in block.split(b"\n")
             if line.startswith(b"data: ")]
    return [json.loads(data) for data in found if data != b"[DONE]"]


def resource(value: dict[str, Any]) -> list[str]:
    return problems("openresponses", "ResponseResource", value) + \
        problems("openai", "Response", {k: v for k, v in value.items() if not (k == "usage" and v is None)})


async def responses(app, body: dict[str, Any], stream: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One ``POST /v1/responses``: the final Response object, and the events when streamed (all checked)."""
    reply = await request(app, "POST", "/v1/responses", {**body, "stream": stream})
    assert reply.status == 200, reply.body
    if not stream:
        assert resource(reply.json()) == []
        return reply.json(), []
    streamed = events(reply)
    assert [(e["type"], p) for e in streamed for p in event_problems("openresponses", e)] == []
    final = streamed[-1]["response"]
    assert resource(final) == []
    return final, streamed


CHECKS = {
    "basic-response": {"input": USER},
    "system-prompt": {"input": [{"type": "message", "role": "system", "content": "You are a pirate."}, *USER]},
    "multi-turn": {"input": [*USER, {"type": "message", "role": "assistant", "content": "Hello there, Alice!"},
                             {"type": "message", "role": "user", "content": "What is my name?"}]},
    "assistant-phase": {"input": [
        {"type": "message", "role": "assistant", "phase": "commentary", "content": "I should answer."},
        {"type": "message", "role": "assistant", "phase": "final_answer", "content": "The number is four."}, *USER]},
    "image-input": {"input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "What do you see?"}, {"type": "input_image", "image_url": PIXEL}]}]},
}


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
@pytest.mark.parametrize("check", list(CHECKS))
async def test_the_demo_passes_the_open_responses_text_checks(autojump_clock, check, stream):
    async with gateway(DEMO) as app:
        final, streamed = await responses(app, {"model": "demo", **CHECKS[check]}, stream)
    assert final["status"] == "completed" and final["output"]
    assert not stream or [e["type"] for e in streamed][-1] == "response.completed"


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
async def test_the_demos_model_calls_the_tool_it_is_offered(autojump_clock, stream):
    async with gateway(DEMO) as app:
        final, streamed = await responses(app, {"model": "demo", "input": USER, "tools": [WEATHER]}, stream)
    assert [(i["type"], i["name"]) for i in final["output"]] == [("function_call", "get_weather")]
    assert final["tools"][0]["strict"] is True
    kinds = {e["type"] for e in streamed}
    assert not stream or {"response.function_call_arguments.delta", "response.function_call_arguments.done"} <= kinds


async def test_a_function_calls_round_trip_and_a_previous_response_continue_on_the_demo(autojump_clock):
    async with gateway(DEMO) as app:
        first, _ = await responses(app, {"model": "demo", "input": "Weather in Paris?", "tools": [WEATHER],
                                         "tool_choice": {"type": "function", "name": "get_weather"}})
        call = first["output"][0]
        second, _ = await responses(app, {"model": "demo", "previous_response_id": first["id"], "input": [
            {"type": "function_call_output", "call_id": call["call_id"], "output": "64 degrees and clear"}]})
        orphan = await request(app, "POST", "/v1/responses", {"model": "demo", "input": [
            {"type": "function_call_output", "call_id": "call_missing", "output": "nothing called me"}]})
    assert second["status"] == "completed" and second["output"][0]["type"] == "message"
    assert second["previous_response_id"] == first["id"]
    assert orphan.status == 400 and orphan.json()["error"]["message"] == \
        "No tool call found for function call output with call_id call_missing."


async def test_the_demo_compacts_and_refuses_a_compaction_without_a_model(autojump_clock):
    async with gateway(DEMO) as app:
        compacted = await request(app, "POST", "/v1/responses/compact", {
            "model": "demo", "prompt_cache_key": "compact-test", "input": CHECKS["multi-turn"]["input"]})
        refused = await request(app, "POST", "/v1/responses/compact", {"input": USER})
    assert compacted.status == 200 and problems("openresponses", "CompactResource", compacted.json()) == []
    assert problems("openai", "CompactResource", compacted.json()) == []
    assert compacted.json()["object"] == "response.compaction"
    assert compacted.json()["output"][-1]["type"] == "compaction"
    assert refused.status in (400, 422)


async def test_a_stored_response_and_its_input_items_pass_the_schemas_through_the_gateway(autojump_clock):
    async with gateway(DEMO) as app:
        final, _ = await responses(app, {"model": "demo", "input": CHECKS["multi-turn"]["input"]})
        retrieved = await request(app, "GET", f"/v1/responses/{final['id']}")
        listing = await request(app, "GET", f"/v1/responses/{final['id']}/input_items")
    assert retrieved.status == 200 and resource(retrieved.json()) == []
    assert listing.status == 200 and problems("openai", "ResponseItemList", listing.json()) == []


@pytest.mark.parametrize("path, body, schema", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2, "logprobs": True},
     "CreateChatCompletionResponse"),
    ("/v1/completions", {"prompt": "hi"}, "CreateCompletionResponse"),
    ("/v1/embeddings", {"input": ["a", "b"]}, "CreateEmbeddingResponse"),
    ("/v1/images/generations", {"prompt": "a fox"}, "ImagesResponse"),
], ids=["chat", "completions", "embeddings", "images"])
async def test_the_demos_openai_answers_pass_openais_schema(autojump_clock, path, body, schema):
    async with gateway(DEMO) as app:
        reply = await request(app, "POST", path, {"model": "demo", **body})
        chunks = await request(app, "POST", path, {"model": "demo", **body, "stream": True,
                                                   "stream_options": {"include_usage": True}}) \
            if path == "/v1/chat/completions" else None
    assert reply.status == 200, reply.body
    assert problems("openai", schema, reply.json()) == []
    assert chunks is None or [p for c in events(chunks)
                              for p in problems("openai", "CreateChatCompletionStreamResponse", c)] == []


async def test_the_demo_answers_online_with_url_citations_from_its_simulated_search(autojump_clock):
    """README's ``demo:online``: the backend calls ``web_search``, the simulated provider answers, the
    backend's answer cites the numbered sources, and the gateway annotates each citation."""
    async with gateway(DEMO) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              {"model": "demo:online", "messages": [{"role": "user", "content": "What is Trio?"}]})
    assert reply.status == 200, reply.body
    assert problems("openai", "CreateChatCompletionResponse", reply.json()) == []
    message = reply.json()["choices"][0]["message"]
    cited = [(a["type"], a["url_citation"]["url"], message["content"][a["url_citation"]["start_index"]:
                                                                      a["url_citation"]["end_index"]])
             for a in message["annotations"]]
    assert cited == [("url_citation", "https://example.com/articles/what-is-trio", "[1]"),
                     ("url_citation", "https://docs.example.org/reference/what-is-trio", "[2]"),
                     ("url_citation", "https://forum.example.net/t/what-is-trio", "[3]")]
    assert (reply.json()["model"], reply.headers[b"x-continuum-model-variant"]) == ("demo:online", b"online")


@pytest.mark.parametrize("beta, status", [
    ("context-management-2025-06-27,mid-conversation-system-2026-04-07", 200), ("context-management-2025-06-27", 400),
], ids=["with_betas", "without_the_system_beta"])
async def test_a_native_anthropic_simulator_takes_claude_codes_betas_through_the_gateway(autojump_clock, beta, status):
    """A mid-conversation system message and context edits reach the simulator, taken under their betas only.
    (The Messages door renders the answer itself, so its shape is the door's: tests/unit/test_simulated_schemas.py
    checks the simulator's own.)"""
    body = {"model": "claude-x", "max_tokens": 64, "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "Be brief."}]}
    headers = [(b"anthropic-version", b"2023-06-01"), (b"anthropic-beta", beta.encode())]
    async with gateway(DEMO) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", body, headers=headers)
    assert reply.status == status, reply.body
    if status == 200:
        assert [e["type"] for e in events(reply)][-1] == "message_stop"
    else:
        assert reply.json()["error"]["message"].startswith('messages: Unexpected role "system".')
