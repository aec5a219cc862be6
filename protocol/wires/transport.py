"""Switchyard's upstream connection pool: an httpx transport whose cost per request is O(1).

httpcore's pool walks every pooled connection, polling each idle socket, on
every request and every response close, so its cost grows with the number
of open connections. Here idle connections wait in a deque per origin: a
request pops the most recently used one and checks only that one (expired,
or readable while idle, which means the server closed it); a response, once
fully read and closed, appends its connection back. Parsing, TLS and the
HTTP/1.1 state machine stay httpcore's (``AsyncHTTP11Connection`` on its trio
network backend), and failures surface as the httpx exceptions httpx's own
transport raises.

Limits follow ``httpx.Limits``: ``max_connections`` caps all connections
(open, opening, idle) across origins; a request that finds none free and no
idle one to replace waits FIFO for ``timeout["pool"]`` (None: no limit) and
then raises ``httpx.PoolTimeout``. At most ``max_keepalive_connections`` stay
idle, each at most ``keepalive_expiry`` seconds. HTTP/1.1 only, no proxies.
An ``http+unix://`` URL (a Unix-socket backend, ``config/unix_socket.py``)
connects to the socket its host names; its connections pool per socket.
"""

from __future__ import annotations

import functools
import math
import os
import ssl
import sys
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Literal

import h11
import httpcore
import httpx
import trio

from switchyard.config import unix_socket

Key = tuple[bytes, bytes, int]   # scheme, host, port (a Unix socket: http+unix, its encoded path, 0)

# A request body up to this size goes out in the same write as the head.
COALESCE_MAX = 64 * 1024


class _Uncontended:
    """A lock for state only one task ever holds at a time: entering never waits, nor yields."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


class Conn(httpcore.AsyncHTTP11Connection):
    """httpcore's HTTP/1.1 connection, without two costs the pool makes needless.

    httpcore writes the head and each body chunk separately: two system
    calls and two trips through Trio's scheduler for every chat request,
    whose body is one small chunk. Here the head waits for the first body
    chunk (or the end of a bodiless request) and goes out with it. A larger
    first chunk is not copied: the head goes out alone, then the chunk, as
    httpcore would.

    httpcore guards the connection's state with a lock, taken when a request
    starts and when its response closes; each take is a trip through the
    scheduler even when free. The pool gives a connection to one request at
    a time, so the lock is never contended: it is replaced by one that does
    not yield. Parsing and the state machine are untouched.
    """

    _head = b""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._state_lock = _Uncontended()   # type: ignore[assignment]  # a lock of our own kind in its place

    async def _send_event(self, event: h11.Event, timeout: float | None = None) -> None:
        data = self._h11_state.send(event) or b""
        if type(event) is h11.Request:
            self._head = data
            return
        head, self._head = self._head, b""
        if head:
            if len(data) <= COALESCE_MAX:
                data = head + data
            else:
                await self._network_stream.write(head, timeout=timeout)
        if data:
            await self._network_stream.write(data, timeout=timeout)

_DEFAULT_PORTS = {b"http": 80, b"https": 443}
_UNIX = unix_socket.SCHEME.encode()   # config/unix_socket.py: the host is the socket path, hex-encoded

# httpcore -> httpx, most specific first (what httpx's own transport maps).
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


class _MapErrors:
    """Re-raise httpcore's exceptions as httpx's, so callers catch one family."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> Literal[False]:
        if not isinstance(exc, Exception):
            return False
        for source, target in _ERRORS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        return False


_mapped = _MapErrors()


class _Waiter:
    """One request queued for a connection slot; ``conn`` None with ``granted`` means "open a new one"."""

    __slots__ = ("conn", "event", "gone", "granted", "key")

    def __init__(self, key: Key) -> None:
        self.key = key
        self.event = trio.Event()
        self.conn: Conn | None = None
        self.granted = False
        self.gone = False   # timed out or cancelled: skipped when popped


