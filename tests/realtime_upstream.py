"""A simulated realtime upstream: a trio-websocket server that answers realtime events, for the tests.

It speaks a small part of OpenAI's realtime protocol: ``session.created`` on
open, ``response.create`` answered with ``response.created``, two
``response.output_text.delta`` events and ``response.done``; any other event
comes back as ``test.echo``, bytes come back as they are, and a
``{"type": "test.close", "code": ..., "reason": ...}`` event makes it close
with that code and reason. It records every handshake it saw and how each
session ended from its side.

``serve`` runs it on 127.0.0.1 (end-to-end tests); ``open`` stands in for
``trio_websocket.open_websocket_url`` over an in-memory stream (harness tests
under MockClock, where real sockets and virtual time do not mix).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, AsyncIterator
from urllib.parse import parse_qs, urlsplit

import attrs
import trio
import trio.testing
from trio_websocket import (
    CloseReason,
    ConnectionClosed,
    ConnectionTimeout,
    HandshakeError,
    WebSocketConnection,
    WebSocketRequest,
    serve_websocket,
    wrap_client_stream,
    wrap_server_stream,
)


@attrs.define
class Seen:
    """One handshake as the upstream saw it, and the session that followed."""

    path: str
    headers: dict[bytes, bytes]
    subprotocols: tuple[str, ...]
    received: list[str | bytes] = attrs.Factory(list)
    closed: CloseReason | None = None       # the close the upstream received (None: it closed first, or none yet)
    ended: trio.Event = attrs.Factory(trio.Event)

    @property
    def model(self) -> str:
        return parse_qs(urlsplit(self.path).query)["model"][0]


class RealtimeUpstream:
    def __init__(self, reject: tuple[int, bytes] | None = None, unreachable: bool = False,
                 stall: bool = False) -> None:
        self.reject = reject                # answer every handshake with this HTTP status and body
        self.unreachable = unreachable      # (in memory) refuse the TCP connection itself
        self.stall = stall                  # (in memory) never answer the handshake
        self.sessions: list[Seen] = []
        self.opened = trio.Event()          # the first handshake arrived

    async def handle(self, request: WebSocketRequest) -> None:
        seen = Seen(request.path, {k.lower(): v for k, v in request.headers}, tuple(request.proposed_subprotocols))
        self.sessions.append(seen)
        self.opened.set()
        try:
            if self.reject is not None:
                status, body = self.reject
                await request.reject(status, extra_headers=[(b"content-type", b"application/json")], body=body)
                return
            chosen = "realtime" if "realtime" in seen.subprotocols else None   # as OpenAI's server does
            ws = await request.accept(subprotocol=chosen)
            await self._session(ws, seen)
        finally:
            seen.ended.set()

    async def _session(self, ws: WebSocketConnection, seen: Seen) -> None:
        await ws.send_message(json.dumps({"type": "session.created", "session": {"model": seen.model}}))
        try:
            while True:
                message = await ws.get_message()
                seen.received.append(message)
                if isinstance(message, bytes):
                    await ws.send_message(message)
                    continue
                event = json.loads(message)
                kind = event.get("type")
                if kind == "test.close":
                    await ws.aclose(event.get("code", 1000), event.get("reason"))
                    return
                if kind == "response.create":
                    for out in _response():
                        await ws.send_message(json.dumps(out))
                else:
                    await ws.send_message(json.dumps({"type": "test.echo", "event": event}))
        except ConnectionClosed as closed:
            seen.closed = closed.reason

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on 127.0.0.1 (an ephemeral port); ``nursery.start`` returns the server (``.port``)."""
        await serve_websocket(self.handle, "127.0.0.1", 0, None, task_status=task_status, disconnect_timeout=2)

    @contextlib.asynccontextmanager
    async def open(self, url: str, *, subprotocols: Any = None, extra_headers: Any = None,
                   max_message_size: int = 2**20, connect_timeout: float = 10, disconnect_timeout: float = 2,
                   **_: Any) -> AsyncIterator[WebSocketConnection]:
        """``open_websocket_url`` over an in-memory stream to this upstream (same errors: HandshakeError,
        ConnectionRejected)."""
        if self.unreachable:
            raise HandshakeError() from OSError(f"all attempts to connect to {urlsplit(url).netloc} failed")
        parts = urlsplit(url)
        client, server = trio.testing.memory_stream_pair()
        try:
            async with trio.open_nursery() as nursery:
                async def upstream_side() -> None:
                    request = await wrap_server_stream(nursery, server)
                    await self.handle(request)
                nursery.start_soon(upstream_side)
                with trio.move_on_after(connect_timeout) as waited:
                    if self.stall:
                        await trio.sleep_forever()
                    ws = await wrap_client_stream(nursery, client, parts.netloc, f"{parts.path}?{parts.query}",
                                                  subprotocols=subprotocols, extra_headers=extra_headers,
                                                  max_message_size=max_message_size)
                if waited.cancelled_caught:
                    raise ConnectionTimeout()
                try:
                    yield ws
                finally:
                    # Both sides end on their own once closed; the deadline only bounds a hung close.
                    nursery.cancel_scope.deadline = trio.current_time() + disconnect_timeout
                    await ws.aclose()
        except BaseExceptionGroup as group:   # the reader task's ConnectionRejected, as open_websocket_url raises it
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise


def _response() -> list[dict[str, Any]]:
    return [{"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
            {"type": "response.output_text.delta", "response_id": "resp_1", "delta": "Hello"},
            {"type": "response.output_text.delta", "response_id": "resp_1", "delta": " there"},
            {"type": "response.done", "response": {"id": "resp_1", "status": "completed"}}]
