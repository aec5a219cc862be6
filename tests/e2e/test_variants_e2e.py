"""End-to-end: model variant suffixes through the official openai SDK on a real socket: a
``:floor`` call buffered and streamed (model and headers), and an ``:online`` refusal."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.e2e.support import backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw


def priced(name: str, price: float) -> dict[str, Any]:
    b = backend(name)
    b["model_configs"] = [{"id": "demo", "metadata": {"pricing": {"input_tokens": price, "output_tokens": price}}}]
    return b


async def test_floor_and_online_through_the_sdk(start_gateway):
    gw = await start_gateway(gateway_config(priced("dear", 10), priced("cheap", 1),
                                            proxy={"variant_suffixes": {"enabled": True}}))
    client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
    messages = [{"role": "user", "content": "hi"}]
    with client:
        def buffered() -> Any:
            return client.chat.completions.with_raw_response.create(model="demo:floor", messages=messages)

        def streamed() -> list[Any]:
            with client.chat.completions.create(model="demo:floor", messages=messages, stream=True) as stream:
                return list(stream)

        def online() -> None:
            client.chat.completions.create(model="demo:online", messages=messages, stream=True)

        raw = await in_thread(buffered)
        chunks = await in_thread(streamed)
        with pytest.raises(openai.NotFoundError) as refused:
            await in_thread(online)
    assert raw.headers["x-continuum-model-variant"] == "floor"
    assert raw.headers["x-continuum-model-variant-applied"] == "true"
    assert raw.parse().model == "demo:floor"
    assert chunks and {c.model for c in chunks} == {"demo:floor"}
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert refused.value.code == "unsupported_model_variant"
    assert refused.value.body["type"] == "invalid_request_error"
    # both answers came from the cheapest backend, which was sent the base id
    assert [json.loads(r.content)["model"] for r in gw.sim("cheap").requests
            if r.url.path.endswith("/chat/completions")] == ["demo", "demo"]
    assert not [r for r in gw.sim("dear").requests if r.url.path.endswith("/chat/completions")]
