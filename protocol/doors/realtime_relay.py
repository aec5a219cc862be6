"""One open realtime session: both directions relayed at once, and how it ends.

Every hop is bounded (hypercorn's app queue, trio-websocket's one-message
queue, each send waiting on its socket), so a slow reader slows its writer
instead of growing memory. The first end wins and stops everything at once;
then whichever side is still listening is told, in close codes it can take:
the upstream's code and reason go to the client; a client that left closes
the upstream with 1000 "client disconnected" (hypercorn reports 1006 for any
client close, never the client's own code); idleness and a drain close
both.
"""

from __future__ import annotations

from typing import Any

import trio
from attrs import frozen
from trio_websocket import ConnectionClosed, WebSocketConnection

from switchyard.protocol.http.asgi import Receive, Send, clip

CLOSE_GRACE = 2.0        # seconds the closing handshake with the upstream may take
# Close codes that describe a close locally and never go on the wire (RFC 6455, 7.4.1).
LOCAL_ONLY = frozenset({1005, 1006, 1015})


@frozen
class End:
    """How a session ended, and what each side still listening is told."""

    by: str              # client | upstream | idle | shutdown
    client_code: int     # what the client got (or, when it left, what its server reported)
    upstream_code: int   # what the upstream got (or sent, when it closed)
    reason: str


SHUTDOWN = End("shutdown", 1001, 1001, "server shutting down")


class Relay:
    """The client (ASGI ``receive``/``send``) and one open upstream socket, message by message."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self.receive, self.send = receive, send
        self.end: End | None = None
        self.last = 0.0              # when the last message went either way (the idle clock)
        self.to_upstream = self.to_client = 0
        self.pending: dict[str, Any] | None = None   # a client message read before the relay started
        self._scope: trio.CancelScope | None = None

    def finish(self, end: End) -> None:
        """End the session (the first end wins): the relay stops at once and tells both sides."""
        if self.end is None:
            self.end = end
        if self._scope is not None:
            self._scope.cancel()

    async def run(self, upstream: WebSocketConnection, idle_timeout: float) -> End:
        """Relay until an end; then close the upstream and the client as the end says."""
        self.last = trio.current_time()
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            if self.end is None:   # not ended already (the client left, or a drain) while the accept went out
                nursery.start_soon(self._client_to_upstream, upstream)
                nursery.start_soon(self._upstream_to_client, upstream)
                nursery.start_soon(self._idle, idle_timeout)
        end = self.end
        assert end is not None
        if end.by != "upstream":
            with trio.move_on_after(CLOSE_GRACE):
                await upstream.aclose(end.upstream_code, end.reason)
        if end.by != "client":
            await self.send({"type": "websocket.close", "code": end.client_code, "reason": clip(end.reason)})
        return end

    async def _client_to_upstream(self, upstream: WebSocketConnection) -> None:
        pending, self.pending = self.pending, None
        while True:
            message = pending or await self.receive()
            pending = None
            if message["type"] == "websocket.disconnect":
                self.finish(client_end(message))
                return
            data = message.get("text")
            if data is None:
                data = message.get("bytes")
            if message["type"] != "websocket.receive" or data is None:
                continue
            self.last = trio.current_time()
            try:
                await upstream.send_message(data)
            except ConnectionClosed:
                await trio.sleep_forever()   # the upstream is closing: its reader ends the session with its code
            self.to_upstream += 1

    async def _upstream_to_client(self, upstream: WebSocketConnection) -> None:
        while True:
            try:
                message = await upstream.get_message()
            except ConnectionClosed as closed:
                self.finish(upstream_end(closed.reason))
                return
            self.last = trio.current_time()
            if isinstance(message, str):
                await self.send({"type": "websocket.send", "text": message})
            else:
                await self.send({"type": "websocket.send", "bytes": message})
            self.to_client += 1

    async def _idle(self, timeout: float) -> None:
        while True:
            deadline = self.last + timeout
            if trio.current_time() >= deadline:
                self.finish(End("idle", 1000, 1000, f"idle timeout: no message either way for {timeout:g}s"))
                return
            await trio.sleep_until(deadline)


def client_end(message: dict[str, Any]) -> End:
    """The client left (``websocket.disconnect``): hypercorn says 1006 for every close the client began;
    a server that reports a real code has it passed on."""
    code = int(message.get("code", 1005))
    return End("client", code, code if sendable(code) else 1000, "client disconnected")


def upstream_end(reason: Any) -> End:
    """The upstream closed: its code and reason for the client, made sendable where they describe no frame."""
    code = reason.code if reason is not None else 1006
    text = (reason.reason if reason is not None else None) or ""
    if code == 1005:     # a close frame without a code
        return End("upstream", 1000, code, text)
    if code in LOCAL_ONLY:   # no close frame at all: the connection broke
        return End("upstream", 1011, code, text or "upstream connection lost")
    return End("upstream", code, code, text)


def sendable(code: int) -> bool:
    """Whether ``code`` may go in a close frame (RFC 6455, 7.4)."""
    return (1000 <= code <= 1011 and code not in LOCAL_ONLY and code != 1004) or 3000 <= code <= 4999