@functools.cache
def default_tls(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """httpx's verifying context, offering HTTP/1.1 by ALPN: one per process for each value of the two
    variables httpx reads its trust store from (``SSL_CERT_FILE``, ``SSL_CERT_DIR``; neither: certifi's
    bundle). Parsing the bundle takes about 30 ms of CPU on the event loop, so every pool that verifies by
    default shares the one context (a Runtime built again in the process does not parse it again); nothing
    changes the context once made."""
    context = httpx.create_ssl_context(verify=True)
    context.set_alpn_protocols(["http/1.1"])
    return context


class PooledTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 keep-alive pool with O(1) acquire and release; Trio only.

    Invariant: each request holds one *slot* (counted in ``_open``) from
    acquire to release, whether its connection is reused, being opened, or
    failed. A freed slot goes to the first live waiter, with the connection
    if it is reusable and for the waiter's origin; so waiters exist only
    while every slot is busy and no connection is idle.
    """

    def __init__(self, limits: httpx.Limits | None = None, *, verify: ssl.SSLContext | bool = True,
                 network_backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        limits = limits or httpx.Limits()
        self._max = sys.maxsize if limits.max_connections is None else limits.max_connections
        idle_cap = limits.max_keepalive_connections
        self._max_idle = self._max if idle_cap is None else min(idle_cap, self._max)
        self._expiry: float | None = limits.keepalive_expiry
        if verify is True:
            self._ssl = default_tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        else:
            self._ssl = httpx.create_ssl_context(verify=verify)
            self._ssl.set_alpn_protocols(["http/1.1"])
        self._backend = network_backend or httpcore.TrioBackend()
        self._idle: dict[Key, deque[tuple[Conn, float]]] = {}
        self._idle_count = 0
        self._open = 0                   # slots held: connections open, opening, or about to be
        self._conns: set[Conn] = set()   # every open connection, for aclose
        self._waiters: deque[_Waiter] = deque()
        self._next_sweep = 0.0
        self._closed = False
        self.connects = 0                # connections opened so far (tests, diagnostics)

    @property
    def open_connections(self) -> int:
        return self._open

    @property
    def idle_connections(self) -> int:
        return self._idle_count

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.raw_scheme
        headers = request.headers.raw
        if scheme == _UNIX:   # a Unix-socket backend: pooled per socket, spoken to as http://localhost
            key: Key = (scheme, url.raw_host, 0)
            target = httpcore.URL(scheme=b"http", host=unix_socket.LOCAL_HOST, port=None, target=url.raw_path)
            headers = [(k, unix_socket.LOCAL_HOST) if k.lower() == b"host" else (k, v) for k, v in headers]
        elif scheme in _DEFAULT_PORTS:
            key = (scheme, url.raw_host, url.port or _DEFAULT_PORTS[scheme])
            target = httpcore.URL(scheme=scheme, host=url.raw_host, port=url.port, target=url.raw_path)
        else:
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        req = httpcore.Request(method=request.method, url=target, headers=headers, content=request.stream,
                               extensions=request.extensions)
        conn = await self._acquire(key, request.extensions.get("timeout", {}).get("pool"))
        try:
            with _mapped:
                if conn is None:
                    conn = await self._connect(key, req)
                response = await conn.handle_async_request(req)
        except BaseException:
            # httpcore has already closed a connection whose exchange did not finish.
            with trio.CancelScope(shield=True):
                await self._release(key, conn)
            raise
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_PooledStream(self, key, conn, response.stream),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        """Close every connection, idle or busy; waiting requests fail with ConnectError."""
        self._closed = True
        conns, self._conns = list(self._conns), set()
        self._open -= self._idle_count
        for queue in self._idle.values():
            queue.clear()
        self._idle.clear()
        self._idle_count = 0
        while self._waiters:
            waiter = self._waiters.popleft()
            waiter.gone = True
            waiter.event.set()
        for conn in conns:
            await self._close(conn)

    # -- slots and idle connections

    async def _acquire(self, key: Key, timeout: float | None) -> Conn | None:
        """A slot for ``key``: an idle connection to reuse, or None to open a new one."""
        while True:
            if self._closed:
                raise httpx.ConnectError("Switchyard's upstream connection pool is closed")
            idle = self._idle.get(key)
            if not idle:
                break
            conn, since = idle.pop()   # the most recently used: the least likely to be dropped
            self._idle_count -= 1
            if self._fresh(conn, since):
                return conn
            await self._discard(conn)   # then try the next one
        if self._open < self._max:
            self._open += 1
            return None
        if self._idle_count:
            # At the cap, but another origin has an idle connection: replace its oldest.
            conn = self._pop_oldest_idle()
            self._conns.discard(conn)
            await self._close(conn)
            return None
        return await self._wait(key, timeout)

    async def _wait(self, key: Key, timeout: float | None) -> Conn | None:
        waiter = _Waiter(key)
        self._waiters.append(waiter)
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                await waiter.event.wait()
        except BaseException as exc:
            waiter.gone = True
            if waiter.granted:   # woken and cancelled at once: pass the slot on
                with trio.CancelScope(shield=True):
                    await self._release(key, waiter.conn)
            if isinstance(exc, trio.TooSlowError):
                raise httpx.PoolTimeout("Timed out waiting for a connection from the pool") from None
            raise
        if not waiter.granted:
            raise httpx.ConnectError("Switchyard's upstream connection pool closed while waiting")
        conn = waiter.conn
        if conn is not None and conn.has_expired():   # closed by the server since its release
            self._conns.discard(conn)
            await self._close(conn)
            return None   # the slot stays ours
        return conn

    def _fresh(self, conn: Conn, since: float) -> bool:
        """Reusable: within keep-alive expiry and, one poll, not readable while idle (server closed it)."""
        if self._expiry is not None and trio.current_time() - since > self._expiry:
            return False
        return not conn.has_expired()

    async def _release(self, key: Key, conn: Conn | None) -> None:
        """Give back a slot and, if it can serve another request, its connection. Call under a shield."""
        waiter = self._next_waiter()
        if conn is not None and conn.is_idle() and not self._closed:
            if waiter is not None and waiter.key == key:
                self._grant(waiter, conn)
                return
            if waiter is None and self._idle_count < self._max_idle:
                now = trio.current_time()
                self._idle.setdefault(key, deque()).append((conn, now))
                self._idle_count += 1
                if self._expiry is not None and now >= self._next_sweep:
                    await self._sweep(now)
                return
        if waiter is not None:
            self._grant(waiter, None)   # the slot passes on; the waiter opens its own connection
        else:
            self._open -= 1
        if conn is not None:
            self._conns.discard(conn)
            await self._close(conn)

    def _next_waiter(self) -> _Waiter | None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.gone:
                return waiter
        return None

    @staticmethod
    def _grant(waiter: _Waiter, conn: Conn | None) -> None:
        waiter.conn = conn
        waiter.granted = True
        waiter.event.set()

    def _pop_oldest_idle(self) -> Conn:
        """The longest-idle connection of any origin (a walk over origins, not connections)."""
        oldest_key = min((k for k, q in self._idle.items() if q), key=lambda k: self._idle[k][0][1])
        conn, _ = self._idle[oldest_key].popleft()
        self._idle_count -= 1
        return conn

    async def _discard(self, conn: Conn) -> None:
        """Drop an idle connection that was already taken off its deque, freeing its slot."""
        self._conns.discard(conn)
        waiter = self._next_waiter()
        if waiter is not None:
            self._grant(waiter, None)
        else:
            self._open -= 1
        await self._close(conn)

    async def _sweep(self, now: float) -> None:
        """Close connections idle past keep-alive expiry (oldest are at each deque's left); at most once per expiry."""
        assert self._expiry is not None
        self._next_sweep = now + self._expiry
        expired = []
        for queue in self._idle.values():
            while queue and now - queue[0][1] > self._expiry:
                expired.append(queue.popleft()[0])
                self._idle_count -= 1
        for conn in expired:
            await self._discard(conn)

    # -- connections

    async def _connect(self, key: Key, request: httpcore.Request) -> Conn:
        scheme, host, port = key
        timeout = request.extensions.get("timeout", {}).get("connect")
        if scheme == _UNIX:
            stream = await self._backend.connect_unix_socket(unix_socket.socket_path(host), timeout=timeout)
            origin = httpcore.Origin(b"http", unix_socket.LOCAL_HOST, 80)
        else:
            stream = await self._backend.connect_tcp(host.decode("ascii"), port, timeout=timeout)
            origin = httpcore.Origin(scheme, host, port)
        if scheme == b"https":
            try:
                server_name = request.extensions.get("sni_hostname") or host.decode("ascii")
                stream = await stream.start_tls(self._ssl, server_hostname=server_name, timeout=timeout)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                raise
        conn = Conn(origin=origin, stream=stream)
        self.connects += 1
        self._conns.add(conn)
        return conn

    @staticmethod
    async def _close(conn: Conn) -> None:
        with trio.CancelScope(shield=True):
            try:
                await conn.aclose()
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                pass   # already broken: nothing left to release


class _PooledStream(httpx.AsyncByteStream):
    """A response body that gives its connection back once, when closed.

    httpcore marks the connection idle only if both request and response
    were read to the end; otherwise (cancelled, abandoned, ``Connection:
    close``) it closes it, and only the slot comes back.

    It is its own iterator, not an async generator: a generator would stay
    suspended for the whole life of a stream (with trio's weak reference to
    it), about 0.4 KB per open stream.
    """

    __slots__ = ("_conn", "_done", "_key", "_parts", "_pool", "_stream")

    def __init__(self, pool: PooledTransport, key: Key, conn: Conn, stream: Any) -> None:
        # ``stream``: httpcore's, async-iterable with an ``aclose`` (which its type, ``Response.stream``, omits)
        self._pool, self._key, self._conn, self._stream = pool, key, conn, stream
        self._parts: AsyncIterator[bytes] | None = None
        self._done = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        if self._parts is not None:
            raise httpx.StreamConsumed()   # read once: a second pass would find it silently empty
        self._parts = self._stream.__aiter__()
        return self

    async def __anext__(self) -> bytes:
        try:
            with _mapped:
                if self._parts is None:
                    self._parts = self._stream.__aiter__()
                return await self._parts.__anext__()
        except StopAsyncIteration:
            raise
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._done:
            return
        self._done = True
        with trio.CancelScope(shield=True):
            try:
                with _mapped:
                    await self._stream.aclose()
            finally:
                await self._pool._release(self._key, self._conn)
