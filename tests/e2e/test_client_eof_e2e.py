"""A client's end of stream, over real sockets: connections it ended are released at once, a client that
only half-closed still gets its answer, and one that went away still cancels the upstream call.

The server side is ``protocol/serving/client_eof.py``; a keep-alive timeout far longer than each test's
bound shows that nothing waits for it.
"""

from __future__ import annotations

import http.client
import io
import json
import signal

import h11
import httpx
import openai
import pytest
import trio

from switchyard.actors.call.request import RequestActor
from switchyard.actors.ledger.record import UsageQuery
from tests.e2e.support import Gateway, backend, gateway_config, in_thread, switchyard_serve
from tests.e2e.test_slow_clients_e2e import open_raw as connect
from tests.e2e.test_slow_clients_e2e import read_until_closed

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CHAT = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}
KEEP_ALIVE = "30s"   # no test here waits anything like it


def config(*backends: dict, **server: str) -> dict:
    out = gateway_config(*(backends or [backend("sim-a")]))
    out["server"] = {"keep_alive_timeout": KEEP_ALIVE, **server}
    return out


def request(client: h11.Connection, method: str, path: str, body: dict | None = None) -> bytes:
    """The bytes of one request, sent through ``client`` (so it then reads the answer to it)."""
    data = json.dumps(body).encode() if body is not None else b""
    headers = [("host", "gateway"), ("content-type", "application/json"), ("content-length", str(len(data)))]
    return (client.send(h11.Request(method=method, target=path, headers=headers)) + client.send(h11.Data(data=data))
            + client.send(h11.EndOfMessage()))


async def exchange(stream: trio.SocketStream, method: str, path: str, body: dict | None = None) -> int:
    """One request on a kept-alive connection, its answer read whole; the answer's status."""
    client = h11.Connection(h11.CLIENT)
    await stream.send_all(request(client, method, path, body))
    status = 0
    with trio.fail_after(3):
        while not isinstance(event := client.next_event(), h11.EndOfMessage):
            if event is h11.NEED_DATA:
                client.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
    return status


def parsed(raw: bytes) -> tuple[int, bytes]:
    """``raw`` as Python's http.client reads it (it skips interim 100 responses, and only those); h11 (httpx's
    parser) must agree."""
    class Socket:
        def makefile(self, *_: object) -> io.BufferedReader:
            return io.BufferedReader(io.BytesIO(raw))

    response = http.client.HTTPResponse(Socket())  # type: ignore[arg-type]
    response.begin()
    status, body = response.status, response.read()
    client = h11.Connection(h11.CLIENT)
    request(client, "POST", "/v1/chat/completions", CHAT)
    client.receive_data(raw)
    client.receive_data(b"")
    events = []
    while not isinstance(event := client.next_event(), h11.ConnectionClosed):
        events.append(event)
    final = next(e for e in events if isinstance(e, h11.Response))
    assert (final.status_code, b"".join(e.data for e in events if isinstance(e, h11.Data))) == (status, body)
    return status, body


async def wait_until(predicate, *, within: float) -> bool:
    with trio.move_on_after(within):
        while not predicate():
            await trio.sleep(0.02)
        return True
    return False


async def test_a_kept_alive_connection_the_client_ends_while_idle_is_closed_at_once(start_gateway):
    gw = await start_gateway(config())
    stream = await connect(gw.url)
    assert await exchange(stream, "GET", "/health") == 200
    await trio.sleep(0.1)   # the server has put the connection back to waiting for a request
    await stream.send_eof()   # a FIN, as close() sends; the half left open lets the test see the server's
    assert await read_until_closed(stream, within=2) == b""
    never_used = await connect(gw.url)
    await never_used.send_eof()
    assert await read_until_closed(never_used, within=2) == b""


async def test_client_churn_under_a_low_descriptor_limit_keeps_every_connection_served(tmp_path):
    # 400 connections, each closed by its client, through a server allowed 96 descriptors: each must be
    # released when its client ends it, not when the keep-alive timeout does.
    async with switchyard_serve(tmp_path, config(), max_open_files=96) as (_, url, log_path):
        failed: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            async def churn(count: int) -> None:
                for _ in range(count):
                    try:
                        with trio.fail_after(2):
                            stream = await connect(url)
                            assert await exchange(stream, "GET", "/health") == 200
                            await trio.sleep(0.02)   # a client that lingers a moment before it closes
                            await stream.aclose()
                    except (trio.TooSlowError, OSError, trio.BrokenResourceError) as exc:
                        failed.append(exc)
                        nursery.cancel_scope.cancel()

            for _ in range(8):
                nursery.start_soon(churn, 50)
        assert not failed, (failed, log_path.read_text()[-2000:])
        last = await connect(url)
        assert await exchange(last, "POST", "/v1/chat/completions", CHAT) == 200


