"""End-to-end: kv_cache_index through the official openai SDK on a real socket: a conversation's second
turn goes to the simulated engine that served its first (the gateway's own record of what it sent where),
and a call goes to the engine whose KV events (vLLM's ZMQ wire, from a publisher the test runs) say it holds
the prompt, as the ``kv_route`` event behind the answer's ``x-continuum-request-id`` says; ``/metrics``
counts it."""

from __future__ import annotations

import re
from typing import Any

import httpx
import openai
import trio

from switchyard.actors.kv.sim_tokens import SimulatedTokenizer
from tests.e2e.support import backend, gateway_config, in_thread
from tests.kv.publisher import VllmPublisher, stored

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


async def test_the_engine_whose_events_say_it_holds_the_prompt_gets_the_call(start_gateway):
    """Event-fed: vLLM's publisher (its exact ZMQ wire) tells the gateway engine `b` stored the prompt's
    blocks; the call goes to `b` for its overlap, not to `a` whose turn round robin would give it."""
    publishers = {name: VllmPublisher(replay=False) for name in ("a", "b")}
    try:
        sources = {name: {"endpoint": p.endpoint} for name, p in publishers.items()}
        gw = await start_gateway(gateway_config(backend("a"), backend("b"), admin={"token": TOKEN},
                                                kv_cache_index={"enabled": True, "event_sources": sources},
                                                server={"bind_address": "127.0.0.1:8080", "max_body_bytes": 65536}))
        with trio.fail_after(5):
            for p in publishers.values():
                await p.subscribed()
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which saw for plywood?"}]
        tokens = SimulatedTokenizer().chat(messages)
        blocks = len(tokens) // 16
        publishers["b"].publish([stored(list(range(100, 100 + blocks)), None, tokens[:blocks * 16], block_size=16)])
        async with httpx.AsyncClient(base_url=gw.url, headers={"authorization": f"Bearer {TOKEN}"}) as admin:
            with trio.fail_after(5):
                while True:
                    index = {b["name"]: b["kv_index"] for b in (await admin.get("/admin/backends")).json()["backends"]}
                    if index["a"]["state"] == "events" and index["b"]["entries"] == blocks:
                        break
                    await trio.sleep(0.02)
            client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
            with client:
                raw = await in_thread(client.chat.completions.with_raw_response.create, model="demo",
                                      messages=messages)
            rid = raw.headers["x-continuum-request-id"]
            [route] = [e for e in (await admin.get(f"/admin/requests/{rid}/events")).json()["events"]
                       if e["event"] == "kv_route"]
        assert (route["backend"], route["detail"]["reason"]) == ("b", "overlap")
        assert route["detail"]["held"] == {"a": 0, "b": blocks}
        assert "Hello from b" in (raw.parse().choices[0].message.content or "")
    finally:
        for p in publishers.values():
            p.close()
