"""RequestActor: one per call. Picks a backend, dispatches, relays.

It owns a nursery holding the upstream attempt and a watcher on the client
connection: when the client goes away the whole nursery is cancelled, which
closes the upstream connection at once. Bytes are relayed as they arrive; the
stream is only scanned for its closing ``[DONE]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

import trio

from actors.messages import Call, PassiveReport
from protocol.errors import (
    GatewayError,
    UpstreamFailure,
    UpstreamProtocolError,
    UpstreamStatusError,
    map_upstream_exceptions,
)
from protocol.upstream import auth_headers, join_url

if TYPE_CHECKING:
    from actors.runtime import Runtime

DONE_EVENT = b"data: [DONE]\n\n"
# Statuses that say the backend itself is in trouble (not the request).
UNHEALTHY_STATUSES = frozenset({502, 503, 504})


class ResponseSink(Protocol):
    """Where the response goes; the protocol layer implements it per ingress."""

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None: ...
    async def send(self, chunk: bytes) -> None: ...
    async def finish(self) -> None: ...
    async def fail(self, error: GatewayError) -> None: ...


class RequestActor:
    def __init__(self, runtime: "Runtime", call: Call, sink: ResponseSink,
                 disconnected: Callable[[], Awaitable[None]]) -> None:
        self.runtime = runtime
        self.call = call
        self.sink = sink
        self.disconnected = disconnected

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_client, nursery.cancel_scope)
            try:
                await self._serve()
            except GatewayError as err:
                await self.sink.fail(err)
            nursery.cancel_scope.cancel()

    async def _watch_client(self, scope: trio.CancelScope) -> None:
        await self.disconnected()
        scope.cancel()

    async def _serve(self) -> None:
        rt, call = self.runtime, self.call
        backend = rt.pool.choose(call, rt.health.view, rt.discovery.view)
        headers = [("content-type", "application/json"), *auth_headers(backend)]
        request = rt.upstream.client.build_request(
            "POST", join_url(backend.url, "/v1/chat/completions"), headers=headers, content=call.body)
        with rt.pool.dispatched(backend.name):
            began = trio.current_time()
            try:
                with map_upstream_exceptions(backend.name):
                    response = await rt.upstream.client.send(request, stream=True)
                    try:
                        status = response.status_code
                        if status >= 400:
                            raise UpstreamStatusError(backend.name, status, await response.aread(),
                                                      response.headers.get("content-type", "").encode(),
                                                      response.headers.get("retry-after"))
                        if status >= 300:
                            raise UpstreamProtocolError(
                                f"Backend '{backend.name}' answered a redirect (HTTP {status}); "
                                "point its url at the API itself", details={"status": status})
                        # error answers can be fast; only successes say how quick a backend is
                        rt.pool.observe_latency(backend.name, trio.current_time() - began)
                        await self._relay(response)
                    finally:
                        await response.aclose()
            except UpstreamFailure as err:
                if not isinstance(err, UpstreamStatusError) or err.status in UNHEALTHY_STATUSES:
                    rt.health.report(PassiveReport(backend.name, ok=False, error=err.message))
                raise
        record = rt.health.view.backends.get(backend.name)
        if record is not None and record.failures:  # only a success that changes something is told
            rt.health.report(PassiveReport(backend.name, ok=True))

    async def _relay(self, response) -> None:
        content_type = response.headers.get("content-type", "application/json").encode()
        if not self.call.stream:
            # Read it all before the status goes out: a body that breaks
            # half-way must become an error, not a 200 with half a JSON.
            body = await response.aread()
            await self.sink.start(response.status_code, [(b"content-type", content_type)])
            await self.sink.send(body)
            await self.sink.finish()
            return
        await self.sink.start(response.status_code, [(b"content-type", content_type)])
        tail = b""
        # aiter_bytes, not aiter_raw: a backend that compresses its stream is
        # decoded here, since the client never sees its content-encoding.
        async for chunk in response.aiter_bytes():
            await self.sink.send(chunk)
            tail = (tail + chunk[-16:])[-16:]
        if b"[DONE]" not in tail:
            await self.sink.send(DONE_EVENT)
        await self.sink.finish()
