"""Realtime websockets in memory: the ASGI websocket messages hypercorn would exchange, a simulated upstream
reached over in-memory trio-websocket streams, MockClock for the idle timeout and the drain."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any, AsyncIterator

import pytest
import trio

from switchyard.protocol.doors import realtime, realtime_relay
from tests.harness import gateway, request
from tests.realtime_upstream import RealtimeUpstream

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

KEY = b"sk-client-0123456789abcdef"

CONFIG = """
health_checks: {enabled: false}
server: {realtime_idle_timeout: 30s}
backends:
  - name: rt-a
    type: openai
    url: https://rt-a.test/v1
    api_key: sk-backend-a
    discovery: false
    models: [gpt-realtime]
    model_configs:
      - {id: gpt-realtime, upstream_id: gpt-realtime-2025-08-28}
"""

TWO = """
health_checks: {enabled: false}
selection_strategy: RoundRobin
backends:
  - {name: rt-a, type: openai, url: "http://rt-a.test:8000", discovery: false, models: [gpt-realtime]}
  - {name: rt-b, type: generic, url: "http://rt-b.test:8000", discovery: false, models: [gpt-realtime]}
"""

KEYS = """
health_checks: {enabled: false}
api_keys:
  - {id: team, key: sk-client-0123456789abcdef, allowed_models: [gpt-realtime]}
backends:
  - {name: rt-a, type: openai, url: "http://rt-a.test", discovery: false, models: [gpt-realtime, other]}
