"""Tracing through the app: the x-request-id echo, the 400, client_ref counting, propagation upstream
across retries and fallback, tracing off, and the JSON log line (no secrets, no prompt)."""

import io
import json
import logging
import re

import pytest

from switchyard.actors import log_fields
from switchyard.protocol.http.logs import JsonFormatter
from tests.actors.test_failover import BASE, backend, sims
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TID = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
ROUTER_ID = re.compile(rb"req_[0-9a-f]{32}")
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
TOKEN = "test-admin-token-0123456789"
ADMIN = f"admin: {{token: {TOKEN}}}\n"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]
CLIENT_REF = "tracing: {headers: {client_ref: X-Client-Ref}}\n"
OK = BASE + backend("a", "big", "{latency: 10ms}")
# a fails with 503 (retried once on a), then the chain moves to small on b
RETRY_THEN_FALLBACK = BASE + backend("a", "big", "{latency: 10ms, failure: {status: 503}}") + \
    backend("b", "small", "{latency: 10ms}")


def upstream(app, name):
    return sims(app)[f"{name}.simulated"].requests


async def events_of(app, reply):
    rid = reply.headers[b"x-continuum-request-id"].decode()
    got = await request(app, "GET", f"/admin/requests/{rid}/events", headers=AUTH)
    assert got.status == 200
    return got.json()


# --- the x-request-id echo ---------------------------------------------------------

async def test_response_echoes_valid_client_request_id(autojump_clock):
    async with gateway(OK) as app:
        for method, path, body in [("POST", "/v1/chat/completions", chat("big")), ("GET", "/v1/models", None),
                                   ("GET", "/nowhere", None), ("POST", "/v1/chat/completions", chat("nope"))]:
            reply = await request(app, method, path, body, headers=[(b"x-request-id", b"REF.001:A/7")])
            assert reply.headers[b"x-request-id"] == b"REF.001:A/7", (path, reply.status)
            assert ROUTER_ID.fullmatch(reply.headers[b"x-continuum-request-id"])


async def test_response_request_id_falls_back_to_router_id(autojump_clock):
    async with gateway(OK) as app:
        for method, path, body in [("POST", "/v1/chat/completions", chat("big")), ("GET", "/health", None)]:
            reply = await request(app, method, path, body)
            assert ROUTER_ID.fullmatch(reply.headers[b"x-request-id"])
            assert reply.headers[b"x-request-id"] == reply.headers[b"x-continuum-request-id"]


async def test_invalid_request_id_is_a_400_that_still_names_the_call(autojump_clock):
    async with gateway(OK) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"),
                              headers=[(b"x-request-id", b"not valid; at all")])
        assert reply.status == 400
        error = reply.json()["error"]
        assert (error["type"], error["code"], error["param"]) == \
            ("invalid_request_error", "invalid_request_id", "x-request-id")
        assert ROUTER_ID.fullmatch(reply.headers[b"x-continuum-request-id"])
        assert reply.headers[b"x-request-id"] == reply.headers[b"x-continuum-request-id"]
        assert upstream(app, "a") == []


# --- client_ref -------------------------------------------------------------------

async def test_client_ref_valid_is_forwarded_and_recorded(autojump_clock):
    async with gateway(ADMIN + CLIENT_REF + OK) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"),
                              headers=[(b"x-client-ref", b"billing-dept-01")])
        assert reply.status == 200
        assert upstream(app, "a")[0].headers["x-client-ref"] == "billing-dept-01"
        trace = await events_of(app, reply)
        assert trace["client_ref"] == "billing-dept-01"
        assert all(e["client_ref"] == "billing-dept-01" for e in trace["events"])
        assert app.runtime.client_ref_rejected.as_dict() == {}


async def test_client_ref_invalid_is_dropped_and_counted_by_reason(autojump_clock):
    sent = [b"", b"x" * 129, b"a\x01b", b"a/b", b"a b", b"ok/no"]
    async with gateway(CLIENT_REF + OK) as app:
        for value in sent:
            reply = await request(app, "POST", "/v1/chat/completions", chat("big"),
                                  headers=[(b"x-client-ref", value)])
            assert reply.status == 200, value
        assert all("x-client-ref" not in r.headers for r in upstream(app, "a"))
        assert app.runtime.client_ref_rejected.as_dict() == {"empty": 1, "too_long": 1, "control_char": 1,
                                                             "invalid_char": 3}
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        for reason, count in [("empty", 1), ("too_long", 1), ("control_char", 1), ("invalid_char", 3)]:
            assert f'client_ref_rejected_total{{reason="{reason}"}} {count}.0' in metrics


async def test_client_ref_counter_is_exported_at_zero_before_any_rejection(autojump_clock):
    async with gateway(OK) as app:
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'client_ref_rejected_total{reason="empty"} 0.0' in metrics


# --- propagation ------------------------------------------------------------------

