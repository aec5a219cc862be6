"""Slow request bodies: the body deadlines, and the concurrency slot counted only once the body is in (MockClock)."""

from __future__ import annotations

import json
from typing import Any

import trio

from tests.harness import Reply, chat, gateway, request

CONFIG = """
server: {max_concurrent_requests: 2, request_body_timeout: 30s, request_body_idle_timeout: 10s}
health_checks: {interval: 1h}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}}
"""

BODY = json.dumps(chat()).encode()


async def trickle(app: Any, path: str, pieces: list[bytes], every: float | list[float],
                  headers: list[tuple[bytes, bytes]] | None = None) -> Reply:
    """A client that sends ``pieces`` of a body one by one, ``every`` seconds apart (or after each delay given)."""
    reply = Reply()
    queue = list(pieces)
    delays = list(every) if isinstance(every, list) else [every] * len(pieces)

    async def receive() -> dict[str, Any]:
        if not queue:
            await trio.sleep_forever()
        await trio.sleep(delays.pop(0))
        piece = queue.pop(0)
        return {"type": "http.request", "body": piece, "more_body": bool(queue)}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status, reply.headers = message["status"], dict(message["headers"])
        elif message.get("body"):
            reply.chunks.append((trio.current_time(), message["body"]))
            reply.ended_at = trio.current_time()

    scope = {"type": "http", "method": "POST", "path": path, "headers": headers or []}
    await app(scope, receive, send)
    return reply


def one_byte_at_a_time(body: bytes) -> list[bytes]:
    return [body[i:i + 1] for i in range(len(body))]


async def test_a_body_pausing_past_request_body_idle_timeout_is_408_at_that_instant(autojump_clock):
    async with gateway(CONFIG) as app:
        t0 = trio.current_time()
        reply = await trickle(app, "/v1/chat/completions", [BODY[:10], BODY[10:]], every=[9, 11])
        assert reply.status == 408
        assert reply.ended_at == t0 + 9 + 10   # the first piece at 9 s, then 10 s of silence
        error = reply.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "request_timeout")
        assert "server.request_body_idle_timeout" in error["message"]
        assert reply.headers[b"connection"] == b"close"   # the rest of the body is never read


async def test_a_body_trickling_past_request_body_timeout_is_408_at_that_instant(autojump_clock):
    async with gateway(CONFIG) as app:
        t0 = trio.current_time()
        reply = await trickle(app, "/v1/chat/completions", one_byte_at_a_time(BODY), every=5)
        assert reply.status == 408
        assert reply.ended_at == t0 + 30
        assert "server.request_body_timeout" in reply.json()["error"]["message"]


async def test_a_slow_body_within_its_deadlines_is_served(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await trickle(app, "/v1/chat/completions", [BODY[:20], BODY[20:40], BODY[40:]], every=9)
        assert reply.status == 200, reply.body


async def test_the_body_timeout_answers_in_the_anthropic_shape_on_the_messages_door(autojump_clock):
    async with gateway(CONFIG) as app:
        body = json.dumps({"model": "demo", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        reply = await trickle(app, "/anthropic/v1/messages", [body[:5].encode(), body[5:].encode()], every=[1, 60])
        assert reply.status == 408
        assert reply.json()["type"] == "error" and reply.json()["error"]["type"] == "invalid_request_error"


async def test_a_client_still_sending_its_body_holds_no_concurrency_slot(autojump_clock):
    async with gateway(CONFIG) as app, trio.open_nursery() as nursery:
        t0 = trio.current_time()
        slow: list[int] = []

        async def slowloris() -> None:
            slow.append((await trickle(app, "/v1/chat/completions", one_byte_at_a_time(BODY), every=5)).status)

        for _ in range(10):   # ten sockets trickling bodies, with room for two calls
            nursery.start_soon(slowloris)
        await trio.sleep(12)
        assert app.active_requests == 0
        for path, body in [("/v1/chat/completions", chat()), ("/v1/completions", {"model": "demo", "prompt": "hi"}),
                           ("/v1/embeddings", {"model": "demo", "input": "hi"})]:
            assert (await request(app, "POST", path, body)).status == 200, path
        await trio.sleep_until(t0 + 31)
        assert slow == [408] * 10 and app.active_requests == 0


async def test_slots_are_free_again_after_the_body_deadline(autojump_clock):
    """Once a body is in, its call counts; a trickler past the deadline leaves nothing behind."""
    config = CONFIG.replace("latency: 10ms", "latency: 20s")
    async with gateway(config) as app, trio.open_nursery() as nursery:
        t0 = trio.current_time()
        for _ in range(2):   # two calls whose bodies came, each holding a slot for 20 s
            nursery.start_soon(request, app, "POST", "/v1/chat/completions", chat())
        nursery.start_soon(trickle, app, "/v1/chat/completions", one_byte_at_a_time(BODY), 5)
        await trio.sleep(1)
        assert app.active_requests == 2
        refused = await request(app, "POST", "/v1/chat/completions", chat())
        assert (refused.status, refused.json()["error"]["code"]) == (503, "too_many_concurrent_requests")
        await trio.sleep_until(t0 + 31)
        assert app.active_requests == 0
        assert (await request(app, "POST", "/v1/chat/completions", chat())).status == 200
