"""Route events: every call's sequence, retrievable by its request id."""

import re

from tests.actors.test_failover import BASE, backend
from tests.actors.test_midstream import config as midstream_config
from tests.harness import chat, gateway, request

ID = re.compile(rb"req_[0-9a-f]{32}")
TOKEN = "test-admin-token-0123456789"
ADMIN = f"admin: {{token: {TOKEN}}}\n"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]


async def events_of(app, reply):
    rid = reply.headers[b"x-continuum-request-id"]
    got = await request(app, "GET", f"/admin/requests/{rid.decode()}/events", headers=AUTH)
    assert got.status == 200
    return got.json()


def summary(trace):
    return [(e["event"], e["attempt"], e["backend"], e["model"]) for e in trace["events"]]


async def test_every_response_carries_a_request_id(autojump_clock):
    async with gateway(ADMIN + BASE + backend("a", "big", "{latency: 10ms}")) as app:
        for method, path, body in [("POST", "/v1/chat/completions", chat("big")), ("GET", "/v1/models", None),
                                   ("POST", "/v1/chat/completions", chat("nope")), ("GET", "/nowhere", None),
                                   ("GET", "/ready", None)]:
            reply = await request(app, method, path, body)
            assert ID.fullmatch(reply.headers[b"x-continuum-request-id"]), (path, reply.status)


async def test_fallback_call_records_each_attempt_and_one_terminal_event(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 100ms, failure: {status: 503}}") + \
        backend("b", "small", "{latency: 100ms, chunks: 2}")
    async with gateway(ADMIN + config) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        trace = await events_of(app, reply)
        assert summary(trace) == [
            ("accepted", 0, None, "big"),
            ("selected", 1, "a", "big"),
            ("attempt_failed", 1, "a", "big"),
            ("retry_scheduled", 1, "a", "big"),
            ("selected", 2, "a", "big"),
            ("attempt_failed", 2, "a", "big"),
            ("route_changed", 2, None, "small"),
            ("selected", 3, "b", "small"),
            ("completed", 3, "b", "small"),
        ]
        assert trace["terminal_status"] == "completed" and trace["attempts"] == 3
        assert [e.get("terminal_status") for e in trace["events"]].count("completed") == 1
        revision = app.runtime.snapshot.revision
        assert all(e["request_id"] == trace["request_id"] and e["route_revision"] == revision
                   for e in trace["events"])
        failed = trace["events"][2]["detail"]
        assert failed["kind"] == "status" and failed["status"] == 503


async def test_mid_stream_failure_records_route_change_and_one_terminal_state(autojump_clock):
    async with gateway(ADMIN + midstream_config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        trace = await events_of(app, reply)
        kinds = [e["event"] for e in trace["events"]]
        assert kinds == ["accepted", "selected", "attempt_failed", "route_changed", "selected", "completed"]
        change = trace["events"][3]
        assert change["detail"]["mid_stream"] is True and change["detail"]["mode"] == "prefill"
        assert trace["events"][2]["detail"]["committed"] is True
        assert trace["events"][2]["detail"]["timeout"] == "chunk_interval"


async def test_failed_call_terminal_event_names_the_error(autojump_clock):
    config = BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {}") + \
        backend("a", "big", "{latency: 10ms, failure: {status: 400}}")
    async with gateway(ADMIN + config) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        trace = await events_of(app, reply)
        last = trace["events"][-1]
        assert last["event"] == "failed" and last["terminal_status"] == "failed"
        assert last["detail"]["status"] == 400


async def test_unknown_request_id_is_404(autojump_clock):
    async with gateway(ADMIN + BASE + backend("a", "big")) as app:
        reply = await request(app, "GET", "/admin/requests/req_0/events", headers=AUTH)
        assert reply.status == 404 and reply.json()["error"]["code"] == "request_not_found"


async def test_admin_api_is_off_without_a_token(autojump_clock):
    async with gateway(BASE + backend("a", "big")) as app:
        reply = await request(app, "GET", "/admin/requests/req_0/events", headers=AUTH)
        assert reply.status == 404


async def test_admin_api_needs_the_bearer_token(autojump_clock):
    async with gateway(ADMIN + BASE + backend("a", "big")) as app:
        for headers in ([], [(b"authorization", b"Bearer wrong-token-xxxxxxxxxx")],
                        [(b"authorization", TOKEN.encode())]):
            reply = await request(app, "GET", "/admin/requests/req_0/events", headers=headers)
            assert reply.status == 401 and reply.json()["error"]["type"] == "invalid_request_error"
            assert reply.headers[b"www-authenticate"].startswith(b"Bearer")
