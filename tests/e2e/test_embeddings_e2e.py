"""End-to-end: /v1/embeddings and /v1/completions through hypercorn, the official openai SDK as the client."""

from __future__ import annotations

import openai
import pytest

from switchyard.protocol.simulated.endpoints import embedding_vector
from tests.e2e.support import Gateway, backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TEXT = "Hello from sim-a. The quick brown fox"


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


async def test_sdk_embeddings_decode_the_default_base64_answer(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:   # the SDK asks for base64 unless told otherwise, and decodes it to floats
        result = await in_thread(client.embeddings.create, model="demo", input=["alpha", "beta"])
    assert [d.embedding for d in result.data] == [embedding_vector("demo", "alpha"), embedding_vector("demo", "beta")]
    assert result.model == "demo" and result.usage.prompt_tokens == 2
    assert gw.sim("sim-a").requests[0].url.path == "/v1/embeddings"


async def test_sdk_embeddings_with_float_format_and_dimensions(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        result = await in_thread(client.embeddings.create, model="demo", input="alpha", encoding_format="float",
                                 dimensions=3)
    assert result.data[0].embedding == embedding_vector("demo", "alpha", 3)


async def test_sdk_sees_a_refused_embeddings_field_by_name(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client, pytest.raises(openai.BadRequestError) as refused:
        await in_thread(client.embeddings.create, model="demo", input="alpha", dimensions=0)
    assert refused.value.body["param"] == "dimensions"
    assert gw.sim("sim-a").requests == []


async def test_sdk_completions_buffered(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        completion = await in_thread(client.completions.create, model="demo", prompt="Say hello", max_tokens=8)
    assert completion.object == "text_completion"
    assert completion.choices[0].text == TEXT and completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens == 5


async def test_sdk_completions_streamed(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))

    def consume(client: openai.OpenAI) -> list:
        return list(client.completions.create(model="demo", prompt="Say hello", stream=True))

    with sdk(gw) as client:
        chunks = await in_thread(consume, client)
    assert "".join(c.choices[0].text for c in chunks) == TEXT
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert gw.sim("sim-a").count("completed") == 1
