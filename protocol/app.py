"""ASGI entry: the lifespan starts the Runtime; a plain route table serves HTTP.

Hypercorn does not cancel an ASGI app when its client goes away, so every
call hands the RequestActor a ``disconnected`` awaitable that waits on
``receive()`` for ``http.disconnect``.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from typing import Any, Awaitable, Callable

import trio

from actors.request import RequestActor
from actors.routing.candidates import listed_models
from actors.runtime import Runtime
from config.load import load_demo, load_file
from config.schema import Snapshot
from protocol.errors import BodyTooLarge, GatewayError, MethodNotAllowed, RouteNotFound, Unavailable
from protocol.admin import AdminApi
from protocol.metrics import CONTENT_TYPE, exposition
from protocol.openai import model_list, parse_chat

log = logging.getLogger("switchyard.app")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON = [(b"content-type", b"application/json")]


def new_request_id() -> str:
    return "req_" + secrets.token_hex(16)
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
            raise _ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"Request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class _ClientGone(Exception):
    """The client left before its request body arrived; nobody to answer."""


def disconnect_waiter(receive: Receive) -> Callable[[], Awaitable[None]]:
    async def wait() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
    return wait


class App:
    def __init__(self, load: Callable[[], Snapshot], runtime: Runtime | None = None) -> None:
        self._load = load
        self.runtime = runtime
        self.admin = AdminApi(respond)
        self.routes: dict[str, dict[str, Callable[..., Awaitable[None]]]] = {
            "/v1/chat/completions": {"POST": self.chat_completions},
            "/v1/models": {"GET": self.models},
            "/health": {"GET": self.health},
            "/ready": {"GET": self.ready},
            "/metrics": {"GET": self.metrics},
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self.lifespan(receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        try:
            async with trio.open_nursery() as nursery:
                try:
                    snapshot = self._load()
                    self.runtime = await nursery.start(Runtime(snapshot).run)
                except Exception as exc:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                log.info("serving %d backend(s), config revision %s from %s", len(snapshot.backends),
                         snapshot.revision, snapshot.source)
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown
                nursery.cancel_scope.cancel()
        finally:
            self.runtime = None
        await send({"type": "lifespan.shutdown.complete"})

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = new_request_id()
        scope["switchyard.request_id"] = request_id
        id_header = (b"x-continuum-request-id", request_id.encode())
        started = False

        async def send_with_id(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", ()), id_header]}
            await send(message)

        try:
            path = scope["path"]
            if path.startswith("/admin/"):
                await self.admin.handle(self._runtime(), scope, receive, send_with_id)
                return
            methods = self.routes.get(path)
            if methods is None:
                raise RouteNotFound(f"No route for {scope['method']} {path}")
            handler = methods.get(scope["method"])
            if handler is None:
                raise MethodNotAllowed(f"{scope['method']} is not allowed on {path}", allowed=tuple(methods))
            await handler(scope, receive, send_with_id)
        except GatewayError as err:
            await respond(send_with_id, err.status, err.body(), err.headers())
        except _ClientGone:
            pass
        except Exception:
            # A bug must still answer in our envelope, and be loud in the log.
            log.exception("unhandled error on %s %s (request %s)", scope["method"], scope["path"], request_id)
            if not started:
                err = GatewayError("Internal error in the gateway; see its log")
                await respond(send_with_id, err.status, err.body(), err.headers())

    def _runtime(self) -> Runtime:
        if self.runtime is None:
            raise Unavailable("The gateway is starting or stopping; retry shortly")
        return self.runtime

    async def chat_completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self._runtime()
        snapshot = runtime.snapshot
        body = await read_body(scope, receive, snapshot.server.max_body_bytes)
        call = parse_chat(body, snapshot, dict(scope["headers"]), scope["switchyard.request_id"])
        sink = AsgiSink(send, call.stream)
        await RequestActor(runtime, call, sink, disconnect_waiter(receive)).run()

    async def models(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self._runtime()
        listed = listed_models(runtime.snapshot.backends, runtime.discovery.view)
        await respond(send, 200, json.dumps(model_list(listed)).encode())

    async def metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        await respond(send, 200, exposition(self._runtime()), [(b"content-type", CONTENT_TYPE)])

    async def health(self, scope: Scope, receive: Receive, send: Send) -> None:
        await respond(send, 200, b'{"status":"ok"}')

    async def ready(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self.runtime
        if runtime is None:
            await respond(send, 503, b'{"status":"starting","healthy_backends":0}')
            return
        # Ready when some public backend takes traffic: healthy, or not yet
        # checked (the first check runs at start; with checks off it never does).
        view = runtime.health.view
        public = [b.name for b in runtime.snapshot.backends if b.enabled and not b.internal]
        routable = [name for name in public if view.routable(name)]
        states = {name: view.backends[name].state.value for name in public if name in view.backends}
        body = {"status": "ready" if routable else "unavailable",
                "healthy_backends": sum(1 for s in states.values() if s == "healthy"),
                "routable_backends": len(routable), "backends": states}
        await respond(send, 200 if routable else 503, json.dumps(body).encode())


def create_app(config_path: str | None = None) -> App:
    """The ASGI app for a config file, or for the embedded demo when None."""
    if config_path:
        return App(lambda: load_file(config_path).snapshot)
    return App(lambda: load_demo().snapshot)


def app_from_env() -> App:
    """Factory for hypercorn worker processes: the CLI passes the path in the environment."""
    from protocol.cli import configure_logging

    configure_logging(os.environ.get("SWITCHYARD_LOG_LEVEL", "info"))
    return create_app(os.environ.get("SWITCHYARD_CONFIG") or None)
