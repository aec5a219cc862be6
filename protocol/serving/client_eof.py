"""What a client's end of stream (its FIN) means on a hypercorn trio connection.

hypercorn 0.18's trio ``TCPServer`` returns from its read loop on end of
stream but leaves the keep-alive timer task in the connection's nursery, so
the connection's socket is closed only when ``keep_alive_timeout`` (75 s)
ends: a kept-alive connection the client closed while idle sits in
CLOSE-WAIT holding a descriptor, and ordinary client churn exhausts the
process's file descriptors (a CLOSE_WAIT leak on trio is reported in
pgjones/hypercorn#87; 0.18.0, the newest release and the head of its main
branch, still waits for the timer). The subclass below ends the timer when
reading ends, so such a connection is closed at once. Drop it once a
hypercorn release closes the connection on end of stream by itself and
handles a half-closed client as below (``tests/e2e/test_client_eof_e2e.py``
checks both); ``pyproject.toml`` holds hypercorn below 0.19 until then.
``install`` (in ``workers.py`` and ``tests/e2e/conftest.py``) stays for the
HTTP stream below.

A FIN that arrives while a request is being answered is either a client
that half-closed (``shutdown(SHUT_WR)``: it still reads) or one that went
away; TCP cannot tell them apart. hypercorn treats it as going away. Here,
for an HTTP/1.1 request read whole whose answer has not started, the
connection stays open and the peer is probed with an interim
``100 Continue`` (every HTTP/1.1 client skips one it did not ask for): a
peer that closed its socket answers the write with a reset, the next probe
fails, and the app is told ``http.disconnect`` (which cancels the upstream
call). Probes go out at growing intervals, five at most; an answer that
starts meanwhile tells the same way by its own writes. A half-closed client
gets its whole answer, and the connection then closes. A FIN that comes once
the answer is under way is a client that left, as hypercorn takes it.

A client that left is told to its call: each request's HTTP stream
(``ReleasingHTTPStream``, HTTP/1.1 and HTTP/2) puts a ``GoneHook`` in its
ASGI scope and fires it when the stream closes before its answer was
complete (hypercorn's own test for an answer cut short). The call hears it
on the run loop's next round and cancels its scope, unless its answer's
end was already going out (a client may close on reading ``[DONE]``), as
the ``http.disconnect`` the app is still sent would have it; the call needs
no task of its own waiting on ``receive()`` for it.
"""

from __future__ import annotations

from math import inf
from typing import Any

import h11
import trio
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol import h2 as hypercorn_h2
from hypercorn.protocol import h11 as hypercorn_h11
from hypercorn.protocol.events import Request, StreamClosed
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.protocol.http_stream import ASGIHTTPState, HTTPStream
from hypercorn.trio import run as hypercorn_run
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer

from switchyard.protocol.http.asgi import CLIENT_GONE, GoneHook

# Seconds from the client's end of stream to each probe. The first write draws a reset from a peer
# that closed its socket; a later one fails on it. Five: Go's net/http client refuses a sixth interim
# response; Python's http.client, httpx (h11) and curl skip many more.
PROBE_AT = (0.0, 0.05, 0.25, 1.0, 5.0)
CONTINUE = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")


class ReleasingTCPServer(TCPServer):
    """hypercorn's trio connection, closed at once when the client's end of stream leaves nothing owed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reading = True
        self._over = trio.Event()   # the connection is closed, or the peer proved gone

    async def _read_data(self) -> None:
        while True:
            try:
                with trio.fail_after(self.config.read_timeout or inf):
                    data = await self.stream.receive_some(MAX_RECV)
            except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                break
            await self.protocol.handle(RawData(bytes(data)))
            if data == b"":
                if self._answer_owed():
                    await self._probe_until_over()
                break
        self._reading = False
        await self.protocol.handle(Closed())   # the app hears http.disconnect if its answer is unfinished
        await self.idle_task.stop()            # nothing left to time: the nursery ends with the app's task

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData):
            # hypercorn's own, but a failed write also ends the probes.
            async with self.send_lock:
                try:
                    with trio.CancelScope(shield=True):
                        await self.stream.send_all(event.data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._over.set()
                    await self.protocol.handle(Closed())
            return
        if isinstance(event, Closed):
            self._over.set()
        elif isinstance(event, Updated) and event.idle and not self._reading:
            return   # no keep-alive timer for a connection the client has ended
        await super().protocol_send(event)

    def _answer_owed(self) -> bool:
        """An HTTP/1.1 request read whole (the client's side ended after it) whose answer has not started. A FIN
        once the answer is under way is a client that left: a half-closing client ends its side right after
        its request, and a stream's writes could be far apart (the upstream would go on, and cost, till then)."""
        protocol = self.protocol.protocol
        if not isinstance(protocol, H11Protocol) or not isinstance(protocol.stream, HTTPStream):
            return False   # HTTP/2, a websocket, or no request: the end of stream ends the connection
        connection = protocol.connection
        return (isinstance(connection, h11.Connection) and connection.their_http_version == b"1.1"
                and connection.their_state is h11.CLOSED
                and connection.our_state is h11.SEND_RESPONSE and not self._over.is_set())

    async def _probe_until_over(self) -> None:
        began = trio.current_time()
        for at in PROBE_AT:
            with trio.move_on_at(began + at):
                await self._over.wait()
            if self._over.is_set():
                return
            protocol = self.protocol.protocol   # HTTP/1.1, as _answer_owed found
            connection = protocol.connection if isinstance(protocol, H11Protocol) else None
            # Once the answer started, its writes probe.
            if isinstance(connection, h11.Connection) and connection.our_state is h11.SEND_RESPONSE:
                await self.protocol_send(RawData(connection.send(CONTINUE)))
        await self._over.wait()


class ReleasingHTTPStream(HTTPStream):
    """hypercorn's HTTP stream, whose request's call is told by it that its client left (``GoneHook``)."""

    gone: GoneHook | None = None

    async def handle(self, event: Any) -> None:
        if isinstance(event, StreamClosed) and not self.closed and self.gone is not None \
                and self.state is not ASGIHTTPState.CLOSED:
            self.gone.fire()   # the answer is unfinished: hypercorn's own test (it logs it as cut short)
        await super().handle(event)
        if isinstance(event, Request) and not self.closed:
            # The app was spawned by the handling above, and has not run yet: it finds the hook.
            self.gone = GoneHook()
            extensions: dict[str, Any] = self.scope["extensions"]   # ASGI's extensions: any server's own keys
            extensions[CLIENT_GONE] = self.gone


def install() -> None:
    """Serve hypercorn's trio connections with ``ReleasingTCPServer``, their requests with
    ``ReleasingHTTPStream``, in this process (every worker calls it)."""
    hypercorn_run.TCPServer = ReleasingTCPServer  # type: ignore[attr-defined]  # a module global, not re-exported
    hypercorn_h11.HTTPStream = ReleasingHTTPStream  # type: ignore[attr-defined]  # imported there, not re-exported
    hypercorn_h2.HTTPStream = ReleasingHTTPStream  # type: ignore[attr-defined]
