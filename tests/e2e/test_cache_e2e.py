"""End-to-end: response cache hits through the official openai and anthropic SDKs, and one Redis cache
shared by two ``switchyard serve`` processes.

A hit must be indistinguishable from the original answer to the SDK: the
same content, tool calls, finish (stop) reason and usage, streamed or
buffered whichever way the answer was stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import trio

from tests import redis as redis_fixture
from tests.e2e.support import Gateway, backend, gateway_config, in_thread, switchyard_serve

pytestmark = pytest.mark.simulator_history

redis_server, redis_url = redis_fixture.redis_server, redis_fixture.redis_url

PROMPT = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
WEATHER = {"name": "get_weather", "description": "Weather now",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CACHE = {"enabled": True}
# The semantic cache on a simulated embeddings backend whose vectors count words (tests/actors/test_semantic_cache.py):
# each pair below differs in one word of nine, a cosine of 0.9 (with the "user:" the embedded text begins with).
EMBED = {"name": "emb", "type": "simulated", "models": ["embed"],
         "simulation": {"latency": "1ms", "embedding": "words"}}
SEMANTIC = {"enabled": True, "embedding_model": "embed", "threshold": 0.85, "dimensions": 2048}
Q1, Q2 = "what is the capital of france please tell me", "what is the capital of france please tell us"
Q3, Q4 = "how many legs does a spider have in total", "how many legs does a spider have in all"


def cached(*backends: dict[str, Any], **top: Any) -> dict[str, Any]:
    return gateway_config(*backends, response_cache=CACHE, **top)


def openai_sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def anthropic_sdk(gw: Gateway) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url + "/anthropic", api_key="x", max_retries=0, timeout=10)


def streamed(client: openai.OpenAI, seen: list[Any] | None = None, **kwargs: Any) -> tuple[dict[str, Any], str]:
    """A chat stream as the SDK reads it, folded: (content, tool calls, finish reason, usage), and the header;
    ``seen`` gets the answer's headers and each chunk as the SDK parsed it."""
    with client.chat.completions.with_streaming_response.create(stream=True, **kwargs) as raw:
        header = raw.headers["x-continuum-cache"]
        if seen is not None:
            seen.append(raw.headers)
        text, tools, finish, usage = [], {}, None, None
        for chunk in raw.parse():
            if seen is not None:
                seen.append(chunk)
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
                for call in choice.delta.tool_calls or ():
                    tool = tools.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                    tool["id"] = call.id or tool["id"]
                    tool["name"] += call.function.name or ""
                    tool["arguments"] += call.function.arguments or ""
                finish = choice.finish_reason or finish
    return {"content": "".join(text), "tools": [tools[i] for i in sorted(tools)], "finish": finish,
            "usage": usage}, header


def buffered(client: openai.OpenAI, seen: list[Any] | None = None, **kwargs: Any) -> tuple[dict[str, Any], str, Any]:
    raw = client.chat.completions.with_raw_response.create(**kwargs)
    if seen is not None:
        seen.append(raw.headers)
    answer = raw.parse()
    message = answer.choices[0].message
    folded = {"content": message.content or "",
              "tools": [{"id": t.id, "name": t.function.name, "arguments": t.function.arguments}
                        for t in message.tool_calls or ()],
              "finish": answer.choices[0].finish_reason, "usage": answer.usage.model_dump()}
    return folded, raw.headers["x-continuum-cache"], answer


@pytest.mark.parametrize("tool_call", [False, True])
async def test_openai_sdk_buffered_hit_is_the_original_answer(start_gateway, tool_call):
    gw = await start_gateway(cached(backend("sim-a", text="Cached words here", failure={"tool_call": tool_call})))
    kwargs = {"model": "demo", "messages": PROMPT, "temperature": 0, "tools": [TOOL]}
    with openai_sdk(gw) as client:
        first, miss, original = await in_thread(buffered, client, **kwargs)
        again, hit, replayed = await in_thread(buffered, client, **kwargs)
    assert (miss, hit) == ("miss", "hit")
    assert replayed.model_dump() == original.model_dump()
    assert again == first
    assert first["finish"] == ("tool_calls" if tool_call else "stop")
    assert gw.sim("sim-a").served == 1


