"""End-to-end: a backend on a Unix socket (``url: unix:///path.sock``), driven by the official openai SDK.

The backend is a real OpenAI-compatible server on a real socket: a second
Switchyard (serving a simulated ``demo``) under hypercorn bound to
``unix:PATH``. Everything between the SDK and it is real: TCP to the
gateway, the gateway's pooled transport dialing the socket, HTTP/1.1 over
it, health checks and discovery on their own schedule.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import attrs
import httpx
import openai
import pytest
import trio
import yaml
from hypercorn.trio import serve

from switchyard.config.load import load_file
from switchyard.config.schema import Snapshot
from switchyard.protocol.serving.app import App, create_app
from switchyard.protocol.serving.workers import hypercorn_config
from switchyard.protocol.simulated.openai import SimulatedTransport
from tests.e2e.support import Gateway, backend, gateway_config, in_thread
from tests.servers import lifespan, request_body

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CHAT = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}
QUIET = {"health_checks": {"enabled": False}}


@attrs.define
class SocketServer:
    path: str          # the socket file
    app: App
    stop: trio.Event

    @property
    def url(self) -> str:
        return "unix://" + self.path

    def sim(self) -> SimulatedTransport:
        assert self.app.runtime is not None
        return self.app.runtime.upstream.simulated["inner.simulated"]


StartSocket = Callable[..., Awaitable[SocketServer]]


@pytest.fixture
async def socket_server(tmp_path: Path) -> AsyncIterator[StartSocket]:
    """Starts an OpenAI-compatible server (Switchyard with a simulated ``demo``) on a Unix socket."""
    folder = tempfile.mkdtemp(prefix="sy-", dir="/tmp")   # short: a socket path holds at most 107 bytes
    stops: list[trio.Event] = []
    try:
        async with trio.open_nursery() as nursery:

            async def start(models: tuple[str, ...] = ("demo",), **simulation: Any) -> SocketServer:
                inner = backend("inner", **simulation)
                inner["models"] = list(models)
                config = tmp_path / f"inner-{len(stops)}.yaml"
                config.write_text(yaml.safe_dump(gateway_config(inner)), encoding="utf-8")
                path = os.path.join(folder, f"b{len(stops)}.sock")
                app = create_app(str(config))
                hc = hypercorn_config(load_file(str(config)).snapshot.server, f"unix:{path}")
                hc.graceful_timeout = 1.0
                stop = trio.Event()
                stops.append(stop)
                with trio.fail_after(5):
                    await nursery.start(functools.partial(serve, app, hc, shutdown_trigger=stop.wait))
                return SocketServer(path, app, stop)

            try:
                yield start
            finally:
                for stop in stops:
                    stop.set()
                nursery.cancel_scope.deadline = trio.current_time() + 5
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def on_socket(name: str, url: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": "generic", "url": url, **fields}


async def wait_until(predicate: Callable[[], bool], within: float) -> bool:
    with trio.move_on_after(within):
        while not predicate():
            await trio.sleep(0.02)
        return True
    return False


async def test_a_unix_socket_backend_serves_the_openai_sdk_buffered_and_streamed(start_gateway, socket_server):
    server = await socket_server()
    gw = await start_gateway(gateway_config(on_socket("sock", server.url, models=["demo"]), **QUIET))

    def stream(client: openai.OpenAI) -> tuple[str, list[str | None]]:
        chunks = list(client.chat.completions.create(**CHAT, stream=True))
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), \
            [c.choices[0].finish_reason for c in chunks if c.choices]

    with sdk(gw) as client:
        completion = await in_thread(client.chat.completions.create, **CHAT)
        text, finishes = await in_thread(stream, client)
    expected = "Hello from inner. The quick brown fox"
    assert completion.choices[0].message.content == expected
    assert text == expected and finishes[-1] == "stop"
    assert server.sim().served == 2


async def test_discovery_lists_a_unix_socket_backends_models(start_gateway, socket_server):
    server = await socket_server(models=("demo", "other"))
    gw = await start_gateway(gateway_config(on_socket("sock", server.url), **QUIET))   # no models: discovered
    with sdk(gw) as client:
        listed = await in_thread(client.models.list)
        completion = await in_thread(client.chat.completions.create, **{**CHAT, "model": "other"})
    assert {m.id for m in listed.data} == {"demo", "other"}
    assert completion.choices[0].message.content.startswith("Hello from inner.")


async def test_health_checks_reach_a_unix_socket_backend_and_see_it_go(start_gateway, socket_server):
    server = await socket_server()
    gw = await start_gateway(gateway_config(
        on_socket("sock", server.url, models=["demo"]),
        health_checks={"interval": "100ms", "unhealthy_threshold": 1, "warmup_check_interval": "100ms"}))
    health = gw.app.runtime.health

    def state() -> str:
        return health.view.backends["sock"].state.value

    assert await wait_until(lambda: state() == "healthy", within=5), state()
    server.stop.set()   # the server goes away; its socket with it
    assert await wait_until(lambda: state() == "unhealthy", within=5), state()
    with sdk(gw) as client, pytest.raises(openai.APIStatusError) as refused:
        await in_thread(client.chat.completions.create, **CHAT)
    assert refused.value.status_code == 503


async def test_a_path_after_the_socket_path_is_the_servers_http_root(start_gateway, socket_server):
    server = await socket_server()
    gw = await start_gateway(gateway_config(on_socket("sock", server.url + ":/v1", models=["demo"]), **QUIET))
    with sdk(gw) as client:
        completion = await in_thread(client.chat.completions.create, **CHAT)
    assert completion.choices[0].message.content.startswith("Hello from inner.")


async def test_connections_to_a_unix_socket_are_pooled_per_socket(start_gateway, socket_server):
    server = await socket_server()
    gw = await start_gateway(gateway_config(
        on_socket("one", server.url, models=["demo"], discovery=False),
        on_socket("two", server.url, models=["demo"], discovery=False), **QUIET))
    with sdk(gw) as client:
        for _ in range(6):   # round robin: both backends, one after the other
            await in_thread(client.chat.completions.create, **CHAT)
    assert server.sim().served == 6
    assert gw.app.runtime.upstream.transport.network.connects == 1


async def test_pre_stream_fallback_reaches_a_unix_socket_backend(start_gateway, socket_server):
    server = await socket_server(models=("small",))
    gw = await start_gateway(gateway_config(
        {**backend("tcp", failure={"status": 503}), "models": ["big"]},
        on_socket("sock", server.url, models=["small"]),
        fallback={"enabled": True, "fallback_chains": {"big": ["small"]}}, **QUIET))
    with sdk(gw) as client:
        completion = await in_thread(client.chat.completions.create, **{**CHAT, "model": "big"}, stream=False)
    assert completion.choices[0].message.content.startswith("Hello from inner.")


async def test_mid_stream_recovery_never_continues_on_a_unix_socket_backend(start_gateway, socket_server):
    server = await socket_server(models=("small",))
    gw = await start_gateway(gateway_config(
        {**backend("tcp", failure={"reset_after_chunk": 2}), "models": ["big"]},
        on_socket("sock", server.url, models=["small"]),
        fallback={"enabled": True, "fallback_chains": {"big": ["small"]}}, **QUIET))

    def consume(client: openai.OpenAI) -> tuple[list[str], Exception | None]:
        seen: list[str] = []
        try:
            for chunk in client.chat.completions.create(**{**CHAT, "model": "big"}, stream=True):
                seen.append(chunk.choices[0].delta.content or "")
        except openai.APIError as exc:
            return seen, exc
        return seen, None

    with sdk(gw) as client:
        seen, error = await in_thread(consume, client)
    assert seen == ["Hello from tcp.", " The"]
    assert isinstance(error, openai.APIError) and "tcp" in error.message   # the stream's own failure, in-band
    assert server.sim().served == 0   # the socket backend was never dialed mid-stream


def slow_body_app(log: list[tuple[str, float]]):
    """An OpenAI-compatible chat route whose headers go out at once and whose body comes 300 ms later."""
    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        await request_body(receive)
        log.append(("request", trio.current_time()))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await trio.sleep(0.3)
        body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "small", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "slow", "refusal": None}, "logprobs": None,
             "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})
        log.append(("answered", trio.current_time()))
    return app


async def test_a_non_streaming_fallback_dial_to_a_unix_socket_holds_its_permit_until_the_answer_is_read(
        start_gateway, nursery):
    folder = tempfile.mkdtemp(prefix="sy-", dir="/tmp")
    path, log, stop = os.path.join(folder, "slow.sock"), [], trio.Event()
    hc = hypercorn_config(Snapshot().server, f"unix:{path}")
    try:
        with trio.fail_after(5):
            await nursery.start(functools.partial(serve, slow_body_app(log), hc, shutdown_trigger=stop.wait))
        gw = await start_gateway(gateway_config(
            {**backend("tcp", failure={"status": 503}), "models": ["big"]},
            on_socket("sock", "unix://" + path, models=["small"], discovery=False),
            fallback={"enabled": True, "fallback_chains": {"big": ["small"]},
                      "fallback_policy": {"max_concurrent_dials_per_backend": 1}}, **QUIET))

        async def call() -> None:
            async with httpx.AsyncClient(base_url=gw.url, timeout=10) as http:
                reply = await http.post("/v1/chat/completions", json={**CHAT, "model": "big"})
                assert reply.status_code == 200, reply.text

        with trio.fail_after(10):
            async with trio.open_nursery() as calls:
                calls.start_soon(call)
                calls.start_soon(call)
    finally:
        stop.set()
        shutil.rmtree(folder, ignore_errors=True)
    # One permit: the second dial waits for the first answer's end, not just its headers.
    assert [kind for kind, _ in log] == ["request", "answered", "request", "answered"]
