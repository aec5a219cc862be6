"""``GET /admin/traffic``: requests/s, error rate and p50/p95 latency and time to first byte over time,
per model, per backend or per endpoint, from the usage ledger.

Read from the ledger, not from this worker's memory, so it holds for every
worker and instance writing to the same store (and lags by
``usage.flush_interval``). The store answers counts and histograms per time
slot (``actors/ledger/traffic.py``); here they become one point per slot,
empty slots included, and percentiles estimated from the histograms. The
filters keep ``/admin/usage``'s rules (``usage_query``); ``group_by`` is
``model``, ``backend`` or ``endpoint`` only, and ``step`` the slot's length.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, Sequence

import attrs

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.ledger import traffic as spread
from switchyard.actors.ledger.record import UsageQuery
from switchyard.protocol.admin.usage import ask
from switchyard.protocol.admin.usage_query import QUERY_PARAMS, QueryError, parse_query, query_pairs, single_values

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

Respond = Callable[..., Awaitable[None]]

PARAMS = (*QUERY_PARAMS, "step")
STEP_DEFAULT, STEP_MIN, STEP_MAX = 60, 10, 86_400   # seconds
RANGE_DEFAULT = 3600.0   # seconds before ``to`` when ``from`` is left out: the last hour
MAX_SLOTS = 1440         # (to - from) / step: a day by the minute, and an answer that stays small
QUANTILES = (("p50", 0.5), ("p95", 0.95))


@attrs.frozen
class TrafficQuery:
    query: UsageQuery   # filters, since/until (both set), group_by (model, backend, endpoint or None)
    step: int           # seconds a slot lasts


def parse_traffic(params: Mapping[str, str], now: float) -> TrafficQuery:
    """``params`` (names of PARAMS) as a TrafficQuery; ``to`` defaults to ``now``, ``from`` to an hour
    before ``to``. A QueryError names the first parameter that breaks its rule."""
    group_by = params.get("group_by")
    if group_by is not None and group_by not in spread.GROUPS:
        raise QueryError("group_by", f"must be one of {', '.join(spread.GROUPS)}, got {_shown(group_by)!r}")
    step = parse_step(params.get("step"))
    query = parse_query({**params, "group_by": None})
    until = query.until if query.until is not None else now
    since = query.since if query.since is not None else until - RANGE_DEFAULT
    if since >= until:   # only a ``from`` given, at or after now (parse_query checked the pair)
        raise QueryError("from", f"must be earlier than to (now when to is left out), got from={params['from']!r}")
    if (until - since) / step > MAX_SLOTS:
        raise QueryError("step", f"must leave at most {MAX_SLOTS} slots between from and to: "
                                 f"{until - since:g} s / {step} s is {math.ceil((until - since) / step)}; "
                                 "give a larger step or a shorter range")
    return TrafficQuery(attrs.evolve(query, since=since, until=until, group_by=group_by), step)


def parse_step(value: str | None) -> int:
    """Whole seconds, STEP_MIN to STEP_MAX; STEP_DEFAULT when absent."""
    if value is None:
        return STEP_DEFAULT
    text = value.strip()
    if not text.isascii() or not text.isdigit() or not STEP_MIN <= int(text) <= STEP_MAX:
        raise QueryError("step", f"must be a whole number of seconds from {STEP_MIN} to {STEP_MAX}, "
                                 f"got {_shown(value)!r}")
    return int(text)


def answer(tq: TrafficQuery, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The body: one series per group (None last; one series without group_by, even over no calls), a
    point per slot from the one holding ``from`` to the one holding the last instant before ``to``, and
    each group's totals over the range."""
    q, step = tq.query, tq.step
    assert q.since is not None and q.until is not None
    first, last = spread.slot_of(q.since, step), math.ceil(q.until / step) - 1
    by_group: dict[Any, dict[int, Mapping[str, Any]]] = {}
    for row in rows:
        by_group.setdefault(row["group"], {})[row["slot"]] = row
    if q.group_by is None and not by_group:
        by_group[None] = {}
    groups = sorted(by_group, key=lambda g: (g is None, g or ""))
    series, totals = [], []
    for group in groups:
        slots = by_group[group]
        series.append({"group": group, "points": [point(slot, step, slots.get(slot)) for slot in
                                                  range(first, last + 1)]})
        totals.append({"group": group, **counts(slots.values())})
    return {"from": q.since, "to": q.until, "step": step, "group_by": q.group_by,
            "latency_bounds_ms": list(spread.BOUNDS_MS), "series": series, "totals": totals}


def point(slot: int, step: int, row: Mapping[str, Any] | None) -> dict[str, Any]:
    c = counts([row] if row is not None else [])
    return {"time": slot * step, "requests": c["requests"], "requests_per_second": c["requests"] / step,
            "errors": c["errors"], "error_rate": c["error_rate"], "latency_ms": c["latency_ms"],
            "ttfb_ms": c["ttfb_ms"]}


def counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Requests, errors, the error rate (None without requests) and p50/p95 of the merged histograms."""
    rows = list(rows)
    requests = sum(r["requests"] for r in rows)
    errors = sum(r["errors"] for r in rows)
    return {"requests": requests, "errors": errors, "error_rate": errors / requests if requests else None,
            "latency_ms": percentiles(spread.merged([r["latency_ms"] for r in rows])),
            "ttfb_ms": percentiles(spread.merged([r["ttfb_ms"] for r in rows]))}


def percentiles(histogram: Sequence[int]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, q in QUANTILES:
        value = spread.quantile(q, histogram)
        out[name] = None if value is None else round(value, 3)
    return out


class TrafficAdmin:
    def __init__(self, respond: Respond, clock: Callable[[], float] = time.time) -> None:
        """``clock``: the wall clock ``to`` defaults to (the ledger's times are wall-clock Unix seconds)."""
        self.respond = respond
        self.clock = clock
        self.routes = {"/admin/traffic": {"GET": self.traffic}}

    async def traffic(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        try:
            tq = parse_traffic(single_values(query_pairs(scope.get("query_string", b"")), PARAMS), self.clock())
        except QueryError as exc:
            raise InvalidRequest(str(exc), param=exc.param, code=exc.code) from None
        rows = await ask(runtime, lambda reader: reader.traffic(tq.query, tq.step))
        await self.respond(send, 200, json.dumps(answer(tq, rows)).encode())


def _shown(value: str) -> str:
    """``value`` cut short for an error message."""
    return value if len(value) <= 64 else value[:61] + "..."
