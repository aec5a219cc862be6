"""Realtime end to end: a trio-websocket client, Switchyard under hypercorn, a simulated realtime upstream,
all on 127.0.0.1. What hypercorn's ASGI websocket interface really passes (and does not) is checked here."""

from __future__ import annotations

import contextlib
import json
from typing import Any, AsyncIterator

import pytest
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from tests.e2e.support import Gateway, gateway_config
from tests.realtime_upstream import RealtimeUpstream

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

KEY = "sk-client-0123456789abcdef"
AUTH = [(b"authorization", f"Bearer {KEY}".encode())]


@contextlib.asynccontextmanager
async def realtime(start_gateway: Any) -> AsyncIterator[tuple[Gateway, RealtimeUpstream]]:
    upstream = RealtimeUpstream()
    async with trio.open_nursery() as nursery:
        server = await nursery.start(upstream.serve)
        config = gateway_config(
            {"name": "rt", "type": "openai", "url": f"http://127.0.0.1:{server.port}", "api_key": "sk-backend",
             "discovery": False, "models": ["gpt-realtime"]},
            health_checks={"enabled": False}, api_keys=[{"id": "team", "key": KEY}])
        gateway = await start_gateway(config)
        with trio.fail_after(10):
            yield gateway, upstream
        nursery.cancel_scope.cancel()


def ws_url(gateway: Gateway, query: str = "model=gpt-realtime") -> str:
    return gateway.url.replace("http://", "ws://") + "/v1/realtime?" + query


async def test_events_flow_both_ways_through_hypercorn(start_gateway):
    async with realtime(start_gateway) as (gateway, upstream):
        async with open_websocket_url(ws_url(gateway), extra_headers=AUTH, subprotocols=["realtime"]) as ws:
            assert ws.subprotocol == "realtime"
            assert json.loads(await ws.get_message())["type"] == "session.created"
            await ws.send_message(json.dumps({"type": "response.create"}))
            kinds = [json.loads(await ws.get_message())["type"] for _ in range(4)]
            assert kinds[0] == "response.created" and kinds[-1] == "response.done"
            await ws.send_message(b"\x00\x01pcm")
            assert await ws.get_message() == b"\x00\x01pcm"
        seen = upstream.sessions[0]
        assert seen.headers[b"authorization"] == b"Bearer sk-backend" and seen.model == "gpt-realtime"


async def test_the_upstreams_close_code_and_reason_reach_the_client(start_gateway):
    async with realtime(start_gateway) as (gateway, _):
        async with open_websocket_url(ws_url(gateway), extra_headers=AUTH) as ws:
            await ws.get_message()
            await ws.send_message(json.dumps({"type": "test.close", "code": 4001, "reason": "session expired"}))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
    assert (closed.value.reason.code, closed.value.reason.reason) == (4001, "session expired")


async def test_a_client_close_reaches_the_upstream_as_1000_without_its_code(start_gateway):
    async with realtime(start_gateway) as (gateway, upstream):
        async with open_websocket_url(ws_url(gateway), extra_headers=AUTH) as ws:
            request_id = dict(ws.handshake_headers)[b"x-continuum-request-id"].decode()
            await ws.get_message()
            await ws.aclose(4000, "bye")
        seen = upstream.sessions[0]
        await seen.ended.wait()
        while (trace := gateway.app.runtime.traces.get(request_id)) is None:
            await trio.sleep(0.01)
    # hypercorn hands the app 1006 for any close the client began, never its code or reason.
    assert trace.events[-1]["detail"]["client_code"] == 1006
    assert (seen.closed.code, seen.closed.reason) == (1000, "client disconnected")


@pytest.mark.parametrize("query, headers, status, code", [
    ("", AUTH, 400, "missing_required_parameter"),
    ("model=gpt-realtime", [(b"authorization", b"Bearer sk-wrong-0123456789abcdef")], 401, "invalid_api_key"),
    ("model=nope", AUTH, 404, "model_not_found"),
])
async def test_a_refused_handshake_is_an_http_answer_in_the_error_envelope(start_gateway, query, headers, status,
                                                                           code):
    async with realtime(start_gateway) as (gateway, upstream):
        with pytest.raises(ConnectionRejected) as rejected:
            async with open_websocket_url(ws_url(gateway, query), extra_headers=headers):
                pass
        assert upstream.sessions == []
    assert rejected.value.status_code == status
    assert json.loads(rejected.value.body)["error"]["code"] == code
    assert dict(rejected.value.headers)[b"x-continuum-request-id"].startswith(b"req_")