async def test_propagation_same_trace_new_span_across_retry_and_fallback(autojump_clock):
    async with gateway(ADMIN + RETRY_THEN_FALLBACK) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"),
                              headers=[(b"x-request-id", b"client-7")])
        assert reply.status == 200
        sent = upstream(app, "a") + upstream(app, "b")
        assert len(sent) == 3                              # a, a again (retry), b (fallback)
        parents = [TRACEPARENT.fullmatch(r.headers["traceparent"]).groups() for r in sent]
        trace_ids = {p[0] for p in parents}
        assert len(trace_ids) == 1
        trace_id = trace_ids.pop()
        assert len({p[1] for p in parents}) == 3           # a new span per attempt
        assert all(p[2] == "01" for p in parents)
        for r in sent:
            # every id header carries the trace id; the client's own id stays on our side
            assert r.headers["x-trace-id"] == r.headers["x-request-id"] == r.headers["x-correlation-id"] == trace_id
        assert reply.headers[b"x-request-id"] == b"client-7"
        trace = await events_of(app, reply)
        assert trace["trace_id"] == trace_id and trace["x_request_id"] == "client-7"
        assert all(e["trace_id"] == trace_id and e["x_request_id"] == "client-7" for e in trace["events"])
        spans = [e["detail"]["span_id"] for e in trace["events"] if e["event"] == "selected"]
        assert spans == [p[1] for p in parents]


async def test_propagation_continues_inbound_traceparent(autojump_clock):
    async with gateway(RETRY_THEN_FALLBACK) as app:
        await request(app, "POST", "/v1/chat/completions", chat("big"), headers=[
            (b"traceparent", f"00-{TID}-{PARENT}-00".encode()), (b"tracestate", b"congo=t61rcWkgMzE"),
            (b"x-trace-id", b"4bf92f3577b34da6a3ce929d0e0e4736")])
        for r in upstream(app, "a") + upstream(app, "b"):
            trace_id, span, flags = TRACEPARENT.fullmatch(r.headers["traceparent"]).groups()
            assert (trace_id, flags) == (TID, "00") and span != PARENT
            assert r.headers["tracestate"] == "congo=t61rcWkgMzE" and r.headers["x-trace-id"] == TID


async def test_propagation_uses_trace_id_header_without_traceparent(autojump_clock):
    async with gateway(OK) as app:
        await request(app, "POST", "/v1/chat/completions", chat("big"),
                      headers=[(b"x-trace-id", b"4bf92f3577b34da6a3ce929d0e0e4736"), (b"tracestate", b"a=1")])
        r = upstream(app, "a")[0]
        assert r.headers["traceparent"].startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-")
        assert "tracestate" not in r.headers


# --- off --------------------------------------------------------------------------

async def test_tracing_disabled_propagates_and_echoes_nothing(autojump_clock):
    async with gateway("tracing: {enabled: false}\n" + ADMIN + OK) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"), headers=[
            (b"x-request-id", b"not valid; but nobody reads it"), (b"traceparent", f"00-{TID}-{PARENT}-01".encode())])
        assert reply.status == 200
        assert b"x-request-id" not in reply.headers
        assert ROUTER_ID.fullmatch(reply.headers[b"x-continuum-request-id"])
        sent = upstream(app, "a")[0].headers
        assert not {"x-request-id", "x-trace-id", "x-correlation-id", "traceparent", "tracestate"} & set(sent)
        trace = await events_of(app, reply)
        assert trace["trace_id"] is None and all(e["trace_id"] is None for e in trace["events"])


# --- structured logs ---------------------------------------------------------------

SECRET = "sk-test-secret-key-0123456789abcdef"
PROMPT = "the-private-prompt-text-4711"


async def test_json_log_lines_carry_trace_ids_and_never_the_key_or_prompt(autojump_clock):
    config = CLIENT_REF + BASE.replace("fallback_chains: {big: [small]}", "fallback_chains: {}") + \
        backend("a", "big", "{latency: 10ms, failure: {status: 503}}", f", api_key: {SECRET}")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        async with gateway(config) as app:
            body = chat("big")
            body["messages"][0]["content"] = PROMPT
            reply = await request(app, "POST", "/v1/chat/completions", body, headers=[
                (b"x-request-id", b"REF.001:A/7"), (b"x-client-ref", b"billing-dept-01")])
            assert reply.status == 503
            sent = upstream(app, "a")
            assert sent[0].headers["authorization"] == f"Bearer {SECRET}"   # the key did go upstream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    text = out.getvalue()
    assert SECRET not in text and PROMPT not in text
    lines = [json.loads(line) for line in text.splitlines()]
    route = [line for line in lines if line["logger"] == "switchyard.route"]
    assert len(route) == 1
    line = route[0]
    trace_id = TRACEPARENT.fullmatch(sent[0].headers["traceparent"]).group(1)
    assert line["level"] == "info" and line["timestamp"].endswith("Z")
    assert (line["trace_id"], line["x_request_id"], line["client_ref"], line["backend"], line["model"]) == \
        (trace_id, "REF.001:A/7", "billing-dept-01", "a", "big")
    assert line["request_id"] == reply.headers[b"x-continuum-request-id"].decode()
    assert json.loads(line["message"])["trace_id"] == trace_id


async def test_log_fields_are_bound_for_the_request_only(autojump_clock):
    async with gateway(OK) as app:
        await request(app, "POST", "/v1/chat/completions", chat("big"), headers=[(b"x-request-id", b"r1")])
        await request(app, "POST", "/v1/chat/completions", chat("big"), headers=[(b"x-request-id", b"bad id")])
        assert log_fields.bound() == {}     # the harness runs the app in this very task: nothing leaked out
