"""Tracing headers: one table per precedence rule and per validation rule (pure; no app)."""

import re
import secrets

import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.trace import TraceContext, outbound_headers
from switchyard.config.operations import Tracing, TracingHeaders
from switchyard.protocol.http.tracing import response_request_id, trace_context

TID = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
HEADER_TID = "4bf92f3577b34da6a3ce929d0e0e4736"
FRESH = "1234567890abcdef1234567890abcdef"
TRACEPARENT = f"00-{TID}-{PARENT}-01"
ON = Tracing()
W3C_OFF = Tracing(w3c_trace_context=False)
WITH_REF = Tracing(headers=TracingHeaders(client_ref="x-client-ref"))


def fixed(nbytes):
    return FRESH[:nbytes * 2]


def ctx(headers, tracing=ON, token_hex=fixed):
    raw = [(k.encode(), v.encode("latin-1")) for k, v in headers]
    return trace_context(raw, tracing, token_hex=token_hex)


# --- trace id precedence ---------------------------------------------------------

@pytest.mark.parametrize("headers", [
    [("traceparent", TRACEPARENT)],
    [("traceparent", TRACEPARENT), ("x-trace-id", HEADER_TID)],
    [("x-trace-id", HEADER_TID), ("traceparent", TRACEPARENT)],
    [("traceparent", TRACEPARENT), ("x-trace-id", HEADER_TID), ("x-request-id", "abc")],
], ids=["alone", "before_header", "after_header", "with_request_id"])
def test_precedence_valid_traceparent_wins(headers):
    c = ctx(headers)
    assert (c.trace_id, c.source, c.parent_id, c.flags) == (TID, "traceparent", PARENT, "01")


@pytest.mark.parametrize("traceparent", [
    f"01-{TID}-{PARENT}-01",                     # another version
    f"ff-{TID}-{PARENT}-01",                     # the forbidden version
    f"00-{TID.upper()}-{PARENT}-01",             # uppercase trace id
    f"00-{'0' * 32}-{PARENT}-01",                # all-zero trace id
    f"00-{TID}-{'0' * 16}-01",                   # all-zero parent id
    f"00-{TID[:-1]}-{PARENT}-01",                # short trace id
    f"00-{TID}-{PARENT}0-01",                    # long parent id
    f"00-{TID}-{PARENT}-1",                      # one-digit flags
    f"00-{TID}-{PARENT}-0g",                     # non-hex flags
    f"00-{TID}-{PARENT}-01-extra",               # trailing data
    f"00_{TID}_{PARENT}_01",                     # wrong separator
    f"{TRACEPARENT},{TRACEPARENT}",              # sent twice
    "",
], ids=["v01", "vff", "upper", "zero_trace", "zero_parent", "short_trace", "long_parent", "short_flags",
        "bad_flags", "trailing", "separator", "repeated", "empty"])
def test_precedence_invalid_traceparent_falls_to_trace_id_header(traceparent):
    c = ctx([("traceparent", traceparent), ("x-trace-id", HEADER_TID)])
    assert (c.trace_id, c.source, c.parent_id) == (HEADER_TID, "header", None)


@pytest.mark.parametrize("headers,expected", [
    ([("traceparent", TRACEPARENT), ("x-trace-id", HEADER_TID)], HEADER_TID),
    ([("traceparent", TRACEPARENT)], FRESH),
], ids=["header_next", "fresh_next"])
def test_precedence_traceparent_ignored_when_w3c_off(headers, expected):
    c = ctx(headers, W3C_OFF)
    assert c.trace_id == expected and c.parent_id is None


@pytest.mark.parametrize("value", [
    HEADER_TID.upper(), HEADER_TID[:-1], HEADER_TID + "0", "0" * 32, "g" * 32, f"{HEADER_TID},{HEADER_TID}", "",
], ids=["uppercase", "short", "long", "all_zero", "non_hex", "repeated", "empty"])
def test_precedence_invalid_trace_id_header_falls_to_fresh_id(value):
    c = ctx([("x-trace-id", value)])
    assert (c.trace_id, c.source) == (FRESH, "generated")


