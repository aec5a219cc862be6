"""What a door asks of the App that hosts it: the door modules name this, never the App above them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

if TYPE_CHECKING:
    from switchyard.actors.dedup import StreamingSink
    from switchyard.actors.messages import Call
    from switchyard.actors.runtime import Runtime
    from switchyard.actors.trace import TraceContext
    from switchyard.config.endpoints import Endpoint
    from switchyard.protocol.doors.models import ModelRoutes
    from switchyard.protocol.http.asgi import Receive, Scope, Send
    from switchyard.protocol.http.gate import Gate, Identity


class DoorHost(Protocol):
    runtime: "Runtime | None"
    gate: "Gate"                          # who asks, whether it may come in; what is in, for the cap
    model_routes: "ModelRoutes"

    def serve_chat(self, runtime: "Runtime", who: "Identity", scope: "Scope", receive: "Receive",
                   payload: dict[str, Any], body: bytes, sink_for: Callable[["Call"], "StreamingSink"],
                   endpoint: "Endpoint" = ..., parse: Callable[..., "Call"] = ...,
                   shape: Callable[["Call"], "Call"] | None = ...
                   ) -> Awaitable[None]: ...   # the call's coroutine, for the door to await

    async def http(self, scope: "Scope", receive: "Receive", send: "Send", settled: "Identity | None" = ...
                   ) -> None: ...   # a request served whole (``settled``: an in-process call's Identity)

    def trace_context(self, scope: "Scope", request_id: str,
                      id_headers: list[tuple[bytes, bytes]]) -> "TraceContext | None": ...