@pytest.mark.parametrize("tool_call", [False, True])
async def test_openai_sdk_streamed_hit_is_the_original_stream(start_gateway, tool_call):
    gw = await start_gateway(cached(backend("sim-a", text="one two three four", failure={"tool_call": tool_call})))
    kwargs = {"model": "demo", "messages": PROMPT, "temperature": 0, "tools": [TOOL],
              "stream_options": {"include_usage": True}}
    with openai_sdk(gw) as client:
        first, miss = await in_thread(streamed, client, **kwargs)
        again, hit = await in_thread(streamed, client, **kwargs)
        as_buffered, also_hit, _ = await in_thread(buffered, client, model="demo", messages=PROMPT,
                                                   temperature=0, tools=[TOOL])
    assert (miss, hit, also_hit) == ("miss", "hit", "hit")
    first["usage"].pop("cost", None)   # the original call's price; a hit costs nothing
    assert again == first
    assert as_buffered == first
    assert gw.sim("sim-a").served == 1


async def test_anthropic_sdk_buffered_hit_is_the_original_message(start_gateway):
    gw = await start_gateway(cached(backend("sim-a", text="Hello from the cache")))
    kwargs = {"model": "demo", "max_tokens": 64, "messages": PROMPT}
    with anthropic_sdk(gw) as client:
        miss = await in_thread(client.messages.with_raw_response.create, **kwargs)
        hit = await in_thread(client.messages.with_raw_response.create, **kwargs)
    assert (miss.headers["x-continuum-cache"], hit.headers["x-continuum-cache"]) == ("miss", "hit")
    original, replayed = miss.parse().model_dump(), hit.parse().model_dump()
    assert original.pop("id") != replayed.pop("id")   # each answer has its own message id
    assert replayed == original
    assert replayed["usage"]["output_tokens"] > 0
    assert gw.sim("sim-a").served == 1


@pytest.mark.parametrize("tool_call", [False, True])
async def test_anthropic_sdk_streamed_hit_is_the_original_message(start_gateway, tool_call):
    gw = await start_gateway(cached(backend("sim-a", text="one two three", failure={"tool_call": tool_call})))
    kwargs = {"model": "demo", "max_tokens": 64, "messages": PROMPT, "tools": [WEATHER]}

    def stream(client: anthropic.Anthropic) -> tuple[list[str], dict[str, Any]]:
        with client.messages.stream(**kwargs) as s:
            return list(s.text_stream), s.get_final_message().model_dump()

    with anthropic_sdk(gw) as client:
        pieces, original = await in_thread(stream, client)
        again, replayed = await in_thread(stream, client)
        buffered_hit = (await in_thread(client.messages.create, **kwargs)).model_dump()
    for message in (original, replayed, buffered_hit):
        message.pop("id")
        message["usage"].pop("cost", None)
    assert "".join(again) == "".join(pieces)
    assert replayed == original
    assert buffered_hit == original
    assert original["stop_reason"] == ("tool_use" if tool_call else "end_turn")
    assert gw.sim("sim-a").served == 1


def paraphrase(question: str) -> dict[str, Any]:
    return {"model": "demo", "messages": [{"role": "user", "content": question}], "temperature": 0}


async def test_openai_sdk_buffered_semantic_hit_is_the_original_answer(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", text="Paris is the capital"), EMBED,
                                            response_cache={"enabled": True, "semantic": SEMANTIC}))
    seen: list[Any] = []
    with openai_sdk(gw) as client:
        first, miss, original = await in_thread(buffered, client, seen, **paraphrase(Q1))
        again, hit, replayed = await in_thread(buffered, client, seen, **paraphrase(Q2))
    assert (miss, hit) == ("miss", "hit")
    assert seen[1]["x-continuum-cache-kind"] == "semantic"
    assert float(seen[1]["x-continuum-cache-similarity"]) == pytest.approx(0.9, abs=1e-4)
    assert replayed.model_dump() == original.model_dump()
    assert again == first and first["content"] == "Paris is the capital"
    assert gw.sim("sim-a").served == 1


