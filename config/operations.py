"""Frozen config for running the gateway among other systems: tracing, logs, admin.

Separate from ``schema.py`` because none of it changes where a call goes;
it changes what the operator and the surrounding infrastructure see.
"""

from __future__ import annotations

from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, section
from switchyard.config.telemetry import OtlpExport, check_otlp


@frozen
class TracingHeaders:
    trace_id: str = field("x-trace-id", values.header_name)
    request_id: str = field("x-request-id", values.header_name)
    correlation_id: str = field("x-correlation-id", values.header_name)
    client_ref: str = field("", values.optional_header_name)     # empty: no client reference header


@frozen
class Tracing:
    enabled: bool = field(True, rules.boolean)
    w3c_trace_context: bool = field(True, rules.boolean)
    headers: TracingHeaders = section(TracingHeaders)
    # The gateway's own spans to an OpenTelemetry collector; None (absent): none are exported.
    otlp: OtlpExport | None = section(OtlpExport, optional=True, check=check_otlp)


@frozen
class Logging:
    level: str = field("info", values.words("debug", "info", "warning", "error"))
    format: str = field("json", values.words("json", "text"))


@frozen
class Admin:
    # Bearer token for /admin/*. None: the admin API is off (404), never open.
    token: str | None = field(None, values.bearer_token, repr=False)
