"""Switchyard's upstream pool (protocol/wires/transport.py) against a real HTTP/1.1 server on 127.0.0.1.

The server is written here on h11 so each test can see what reached it:
which TCP connection carried which request, and when a connection closed.
"""

from __future__ import annotations

import gzip
import shutil
import ssl
from pathlib import Path

import h11
import httpcore
import httpx
import pytest
import trio
import trio.testing

from switchyard.actors.bodies import ResponseTooLarge, body_chunks, whole_body
from switchyard.config.load import load_text
from switchyard.protocol.wires.transport import COALESCE_MAX, PooledTransport
from switchyard.protocol.wires.upstream import Upstream
from tests.harness import gateway

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

LIMIT = 10.0   # seconds any one test may take


class Server:
    """Answers by path: ``/`` ok, ``/close`` with Connection: close, ``/hold`` after ``gate``,
    ``/stream`` one chunk then the rest after ``gate``, ``/noreply`` closes without answering."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.ssl_context = ssl_context
        self.accepted = 0
        self.requests: list[tuple[int, str]] = []   # (connection number, path)
        self.bodies: list[bytes] = []               # each request's body, as received
        self.open: dict[int, trio.CancelScope] = {}
        self.idle: set[int] = set()
        self.closed: list[int] = []
        self.gate = trio.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        if self.ssl_context is not None:
            listeners = [trio.SSLListener(lst, self.ssl_context, https_compatible=True) for lst in listeners]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    def close_idle(self) -> None:
        """Drop every connection that is waiting for its next request, as a keep-alive timeout would."""
        for number in list(self.idle):
            self.open[number].cancel()

    async def _connection(self, stream: trio.abc.Stream) -> None:
        number = self.accepted
        self.accepted += 1
        h = h11.Connection(h11.SERVER)
        with trio.CancelScope() as scope:
            self.open[number] = scope
            try:
                await self._serve(number, stream, h)
            except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
                pass
        del self.open[number]
        self.idle.discard(number)
        with trio.CancelScope(shield=True):
            await stream.aclose()
        self.closed.append(number)

    async def _next(self, stream, h) -> object:
        while True:
            event = h.next_event()
            if event is not h11.NEED_DATA:
                return event
            h.receive_data(await stream.receive_some(65536))

    async def _serve(self, number: int, stream, h: h11.Connection) -> None:
        while True:
            self.idle.add(number)
            event = await self._next(stream, h)
            self.idle.discard(number)
            if not isinstance(event, h11.Request):
                return
            body = []
            while not isinstance(part := await self._next(stream, h), h11.EndOfMessage):
                body.append(part.data)
            self.bodies.append(b"".join(body))
            path = event.target.decode()
            self.requests.append((number, path))
            if path == "/noreply":
                return
            headers = [("content-type", "text/plain")]
            if path == "/stream":
                await stream.send_all(h.send(h11.Response(status_code=200, headers=headers)))
                await stream.send_all(h.send(h11.Data(data=b"first,")))
                await self.gate.wait()
                await stream.send_all(h.send(h11.Data(data=b"rest")))
                await stream.send_all(h.send(h11.EndOfMessage()))
            else:
                if path.startswith("/hold"):
                    await self.gate.wait()
                if path == "/close":
                    headers.append(("connection", "close"))
                body = f"ok {number}".encode()
                headers.append(("content-length", str(len(body))))
                await stream.send_all(h.send(h11.Response(status_code=200, headers=headers)))
                await stream.send_all(h.send(h11.Data(data=body)) + h.send(h11.EndOfMessage()))
            if h.our_state is h11.MUST_CLOSE:
                return
            h.start_next_cycle()


def client(server: Server, **limits) -> tuple[httpx.AsyncClient, PooledTransport]:
    transport = PooledTransport(httpx.Limits(**{"max_connections": 10, **limits}))
    return httpx.AsyncClient(transport=transport, base_url=server.url, timeout=5.0), transport


async def settle() -> None:
    """Let the server notice what the client did (closes travel over loopback at once)."""
    for _ in range(3):
        await trio.testing.wait_all_tasks_blocked(0.01)


@pytest.fixture
async def watchdog(nursery):
    """Bound every test in time: a task in the test's nursery fails it after LIMIT seconds."""
    async def bite() -> None:
        await trio.sleep(LIMIT)
        raise TimeoutError(f"test still running after {LIMIT:g}s")
    nursery.start_soon(bite)


@pytest.fixture
async def server(nursery, watchdog):
    s = Server()
    await nursery.start(s.run)
    return s


async def test_sequential_requests_share_one_connection(server):
    http, pool = client(server)
    async with http:
        for _ in range(5):
            r = await http.get("/")
            assert r.text == "ok 0"
        assert server.accepted == 1 and pool.connects == 1
        assert (pool.open_connections, pool.idle_connections) == (1, 1)


class CountingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's trio backend, recording the size of every write on its streams."""

    def __init__(self) -> None:
        self.inner = httpcore.TrioBackend()
        self.writes: list[int] = []

    async def connect_tcp(self, *args, **kwargs):
        stream = await self.inner.connect_tcp(*args, **kwargs)
        writes = self.writes
        write = stream.write

        async def counted(buffer: bytes, timeout: float | None = None) -> None:
            writes.append(len(buffer))
            await write(buffer, timeout)
        stream.write = counted
        return stream

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


async def test_request_head_and_a_small_body_go_out_in_one_write(server):
    backend = CountingBackend()
    transport = PooledTransport(httpx.Limits(max_connections=1), network_backend=backend)
    async with httpx.AsyncClient(transport=transport, base_url=server.url, timeout=5.0) as http:
        small, large = b'{"model":"m"}', b"x" * (COALESCE_MAX + 1)
        assert (await http.post("/", content=small)).text == "ok 0"
        assert len(backend.writes) == 1 and backend.writes[0] > len(small)
        assert (await http.get("/")).text == "ok 0"   # no body: the head alone, once
        assert len(backend.writes) == 2
        assert (await http.post("/", content=large)).text == "ok 0"   # not copied: head, then body
        assert backend.writes[2:] == [backend.writes[2], len(large)] and backend.writes[2] < 1000
        assert server.bodies == [small, b"", large] and server.accepted == 1


async def test_parallel_requests_open_parallel_connections_up_to_the_cap(server):
    http, pool = client(server, max_connections=3)
    async with http:
        results = []

        async def one() -> None:
            results.append((await http.get("/hold")).text)

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(one)
            await settle()
            # three connections busy at the server, two requests waiting in the pool
            assert server.accepted == 3 and len(server.requests) == 3
            assert pool.open_connections == 3
            server.gate.set()
        assert len(results) == 5 and server.accepted == 3
        assert pool.idle_connections == 3


async def test_waiters_are_served_first_come_first_served(server):
    http, _ = client(server, max_connections=1)
    async with http:
        order = []

        async def one(name: str) -> None:
            await http.get(f"/hold/{name}")
            order.append(name)

        async with trio.open_nursery() as nursery:
            for name in "abcd":
                nursery.start_soon(one, name)
                await settle()
            server.gate.set()
        assert order == list("abcd")
        assert [path for _, path in server.requests] == [f"/hold/{n}" for n in "abcd"]
        assert server.accepted == 1


async def test_wait_at_the_cap_times_out_with_pool_timeout_and_leaks_no_slot(server):
    http, pool = client(server, max_connections=1)
    async with http:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(http.get, "/hold")
            await settle()
            with pytest.raises(httpx.PoolTimeout):
                await http.get("/", timeout=httpx.Timeout(5.0, pool=0.1))
            assert server.requests == [(0, "/hold")]   # the timed-out request never reached the server
            server.gate.set()
        assert (await http.get("/")).text == "ok 0"
        assert pool.open_connections == 1


async def test_cancelled_wait_gives_up_its_place(server):
    http, pool = client(server, max_connections=1)
    async with http:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(http.get, "/hold")
            await settle()
            with trio.move_on_after(0.05):
                await http.get("/")
            server.gate.set()
        assert (await http.get("/")).text == "ok 0"
        assert (pool.open_connections, pool.idle_connections) == (1, 1)


async def test_server_closed_idle_connection_is_replaced_transparently(server):
    http, pool = client(server)
    async with http:
        assert (await http.get("/")).text == "ok 0"
        await settle()
        server.close_idle()
        await settle()
        assert server.closed == [0]
        assert (await http.get("/")).text == "ok 1"   # not an error: the dead one was noticed before sending
        assert server.requests == [(0, "/"), (1, "/")]
        assert (pool.open_connections, pool.idle_connections) == (1, 1)


async def test_all_idle_connections_dropped_at_once_are_all_replaced(server):
    http, pool = client(server, max_connections=3)
    async with http:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(http.get, "/hold")
            await settle()
            server.gate.set()
        await settle()
        server.close_idle()   # a backend restart
        await settle()
        assert sorted(server.closed) == [0, 1, 2]
        assert (await http.get("/")).text == "ok 3"
        assert (pool.open_connections, pool.idle_connections) == (1, 1)


async def test_a_request_the_server_dropped_is_not_sent_again(server):
    http, pool = client(server)
    async with http:
        await http.get("/")
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get("/noreply")
        assert server.requests == [(0, "/"), (0, "/noreply")]
        assert server.accepted == 1
        assert pool.open_connections == 0