@pytest.mark.parametrize("headers", [
    [],
    [("x-request-id", "REF.001:A/7")],       # a request id never becomes the trace id
    [("x-correlation-id", HEADER_TID)],      # nor does a correlation id
], ids=["nothing", "request_id_only", "correlation_id_only"])
def test_precedence_fresh_random_id_last(headers):
    c = ctx(headers, token_hex=secrets.token_hex)
    assert re.fullmatch(r"[0-9a-f]{32}", c.trace_id) and c.trace_id.strip("0") and c.source == "generated"
    assert ctx(headers, token_hex=secrets.token_hex).trace_id != c.trace_id


def test_precedence_fresh_id_is_never_all_zero():
    draws = iter(["0" * 32, FRESH])
    assert ctx([], token_hex=lambda n: next(draws)).trace_id == FRESH


@pytest.mark.parametrize("tracing,headers,expected", [
    (Tracing(headers=TracingHeaders(trace_id="x-b3-traceid")), [("x-b3-traceid", HEADER_TID)], HEADER_TID),
    (Tracing(headers=TracingHeaders(trace_id="x-b3-traceid")), [("x-trace-id", HEADER_TID)], FRESH),
], ids=["configured_name_read", "default_name_ignored"])
def test_precedence_uses_configured_trace_id_header(tracing, headers, expected):
    assert ctx(headers, tracing).trace_id == expected


# --- x-request-id ---------------------------------------------------------------

@pytest.mark.parametrize("value", ["REF.001:A/7", "a", "A" * 128, "550e8400-e29b-41d4-a716-446655440000",
                                   "tenant:abc/req_1.2-3"],
                         ids=["spec_example", "one_char", "max_len", "uuid", "all_punctuation"])
def test_request_id_valid_is_kept_and_never_replaces_trace_id(value):
    c = ctx([("x-request-id", value), ("x-trace-id", HEADER_TID)])
    assert c.x_request_id == value and c.trace_id == HEADER_TID


@pytest.mark.parametrize("value", ["", "A" * 129, "has space", "a,b", "a;b", "caf\xe9", "a\x01b", "a\tb", "<x>"],
                         ids=["empty", "too_long", "space", "comma", "semicolon", "non_ascii", "control_char",
                              "tab", "angle_brackets"])
def test_request_id_invalid_is_rejected(value):
    with pytest.raises(InvalidRequest) as info:
        ctx([("x-request-id", value)])
    err = info.value
    assert (err.status, err.type, err.code, err.param) == (400, "invalid_request_error", "invalid_request_id",
                                                          "x-request-id")


def test_request_id_sent_twice_is_rejected():
    with pytest.raises(InvalidRequest):
        ctx([("x-request-id", "a"), ("x-request-id", "b")])


def test_request_id_configured_name_is_the_one_read():
    tracing = Tracing(headers=TracingHeaders(request_id="x-client-request-id"))
    assert ctx([("x-client-request-id", "mine"), ("x-request-id", "bad value")], tracing).x_request_id == "mine"
    with pytest.raises(InvalidRequest) as info:
        ctx([("x-client-request-id", "bad value")], tracing)
    assert info.value.param == "x-client-request-id"


def test_request_id_echo_prefers_client_value_then_router_id():
    assert response_request_id(TraceContext(trace_id=TID, x_request_id="mine"), "req_1") == "mine"
    assert response_request_id(TraceContext(trace_id=TID), "req_1") == "req_1"


# --- client_ref -----------------------------------------------------------------

@pytest.mark.parametrize("value", ["billing-dept-01", "a", "A" * 128, "team.x:42_y"],
                         ids=["spec_example", "one_char", "max_len", "punctuation"])
def test_client_ref_valid_is_kept(value):
    c = ctx([("x-client-ref", value)], WITH_REF)
    assert (c.client_ref, c.client_ref_rejected) == (value, None)


@pytest.mark.parametrize("value,reason", [
    ("", "empty"),
    ("   ", "empty"),                 # blanks around a value are not part of it
    ("A" * 129, "too_long"),
    ("a\x01b", "control_char"),
    ("a\x7fb", "control_char"),
    ("a/b", "invalid_char"),          # unlike x-request-id, no slash
    ("a b", "invalid_char"),
    ("caf\xe9", "invalid_char"),
    ("a,b", "invalid_char"),          # sent twice
], ids=["empty", "blank", "too_long", "control", "delete", "slash", "space", "non_ascii", "repeated"])
def test_client_ref_invalid_is_dropped_with_reason(value, reason):
    c = ctx([("x-client-ref", value), ("x-trace-id", HEADER_TID)], WITH_REF)
    assert (c.client_ref, c.client_ref_rejected, c.trace_id) == (None, reason, HEADER_TID)