async def test_a_drain_with_only_idle_connections_ends_at_once(tmp_path):
    async with switchyard_serve(tmp_path, config(shutdown_drain_timeout="30s")) as (proc, url, log_path):
        kept, ended = [], []
        for streams in (kept, ended):
            for _ in range(3):
                stream = await connect(url)
                assert await exchange(stream, "GET", "/health") == 200
                streams.append(stream)
        refused = await connect(url)   # idle after a call refused before it reached a backend
        assert await exchange(refused, "POST", "/v1/chat/completions", {**CHAT, "model": "nosuch"}) == 404
        kept.append(refused)
        await trio.sleep(0.1)
        for stream in ended:
            await stream.send_eof()
        proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(5):   # the window is 30 s: only a wait for the connections could take this long
            await proc.wait()
        assert proc.returncode == 0, log_path.read_text()
        for stream in kept + ended:
            assert await read_until_closed(stream, within=1) == b""


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
async def test_a_client_that_half_closes_after_its_request_gets_its_whole_answer(start_gateway, stream):
    gw: Gateway = await start_gateway(config(backend("sim-a", latency="300ms", tokens_per_second=20)))
    client = await connect(gw.url)
    chat = {**CHAT, "stream": stream}
    await client.send_all(request(h11.Connection(h11.CLIENT), "POST", "/v1/chat/completions", chat))
    await client.send_eof()   # shutdown(SHUT_WR): the request is all it sends, and it reads on
    status, body = parsed(await read_until_closed(client, within=5))
    assert status == 200, body
    if stream:
        assert body.endswith(b"data: [DONE]\n\n")
    else:
        assert json.loads(body)["choices"][0]["finish_reason"] == "stop"
    assert gw.sim("sim-a").count("completed") == 1


async def test_a_client_that_closes_before_its_answer_starts_cancels_the_upstream_call(start_gateway):
    gw = await start_gateway(config(backend("sim-a", latency="5s")))
    sim = gw.sim("sim-a")
    client = await connect(gw.url)
    await client.send_all(request(h11.Connection(h11.CLIENT), "POST", "/v1/chat/completions", CHAT))
    assert await wait_until(lambda: sim.count("request") == 1, within=2)
    await client.aclose()   # gone: the FIN looks like a half-close until the server's next write is refused
    assert await wait_until(lambda: sim.count("cancelled") == 1, within=1), sim.events
    assert sim.count("completed") == 0


async def test_a_client_that_closes_once_its_stream_started_cancels_the_upstream_at_once(start_gateway):
    """A FIN once the answer is under way is a client that left: its stream is not kept going until the next
    event's write is refused (here 3 s away), which would keep the upstream generating, and billing."""
    gw = await start_gateway(config(backend("sim-a", latency="10ms", chunks=4, tokens_per_second=1)))
    sim = gw.sim("sim-a")
    client = await connect(gw.url)
    await client.send_all(request(h11.Connection(h11.CLIENT), "POST", "/v1/chat/completions",
                                  {**CHAT, "stream": True}))
    with trio.fail_after(5):
        while b"data: " not in await client.receive_some(65536):   # the first event: the answer started
            pass
    await client.send_eof()
    assert await wait_until(lambda: sim.count("cancelled") == 1, within=1), sim.events
    assert sim.count("completed") == 0
    await client.aclose()


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
async def test_a_client_that_leaves_is_told_to_its_call_by_the_server_with_no_task_watching(start_gateway,
                                                                                         monkeypatch, http2):
    """Under the gateway's own connection (``ReleasingHTTPStream``) a call hears from the server that its
    client left, over HTTP/1.1 and HTTP/2 alike, and starts no task waiting on ``receive()`` for it; an answer
    that was complete is never taken for a client that left."""
    watched: list[str] = []
    watch = RequestActor._watch_client

    async def counted(actor: RequestActor, scope: trio.CancelScope) -> None:
        watched.append(actor.call.request_id)
        await watch(actor, scope)

    monkeypatch.setattr(RequestActor, "_watch_client", counted)
    slow = backend("sim-slow", chunks=50, tokens_per_second=5)   # 10 s of stream: only a leaving client ends it
    slow["models"] = ["slow"]
    settings = config(backend("sim-a"), slow)
    settings["server"]["http2_cleartext"] = True
    gw = await start_gateway(settings)
    sim, streaming = gw.sim("sim-a"), gw.sim("sim-slow")
    async with httpx.AsyncClient(base_url=gw.url, timeout=5, http1=not http2, http2=http2) as http:
        whole = await http.post("/v1/chat/completions", json=CHAT)
        assert whole.status_code == 200 and whole.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
        async with http.stream("POST", "/v1/chat/completions",
                               json={**CHAT, "model": "slow", "stream": True}) as response:
            async for _ in response.aiter_raw():
                break   # the first piece, then the client goes
    assert await wait_until(lambda: streaming.count("cancelled") == 1, within=1), streaming.events
    assert sim.count("completed") == 1 and sim.count("cancelled") == 0   # a whole answer is no client leaving
    assert watched == []


async def test_clients_that_close_right_after_the_last_event_are_recorded_as_answered(start_gateway):
    """The openai SDK closes a stream's connection the moment it has read ``[DONE]``, before the body's end:
    such a client had its whole answer, and its call is recorded as answered, never as a client that left
    (499). Forty through the SDK itself, eight threads at a time, as clients apart from the server."""
    n = 40
    gw = await start_gateway(config(backend("sim-a", latency="10ms", chunks=5)))
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0, timeout=10)
    texts: list[str] = []

    def one() -> None:
        stream = client.chat.completions.create(model="demo", messages=CHAT["messages"], stream=True)
        texts.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))

    limiter = trio.CapacityLimiter(8)

    async def bounded() -> None:
        async with limiter:
            await in_thread(one)

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(bounded)
    client.close()
    assert len(texts) == n and all(texts)
    ledger = gw.app.runtime.ledger
    with trio.fail_after(5):   # a call's record is told just after its answer reached the client
        while len(records := await ledger.records(UsageQuery(purpose=None), 1000)) < n:
            await ledger.flush()
            await trio.sleep(0.02)
    assert sorted(record.status for record in records) == [200] * n
