"""End-to-end: routing.cache_affinity through the official openai SDK on a real socket: calls passing
``prompt_cache_key`` (chat completions and Responses) stay on one of three deployments, which the route
events behind each answer's ``x-continuum-request-id`` name, and the key reaches it unchanged."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.support import backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TOKEN = "test-admin-token-0123456789"


async def test_prompt_cache_key_keeps_one_deployment_through_the_sdk(start_gateway):
    gw = await start_gateway(gateway_config(backend("a"), backend("b"), backend("c"), admin={"token": TOKEN},
                                            routing={"cache_affinity": {"enabled": True}}))
    client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
    messages: Any = [{"role": "user", "content": "hi"}]
    with client:
        def chats() -> list[str]:
            return [client.chat.completions.with_raw_response.create(
                model="demo", messages=messages, prompt_cache_key="team-7").headers["x-continuum-request-id"]
                for _ in range(3)]

        def responses() -> str:
            return client.responses.with_raw_response.create(
                model="demo", input="hi", prompt_cache_key="team-7").headers["x-continuum-request-id"]

        ids = await in_thread(chats) + [await in_thread(responses)]
    async with httpx.AsyncClient(base_url=gw.url, headers={"authorization": f"Bearer {TOKEN}"}) as admin:
        placed = [[e for e in (await admin.get(f"/admin/requests/{rid}/events")).json()["events"]
                   if e["event"] == "cache_affinity"] for rid in ids]
    assert all(len(p) == 1 for p in placed)
    served = {p[0]["backend"] for p in placed}
    assert len(served) == 1 and all(p[0]["detail"]["key"] == "prompt_cache_key" for p in placed)
    home = served.pop()
    got = [json.loads(r.content) for r in gw.sim(home).requests if r.method == "POST"]
    assert [b["prompt_cache_key"] for b in got] == ["team-7"] * 4
    others = [r for name in "abc" if name != home for r in gw.sim(name).requests if r.method == "POST"]
    assert not others