@pytest.mark.parametrize("tracing,headers", [
    (ON, [("x-client-ref", "billing")]),          # no header configured: not read
    (WITH_REF, []),                               # configured, not sent: nothing to reject
], ids=["not_configured", "not_sent"])
def test_client_ref_absent_is_neither_kept_nor_counted(tracing, headers):
    c = ctx(headers, tracing)
    assert (c.client_ref, c.client_ref_rejected) == (None, None)


# --- tracestate -----------------------------------------------------------------

@pytest.mark.parametrize("headers,expected", [
    ([("traceparent", TRACEPARENT), ("tracestate", "congo=t61rcWkgMzE")], "congo=t61rcWkgMzE"),
    ([("traceparent", TRACEPARENT), ("tracestate", "a=1"), ("tracestate", "b=2")], "a=1,b=2"),
    ([("traceparent", TRACEPARENT), ("tracestate", "x" * 512)], "x" * 512),
    ([("traceparent", TRACEPARENT), ("tracestate", "x" * 513)], None),
    ([("traceparent", TRACEPARENT), ("tracestate", "a=\x01")], None),
    ([("traceparent", TRACEPARENT), ("tracestate", "a=\xe9")], None),
    ([("traceparent", TRACEPARENT), ("tracestate", "")], None),
    ([("tracestate", "a=1"), ("x-trace-id", HEADER_TID)], None),                          # no traceparent
    ([("traceparent", f"00-{'0' * 32}-{PARENT}-01"), ("tracestate", "a=1")], None),      # invalid one
], ids=["kept", "repeated_joined", "max_len", "too_long", "control_char", "non_ascii", "empty",
        "without_traceparent", "with_invalid_traceparent"])
def test_tracestate_kept_only_valid_and_with_valid_traceparent(headers, expected):
    assert ctx(headers).tracestate == expected


def test_tracestate_dropped_when_w3c_off():
    assert ctx([("traceparent", TRACEPARENT), ("tracestate", "a=1")], W3C_OFF).tracestate is None


# --- off ------------------------------------------------------------------------

def test_disabled_reads_nothing_and_rejects_nothing():
    assert ctx([("x-request-id", "bad value"), ("traceparent", TRACEPARENT)], Tracing(enabled=False)) is None


# --- outbound ---------------------------------------------------------------------

def test_outbound_sets_ids_to_trace_id_and_a_traceparent_with_the_span():
    c = ctx([("x-request-id", "REF.001:A/7")])
    assert dict(outbound_headers(c, ON, "00f067aa0ba902b7")) == {
        "x-request-id": FRESH, "x-trace-id": FRESH, "x-correlation-id": FRESH,
        "traceparent": f"00-{FRESH}-00f067aa0ba902b7-01"}


def test_outbound_keeps_inbound_flags_and_tracestate():
    c = ctx([("traceparent", f"00-{TID}-{PARENT}-00"), ("tracestate", "congo=1")])
    out = dict(outbound_headers(c, ON, "00f067aa0ba902b7"))
    assert out["traceparent"] == f"00-{TID}-00f067aa0ba902b7-00" and out["tracestate"] == "congo=1"


def test_outbound_without_w3c_has_no_traceparent():
    c = ctx([("x-trace-id", HEADER_TID)], W3C_OFF)
    out = dict(outbound_headers(c, W3C_OFF, "00f067aa0ba902b7"))
    assert "traceparent" not in out and "tracestate" not in out and out["x-trace-id"] == HEADER_TID


@pytest.mark.parametrize("sent,forwarded", [("billing-dept-01", "billing-dept-01"), ("bad/ref", None)],
                         ids=["valid", "dropped"])
def test_outbound_forwards_client_ref_only_when_valid(sent, forwarded):
    c = ctx([("x-client-ref", sent)], WITH_REF)
    assert dict(outbound_headers(c, WITH_REF, "00f067aa0ba902b7")).get("x-client-ref") == forwarded


def test_outbound_uses_configured_names_and_never_reserved_ones():
    tracing = Tracing(headers=TracingHeaders(trace_id="x-b3-traceid", request_id="x-req",
                                             correlation_id="authorization", client_ref="content-type"))
    c = ctx([("content-type", "evil")], tracing)
    assert set(dict(outbound_headers(c, tracing, "00f067aa0ba902b7"))) == {"x-b3-traceid", "x-req", "traceparent"}
