"""A ledger record (one call's end, or one classifier try) and a query over many.

Never prompt or answer text: identities, counts, the cost and the times.
``time`` is wall-clock Unix seconds (the ledger is read by people and across
instances); latencies are milliseconds on the call's own clock.
"""

from __future__ import annotations

import time
from typing import Any

from attrs import asdict, field, frozen

from switchyard.actors import safe_text
from switchyard.actors.ids import random_hex
from switchyard.config.endpoints import Endpoint
from switchyard.config.names import MAX_NAME_LENGTH

# mcp: a tool call at /mcp (actors/mcp/records.py); cache: the semantic cache's embeddings call
# (actors/cache/embed.py); guardrail: a moderation guardrail's moderations call (actors/guardrails/moderation.py);
# batch: a line of a batch (actors/batches/runner.py, relay_records.py)
PURPOSES = ("client", "batch", "classifier", "web_search", "mcp", "cache", "guardrail")
BATCH = "batch"
CALLS = ("client", BATCH)   # the purposes of a client's own model calls (a batch line is one, made later)
MESSAGES = "messages"   # the endpoint of the Anthropic door's calls: chat calls, recorded under their own door
MCP = "mcp"             # the endpoint of a tool call at /mcp (actors/mcp/records.py)
# Every endpoint a record can carry, and so every value the usage queries' endpoint filter takes: each API a
# call can be in (config/endpoints.py) but a realtime session, which leaves no record; the Messages door; /mcp.
RECORD_ENDPOINTS = (*(e.value for e in Endpoint if e is not Endpoint.REALTIME), MESSAGES, MCP)
GROUPS = ("key", "org", "model", "backend", "endpoint", "day", "hour")
# A group's column in the record, for the identity groups.
GROUP_FIELDS = {"key": "key_id", "org": "organization_id", "model": "model", "backend": "backend",
                "endpoint": "endpoint"}


ID_LIMIT = 1024                    # characters of an id or a code a record keeps; a longer one is cut (safe_text.CUT)
NAME_LIMIT = MAX_NAME_LENGTH + 1   # a model or backend name: one past the longest a door takes


def _name(value: str | None) -> str | None:
    """A model or backend name as a record keeps it: safe text, at most one character past the longest
    name a door takes (a refusal records the over-long name it refused, cut)."""
    if value is None or (value.isascii() and len(value) <= NAME_LIMIT and "\x00" not in value):
        return value   # the usual name, at the cost of three C calls: records are made on every call
    return safe_text.clean(value, NAME_LIMIT)


def _id(value: str | None) -> str | None:
    if value is None or (value.isascii() and len(value) <= ID_LIMIT and "\x00" not in value):
        return value
    return safe_text.clean(value, ID_LIMIT)


def _json(value: str | None) -> str | None:
    """The record's JSON fields (route events, guardrail verdicts): ours, never cut; safe all the same."""
    return None if value is None else safe_text.clean(value)


def new_record_id() -> str:
    """Unique, and in time order (microseconds first, then 72 random bits), so a store's index on it
    grows at its end instead of being written all over."""
    return f"{time.time_ns() // 1000:014x}{random_hex(9)}"


@frozen
class LedgerRecord:
    """Every text field is made safe as the record is built (``safe_text.clean``): a value no store or label
    can encode never reaches one, whoever built the record (a call, a refusal, a spill-file replay)."""

    request_id: str = field(converter=_id)               # the x-continuum-request-id the client got
    time: float                                          # when the call arrived, Unix seconds
    key_id: str | None = field(converter=_id)            # the API key's id (never the key); None without keys
    organization_id: str | None = field(converter=_id)   # the key's organization
    endpoint: str = field(converter=_id)                 # one of RECORD_ENDPOINTS: chat | completions | ...
    model: str | None = field(converter=_name)           # as requested (None: refused before a model was read)
    served_model: str | None = field(converter=_name)    # the model that answered (or last tried)
    backend: str | None = field(converter=_name)         # the backend that answered (or last tried)
    attempts: int                                        # upstream attempts made
    status: int                                          # the HTTP status the client got (499: it left first)
    error_code: str | None = field(converter=_id)        # the error envelope's code, when the call failed
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0            # of input_tokens: read from the provider's prompt cache
    cache_write_tokens: int = 0       # of input_tokens: written to the provider's prompt cache
    reasoning_tokens: int = 0
    cost: float | None = None         # USD; None when a priced model was not involved
    estimated: bool = False           # tokens (and so cost) estimated: no usage came back
    latency_ms: float = 0.0           # arrival to end
    ttfb_ms: float | None = None      # arrival to the answer's first byte to the client
    stream: bool = False
    # client | batch | classifier | web_search | mcp | cache | guardrail (PURPOSES)
    purpose: str = field(default="client", converter=_id)
    trace_id: str | None = field(default=None, converter=_id)
    # The call's route events as JSON (GET /admin/requests/{id}/events' answer), kept for every call but one
    # clean attempt, whose record says it all: so any worker or instance can show why a call went as it did.
    route_events: str | None = field(default=None, converter=_json)
    cache_hit: bool = False           # answered from the response cache: nothing went upstream, cost 0
    # The guardrails' verdicts on the call as JSON: which guardrail, stage, mode, action and detectors
    # (counts only: never the matched text) or flagged categories; None when no guardrail applied.
    guardrails: str | None = field(default=None, converter=_json)
    # the store's key: a replay never counts twice
    record_id: str = field(factory=new_record_id, converter=_id)
    # a cache hit: USD the original call cost, which this one did not (None: not a hit, or unpriced)
    saved_cost: float | None = None

    @property
    def failed(self) -> bool:
        return self.status >= 400

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LedgerRecord":
        """The record of a dict of its fields (a spill-file line); TypeError for a field of the wrong type."""
        for name, kinds in _KINDS.items():
            value = data.get(name)
            if name in data and not (isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)):
                raise TypeError(f"{name} must be {' or '.join(k.__name__ for k in kinds)}, got {type(value).__name__}")
        return cls(**{name: data[name] for name in FIELDS if name in data})


FIELDS = tuple(a.name for a in LedgerRecord.__attrs_attrs__)   # the store's columns, in order


def _kinds(annotation: object) -> tuple[type, ...]:
    """The types a field may hold, from its annotation: text, as this module's annotations are postponed."""
    return ((str, type(None)) if annotation in ("str", "str | None") else
            (int,) if annotation == "int" else
            (bool,) if annotation == "bool" else
            (int, float) if annotation == "float" else
            (int, float, type(None)))


# What each field may hold when a record is read back from outside (a spill-file line).
_KINDS: dict[str, tuple[type, ...]] = {a.name: _kinds(a.type) for a in LedgerRecord.__attrs_attrs__}


@frozen
class UsageQuery:
    """Which records (all filters AND together) and how to total them (``group_by``: one of GROUPS, or
    None for one total). ``since`` is inclusive and ``until`` exclusive, Unix seconds."""

    key: str | None = None
    org: str | None = None
    model: str | None = None
    backend: str | None = None
    endpoint: str | None = None       # one of RECORD_ENDPOINTS
    purpose: str | None = "client"    # None: every purpose
    since: float | None = None
    until: float | None = None
    group_by: str | None = None


class StoreUnavailable(Exception):
    """The store cannot be reached or used (its message says which and why; never a password)."""


class RecordRefused(Exception):
    """The store answers, but refuses a value of the records it was given (a number past its column, text it
    cannot encode): a fault of the records, not of the store. Raised only by ``write``."""
