"""End-to-end: kv_cache_index through the official openai SDK on a real socket: a conversation's second
turn goes to the simulated engine that served its first (the gateway's own record of what it sent where),
as the ``kv_route`` event behind the answer's ``x-continuum-request-id`` says, and ``/metrics`` counts it."""

from __future__ import annotations

import re
from typing import Any

import httpx
import openai

from tests.e2e.support import backend, gateway_config, in_thread

TOKEN = "test-admin-token-0123456789"
SYSTEM = "You are the assistant of a hardware shop: drills, saws and sanders, nothing else. " * 4


async def test_a_conversation_stays_on_the_engine_holding_its_prefix(start_gateway):
    gw = await start_gateway(gateway_config(backend("a"), backend("b"), backend("c"), admin={"token": TOKEN},
                                            kv_cache_index={"enabled": True},
                                            server={"bind_address": "127.0.0.1:8080", "max_body_bytes": 65536}))
    client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
    first: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which drill for concrete?"}]
    with client:
        def turn(messages: Any) -> tuple[str, str]:
            raw = client.chat.completions.with_raw_response.create(model="demo", messages=messages)
            return raw.headers["x-continuum-request-id"], raw.parse().choices[0].message.content or ""

        rid1, answer = await in_thread(turn, first)
        second = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "And for wood?"}]
        rid2, _ = await in_thread(turn, second)
    async with httpx.AsyncClient(base_url=gw.url, headers={"authorization": f"Bearer {TOKEN}"}) as admin:
        routes = [[e for e in (await admin.get(f"/admin/requests/{rid}/events")).json()["events"]
                   if e["event"] == "kv_route"] for rid in (rid1, rid2)]
        metrics = (await admin.get("/metrics")).text
    (before,), (after,) = routes
    holder = re.search(r"Hello from (\w+)", answer).group(1)
    assert before["backend"] == holder and before["detail"]["reason"] == "below_threshold"
    assert after["backend"] == holder and after["detail"]["reason"] == "overlap"
    assert after["detail"]["held"][holder] > 0 and after["detail"]["total_blocks"] > after["detail"]["held"][holder]
    assert f'routing_kv_decisions_total{{backend="{holder}",reason="overlap"}} 1.0' in metrics
