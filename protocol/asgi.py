"""ASGI plumbing shared by the routes: types, plain answers, the request body, the sink a call writes to.

Hypercorn does not cancel an ASGI app when its client goes away, so every
call gets a ``disconnected`` awaitable that waits on ``receive()`` for
``http.disconnect``.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from protocol.errors import BodyTooLarge, GatewayError

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON = [(b"content-type", b"application/json")]


SSE_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class AsgiSink:
    """A ResponseSink over ASGI ``send``; knows how to fail before and after start."""

    __slots__ = ("_send", "streaming", "started", "finished", "status")

    def __init__(self, send: Send, streaming: bool) -> None:
        self._send = send
        self.streaming = streaming
        self.started = False
        self.finished = False
        self.status = 0

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        self.status = status
        if self.streaming:
            headers = headers + SSE_HEADERS
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def send(self, chunk: bytes) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def finish(self) -> None:
        self.finished = True
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def fail(self, error: GatewayError) -> None:
        if not self.started:
            await respond(self._send, error.status, error.body(), error.headers())
            self.status = error.status
            return
        if self.streaming:
            # Mid-stream: the status line is gone; an SSE error event is what
            # OpenAI SDKs raise on. No [DONE] follows, so nobody mistakes the
            # stream for complete.
            await self.send(b"data: " + error.body() + b"\n\n")
        await self.finish()


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] = JSON) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise BodyTooLarge(f"Request body is {int(value)} bytes; the limit is {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"Request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class ClientGone(Exception):
    """The client left before its request body arrived; nobody to answer."""


def disconnect_waiter(receive: Receive) -> Callable[[], Awaitable[None]]:
    async def wait() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
    return wait
