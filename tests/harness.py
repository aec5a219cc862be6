"""In-memory ASGI driving for MockClock tests: no sockets, exact virtual instants."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any, AsyncIterator

import attrs
import trio

from switchyard.config.load import load_text
from switchyard.protocol.serving.app import App
from switchyard.protocol.serving.wiring import new_runtime


@attrs.define
class Reply:
    status: int = 0
    headers: dict[bytes, bytes] = attrs.Factory(dict)
    chunks: list[tuple[float, bytes]] = attrs.Factory(list)
    ended_at: float | None = None

    @property
    def body(self) -> bytes:
        return b"".join(c for _, c in self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[bytes]:
        return [e[len(b"data: "):] for e in self.body.split(b"\n\n") if e.startswith(b"data: ")]


async def request(app: App, method: str, path: str, body: bytes | dict | None = None,
                  headers: list[tuple[bytes, bytes]] | None = None,
                  disconnect_at: float | None = None, client: tuple[str, int] | None = None) -> Reply:
    """One request through ``app``; ``client`` is the peer's address (none: the scope has no ``client``, as
    over a Unix socket, so every such request is the one anonymous caller)."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    body = body or b""
    reply = Reply()
    sent_body = False
    answered = trio.Event()

    async def receive() -> dict[str, Any]:
        """The body, then the disconnect: at ``disconnect_at`` (the client leaves), or once the whole
        response is out, as hypercorn reports it."""
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        with trio.move_on_at(math.inf if disconnect_at is None else disconnect_at):
            await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = dict(message["headers"])
        elif message["type"] == "http.response.body":
            if message.get("body"):
                reply.chunks.append((trio.current_time(), message["body"]))
            if not message.get("more_body", False):
                reply.ended_at = trio.current_time()
                answered.set()

    path, _, query = path.partition("?")
    scope = {"type": "http", "method": method, "path": path, "query_string": query.encode(), "headers": headers or []}
    if client is not None:
        scope["client"] = client
    await app(scope, receive, send)
    return reply


@contextlib.asynccontextmanager
async def gateway(config_yaml: str, base_dir: Any = None) -> AsyncIterator[App]:
    """A running Runtime behind an App, torn down on exit; relative paths resolve under ``base_dir``."""
    snapshot = load_text(config_yaml, base_dir=base_dir).snapshot
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(snapshot).run)
        yield App(lambda: snapshot, runtime=runtime)
        nursery.cancel_scope.cancel()


def chat(model: str = "demo", stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}], **extra}
