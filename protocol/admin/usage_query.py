"""The usage ledger's query parameters, read the same way by ``GET /admin/usage`` (and its CSV)
and by ``switchyard usage report``: one copy of the rules, each broken one named.

Parameters: ``key``, ``org``, ``model``, ``backend`` (exact filters), ``endpoint``
(one of RECORD_ENDPOINTS), ``purpose`` (``client`` by default; ``classifier``, or
``all`` for both), ``from`` (inclusive) and ``to`` (exclusive) as RFC 3339 / ISO 8601
times or Unix seconds, ``group_by`` (one of GROUPS), and for a record listing ``limit``.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence
from urllib.parse import parse_qsl

from switchyard.actors.ledger.record import GROUPS, PURPOSES, RECORD_ENDPOINTS, UsageQuery

FILTERS = ("key", "org", "model", "backend")
QUERY_PARAMS = (*FILTERS, "endpoint", "purpose", "from", "to", "group_by")
ALL = "all"                      # purpose=all: every purpose
MAX_VALUE = 1024                 # characters in a filter value
LIMIT_DEFAULT, LIMIT_MAX = 100_000, 1_000_000
UNIX_SECONDS = re.compile(r"\d{1,12}(\.\d{1,9})?")   # up to year 33658: past any date anyone means


class QueryError(ValueError):
    """One parameter broke one rule: ``param`` names it, ``rule`` says what it must be."""

    def __init__(self, param: str, rule: str, code: str = "invalid_parameter") -> None:
        super().__init__(f"{param} {rule}")
        self.param = param
        self.rule = rule
        self.code = code      # the admin API's error code


def single_values(pairs: Iterable[tuple[str, str]], allowed: Sequence[str]) -> dict[str, str]:
    """``name -> value`` of query ``pairs``; a name not in ``allowed``, or given twice, is an error
    (a typo or a second value silently ignored would answer a question nobody asked)."""
    out: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            raise QueryError(_shown(name), f"is not a known parameter; the parameters are {', '.join(allowed)}",
                             "unknown_parameter")
        if name in out:
            raise QueryError(name, "is given more than once; give it once", "duplicate_parameter")
        out[name] = value
    return out


def query_pairs(raw: bytes) -> list[tuple[str, str]]:
    """The ``name=value`` pairs of an ASGI ``query_string`` (percent-decoded, UTF-8, blanks kept)."""
    try:
        return parse_qsl(raw.decode("ascii"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise QueryError("query string", "must be percent-encoded UTF-8") from None


def parse_query(params: Mapping[str, str | None]) -> UsageQuery:
    """A UsageQuery from ``params`` (names of QUERY_PARAMS; a None value is the same as absent)."""
    filters = {name: _text(name, params.get(name)) for name in FILTERS}
    endpoint = parse_endpoint(params.get("endpoint"))
    purpose = parse_purpose(params.get("purpose"))
    since = parse_time("from", params.get("from"))
    until = parse_time("to", params.get("to"))
    if since is not None and until is not None and since >= until:
        raise QueryError("from", f"must be earlier than to (from is inclusive, to exclusive), got from="
                                 f"{params['from']!r} and to={params['to']!r}")
    group_by = params.get("group_by")
    if group_by is not None and group_by not in GROUPS:
        raise QueryError("group_by", f"must be one of {', '.join(GROUPS)}, got {_shown(group_by)!r}")
    return UsageQuery(key=filters["key"], org=filters["org"], model=filters["model"], backend=filters["backend"],
                      endpoint=endpoint, purpose=purpose, since=since, until=until, group_by=group_by)


def parse_endpoint(value: str | None) -> str | None:
    """One of the endpoints a record can carry (a misspelt one would match nothing, silently)."""
    if value is not None and value not in RECORD_ENDPOINTS:
        raise QueryError("endpoint", f"must be one of {', '.join(RECORD_ENDPOINTS)}, got {_shown(value)!r}")
    return value


def parse_purpose(value: str | None) -> str | None:
    """``client`` when absent, None (every purpose) for ``all``."""
    if value is None:
        return "client"
    if value == ALL:
        return None
    if value not in PURPOSES:
        raise QueryError("purpose", f"must be one of {', '.join((*PURPOSES, ALL))}, got {_shown(value)!r}")
    return value


def parse_time(param: str, value: str | None) -> float | None:
    """Unix seconds of ``value``: Unix seconds themselves, a date (midnight UTC), or a date and time
    with its offset (``Z`` or ``+02:00``). A time without an offset is refused: whose clock would it be?"""
    if value is None:
        return None
    text = value.strip()
    if UNIX_SECONDS.fullmatch(text):
        return float(text)
    rule = ("must be Unix seconds or an RFC 3339 time: 2026-12-01, 2026-12-01T13:00:00Z or "
            f"2026-12-01T13:00:00+02:00, got {_shown(value)!r}")
    if not text or len(text) > 64:
        raise QueryError(param, rule)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(param, rule) from None
    if when.tzinfo is None:
        if "T" in text.upper() or " " in text:
            raise QueryError(param, f"needs its UTC offset (Z or +HH:MM), got {_shown(value)!r}")
        when = when.replace(tzinfo=timezone.utc)   # a bare date: that day in UTC, as the ledger's days are
    seconds = when.timestamp()
    if not math.isfinite(seconds):
        raise QueryError(param, rule)
    return seconds


def parse_limit(value: str | None) -> int:
    """How many records a listing returns: LIMIT_DEFAULT when absent, 1 to LIMIT_MAX."""
    if value is None:
        return LIMIT_DEFAULT
    text = value.strip()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= LIMIT_MAX:
        raise QueryError("limit", f"must be a whole number from 1 to {LIMIT_MAX}, got {_shown(value)!r}")
    return int(text)


def _text(param: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not value:
        raise QueryError(param, "must not be empty (leave it out to match every value)")
    if len(value) > MAX_VALUE:
        raise QueryError(param, f"must be at most {MAX_VALUE} characters, got {len(value)}")
    return value


def _shown(value: str) -> str:
    """``value`` cut short for an error message (a parameter can be long; the message stays short)."""
    return value if len(value) <= 64 else value[:61] + "..."
