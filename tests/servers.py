"""What the fixtures that start real servers (PostgreSQL, Redis, the gateway, the fake provider APIs)
share: a free loopback port, one server per session however many test modules bind its fixture, and an
ASGI app served on 127.0.0.1 for the length of a block, and the two chores every fake ASGI app has."""

from __future__ import annotations

import socket
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Generic, Iterator, TypeVar

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

S = TypeVar("S")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Shared(Generic[S]):
    """One server for the session: every module that imports a session fixture gets its own definition
    of it, so the server is kept here and destroyed when the last user ends."""

    def __init__(self, make: Callable[[], S], boot: Callable[[S], Any]) -> None:
        self._make, self._boot = make, boot
        self._server: S | None = None
        self._users = 0

    def use(self) -> Iterator[S]:
        if self._server is None:
            server = self._make()
            try:
                self._boot(server)
            except BaseException:
                server.destroy()  # type: ignore[attr-defined]
                raise
            self._server = server
        self._users += 1
        try:
            yield self._server
        finally:
            self._users -= 1
            if self._users == 0:
                server, self._server = self._server, None
                server.destroy()  # type: ignore[attr-defined]


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` (ASGI) served by hypercorn on a free port of 127.0.0.1 until the block ends; its URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.5
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: serve(app, config, shutdown_trigger=stop.wait,
                                                              task_status=task_status))
        try:
            yield binds[0]
        finally:
            stop.set()


async def lifespan(receive: Any, send: Any) -> None:
    """Answer the server's lifespan messages until its shutdown: a fake app has nothing to start or stop."""
    while True:
        message = await receive()
        await send({"type": message["type"] + ".complete"})
        if message["type"] == "lifespan.shutdown":
            return


async def request_body(receive: Any) -> bytes:
    """The whole body of the request an ASGI app is answering."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body
