"""The simulated backend speaks OpenAI's full shapes (``n``, ``logprobs``, ``refusal``, every required
field), and answers a body it cannot serve with a 400 naming the param, never an exception.

The required fields are OpenAI's OpenAPI spec's (github.com/openai/openai-openapi, openapi.json:
CreateChatCompletionResponse, its choices, ChatCompletionResponseMessage, ChatCompletionTokenLogprob,
CreateChatCompletionStreamResponse, CompletionUsage, Response, OutputMessage, OutputTextContent,
LogProb, FunctionToolCall, ResponseUsage and the stream events), recorded here; each answer is also
parsed by the official ``openai`` SDK's types.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from switchyard.config.schema import SimulatedFailure, Simulation
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.simulated.responses import LOGPROBS_INCLUDE

FAST = Simulation(latency=0.0, tokens_per_second=0, chunks=4)
TOOL = Simulation(latency=0.0, tokens_per_second=0, chunks=4, failure=SimulatedFailure(tool_call=True))
USER = [{"role": "user", "content": "hi"}]

TOKEN_LOGPROB = ("token", "logprob", "bytes", "top_logprobs")
COMPLETION = {"": ("choices", "created", "id", "model", "object"),
              "choices[]": ("finish_reason", "index", "message", "logprobs"),
              "choices[].message": ("role", "content", "refusal"),
              "usage": ("prompt_tokens", "completion_tokens", "total_tokens")}
CHUNK = {"": ("choices", "created", "id", "model", "object"), "choices[]": ("delta", "finish_reason", "index")}
RESPONSE = {"": ("id", "object", "created_at", "error", "incomplete_details", "instructions", "model", "tools",
                 "output", "parallel_tool_calls", "metadata", "tool_choice", "temperature", "top_p"),
            "usage": ("input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details",
                      "total_tokens"),
            "usage.input_tokens_details": ("cached_tokens", "cache_write_tokens"),
            "usage.output_tokens_details": ("reasoning_tokens",)}
OUTPUT_MESSAGE = ("id", "type", "role", "content", "status")
OUTPUT_TEXT = ("type", "text", "annotations", "logprobs")
FUNCTION_CALL = ("type", "call_id", "name", "arguments")
EVENTS = {"response.created": ("type", "response", "sequence_number"),
          "response.output_item.added": ("type", "output_index", "item", "sequence_number"),
          "response.content_part.added": ("type", "item_id", "output_index", "content_index", "part",
                                          "sequence_number"),
          "response.output_text.delta": ("type", "item_id", "output_index", "content_index", "delta",
                                         "sequence_number", "logprobs"),
          "response.output_text.done": ("type", "item_id", "output_index", "content_index", "text",
                                        "sequence_number", "logprobs"),
          "response.completed": ("type", "response", "sequence_number")}


def at(obj: Any, path: str) -> list[Any]:
    """The values at ``path`` (``a.b``, ``a[]`` for every item of a list), from ``obj``."""
    found = [obj]
    for step in filter(None, path.split(".")):
        many = step.endswith("[]")
        found = [v[step.removesuffix("[]")] for v in found if v.get(step.removesuffix("[]")) is not None]
        if many:
            found = [item for v in found for item in v]
    return found


def missing(obj: Any, required: dict[str, tuple[str, ...]]) -> list[str]:
    return [f"{path}.{key}" for path, keys in required.items() for v in at(obj, path) for key in keys
            if key not in v]


async def answer(path: str, body: dict[str, Any], sim: Simulation = FAST) -> httpx.Response:
    async with httpx.AsyncClient(transport=SimulatedTransport("a", sim, ("demo",)),
                                 base_url="http://a.simulated") as client:
        response = await client.post(path, json=body)
        await response.aread()
        return response


def chunks_of(response: httpx.Response) -> list[dict[str, Any]]:
    data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"]


@pytest.mark.parametrize("sim", [FAST, TOOL], ids=["text", "tool_call"])
@pytest.mark.parametrize("extra", [{}, {"n": 3, "logprobs": True, "top_logprobs": 2}], ids=["plain", "n_logprobs"])
async def test_a_chat_completion_has_every_field_openais_schema_requires(sim, extra):
    reply = (await answer("/v1/chat/completions", {"model": "demo", "messages": USER, **extra}, sim)).json()
    assert missing(reply, COMPLETION) == []
    assert [c["message"]["refusal"] for c in reply["choices"]] == [None] * extra.get("n", 1)
    ChatCompletion.model_validate(reply)


@pytest.mark.parametrize("sim", [FAST, TOOL], ids=["text", "tool_call"])
@pytest.mark.parametrize("extra", [{}, {"n": 2, "logprobs": True}], ids=["plain", "n_logprobs"])
async def test_each_chat_chunk_has_every_field_openais_schema_requires(sim, extra):
    response = await answer("/v1/chat/completions", {"model": "demo", "messages": USER, "stream": True,
                                                     "stream_options": {"include_usage": True}, **extra}, sim)
    chunks = chunks_of(response)
    assert [m for c in chunks for m in missing(c, CHUNK)] == []
    assert chunks[0]["choices"][0]["delta"]["refusal"] is None
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)


async def test_n_gives_n_choices_buffered_and_streamed():
    body = {"model": "demo", "messages": USER, "n": 3}
    buffered = (await answer("/v1/chat/completions", body)).json()
    streamed = chunks_of(await answer("/v1/chat/completions", {**body, "stream": True,
                                                               "stream_options": {"include_usage": True}}))
    assert [c["index"] for c in buffered["choices"]] == [0, 1, 2]
    texts = {i: "".join(c["choices"][0]["delta"].get("content") or "" for c in streamed
                        if c["choices"] and c["choices"][0]["index"] == i) for i in range(3)}
    assert set(texts.values()) == {buffered["choices"][0]["message"]["content"]} == {"Hello from a. The quick brown"}
    finishes = [c["choices"][0]["index"] for c in streamed if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finishes == [0, 1, 2]
    assert buffered["usage"]["completion_tokens"] == streamed[-1]["usage"]["completion_tokens"] == 3 * 4


async def test_logprobs_give_each_token_its_probability_and_top_logprobs_its_alternatives():
    body = {"model": "demo", "messages": USER, "logprobs": True, "top_logprobs": 3}
    buffered = (await answer("/v1/chat/completions", body)).json()
    streamed = chunks_of(await answer("/v1/chat/completions", {**body, "stream": True}))
    tokens = buffered["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in tokens] == ["Hello from a.", " The", " quick", " brown"]
    assert all(set(t) == set(TOKEN_LOGPROB) and len(t["top_logprobs"]) == 3 for t in tokens)
    assert [t["top_logprobs"][0]["token"] for t in tokens] == [t["token"] for t in tokens]
    assert [t["bytes"] for t in tokens] == [list(t["token"].encode()) for t in tokens]
    assert buffered["choices"][0]["logprobs"]["refusal"] is None
    streamed_tokens = [t for c in streamed if c["choices"] and c["choices"][0]["logprobs"]
                       for t in c["choices"][0]["logprobs"]["content"]]
    assert streamed_tokens == tokens
    plain = (await answer("/v1/chat/completions", {"model": "demo", "messages": USER})).json()
    assert plain["choices"][0]["logprobs"] is None


@pytest.mark.parametrize("sim", [FAST, TOOL], ids=["text", "tool_call"])
async def test_a_response_object_has_every_field_openais_schema_requires(sim):
    body = {"model": "demo", "input": "hi", "include": [LOGPROBS_INCLUDE], "top_logprobs": 2}
    reply = (await answer("/v1/responses", body, sim)).json()
    assert missing(reply, RESPONSE) == []
    [item] = reply["output"]
    if sim is TOOL:
        assert [k for k in FUNCTION_CALL if k not in item] == []
    else:
        assert [k for k in OUTPUT_MESSAGE if k not in item] == []
        [part] = item["content"]
        assert [k for k in OUTPUT_TEXT if k not in part] == []
        assert [t["token"] for t in part["logprobs"]] == ["Hello from a.", " The", " quick", " brown"]
        assert all(set(t) == set(TOKEN_LOGPROB) and len(t["top_logprobs"]) == 2 for t in part["logprobs"])
    Response.model_validate(reply)


async def test_each_response_event_has_every_field_openais_schema_requires():
    body = {"model": "demo", "input": "hi", "stream": True, "include": [LOGPROBS_INCLUDE]}
    events = chunks_of(await answer("/v1/responses", body))
    seen = {e["type"] for e in events}
    assert set(EVENTS) <= seen
    assert [(e["type"], k) for e in events for k in EVENTS.get(e["type"], ()) if k not in e] == []
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [d["logprobs"][0]["token"] for d in deltas] == [d["delta"] for d in deltas]
    Response.model_validate(events[-1]["response"])
    plain = chunks_of(await answer("/v1/responses", {**body, "include": []}))
    assert {json.dumps(e["logprobs"]) for e in plain if e["type"] == "response.output_text.delta"} == {"[]"}


@pytest.mark.parametrize("path, body, param", [
    ("/v1/chat/completions", {"n": 0}, "n"),
    ("/v1/chat/completions", {"n": 129}, "n"),
    ("/v1/chat/completions", {"n": "2"}, "n"),
    ("/v1/chat/completions", {"logprobs": "yes"}, "logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
    ("/v1/chat/completions", {"messages": [*USER, {"role": "assistant", "content": [{"type": "text", "text": 5}]}]},
     "messages[1].content[0].text"),
    ("/v1/responses", {"include": "message.output_text.logprobs"}, "include"),
    ("/v1/responses", {"top_logprobs": -1}, "top_logprobs"),
])
async def test_a_request_the_simulator_cannot_serve_is_a_400_naming_the_param(path, body, param):
    base = {"model": "demo", "messages": USER} if path.endswith("/completions") else {"model": "demo", "input": "hi"}
    response = await answer(path, {**base, **body})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 300)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),   # JSON has no inf
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)
FIELDS = ("model", "messages", "input", "prompt", "stream", "stream_options", "n", "logprobs", "top_logprobs",
          "include", "reasoning", "text", "metadata", "dimensions", "encoding_format", "tools", "instructions")
PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings")


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), fields=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6),
       content=JSON)
def test_the_simulator_answers_any_json_body_with_a_200_or_a_400(path, fields, content):
    body = {"model": "demo", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}],
            "input": "hi", "prompt": "hi", **fields}
    response = trio.run(answer, path, body)
    assert response.status_code in (200, 400), response.text
