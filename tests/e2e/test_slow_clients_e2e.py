"""Connections that misbehave, over real sockets: slow bodies and headers, ambiguous framing, h2c.

CI runs this file ten times over (``SWITCHYARD_REPEAT=10`` in ``.ci/run``).
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
import trio

from tests.e2e.support import backend, gateway_config

REPEAT = int(os.environ.get("SWITCHYARD_REPEAT", "1"))
CHAT = json.dumps({"model": "demo", "messages": [{"role": "user", "content": "hi"}]}).encode()


def config(**server):
    out = gateway_config(backend("sim-a"))
    out["server"] = server
    return out


async def open_raw(url: str) -> trio.SocketStream:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


async def read_until_closed(stream: trio.SocketStream, within: float) -> bytes:
    """Everything the server sends until it closes the connection (fails if it is still open after ``within``)."""
    data = b""
    with trio.fail_after(within):
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


def head(path: str, length: int, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "host: gateway", "content-type: application/json",
             f"content-length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize("round_", range(REPEAT))
async def test_slow_bodies_hold_no_slot_and_end_in_408_after_the_body_deadline(start_gateway, round_):
    gw = await start_gateway(config(max_concurrent_requests=1, request_body_timeout="1s",
                                    request_body_idle_timeout="500ms"))
    async with trio.open_nursery() as nursery:
        answers: list[bytes] = []

        async def slowloris() -> None:
            stream = await open_raw(gw.url)
            await stream.send_all(head("/v1/chat/completions", 100_000) + b"{")
            for _ in range(20):   # a byte every 200 ms: each pause within the idle limit, the whole past 1 s
                await trio.sleep(0.2)
                try:
                    await stream.send_all(b" ")
                except trio.BrokenResourceError:
                    break
            answers.append(await read_until_closed(stream, within=3))

        for _ in range(5):
            nursery.start_soon(slowloris)
        await trio.sleep(0.3)
        async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:   # the one slot is free
            reply = await http.post("/v1/chat/completions", content=CHAT, headers={"content-type": "application/json"})
        assert reply.status_code == 200, reply.text
    assert len(answers) == 5
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b"request_timeout" in answer and b"server.request_body_timeout" in answer
    assert gw.app.active_requests == 0


@pytest.mark.parametrize("round_", range(REPEAT))
async def test_a_connection_that_never_finishes_its_headers_is_closed_after_keep_alive_timeout(start_gateway,
                                                                                                round_):
    gw = await start_gateway(config(keep_alive_timeout="1s"))
    stream = await open_raw(gw.url)
    began = trio.current_time()
    await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n")
    with trio.move_on_after(0.3):
        while True:   # a header line now and then, never the blank line that ends them
            await stream.send_all(b"x-slow: 1\r\n")
            await trio.sleep(0.1)
    assert await read_until_closed(stream, within=3) == b""
    assert 0.9 < trio.current_time() - began < 2.5


async def test_transfer_encoding_with_content_length_is_400_and_the_connection_closes(start_gateway):
    gw = await start_gateway(config())
    stream = await open_raw(gw.url)
    chunked = hex(len(CHAT))[2:].encode() + b"\r\n" + CHAT + b"\r\n0\r\n\r\n"
    await stream.send_all(head("/v1/chat/completions", 4, "transfer-encoding: chunked") + chunked
                          + head("/v1/chat/completions", len(CHAT)) + CHAT)   # a second request, never read
    answer = await read_until_closed(stream, within=3)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"ambiguous_request_framing" in answer
    assert answer.count(b"HTTP/1.1 ") == 1


async def test_h2c_is_refused_with_505_when_http2_cleartext_is_off(start_gateway):
    gw = await start_gateway(config())
    async with httpx.AsyncClient(base_url=gw.url, http1=False, http2=True, timeout=5) as http:
        reply = await http.post("/v1/chat/completions", content=CHAT, headers={"content-type": "application/json"})
    assert reply.http_version == "HTTP/2"
    assert reply.status_code == 505
    assert reply.json()["error"]["code"] == "http_version_not_supported"


async def test_h2c_serves_calls_when_http2_cleartext_is_on(start_gateway):
    gw = await start_gateway(config(http2_cleartext=True))
    async with httpx.AsyncClient(base_url=gw.url, http1=False, http2=True, timeout=5) as http:
        reply = await http.post("/v1/chat/completions", content=CHAT, headers={"content-type": "application/json"})
    assert (reply.http_version, reply.status_code) == ("HTTP/2", 200)
