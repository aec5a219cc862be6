"""End-to-end: ``model: "auto"`` through the official openai SDK on a real socket routes a trivial
question, a code task and a long prompt (streamed) to three different tiers."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.e2e.support import backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw


def serving(name: str, model: str) -> dict[str, Any]:
    b = backend(name)
    b["models"] = [model]
    return b


SMART = {
    "enabled": True,
    "debug_headers": True,
    "model_profiles": [{"model": "big", "tier": 1}, {"model": "mid", "tier": 2}, {"model": "small", "tier": 3}],
    "routing_policies": [
        {"name": "long", "when": {"input_tokens": {"gt": 2000}}, "route_to": {"tier": 1}},
        {"name": "code", "when": {"domain": ["code"]}, "route_to": {"tier": 2}},
        {"name": "trivial", "when": {"complexity": ["trivial", "simple"]}, "route_to": {"tier": 3}},
        {"name": "rest", "when": {}, "route_to": {"tier": 2}},
    ],
}
CODE = "Implement the REST API endpoint for rate limiting and write a function that refactors the handler."
LONG = "Summarize these notes. " + "The quarterly figures moved as expected this time. " * 300


async def test_auto_picks_three_tiers_through_the_sdk(start_gateway):
    gw = await start_gateway(gateway_config(serving("t1", "big"), serving("t2", "mid"), serving("t3", "small"),
                                            smart_routing=SMART,
                                            server={"bind_address": "127.0.0.1:8080", "max_body_bytes": 1 << 20}))
    client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
    with client:
        def ask(text: str) -> Any:
            return client.chat.completions.with_raw_response.create(
                model="auto", messages=[{"role": "user", "content": text}])

        def stream(text: str) -> list[Any]:
            with client.chat.completions.create(model="auto", messages=[{"role": "user", "content": text}],
                                                stream=True) as s:
                return list(s)

        trivial = await in_thread(ask, "hi")
        code = await in_thread(ask, CODE)
        chunks = await in_thread(stream, LONG)
    assert trivial.parse().model == "small" and trivial.headers["x-smart-route-tier"] == "3"
    assert code.parse().model == "mid" and code.headers["x-smart-route-policy"] == "code"
    assert {c.model for c in chunks} == {"big"} and chunks[-1].choices[0].finish_reason == "stop"
    assert [gw.sim(n).count("request") for n in ("t1", "t2", "t3")] == [1, 1, 1]