async def test_cancelled_stream_closes_its_connection_instead_of_pooling_it(server):
    http, pool = client(server)
    async with http:
        with trio.move_on_after(0.2) as scope:
            async with http.stream("GET", "/stream") as response:
                async for chunk in response.aiter_raw():
                    assert chunk == b"first,"   # then the server holds the rest: we are cancelled here
        assert scope.cancelled_caught
        assert (pool.open_connections, pool.idle_connections) == (0, 0)
        server.gate.set()   # the server's next write or read finds the connection closed
        await settle()
        assert server.closed == [0]
        assert (await http.get("/")).text == "ok 1"


async def test_stream_closed_before_its_end_is_not_reused(server):
    http, pool = client(server)
    async with http:
        async with http.stream("GET", "/stream") as response:
            chunks = response.aiter_raw()
            assert await chunks.__anext__() == b"first,"
            await chunks.aclose()   # the body is abandoned half read
        assert (pool.open_connections, pool.idle_connections) == (0, 0)
        server.gate.set()
        assert (await http.get("/")).text == "ok 1"


async def test_stream_returns_its_connection_only_once_fully_read_and_closed(server):
    http, pool = client(server)
    server.gate.set()
    async with http:
        async with http.stream("GET", "/stream") as response:
            assert pool.idle_connections == 0
            assert await response.aread() == b"first,rest"
        assert (pool.open_connections, pool.idle_connections) == (1, 1)
        assert (await http.get("/")).text == "ok 0"


async def test_body_chunks_of_a_plain_body_come_straight_from_the_pool(server):
    http, pool = client(server)
    server.gate.set()
    async with http:
        async with http.stream("GET", "/stream") as response:
            chunks = body_chunks(response)
            assert chunks is response.stream   # no httpx decoding layers for an unencoded body
            assert b"".join([chunk async for chunk in chunks]) == b"first,rest"
        assert (pool.open_connections, pool.idle_connections) == (1, 1)
        assert (await http.get("/")).text == "ok 0"


async def test_whole_body_reads_a_pooled_body_once_and_gives_the_connection_back(server):
    http, pool = client(server)
    server.gate.set()
    async with http:
        # As Upstream.send does: straight to the transport, so the body is the pool's own stream.
        response = await pool.handle_async_request(httpx.Request("GET", server.url + "/stream"))
        try:
            assert await whole_body(response, 1024) == b"first,rest"
            with pytest.raises(httpx.StreamConsumed):   # never a silent empty second read
                await whole_body(response, 1024)
        finally:
            await response.aclose()
        assert (pool.open_connections, pool.idle_connections) == (1, 1)
        assert (await http.get("/")).text == "ok 0"


async def test_whole_body_of_an_encoded_or_foreign_body_is_httpx_own_read():
    raw = gzip.compress(b'{"ok":true}')
    encoded = httpx.Response(200, headers={"content-encoding": "gzip"}, content=raw)
    assert await whole_body(encoded, 1024) == b'{"ok":true}'
    assert await whole_body(httpx.Response(200, content=b"plain"), 1024) == b"plain"


async def test_whole_body_past_its_limit_is_response_too_large_and_the_connection_is_not_reused(server):
    http, pool = client(server)
    server.gate.set()
    async with http:
        response = await pool.handle_async_request(httpx.Request("GET", server.url + "/stream"))
        try:
            with pytest.raises(ResponseTooLarge):
                await whole_body(response, 8)   # b"first,rest" is 10 bytes
        finally:
            await response.aclose()
        assert pool.idle_connections == 0   # half read: closed, never handed to the next request


async def test_a_compressed_body_is_limited_by_its_decoded_size():
    bomb = gzip.compress(b"0" * 100_000)   # about 100 bytes on the wire
    with pytest.raises(ResponseTooLarge):
        await whole_body(httpx.Response(200, headers={"content-encoding": "gzip"}, content=bomb), 50_000)


async def test_body_chunks_cancelled_half_read_close_the_connection(server):
    http, pool = client(server)
    async with http:
        with trio.move_on_after(0.2) as scope:
            async with http.stream("GET", "/stream") as response:
                async for chunk in body_chunks(response):
                    assert chunk == b"first,"   # then the server holds the rest: we are cancelled here
        assert scope.cancelled_caught
        assert (pool.open_connections, pool.idle_connections) == (0, 0)
        server.gate.set()
        await settle()
        assert server.closed == [0]


async def test_body_chunks_of_an_encoded_body_are_decoded():
    body = b'data: {"choices":[]}\n\n' * 50
    response = httpx.Response(200, headers={"content-encoding": "gzip"}, content=gzip.compress(body))
    assert b"".join([chunk async for chunk in body_chunks(response)]) == body


