"""Frozen config for running the gateway among other systems: tracing, logs, admin.

Separate from ``schema.py`` because none of it changes where a call goes;
it changes what the operator and the surrounding infrastructure see.
"""

from __future__ import annotations

import attrs
from attrs import frozen


@frozen
class TracingHeaders:
    trace_id: str = "x-trace-id"
    request_id: str = "x-request-id"
    correlation_id: str = "x-correlation-id"
    client_ref: str = ""          # empty: no client reference header


@frozen
class Tracing:
    enabled: bool = True
    w3c_trace_context: bool = True
    headers: TracingHeaders = TracingHeaders()


@frozen
class Logging:
    level: str = "info"           # debug | info | warning | error
    format: str = "json"          # json | text


@frozen
class Admin:
    # Bearer token for /admin/*. None: the admin API is off (404), never open.
    token: str | None = attrs.field(default=None, repr=False)
