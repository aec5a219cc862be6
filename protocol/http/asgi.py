"""ASGI plumbing shared by the routes: types, plain answers, the request body, the sink a call writes to,
a refused websocket handshake.

Hypercorn does not cancel an ASGI app when its client goes away, so every
call gets a ``disconnected`` awaitable that waits on ``receive()`` for
``http.disconnect``, or, under the gateway's own hypercorn connection
(``protocol/serving/client_eof.py``), a ``GoneHook`` in the scope that
the connection fires itself: the call then needs no task watching it.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Iterable

import trio

from switchyard.actors.errors import BodyTooLarge, GatewayError, RequestBodyTimeout
from switchyard.actors.ids import random_hex
from switchyard.config.schema import ServerConfig

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

log = logging.getLogger("switchyard")

JSON = [(b"content-type", b"application/json")]
TIMING = "switchyard.timing"   # the scope's key of the request's Timing (actors/timing.py: its Server-Timing)


SSE_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


def new_request_id() -> str:
    """The gateway's own id of a request (``x-continuum-request-id``): unique, not secret."""
    return "req_" + random_hex(16)


class AsgiSink:
    """A ResponseSink over ASGI ``send``; knows how to fail before and after start.

    A buffered answer is held until ``finish`` and goes out as one message with
    its ``content-length``: no chunked encoding, one write instead of three.
    """

    __slots__ = ("_send", "streaming", "started", "finished", "status", "_held", "_body")

    def __init__(self, send: Send, streaming: bool) -> None:
        self._send = send
        self.streaming = streaming
        self.started = False
        self.finished = False
        self.status = 0
        self._held: list[tuple[bytes, bytes]] | None = None   # a buffered answer's headers, not yet sent
        self._body: list[bytes] = []

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        self.status = status
        if not self.streaming:
            self._held = headers
            return
        await self._send({"type": "http.response.start", "status": status, "headers": headers + SSE_HEADERS})

    async def send(self, chunk: bytes) -> None:
        if self._held is not None:
            self._body.append(chunk)
            return
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def finish(self) -> None:
        self.finished = True
        if self._held is not None:
            headers, self._held = self._held, None
            body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            self._body = []
            await respond(self._send, self.status, body, headers)
            return
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def fail(self, error: GatewayError) -> None:
        if not self.started or self._held is not None:
            # Nothing went out yet (a held buffered answer included): the error gets its own status. Finished
            # before its last write, as in ``finish``: the server reports the disconnect during that write,
            # and the call's watcher must not take it for a client leaving (cancelled there, hypercorn's
            # connection lost its keep-alive timer, and a drain waited its whole window for it).
            self._held, self._body = None, []
            self.finished = True
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
    """A whole answer: its length known, so the server neither chunks it nor writes it twice."""
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def whole(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """An answer's headers say its length (``respond``'s): its whole body goes with them, not a stream."""
    for name, _ in headers:
        if name == b"content-length":
            return True
    return False


async def refuse_handshake(scope: Scope, send: Send, err: GatewayError, headers: list[tuple[bytes, bytes]]) -> None:
    """Refuse a websocket handshake: an HTTP answer in our envelope (with ``headers``) where the server offers
    the ASGI ``websocket.http.response`` extension, else a 1008 close that names the error."""
    if "websocket.http.response" in (scope.get("extensions") or {}):
        body = err.body()
        headers = [*err.headers(), *headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "websocket.http.response.start", "status": err.status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body, "more_body": False})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": clip(f"{err.status} {err.code}: {err.message}")})


def clip(reason: str) -> str:
    """A close reason fits 123 bytes of UTF-8."""
    data = reason.encode()
    return reason if len(data) <= 123 else data[:123].decode("utf-8", "ignore")


BODY_READ = "switchyard.body_read"   # set on the scope once read_body has read the whole body