async def test_openai_sdk_streamed_semantic_hit_is_indistinguishable_from_the_live_stream(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", text="Eight legs, as every spider has"), EMBED,
                                            response_cache={"enabled": True, "semantic": SEMANTIC}))
    options = {"stream_options": {"include_usage": True}}
    live: list[Any] = []
    replay: list[Any] = []
    with openai_sdk(gw) as client:
        first, miss = await in_thread(streamed, client, live, **paraphrase(Q3), **options)
        again, hit = await in_thread(streamed, client, replay, **paraphrase(Q4), **options)
    assert (miss, hit) == ("miss", "hit")
    assert replay[0]["x-continuum-cache-kind"] == "semantic"
    first["usage"].pop("cost", None)   # the original call's price; a hit costs nothing
    assert again == first
    # chunk by chunk, the SDK's objects: the same shape and content (each stream has its own id and instant)
    def shape(chunk: Any) -> dict[str, Any]:
        dumped = chunk.model_dump(exclude={"id", "created"})
        if dumped.get("usage"):
            dumped["usage"].pop("cost", None)
        return dumped
    assert [shape(c) for c in replay[1:]] == [shape(c) for c in live[1:]]
    assert live[0]["content-type"] == replay[0]["content-type"]
    assert gw.sim("sim-a").served == 1


async def test_two_gateway_processes_share_one_redis_cache(tmp_path: Path, redis_url):
    config = gateway_config(backend("sim-a", text="Shared through Redis"), EMBED, state={"redis_url": redis_url},
                            response_cache={"enabled": True, "store": "redis", "semantic": SEMANTIC})
    body = {"model": "demo", "messages": PROMPT, "temperature": 0}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with switchyard_serve(tmp_path / "a", config) as (_, url_a, _), \
            switchyard_serve(tmp_path / "b", config) as (_, url_b, _):
        async with httpx.AsyncClient(timeout=10) as http:
            first = await http.post(url_a + "/v1/chat/completions", json=body)
            # A miss is stored once its answer is out: the client can ask again before the put lands.
            await stores_seen(http, url_a, 1)
            shared = await http.post(url_b + "/v1/chat/completions", json={**body, "stream": True})
            own = await http.post(url_b + "/v1/chat/completions", json=body)
            # a semantic entry made through A: its vector reaches B's index through Redis, its answer is A's
            asked = await http.post(url_a + "/v1/chat/completions", json=paraphrase(Q1))
            await counted(http, url_b, "response_cache_semantic_adopted_total", 2)   # "hi" and Q1
            similar = await http.post(url_b + "/v1/chat/completions", json=paraphrase(Q2))
    assert first.headers["x-continuum-cache"] == "miss"
    assert shared.headers["x-continuum-cache"] == "hit"
    assert own.headers["x-continuum-cache"] == "hit"
    assert own.json() == first.json()
    assert b"Shared" in shared.content and shared.content.endswith(b"data: [DONE]\n\n")
    assert asked.headers["x-continuum-cache"] == "miss"
    assert (similar.headers["x-continuum-cache"], similar.headers["x-continuum-cache-kind"]) == ("hit", "semantic")
    assert similar.json() == asked.json()


async def stores_seen(http: httpx.AsyncClient, url: str, count: int) -> None:
    """Wait (at most 10 s) until the gateway at ``url`` counts ``count`` answers written to its cache."""
    await counted(http, url, "response_cache_stores_total", count)


async def counted(http: httpx.AsyncClient, url: str, name: str, count: int) -> None:
    """Wait (at most 10 s) until the gateway at ``url`` exports counter ``name`` at ``count``."""
    with trio.fail_after(10):
        while True:
            text = (await http.get(url + "/metrics")).text
            if any(line.split() == [name, f"{float(count)}"] for line in text.splitlines()):
                return
            await trio.sleep(0.01)


async def test_a_redis_cache_lets_go_of_its_connections_when_the_gateway_stops(redis_url):
    from tests.harness import chat, gateway, request

    config = (f"state: {{redis_url: '{redis_url}'}}\nresponse_cache: {{enabled: true, store: redis}}\n"
              "backends:\n  - {name: sim-a, type: simulated, models: [demo], simulation: {latency: 1ms}}\n")
    async with gateway(config) as app:
        assert (await request(app, "POST", "/v1/chat/completions", chat(temperature=0))).status == 200
        wire = app.runtime.cache.store.wire
        assert wire._idle   # the store's connection, kept for the next call
        idle = list(wire._idle)
    assert wire._idle == [] and all(c.stream.socket.fileno() == -1 for c in idle)