"""


class Client:
    """The client side of one ASGI websocket connection, as hypercorn drives it."""

    def __init__(self) -> None:
        self.inbox_send, self.inbox = trio.open_memory_channel[dict[str, Any]](10)   # hypercorn's app queue
        self.outbox_send, self.outbox = trio.open_memory_channel[dict[str, Any]](math.inf)
        self.first: dict[str, Any] = {}
        self.done = trio.Event()

    async def next(self) -> dict[str, Any]:
        return await self.outbox.receive()

    async def send(self, event: dict[str, Any] | bytes) -> None:
        if isinstance(event, bytes):
            await self.inbox_send.send({"type": "websocket.receive", "bytes": event, "text": None})
        else:
            await self.inbox_send.send({"type": "websocket.receive", "bytes": None, "text": json.dumps(event)})

    async def event(self) -> dict[str, Any]:
        message = await self.next()
        assert message["type"] == "websocket.send", message
        return json.loads(message["text"])

    async def leave(self, code: int = 1006) -> None:
        """What hypercorn reports when the client closes (always 1006) or its connection drops."""
        await self.inbox_send.send({"type": "websocket.disconnect", "code": code})
        await self.done.wait()

    async def refusal(self) -> tuple[int, dict[bytes, bytes], dict[str, Any]]:
        assert self.first["type"] == "websocket.http.response.start", self.first
        body = await self.next()
        assert body["type"] == "websocket.http.response.body" and not body.get("more_body")
        return self.first["status"], dict(self.first["headers"]), json.loads(body["body"])


@contextlib.asynccontextmanager
async def connect(app: Any, query: bytes = b"model=gpt-realtime", path: str = "/v1/realtime",
                  headers: list[tuple[bytes, bytes]] | None = None, subprotocols: tuple[str, ...] = (),
                  extension: bool = True) -> AsyncIterator[Client]:
    client = Client()
    scope = {"type": "websocket", "path": path, "query_string": query, "headers": headers or [],
             "subprotocols": list(subprotocols), "extensions": {"websocket.http.response": {}} if extension else {}}

    async def run() -> None:
        try:
            await app(scope, client.inbox.receive, client.outbox_send.send)
        finally:
            client.done.set()
    async with trio.open_nursery() as nursery:
        await client.inbox_send.send({"type": "websocket.connect"})
        nursery.start_soon(run)
        client.first = await client.next()
        yield client
        if not client.done.is_set():
            await client.leave()


@pytest.fixture
def upstreams(monkeypatch: pytest.MonkeyPatch) -> dict[str, RealtimeUpstream]:
    """Host -> the simulated upstream behind it; every upstream socket the gateway opens lands here."""
    by_host: dict[str, RealtimeUpstream] = {}
    dialed: list[str] = []

    def open_upstream(url: str, **kwargs: Any) -> Any:
        dialed.append(url)
        host = url.split("//", 1)[1].split("/", 1)[0].split(":")[0]
        upstream = by_host.setdefault(host, RealtimeUpstream())
        return upstream.open(url, **kwargs)
    monkeypatch.setattr(realtime, "open_upstream", open_upstream)
    by_host["dialed"] = dialed   # type: ignore[assignment]
    return by_host


def upstream(upstreams: dict[str, Any], host: str, **kw: Any) -> RealtimeUpstream:
    upstreams[host] = RealtimeUpstream(**kw)
    return upstreams[host]


# --- the open session ------------------------------------------------------------------


async def test_events_and_bytes_are_relayed_both_ways(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        assert client.first["type"] == "websocket.accept"
        assert (await client.event())["type"] == "session.created"
        await client.send({"type": "response.create"})
        kinds = [(await client.event())["type"] for _ in range(4)]
        assert kinds == ["response.created", "response.output_text.delta", "response.output_text.delta",
                         "response.done"]
        await client.send(b"\x00\x01pcm")
        assert (await client.next()) == {"type": "websocket.send", "bytes": b"\x00\x01pcm"}
        await client.send({"type": "session.update", "session": {"voice": "alloy"}})
        assert (await client.event())["event"]["type"] == "session.update"
        seen = upstreams["rt-a.test"].sessions[0]
        assert seen.received == [json.dumps({"type": "response.create"}), b"\x00\x01pcm",
                                 json.dumps({"type": "session.update", "session": {"voice": "alloy"}})]


async def test_the_upstream_gets_the_backends_key_its_model_id_and_the_beta_header_only(autojump_clock, upstreams):
    headers = [(b"openai-beta", b"realtime=v1"), (b"authorization", b"Bearer sk-whatever"), (b"cookie", b"a=b")]
    async with gateway(CONFIG) as app, connect(app, b"model=gpt-realtime&intent=chat", headers=headers):
        pass
    assert upstreams["dialed"] == ["wss://rt-a.test/v1/realtime?model=gpt-realtime-2025-08-28&intent=chat"]
    seen = upstreams["rt-a.test"].sessions[0]
    assert seen.headers[b"authorization"] == b"Bearer sk-backend-a"
    assert seen.headers[b"openai-beta"] == b"realtime=v1"
    assert b"cookie" not in seen.headers


async def test_the_client_is_accepted_with_the_subprotocol_the_upstream_chose(autojump_clock, upstreams):
    offered = ("realtime", "openai-beta.realtime-v1")
    async with gateway(CONFIG) as app, connect(app, subprotocols=offered) as client:
        assert client.first["subprotocol"] == "realtime"
        assert dict(client.first["headers"])[b"x-continuum-request-id"].startswith(b"req_")
    assert upstreams["rt-a.test"].sessions[0].subprotocols == offered


async def test_a_browser_key_subprotocol_authenticates_and_never_reaches_the_upstream(autojump_clock, upstreams):
    offered = ("realtime", "openai-insecure-api-key." + KEY.decode())
    async with gateway(KEYS) as app, connect(app, subprotocols=offered) as client:
        assert client.first["type"] == "websocket.accept" and client.first["subprotocol"] == "realtime"
    seen = upstreams["rt-a.test"].sessions[0]
    assert seen.subprotocols == ("realtime",) and KEY not in b"".join(seen.headers.values())


# --- closes -------------------------------------------------------------------------------


async def test_the_upstreams_close_code_and_reason_reach_the_client(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        await client.event()
        await client.send({"type": "test.close", "code": 4001, "reason": "session expired"})
        assert await client.next() == {"type": "websocket.close", "code": 4001, "reason": "session expired"}
        await client.done.wait()


def test_an_upstream_that_drops_without_a_close_frame_closes_the_client_with_1011():
    assert realtime_relay.upstream_end(None) == realtime_relay.End("upstream", 1011, 1006, "upstream connection lost")


async def test_the_client_leaving_closes_the_upstream_with_1000(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        await client.event()
        await client.leave()   # hypercorn: 1006, whatever code the client sent
        seen = upstreams["rt-a.test"].sessions[0]
        with trio.fail_after(1):
            await seen.ended.wait()
        assert (seen.closed.code, seen.closed.reason) == (1000, "client disconnected")
        assert app.active_requests == 0 and app.runtime.pool.in_flight["rt-a"] == 0


async def test_a_real_client_close_code_is_passed_on_when_the_server_reports_one(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        await client.event()
        await client.leave(4003)
        seen = upstreams["rt-a.test"].sessions[0]
        await seen.ended.wait()
        assert seen.closed.code == 4003


async def test_no_message_for_the_idle_timeout_closes_both_sides(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        t0 = trio.current_time()
        await client.event()
        closed = await client.next()
        assert trio.current_time() - t0 == 30
        assert closed == {"type": "websocket.close", "code": 1000,
                          "reason": "idle timeout: no message either way for 30s"}
        seen = upstreams["rt-a.test"].sessions[0]
        await seen.ended.wait()
        assert seen.closed.code == 1000 and seen.closed.reason.startswith("idle timeout")


async def test_a_message_either_way_restarts_the_idle_clock(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        t0 = trio.current_time()
        await client.event()
        await trio.sleep(20)
        await client.send({"type": "ping-ish"})
        await client.event()
        assert (await client.next())["type"] == "websocket.close"
        assert trio.current_time() - t0 == 50


async def test_a_drain_that_runs_out_closes_the_session_with_1001(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        await client.event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app.runtime.drain, 5.0)
            closed = await client.next()
        assert closed == {"type": "websocket.close", "code": 1001, "reason": "server shutting down"}
        await client.done.wait()
        assert upstreams["rt-a.test"].sessions[0].closed.code == 1001
        assert not app.runtime.calls


async def test_a_drain_that_runs_out_during_the_upstream_handshake_refuses_503(autojump_clock, upstreams):
    upstream(upstreams, "rt-a.test", stall=True)
    async with gateway(CONFIG) as app:
        async def drain_soon() -> None:
            await trio.sleep(0.5)   # the session is waiting on its upstream by then
            await app.runtime.drain(1.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_soon)
            async with connect(app) as client:
                status, _, body = await client.refusal()
        assert trio.current_time() == 1.5 and not app.runtime.calls
    assert status == 503 and body["error"]["code"] == "server_shutting_down"


# --- refusals ------------------------------------------------------------------------------


async def test_a_missing_model_is_refused_400_with_the_envelope(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app, b"") as client:
        status, headers, body = await client.refusal()
    assert status == 400 and body["error"]["param"] == "model"
    assert body["error"]["code"] == "missing_required_parameter"
    assert headers[b"x-continuum-request-id"].startswith(b"req_")
    assert upstreams["dialed"] == []


async def test_an_unknown_model_is_refused_404_model_not_found(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app, b"model=nope") as client:
        status, _, body = await client.refusal()
    assert status == 404 and body["error"]["code"] == "model_not_found"


@pytest.mark.parametrize("headers, code", [
    ([], "missing_api_key"),
    ([(b"authorization", b"Bearer sk-wrong-0123456789abcdef")], "invalid_api_key"),
])
async def test_a_missing_or_wrong_key_is_refused_401(autojump_clock, upstreams, headers, code):
    async with gateway(KEYS) as app, connect(app, headers=headers) as client:
        status, _, body = await client.refusal()
    assert status == 401 and body["error"]["code"] == code and upstreams["dialed"] == []


async def test_a_model_outside_the_keys_reach_is_refused_403(autojump_clock, upstreams):
    headers = [(b"authorization", b"Bearer " + KEY)]
    async with gateway(KEYS) as app, connect(app, b"model=other", headers=headers) as client:
        status, _, body = await client.refusal()
    assert status == 403 and body["error"]["code"] == "model_not_allowed"


async def test_a_model_no_realtime_backend_serves_is_refused_400(autojump_clock, upstreams):
    config = """