async def read_body(scope: Scope, receive: Receive, limit: int, server: ServerConfig) -> bytes:
    """The whole request body, at most ``limit`` bytes, within ``server.request_body_timeout`` and with no
    pause over ``server.request_body_idle_timeout``.

    A client that trickles its body (slowloris) is answered 408 once either
    deadline passes instead of holding its connection, and whatever it holds,
    for as long as it likes.
    """
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise BodyTooLarge(f"Request body is {int(value)} bytes; the limit is {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    timeout, idle_timeout = server.request_body_timeout, server.request_body_idle_timeout
    # One cancel scope for both deadlines (one per call is what it costs): its deadline is the
    # nearer of the whole body's and the next piece's, moved on after every piece.
    now = trio.current_time()
    whole = now + timeout
    with trio.CancelScope(deadline=min(whole, now + idle_timeout)) as waiting:
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
                scope[BODY_READ] = True   # the connection can carry another request (see unread_body)
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
            waiting.deadline = min(whole, trio.current_time() + idle_timeout)
    assert waiting.cancelled_caught
    if waiting.deadline < whole:
        raise RequestBodyTimeout(
            f"The request body paused for more than {idle_timeout:g}s "
            f"(server.request_body_idle_timeout) after {size} bytes")
    raise RequestBodyTimeout(f"The request body did not arrive within {timeout:g}s "
                             f"(server.request_body_timeout); {size} bytes came")


def unread_body(scope: Scope) -> bool:
    """The request said a body follows (a Content-Length above 0, or Transfer-Encoding) and ``read_body``
    did not read it to its end: answered now, the server closes the connection after the answer, which
    should say ``Connection: close`` so a client does not reuse it. Asked on the error path only."""
    if scope.get(BODY_READ):
        return False
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"0", b"")):
            return True
    return False


class ClientGone(Exception):
    """The client left before its request body arrived; nobody to answer."""


CLIENT_GONE = "switchyard.client_gone"   # the scope's extension holding the request's GoneHook (the server's)


class GoneHook:
    """Told by the server's side of the connection, in its own task, that the client left before the answer
    was complete (``protocol/serving/client_eof.py``); it calls what the request's call gave it.

    The call is told on the run loop's next round, not at once: a client may close the moment it has read
    the answer's last event (the openai SDK does, right after ``[DONE]``, before the body's end), while the
    call, runnable again once that last write is out, has yet to mark its answer finished; waiting a round
    usually lets it. What makes a stream's end certain is the call's own check when told (the relay's
    ``ending``, set before the end goes out: ``RequestActor._answer_out``)."""

    __slots__ = ("callback",)

    def __init__(self) -> None:
        self.callback: Callable[[], None] | None = None

    def fire(self) -> None:
        if self.callback is not None:
            trio.lowlevel.current_trio_token().run_sync_soon(self._tell)

    def _tell(self) -> None:
        try:
            if self.callback is not None:
                self.callback()
        except Exception:   # ours, in the run loop's own task: logged, never the run's end
            log.exception("telling a call that its client left failed")


class ClientLink:
    """A call's ``disconnected``: awaited, it returns once the client has gone (``receive()`` said so);
    ``subscribe(callback)`` asks the server to call ``callback`` instead, True when it will (the scope holds
    its GoneHook), so the call starts no task to wait. Per open stream that task's pending ``receive()``,
    its frames and its two steps cost about 2.4 KB and 85k instructions."""

    __slots__ = ("_receive", "_scope")

    def __init__(self, receive: Receive, scope: Scope | None) -> None:
        self._receive, self._scope = receive, scope

    async def __call__(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass

    def subscribe(self, callback: Callable[[], None]) -> bool:
        gone = (self._scope.get("extensions") or {}).get(CLIENT_GONE) if self._scope is not None else None
        if gone is None:
            return False
        gone.callback = callback
        return True


def disconnect_waiter(receive: Receive, scope: Scope | None = None) -> ClientLink:
    """The call's ``disconnected``; without the request's ``scope``, it can only wait on ``receive()``."""
    return ClientLink(receive, scope)
