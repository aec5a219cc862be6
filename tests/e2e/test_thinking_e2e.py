"""End-to-end: a thinking-pattern model streamed to the official openai SDK, reasoning in
``delta.reasoning_content`` (an extra field the SDK keeps in ``model_extra``)."""

from __future__ import annotations

from typing import Any

import openai

from tests.e2e.support import gateway_config, in_thread

TEXT = "Let me think about it. Six times seven.</think> The answer is 42."


async def test_reasoning_and_content_arrive_apart_in_the_sdk(start_gateway):
    gw = await start_gateway(gateway_config({
        "name": "sim", "type": "simulated", "models": ["nemotron-3-nano"],
        "simulation": {"latency": "10ms", "tokens_per_second": 0, "chunks": 12, "text": TEXT},
        "model_configs": [{"id": "nemotron-3-nano", "metadata": {"thinking": {
            "pattern": "unterminated_start", "end_marker": "</think>", "assume_reasoning_first": True}}}],
    }))
    client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
    with client:
        def consume() -> list[Any]:
            with client.chat.completions.create(model="nemotron-3-nano", stream=True,
                                                messages=[{"role": "user", "content": "6*7?"}]) as stream:
                return list(stream)

        chunks = await in_thread(consume)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    content = "".join(d.content or "" for d in deltas)
    assert reasoning == "Let me think about it. Six times seven."
    assert content == " The answer is 42."
    assert chunks[-1].choices[0].finish_reason == "stop"