async def test_idle_connection_expires_after_keepalive_expiry(server):
    http, _ = client(server, keepalive_expiry=0.1)
    async with http:
        await http.get("/")
        await trio.sleep(0.15)
        assert (await http.get("/")).text == "ok 1"
        await settle()
        assert server.closed == [0]   # the expired one was closed, not just forgotten


async def test_expired_idle_connections_of_other_origins_are_swept(server, nursery):
    other = Server()
    await nursery.start(other.run)
    http, pool = client(server, keepalive_expiry=0.1)
    async with http:
        await http.get(other.url + "/")
        await trio.sleep(0.15)
        await http.get("/")
        await settle()
        assert other.closed == [0]
        assert (pool.open_connections, pool.idle_connections) == (1, 1)


async def test_connection_close_response_is_not_reused(server):
    http, pool = client(server)
    async with http:
        assert (await http.get("/close")).text == "ok 0"
        assert (pool.open_connections, pool.idle_connections) == (0, 0)
        assert (await http.get("/")).text == "ok 1"


async def test_keepalive_cap_closes_surplus_idle_connections(server):
    http, pool = client(server, max_keepalive_connections=1)
    async with http:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(http.get, "/hold")
            await settle()
            server.gate.set()
        await settle()
        assert (pool.open_connections, pool.idle_connections) == (1, 1)
        assert len(server.closed) == 2


async def test_at_the_cap_an_idle_connection_of_another_origin_is_replaced(server, nursery):
    other = Server()
    await nursery.start(other.run)
    http, pool = client(server, max_connections=1)
    async with http:
        await http.get(other.url + "/")
        assert (await http.get("/")).text == "ok 0"
        await settle()
        assert other.closed == [0]
        assert pool.open_connections == 1


async def test_aclose_closes_idle_and_busy_connections(server):
    http, pool = client(server)
    async with trio.open_nursery() as nursery:
        async def busy() -> None:
            with pytest.raises(httpx.ReadError):
                await http.get("/hold")
        nursery.start_soon(busy)
        await settle()
        assert (await http.get("/")).text == "ok 1"   # a second connection, left idle
        await pool.aclose()
    assert (pool.open_connections, pool.idle_connections) == (0, 0)
    server.gate.set()
    await settle()
    assert sorted(server.closed) == [0, 1]
    with pytest.raises(httpx.ConnectError):
        await pool.handle_async_request(httpx.Request("GET", server.url))


async def test_errors_are_httpx_exceptions(server):
    http, _ = client(server)
    async with http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/hold", timeout=httpx.Timeout(5.0, read=0.05))
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{free_port()}/")
        with pytest.raises(httpx.UnsupportedProtocol):
            await http.get("ftp://127.0.0.1/")


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
async def test_https_backends_reuse_tls_connections(nursery, watchdog, tmp_path: Path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    await trio.run_process(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", str(key), "-out", str(cert)], capture_stdout=True, capture_stderr=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server = Server(server_ctx)
    await nursery.start(server.run)
    pool = PooledTransport(httpx.Limits(max_connections=4), verify=ssl.create_default_context(cafile=str(cert)))
    async with httpx.AsyncClient(transport=pool, base_url=server.url, timeout=5.0) as http:
        assert (await http.get("/")).text == "ok 0"
        assert (await http.get("/")).text == "ok 0"
        assert server.accepted == 1
    with pytest.raises(httpx.ConnectError):   # an unknown certificate is refused
        async with httpx.AsyncClient(transport=PooledTransport(), timeout=5.0) as http:
            await http.get(server.url + "/")


async def test_a_gateway_built_again_in_the_process_parses_no_ca_bundle(monkeypatch):
    """The trust store is parsed once per process (about 30 ms of the event loop each time): the pools that
    verify by default share one context, and the alerts' client is made only for a webhook."""
    config = "backends: [{name: sim, type: simulated, models: [demo]}]"
    async with gateway(config):
        pass
    parsed = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: parsed.append(k) or real(*a, **k))
    async with gateway(config):
        pass
    assert parsed == []


async def test_upstream_client_uses_the_pool_and_still_reaches_simulators(server):
    snapshot = load_text(f"""
server: {{connection_pool_size: 7}}
backends:
  - {{name: real, type: generic, url: "{server.url}", models: [m], discovery: false}}
  - {{name: sim, type: simulated, models: [demo]}}
""", env={}).snapshot
    upstream = Upstream(snapshot)
    pool = upstream.client._transport.network
    assert isinstance(pool, PooledTransport) and pool._max == 7
    assert (await upstream.client.get(server.url + "/")).text == "ok 0"
    assert (await upstream.client.get("http://sim.simulated/v1/models")).status_code == 200
    assert pool.connects == 1
    await upstream.aclose()
    await settle()
    assert server.closed == [0]
