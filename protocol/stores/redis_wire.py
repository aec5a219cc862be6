"""The Redis limiter's connections: RESP, read by coredis's parser, on plain Trio streams.

An admission is one script call on the request path, so what the client costs per command is what
admission costs. coredis's client spends about 0.25 ms of CPU on each command (every connection has
a writer and a reader task, with memory streams between them and the caller), against about 0.04 ms
for the same round trip on a bare Trio stream. So the limiter holds its few connections itself:
a command is sent and its reply read from the caller's own task, one command per connection at a
time. Replies are read by coredis's ``Parser`` (which raises its exception classes for error replies);
a command is a RESP array of bulk strings, packed here.

A command that is cancelled or fails half-way, or whose reply is not RESP, leaves its connection in an
unknown state (a reply may still come): that connection is closed, never reused. A connection that
breaks closes the idle ones too (a server that restarted broke them all). Idle connections are kept,
up to ``IDLE_MOST``.
"""

from __future__ import annotations

import select
import ssl
from typing import Any
from urllib.parse import unquote, urlsplit

import trio
from coredis.constants.resp import DataType
from coredis.exceptions import InvalidResponse, RedisError
from coredis.parser import NotEnoughData, Parser

DEFAULT_PORT = 6379
IDLE_MOST = 8          # idle connections kept; more are closed
READ_SIZE = 65536


class Address:
    """Where a ``redis://`` or ``rediss://`` URL points and how to log in (``state.redis_url``)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise ValueError("must be a redis:// or rediss:// URL with a host")
        if parts.query or parts.fragment:
            raise ValueError("takes no query options (?...): TLS is rediss://, the database is the path (/0)")
        self.host = parts.hostname
        self.port = parts.port or DEFAULT_PORT
        self.tls = parts.scheme == "rediss"
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"the path names the database, a number: got /{path}")
        self.db = int(path) if path else 0


def pack(command: str, args: tuple[Any, ...]) -> bytes:
    """A command as RESP: an array of bulk strings (numbers as their decimal text)."""
    parts = [command.encode(), *[a if isinstance(a, bytes) else str(a).encode() for a in args]]
    return b"*%d\r\n" % len(parts) + b"".join([b"$%d\r\n%s\r\n" % (len(p), p) for p in parts])   # lists: faster


class Connection:
    """One connection; ``call`` sends a command and reads its reply, one at a time."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._parser = Parser()

    async def call(self, command: str, *args: Any) -> Any:
        """The command's reply (strings decoded, arrays as lists); an error reply is raised as the
        coredis exception for it."""
        await self.stream.send_all(pack(command, args))
        while True:
            parsed = self._parser.parse(decode=True, encoding="utf-8")
            if not isinstance(parsed, NotEnoughData):
                break
            data = await self.stream.receive_some(READ_SIZE)
            if not data:
                raise ConnectionResetError("Redis closed the connection")
            self._parser.feed(bytes(data))   # the same object when it is bytes; coredis' feed takes no bytearray
        if parsed[0] == DataType.ERROR:
            raise parsed[1]
        return parsed[1]

    def closed_while_idle(self) -> bool:
        """Whether the idle connection can be read from: the server closed it (its idle ``timeout``, a
        proxy's) or sent what nobody asked for. One ``select`` with no wait."""
        stream = self.stream.transport_stream if isinstance(self.stream, trio.SSLStream) else self.stream
        sock = getattr(stream, "socket", None)
        return sock is not None and bool(select.select([sock.fileno()], [], [], 0)[0])

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


class RedisWire:
    """The limiter's connections to one Redis: ``call`` takes an idle one, or opens one."""

    def __init__(self, address: Address, ssl_context: ssl.SSLContext | None = None) -> None:
        self.address = address
        self._ssl = ssl_context
        self._idle: list[Connection] = []
        self.opened = 0   # connections opened, for the tests and the logs

    async def call(self, command: str, *args: Any) -> Any:
        connection = await self._take()
        reusable = False
        try:
            reply = await connection.call(command, *args)
            reusable = True
            return reply
        except InvalidResponse:   # bytes that are not RESP: where the next reply begins is unknown
            raise
        except RedisError:   # an error reply: the connection read all of it and is fine
            reusable = True
            raise
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            await self.aclose()   # the server went away (or restarted): the idle ones are gone too
            raise
        finally:
            if reusable and len(self._idle) < IDLE_MOST:
                self._idle.append(connection)
            else:
                await connection.aclose()

    async def _take(self) -> Connection:
        """The most recently used idle connection the server has not closed meanwhile, or a new one."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed_while_idle():
                return connection
            await connection.aclose()
        return await self._open()

    async def warm(self, count: int) -> None:
        """Have ``count`` connections open and idle (opened together), so a burst does not spend its
        time on handshakes."""
        async def one() -> None:
            opened = await self._open()
            try:
                await opened.call("PING")
            except BaseException:   # no answer (or cancelled): its state is unknown
                await opened.aclose()
                raise
            self._idle.append(opened)
        missing = min(count, IDLE_MOST) - len(self._idle)
        async with trio.open_nursery() as nursery:
            for _ in range(missing):
                nursery.start_soon(one)

    async def _open(self) -> Connection:
        a = self.address
        stream: trio.abc.Stream = await trio.open_tcp_stream(a.host, a.port)
        connection = Connection(stream)
        try:
            if a.tls:
                context = self._ssl or ssl.create_default_context()
                stream = trio.SSLStream(stream, context, server_hostname=a.host)
                await stream.do_handshake()
                connection = Connection(stream)
            if a.password is not None:
                await connection.call("AUTH", *([a.username] if a.username else []), a.password)
            if a.db:
                await connection.call("SELECT", a.db)
        except BaseException:
            await connection.aclose()
            raise
        self.opened += 1
        return connection

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()
