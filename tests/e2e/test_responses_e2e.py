"""End-to-end: the Responses API through Switchyard on a real socket, with the official openai SDK."""

from __future__ import annotations

import openai
import pytest

from tests.e2e.support import Gateway, backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TEXT = "Hello from sim-a. The quick brown fox"


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def config() -> dict:
    sim = backend("sim-a")
    sim["models"] = ["demo", "pro"]
    sim["model_configs"] = [{"id": "pro", "metadata": {"responses_only": True}}]
    return gateway_config(sim)


async def test_responses_create_returns_the_backends_response(start_gateway):
    gw = await start_gateway(config())
    with sdk(gw) as client:
        response = await in_thread(client.responses.create, model="demo", input="hi")
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == TEXT
    assert response.usage is not None and response.usage.output_tokens == 5


async def test_responses_stream_delivers_the_event_sequence_and_final_response(start_gateway):
    gw = await start_gateway(config())

    def consume(client: openai.OpenAI):
        events = list(client.responses.create(model="demo", input="hi", stream=True))
        with client.responses.stream(model="demo", input="hi") as stream:
            final = stream.get_final_response()
        return events, final

    with sdk(gw) as client:
        events, final = await in_thread(consume, client)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == TEXT
    assert final.output_text == TEXT


async def test_a_responses_only_model_answers_chat_completions_through_the_bridge(start_gateway):
    gw = await start_gateway(config())

    def consume(client: openai.OpenAI):
        buffered = client.chat.completions.create(model="pro", messages=[{"role": "user", "content": "hi"}])
        chunks = list(client.chat.completions.create(model="pro", messages=[{"role": "user", "content": "hi"}],
                                                     stream=True))
        return buffered, chunks

    with sdk(gw) as client:
        buffered, chunks = await in_thread(consume, client)
    assert buffered.object == "chat.completion" and buffered.choices[0].message.content == TEXT
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == TEXT
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert [r.url.path for r in gw.sim("sim-a").requests] == ["/v1/responses"] * 2