health_checks: {enabled: false}
backends:
  - {name: sim, type: simulated, models: [demo]}
"""
    async with gateway(config) as app, connect(app, b"model=demo") as client:
        status, _, body = await client.refusal()
    assert status == 400 and body["error"]["code"] == "realtime_unsupported"


async def test_another_path_is_refused_404(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app, path="/v1/chat/completions") as client:
        status, _, body = await client.refusal()
    assert status == 404 and body["error"]["code"] == "not_found"


async def test_without_the_http_response_extension_a_refusal_is_a_1008_close(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app, b"model=nope", extension=False) as client:
        assert client.first["type"] == "websocket.close" and client.first["code"] == 1008
        assert client.first["reason"].startswith("404 model_not_found: ")
        assert len(client.first["reason"].encode()) <= 123


async def test_a_draining_gateway_refuses_new_sessions_503(autojump_clock, upstreams):
    async with gateway(CONFIG) as app:
        app.runtime.draining = True
        async with connect(app) as client:
            status, _, body = await client.refusal()
    assert status == 503 and body["error"]["code"] == "server_shutting_down"


async def test_an_open_session_counts_against_max_concurrent_requests(autojump_clock, upstreams):
    config = CONFIG.replace("server: {", "server: {max_concurrent_requests: 1, ")
    async with gateway(config) as app:
        async with connect(app) as first:
            assert first.first["type"] == "websocket.accept"
            async with connect(app) as second:
                status, _, body = await second.refusal()
            assert status == 503 and body["error"]["code"] == "too_many_concurrent_requests"
            assert (await request(app, "GET", "/v1/models")).status == 503
        async with connect(app) as third:
            assert third.first["type"] == "websocket.accept"


# --- the upstream handshake -------------------------------------------------------------


async def test_an_unreachable_backend_gives_way_to_another(autojump_clock, upstreams):
    upstream(upstreams, "rt-a.test", unreachable=True)
    async with gateway(TWO) as app, connect(app) as client:
        assert client.first["type"] == "websocket.accept"
        trace_id = dict(client.first["headers"])[b"x-continuum-request-id"].decode()
    events = [(e["event"], e["backend"]) for e in app.runtime.traces.get(trace_id).events]
    assert events == [("accepted", None), ("selected", "rt-a"), ("attempt_failed", "rt-a"),
                      ("route_changed", "rt-b"), ("selected", "rt-b"), ("completed", "rt-b")]


async def test_no_reachable_backend_is_refused_502(autojump_clock, upstreams):
    upstream(upstreams, "rt-a.test", unreachable=True)
    upstream(upstreams, "rt-b.test", unreachable=True)
    async with gateway(TWO) as app, connect(app) as client:
        status, _, body = await client.refusal()
    assert status == 502 and body["error"]["code"] == "upstream_connection_error"


async def test_an_upstream_5xx_handshake_moves_on_and_a_4xx_is_relayed_as_it_is(autojump_clock, upstreams):
    upstream(upstreams, "rt-a.test", reject=(503, b'{"error": {"message": "busy"}}'))
    async with gateway(TWO) as app, connect(app) as client:
        assert client.first["type"] == "websocket.accept"
    upstream(upstreams, "rt-a.test", reject=(401, b'{"error": {"message": "bad backend key"}}'))
    upstream(upstreams, "rt-b.test", reject=(401, b'{"error": {"message": "bad backend key"}}'))
    async with gateway(TWO) as app, connect(app) as client:
        status, _, body = await client.refusal()
    assert status == 401 and body == {"error": {"message": "bad backend key"}}


async def test_an_upstream_that_never_answers_its_handshake_is_refused_504_at_the_connect_limit(
        autojump_clock, upstreams):
    upstream(upstreams, "rt-a.test", stall=True)
    async with gateway(CONFIG.replace("backends:", "timeouts: {connection: 4s}\nbackends:")) as app:
        t0 = trio.current_time()
        async with connect(app) as client:
            status, _, body = await client.refusal()
        assert trio.current_time() - t0 == 4
    assert status == 504 and body["error"]["code"] == "timeout"


async def test_a_client_leaving_during_the_upstream_handshake_ends_it_at_once(autojump_clock, upstreams):
    upstream(upstreams, "rt-a.test", stall=True)
    async with gateway(CONFIG) as app:
        client = Client()
        scope = {"type": "websocket", "path": "/v1/realtime", "query_string": b"model=gpt-realtime", "headers": [],
                 "subprotocols": [], "extensions": {"websocket.http.response": {}}}
        await client.inbox_send.send({"type": "websocket.connect"})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app, scope, client.inbox.receive, client.outbox_send.send)
            await trio.sleep(1)
            t0 = trio.current_time()
            await client.inbox_send.send({"type": "websocket.disconnect", "code": 1006})
        assert trio.current_time() == t0
        assert app.active_requests == 0 and app.runtime.pool.in_flight["rt-a"] == 0
        trace = next(iter(app.runtime.traces._traces.values()))
        assert trace.terminal == "client_disconnected"


async def test_a_session_ends_with_one_route_trace_saying_who_closed(autojump_clock, upstreams):
    async with gateway(CONFIG) as app, connect(app) as client:
        request_id = dict(client.first["headers"])[b"x-continuum-request-id"].decode()
        await client.event()
        await client.send({"type": "response.create"})
        for _ in range(4):
            await client.event()
        await client.leave()
        last = app.runtime.traces.get(request_id).events[-1]
    assert last["event"] == "completed" and last["backend"] == "rt-a" and last["model"] == "gpt-realtime"
    assert last["detail"] == {"closed_by": "client", "client_code": 1006, "upstream_code": 1000,
                              "reason": "client disconnected", "messages_to_upstream": 1, "messages_to_client": 5}
