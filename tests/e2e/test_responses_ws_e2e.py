"""The Responses API's websocket mode end to end: a trio-websocket client, Switchyard under hypercorn on
127.0.0.1, simulated backends; each ``response.create`` is bridged to the HTTP pipeline."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import ConnectionRejected, WebSocketConnection, open_websocket_url

from tests.e2e.support import Gateway, backend, gateway_config

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

KEY = "sk-client-0123456789abcdef"
AUTH = [(b"authorization", f"Bearer {KEY}".encode())]
TEXT = "Hello from sim-a. The quick brown fox"


def config(*backends: dict, **top: Any) -> dict:
    return gateway_config(*(backends or (backend("sim-a"),)), api_keys=[{"id": "team", "key": KEY}], **top)


def ws_url(gw: Gateway) -> str:
    return gw.url.replace("http://", "ws://") + "/v1/responses"


async def turn(ws: WebSocketConnection, **event: Any) -> list[dict[str, Any]]:
    """Send one client event; the events that answer it, up to its terminal or error event."""
    await ws.send_message(json.dumps(event))
    out = []
    with trio.fail_after(10):
        while True:
            out.append(json.loads(await ws.get_message()))
            if out[-1]["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
                return out


async def test_a_response_create_is_answered_with_the_stream_events_one_message_each(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        events = await turn(ws, type="response.create", model="demo", input="hi")
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == TEXT


async def test_turns_follow_one_another_on_one_socket_and_continue_a_stored_response(start_gateway):
    gw = await start_gateway(config(backend("sim-a"), backend("sim-b")))
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        first = (await turn(ws, type="response.create", model="demo", input="one"))[-1]["response"]
        nexts = [(await turn(ws, type="response.create", model="demo", input="more",
                             previous_response_id=first["id"]))[-1] for _ in range(2)]
    assert [e["type"] for e in nexts] == ["response.completed"] * 2
    assert {e["response"]["previous_response_id"] for e in nexts} == {first["id"]}


async def test_a_bad_event_is_an_error_event_and_the_socket_stays_open(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        await ws.send_message("not json")
        bad_json = json.loads(await ws.get_message())
        steer = (await turn(ws, type="response.steer", input="x"))[-1]
        background = (await turn(ws, type="response.create", model="demo", input="hi", background=True))[-1]
        no_model = (await turn(ws, type="response.create", input="hi"))[-1]
        ok = (await turn(ws, type="response.create", model="demo", input="hi"))[-1]
    assert bad_json["type"] == "error" and bad_json["status"] == 400
    assert (steer["error"]["param"], background["error"]["param"], no_model["error"]["param"]) == \
        ("type", "background", "model")
    assert ok["type"] == "response.completed"


async def test_a_backend_failure_before_the_first_event_fails_over(start_gateway):
    gw = await start_gateway(config(backend("sim-a", failure={"status": 503}), backend("sim-b"),
                                    retry={"max_attempts": 1}))
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        answers = [await turn(ws, type="response.create", model="demo", input="hi") for _ in range(2)]
    assert all(events[-1]["type"] == "response.completed" for events in answers)
    assert all(e["type"] != "error" for events in answers for e in events)
    assert gw.sim("sim-a").count("status:503") >= 1


async def test_an_error_status_from_every_backend_is_an_error_event_with_its_status(start_gateway):
    gw = await start_gateway(config(backend("sim-a", failure={"status": 400})))
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        events = await turn(ws, type="response.create", model="demo", input="hi")
    assert len(events) == 1 and events[0]["type"] == "error" and events[0]["status"] == 400
    assert events[0]["error"]["code"] == "simulated_400"


async def test_stream_id_is_echoed_on_every_event_of_its_response(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        events = await turn(ws, type="response.create", model="demo", input="hi", stream_id="lane-1")
    assert {e.get("stream_id") for e in events} == {"lane-1"}


async def test_the_handshake_needs_the_api_key(start_gateway):
    gw = await start_gateway(config())
    with pytest.raises(ConnectionRejected) as rejected:
        async with open_websocket_url(ws_url(gw)):
            pass
    assert rejected.value.status_code == 401
    assert json.loads(rejected.value.body)["error"]["code"] == "missing_api_key"


async def test_a_response_made_over_the_socket_is_retrieved_over_http(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        final = (await turn(ws, type="response.create", model="demo", input="hi"))[-1]["response"]
    async with httpx.AsyncClient(base_url=gw.v1, headers={"authorization": f"Bearer {KEY}"}) as client:
        got = await client.get(f"/responses/{final['id']}")
    assert got.status_code == 200 and got.json()["id"] == final["id"]


async def test_an_idle_socket_is_closed(start_gateway):
    gw = await start_gateway(config(server={"bind_address": "127.0.0.1:8080", "realtime_idle_timeout": 1}))
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        with trio.fail_after(5):
            while not ws.closed:
                try:
                    await ws.get_message()
                except Exception:
                    break
        assert ws.closed is not None and ws.closed.code == 1000


async def test_a_turn_longer_than_the_idle_timeout_is_not_cut(start_gateway):
    # the idle timeout counts the wait for the next event, never the turn being answered
    gw = await start_gateway(config(backend("sim-a", latency="1500ms"),
                                    server={"bind_address": "127.0.0.1:8080", "realtime_idle_timeout": 1}))
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        events = await turn(ws, type="response.create", model="demo", input="hi")
    assert events[-1]["type"] == "response.completed"


def bodies(gw: Gateway, name: str = "sim-a") -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in gw.sim(name).requests]


async def test_a_turn_chains_on_a_store_false_response_of_the_same_socket(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        first = (await turn(ws, type="response.create", model="demo", input="cobalt", store=False))[-1]["response"]
        second = await turn(ws, type="response.create", model="demo", input="the word?", store=False,
                            previous_response_id=first["id"])
    assert second[-1]["type"] == "response.completed"
    assert {e["response"]["previous_response_id"] for e in second if "response" in e} == {first["id"]}
    sent = bodies(gw)[-1]   # the backend keeps nothing: it is sent the conversation instead
    assert "previous_response_id" not in sent
    said = [{k: v for k, v in item.items() if k != "id"} for item in first["output"]]   # ids name nothing kept
    assert sent["input"] == [{"type": "message", "role": "user", "content": "cobalt"}, *said,
                             {"type": "message", "role": "user", "content": "the word?"}]


async def test_a_store_false_response_is_the_sockets_own_another_socket_cannot_chain_on_it(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        first = (await turn(ws, type="response.create", model="demo", input="copper", store=False))[-1]["response"]
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        missed = (await turn(ws, type="response.create", model="demo", input="again", store=False,
                             previous_response_id=first["id"]))[-1]
        recovered = (await turn(ws, type="response.create", model="demo", input="start over", store=False))[-1]
    assert missed["type"] == "error" and missed["error"]["code"] == "previous_response_not_found"
    assert recovered["type"] == "response.completed"


async def test_a_failed_turn_forgets_the_response_it_continued(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        first = (await turn(ws, type="response.create", model="demo", input="ember", store=False))[-1]["response"]
        orphan = (await turn(ws, type="response.create", model="demo", store=False, previous_response_id=first["id"],
                             input=[{"type": "function_call_output", "call_id": "call_none", "output": "?"}]))[-1]
        stale = (await turn(ws, type="response.create", model="demo", input="still there?", store=False,
                            previous_response_id=first["id"]))[-1]
    assert orphan["type"] == "error" and orphan["status"] == 400 and orphan["error"]["param"] == "input[0].call_id"
    assert stale["type"] == "error" and stale["error"]["code"] == "previous_response_not_found"
    assert len(bodies(gw)) == 1   # neither reached the backend


async def test_a_chain_that_continued_a_stored_response_goes_on_from_the_backend_that_holds_it(start_gateway):
    gw = await start_gateway(config())
    async with open_websocket_url(ws_url(gw), extra_headers=AUTH) as ws:
        stored = (await turn(ws, type="response.create", model="demo", input="one"))[-1]["response"]
        unstored = (await turn(ws, type="response.create", model="demo", input="two", store=False,
                               previous_response_id=stored["id"]))[-1]["response"]
        third = (await turn(ws, type="response.create", model="demo", input="three", store=False,
                            previous_response_id=unstored["id"]))[-1]
    assert third["type"] == "response.completed" and third["response"]["previous_response_id"] == unstored["id"]
    sent = bodies(gw)[-1]
    assert sent["previous_response_id"] == stored["id"]
    assert [i.get("content") for i in sent["input"] if i.get("role") == "user"] == ["two", "three"]
