"""End-to-end: alias dispatch and per-backend upstream ids, with the official openai SDK as the client."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.e2e.support import Gateway, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

MESSAGES = [{"role": "user", "content": "hi"}]
WIRE = "gemma-4-26b-a4b-it-fp8"


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def sim_backend(name: str, models: list[str], model_configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "type": "simulated", "models": models, "model_configs": model_configs,
            "simulation": {"latency": "10ms", "tokens_per_second": 0, "chunks": 4}}


def sent_models(gw: Gateway, name: str) -> list[str]:
    return [json.loads(r.content)["model"] for r in gw.sim(name).requests]


async def test_an_alias_is_dispatched_to_its_canonical_id(start_gateway):
    gw = await start_gateway(gateway_config(sim_backend(
        "google", ["gemini-3.1-pro-preview"], [{"id": "gemini-3.1-pro-preview", "aliases": ["gemini-3.1-pro"]}])))
    with sdk(gw) as client:
        completion = await in_thread(client.chat.completions.create, model="gemini-3.1-pro", messages=MESSAGES)
    assert completion.model == "gemini-3.1-pro-preview"   # the id the backend served
    assert completion.choices[0].message.content
    assert sent_models(gw, "google") == ["gemini-3.1-pro-preview"]


async def test_upstream_id_is_sent_and_the_public_id_restored(start_gateway):
    gw = await start_gateway(gateway_config(sim_backend(
        "vllm", ["gemma4"], [{"id": "gemma4", "upstream_id": WIRE}])))
    with sdk(gw) as client:
        completion = await in_thread(client.chat.completions.create, model="gemma4", messages=MESSAGES)

        def consume() -> list[Any]:
            with client.chat.completions.create(model="gemma4", messages=MESSAGES, stream=True) as stream:
                return list(stream)

        chunks = await in_thread(consume)
    assert completion.model == "gemma4"
    assert len(chunks) >= 4 and {c.model for c in chunks} == {"gemma4"}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
        completion.choices[0].message.content
    assert sent_models(gw, "vllm") == [WIRE, WIRE]
