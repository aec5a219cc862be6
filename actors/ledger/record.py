"""A ledger record (one call's end, or one classifier try) and a query over many.

Never prompt or answer text: identities, counts, the cost and the times.
``time`` is wall-clock Unix seconds (the ledger is read by people and across
instances); latencies are milliseconds on the call's own clock.
"""

from __future__ import annotations

import time
from typing import Any

from attrs import asdict, field, frozen

from switchyard.actors.ids import random_hex

PURPOSES = ("client", "classifier")
GROUPS = ("key", "org", "model", "backend", "day", "hour")
# A group's column in the record, for the identity groups.
GROUP_FIELDS = {"key": "key_id", "org": "organization_id", "model": "model", "backend": "backend"}


def new_record_id() -> str:
    """Unique, and in time order (microseconds first, then 72 random bits), so a store's index on it
    grows at its end instead of being written all over."""
    return f"{time.time_ns() // 1000:014x}{random_hex(9)}"


@frozen
class LedgerRecord:
    request_id: str                   # the x-continuum-request-id the client got
    time: float                       # when the call arrived, Unix seconds
    key_id: str | None                # the API key's id (never the key); None without keys
    organization_id: str | None       # the key's organization
    endpoint: str                     # chat | completions | embeddings | responses | messages | ...
    model: str | None                 # as requested (None: refused before a model was read)
    served_model: str | None          # the model that answered (or last tried)
    backend: str | None               # the backend that answered (or last tried)
    attempts: int                     # upstream attempts made
    status: int                       # the HTTP status the client got (499: it left first)
    error_code: str | None            # the error envelope's code, when the call failed
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None         # USD; None when a priced model was not involved
    estimated: bool = False           # tokens (and so cost) estimated: no usage came back
    latency_ms: float = 0.0           # arrival to end
    ttfb_ms: float | None = None      # arrival to the answer's first byte to the client
    stream: bool = False
    purpose: str = "client"           # client | classifier
    trace_id: str | None = None
    # The call's route events as JSON (GET /admin/requests/{id}/events' answer), kept for every call but one
    # clean attempt, whose record says it all: so any worker or instance can show why a call went as it did.
    route_events: str | None = None
    cache_hit: bool = False           # answered from the response cache: nothing went upstream, cost 0
    # The guardrails' verdicts on the call as JSON: which guardrail, stage, mode, action and detectors
    # (counts only: never the matched text); None when no guardrail applied.
    guardrails: str | None = None
    record_id: str = field(factory=new_record_id)   # the store's key: a replay never counts twice

    @property
    def failed(self) -> bool:
        return self.status >= 400

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LedgerRecord":
        return cls(**{name: data[name] for name in FIELDS if name in data})


FIELDS = tuple(a.name for a in LedgerRecord.__attrs_attrs__)   # the store's columns, in order


@frozen
class UsageQuery:
    """Which records (all filters AND together) and how to total them (``group_by``: one of GROUPS, or
    None for one total). ``since`` is inclusive and ``until`` exclusive, Unix seconds."""

    key: str | None = None
    org: str | None = None
    model: str | None = None
    backend: str | None = None
    purpose: str | None = "client"    # None: every purpose
    since: float | None = None
    until: float | None = None
    group_by: str | None = None


class StoreUnavailable(Exception):
    """The store cannot be reached or used (its message says which and why; never a password)."""
