"""The gate every door passes (``protocol/http/gate.py``): the same rules, and the same refusals in each door's
own shape, for the OpenAI HTTP doors, the Messages door, the realtime websocket and the Responses websocket."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio

from switchyard.actors.hops import HEADER
from switchyard.actors.ledger.record import UsageQuery
from switchyard.config.load import load_text
from switchyard.protocol.serving.app import App
from tests.actors.test_realtime import Client, connect, upstreams  # noqa: F401 (a fixture)
from tests.harness import chat, gateway, request

KEY = b"sk-client-0123456789abcdef"
AUTH = [(b"authorization", b"Bearer " + KEY)]

CONFIG = """
health_checks: {enabled: false}
server: {max_hops: 2}
api_keys:
  - {id: team, key: sk-client-0123456789abcdef}
  - {id: other, key: sk-other-0123456789abcdef}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 0s, chunks: 2}}
"""
REVOKED = CONFIG.replace("  - {id: team, key: sk-client-0123456789abcdef}\n", "")   # the team key is gone
ANTHROPIC = {"model": "demo", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
DOORS = ("chat", "messages", "realtime", "responses_ws")


@attrs.frozen
class Answer:
    status: int
    shape: str            # "openai" (our envelope) or "anthropic"
    code: str | None      # our envelope's code; None in Anthropic's, which has none
    message: str
    request_id: str


async def knock(app: Any, door: str, headers: list[tuple[bytes, bytes]] | None = None) -> Answer:
    """One attempt at ``door`` that the gate refuses: its answer, however the door gives it."""
    headers = AUTH if headers is None else headers
    if door in ("chat", "messages"):
        path, body = ("/v1/chat/completions", chat()) if door == "chat" else ("/anthropic/v1/messages", ANTHROPIC)
        reply = await request(app, "POST", path, body, headers)
        status, found, request_id = reply.status, reply.json(), reply.headers[b"x-continuum-request-id"].decode()
    else:
        path = "/v1/realtime" if door == "realtime" else "/v1/responses"
        async with connect(app, path=path, headers=headers) as client:
            status, sent, found = await client.refusal()
        request_id = sent[b"x-continuum-request-id"].decode()
    if found.get("type") == "error":
        assert found["request_id"] == request_id   # Anthropic's envelope names the request
        return Answer(status, "anthropic", None, found["error"]["message"], request_id)
    return Answer(status, "openai", found["error"]["code"], found["error"]["message"], request_id)


def shapes(answers: dict[str, Answer]) -> dict[str, str]:
    return {door: a.shape for door, a in answers.items()}


OWN_SHAPES = {"chat": "openai", "messages": "anthropic", "realtime": "openai", "responses_ws": "openai"}


async def test_before_the_runtime_is_up_every_door_refuses_503():
    app = App(lambda: load_text(CONFIG).snapshot)   # its lifespan never ran: no runtime
    answers = {door: await knock(app, door) for door in DOORS}
    assert {a.status for a in answers.values()} == {503} and shapes(answers) == OWN_SHAPES
    assert {a.code for a in answers.values()} == {"service_unavailable", None}
    assert all(a.message == "The gateway is starting or stopping; retry shortly" for a in answers.values())
    assert app.active_requests == 0


async def test_while_draining_every_door_refuses_503_shutting_down(autojump_clock):
    async with gateway(CONFIG) as app:
        app.runtime.draining = True
        answers = {door: await knock(app, door) for door in DOORS}
        assert {a.status for a in answers.values()} == {503} and shapes(answers) == OWN_SHAPES
        assert {a.code for a in answers.values()} == {"server_shutting_down", None}
        assert answers["chat"].message == answers["messages"].message == \
            "The server is shutting down; send this call to another instance"
        assert answers["realtime"].message == "The server is shutting down; open this session on another instance"
        assert answers["responses_ws"].message == "The server is shutting down; open this socket on another instance"
        assert app.active_requests == 0 and not app.runtime.calls


async def test_an_http_call_the_gate_refuses_is_recorded_with_the_key_judged_at_the_edge_a_handshake_is_not(
        autojump_clock):
    async with gateway(CONFIG + "usage: {ledger: memory}\n") as app:
        app.runtime.draining = True
        answers = {door: await knock(app, door) for door in DOORS}
        await app.runtime.ledger.flush()
        records = app.runtime.ledger.store.records(UsageQuery(purpose=None), 1000)
    assert sorted((r.request_id, r.status, r.error_code, r.key_id) for r in records) == \
        sorted((answers[door].request_id, 503, "server_shutting_down", "team") for door in ("chat", "messages"))


async def test_at_max_concurrent_requests_every_door_refuses_503(autojump_clock):
    async with gateway(CONFIG.replace("server: {", "server: {max_concurrent_requests: 1, ")) as app:
        async with connect(app, path="/v1/responses", headers=AUTH) as holder:   # an open socket takes the slot
            assert holder.first["type"] == "websocket.accept" and app.active_requests == 1
            answers = {door: await knock(app, door) for door in DOORS}
        assert {a.status for a in answers.values()} == {503} and shapes(answers) == OWN_SHAPES
        assert {a.code for a in answers.values()} == {"too_many_concurrent_requests", None}
        assert all(a.message == "The gateway is at its limit of 1 concurrent requests; retry shortly"
                   for a in answers.values())
        assert app.active_requests == 0
        assert (await request(app, "POST", "/v1/chat/completions", chat(), AUTH)).status == 200   # the slot is free


async def test_past_max_hops_every_door_refuses_508_before_the_key(autojump_clock):
    async with gateway(CONFIG) as app:
        answers = {door: await knock(app, door, [(HEADER.encode(), b"3")]) for door in DOORS}   # and no key
        assert {a.status for a in answers.values()} == {508} and shapes(answers) == OWN_SHAPES
        assert {a.code for a in answers.values()} == {"loop_detected", None}


async def test_a_key_revoked_by_a_reload_is_refused_401_by_every_door(autojump_clock):
    async with gateway(CONFIG) as app:
        app.runtime.apply(load_text(REVOKED).snapshot)
        answers = {door: await knock(app, door) for door in DOORS}
        assert {a.status for a in answers.values()} == {401} and shapes(answers) == OWN_SHAPES
        assert {a.code for a in answers.values()} == {"invalid_api_key", None}


async def upload_across_a_reload(app: Any, path: str, body: dict[str, Any], then: Any) -> tuple[int, Any]:
    """``body`` sent to ``path`` with the team key, arriving only after ``then`` (a revision) is applied."""
    answer: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        if "sent" not in answer:
            await trio.sleep(5)
            answer["sent"] = True
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
        await trio.sleep_forever()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] = answer.get("body", b"") + message.get("body", b"")

    async with trio.open_nursery() as nursery:
        scope = {"type": "http", "method": "POST", "path": path, "headers": AUTH}
        nursery.start_soon(app, scope, receive, send)
        await trio.sleep(1)
        app.runtime.apply(then)
    return answer["status"], json.loads(answer["body"])


@pytest.mark.parametrize("path, body", [("/v1/chat/completions", chat()), ("/v1/responses",
                                                                           {"model": "demo", "input": "hi"}),
                                        ("/anthropic/v1/messages", ANTHROPIC),
                                        ("/anthropic/v1/messages/count_tokens",
                                         {k: v for k, v in ANTHROPIC.items() if k != "max_tokens"})])
async def test_a_key_revoked_while_the_body_uploads_is_judged_by_the_revision_current_once_it_is_in(
        autojump_clock, path, body):
    async with gateway(CONFIG) as app:
        status, answer = await upload_across_a_reload(app, path, body, load_text(REVOKED).snapshot)
        assert status == 401
        if path.startswith("/anthropic/"):
            assert answer["error"]["type"] == "authentication_error"
        else:
            assert answer["error"]["code"] == "invalid_api_key"
        assert app.active_requests == 0


async def next_event(client: Client) -> dict[str, Any]:
    with trio.fail_after(10):
        return await client.event()


async def test_each_turn_of_a_responses_socket_is_judged_by_the_revision_current_then(autojump_clock):
    async with gateway(CONFIG) as app, connect(app, path="/v1/responses", headers=AUTH) as client:
        assert client.first["type"] == "websocket.accept"
        await client.send({"type": "response.create", "model": "demo", "input": "hi"})
        while (event := await next_event(client))["type"] != "response.completed":
            assert event["type"] != "error", event
        app.runtime.apply(load_text(REVOKED).snapshot)
        await client.send({"type": "response.create", "model": "demo", "input": "again"})
        event = await next_event(client)
        assert (event["type"], event["status"], event["error"]["code"]) == ("error", 401, "invalid_api_key")


@pytest.mark.parametrize("path", ["/v1/realtime", "/v1/responses"])
async def test_a_socket_is_counted_while_open_and_a_drain_waits_for_it_then_closes_it_1001(
        autojump_clock, upstreams, path):  # noqa: F811 (the fixture)
    config = CONFIG + "  - {name: rt, type: openai, url: 'http://rt.test', discovery: false, models: [live]}\n"
    async with gateway(config) as app:
        query = b"model=live" if path == "/v1/realtime" else b""
        async with connect(app, query=query, path=path, headers=AUTH) as client:
            assert client.first["type"] == "websocket.accept"
            if path == "/v1/realtime":
                await client.event()   # the upstream's session.created
            assert app.active_requests == 1 and len(app.runtime.calls) == 1
            t0 = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(app.runtime.drain, 10.0)
                closed = await client.next()
            assert closed["type"] == "websocket.close" and closed["code"] == 1001
            assert trio.current_time() == t0 + 10.0   # the whole window, then the end
            await client.leave()
        assert app.active_requests == 0 and not app.runtime.calls
