"""Loading the operations sections: tracing, logging, admin."""

from __future__ import annotations

import ipaddress
from typing import Any

from switchyard.config import rules
from switchyard.config.operations import Admin, Logging, Tracing, TracingHeaders
from switchyard.config.rules import Invalid, Reader

HEADER_NAME = r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}"


def header_name(value: Any) -> str:
    return rules.string(HEADER_NAME, "an HTTP header name")(value).lower()


def optional_header_name(value: Any) -> str:
    if value == "":
        return ""
    return header_name(value)


def cidr(value: Any) -> str:
    text = rules.string()(value)
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise Invalid(f"must be an IP address or CIDR block like 10.0.0.0/8, got {text!r}") from None


def tracing(r: Reader) -> Tracing:
    d, dh = Tracing(), TracingHeaders()
    h = r.section("headers")
    headers = TracingHeaders(
        trace_id=h.get("trace_id", header_name, dh.trace_id),
        request_id=h.get("request_id", header_name, dh.request_id),
        correlation_id=h.get("correlation_id", header_name, dh.correlation_id),
        client_ref=h.get("client_ref", optional_header_name, dh.client_ref),
    )
    h.finish()
    out = Tracing(enabled=r.get("enabled", rules.boolean, d.enabled),
                  w3c_trace_context=r.get("w3c_trace_context", rules.boolean, d.w3c_trace_context),
                  headers=headers)
    r.finish()
    return out


def logging_(r: Reader) -> Logging:
    d = Logging()
    out = Logging(
        level=r.get("level", rules.one_of({v: v for v in ("debug", "info", "warning", "error")}), d.level),
        format=r.get("format", rules.one_of({"json": "json", "text": "text"}), d.format),
    )
    r.finish()
    return out


def admin_token(value: Any) -> str:
    # The message never repeats the value: it is a secret.
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {rules.type_name(value)}")
    if len(value) < 16 or len(value) > 512 or any(ch.isspace() for ch in value):
        raise Invalid("must be 16 to 512 characters without spaces (a bearer token); the value is not shown")
    return value


def admin(r: Reader) -> Admin:
    token = r.get("token", admin_token, None)
    r.finish()
    return Admin(token=token)
