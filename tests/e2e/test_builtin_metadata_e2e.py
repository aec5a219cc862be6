"""End-to-end: the built-in metadata layer seen by a client, with no metadata file configured."""

from __future__ import annotations

import httpx
import openai

from tests.e2e.support import Gateway, gateway_config, in_thread


def sim(models: list[str]) -> dict:
    return {"name": "sim", "type": "simulated", "models": models,
            "simulation": {"latency": "5ms", "tokens_per_second": 0, "chunks": 3}}


async def models_page(gw: Gateway) -> dict:
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        response = await http.get("/models")
    assert response.status_code == 200
    return {m["id"]: m for m in response.json()["data"]}


async def test_v1_models_describes_a_builtin_model_from_the_builtin_layer(start_gateway):
    gw = await start_gateway(gateway_config(sim(["gpt-4o", "gemini-2.5-pro", "local-model"])))
    listed = await models_page(gw)
    assert listed["gpt-4o"]["metadata"]["limits"] == {"context_window": 128000, "max_output": 16384}
    assert listed["gpt-4o"]["metadata"]["pricing"]["input_tokens"] == 2.5
    assert listed["gemini-2.5-pro"]["metadata"]["display_name"] == "Gemini 2.5 Pro"
    assert "metadata" not in listed["local-model"]


async def test_a_builtin_model_is_priced_from_the_builtin_layer(start_gateway):
    gw = await start_gateway(gateway_config(sim(["gpt-4o-mini"])))
    with openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10) as client:
        raw = await in_thread(client.chat.completions.with_raw_response.create, model="gpt-4o-mini",
                              messages=[{"role": "user", "content": "hi"}])
    usage = raw.parse().usage
    expected = (usage.prompt_tokens * 0.15 + usage.completion_tokens * 0.6) / 1_000_000
    assert abs(float(raw.headers["x-continuum-cost"]) - expected) < 1e-12
