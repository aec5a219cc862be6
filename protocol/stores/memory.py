"""``usage.ledger: memory``: records kept in this worker's memory, lost at exit.

For a gateway that needs no ledger on disk (and the tests of what sits above
a store). Queries total the same way the SQL stores do.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Iterable, Sequence

from switchyard.actors.ledger import traffic as spread
from switchyard.actors.ledger.record import GROUP_FIELDS, LedgerRecord, UsageQuery

KEEP = 1_000_000   # records kept; the oldest go first (a gateway that needs them all uses a real store)


# a group's totals before its first record (sql.TOTAL_NAMES)
EMPTY = {"requests": 0, "errors": 0, "input_tokens": 0, "output_tokens": 0, "cost": None, "cache_hits": 0,
         "saved_cost": None}


class MemoryStore:
    name = "memory"

    def __init__(self, keep: int = KEEP) -> None:
        self._records: deque[LedgerRecord] = deque(maxlen=keep)
        self._ids: set[str] = set()

    def open(self) -> None:
        pass

    def write(self, records: Sequence[LedgerRecord]) -> None:
        for rec in records:
            if rec.record_id in self._ids:
                continue
            if len(self._records) == self._records.maxlen:
                self._ids.discard(self._records[0].record_id)
            self._records.append(rec)
            self._ids.add(rec.record_id)

    def ping(self) -> None:
        pass   # memory takes every record

    def _matching(self, q: UsageQuery) -> Iterable[LedgerRecord]:
        for r in self._records:
            if (q.key is not None and r.key_id != q.key) or (q.org is not None and r.organization_id != q.org) \
                    or (q.model is not None and r.model != q.model) \
                    or (q.backend is not None and r.backend != q.backend) \
                    or (q.endpoint is not None and r.endpoint != q.endpoint) \
                    or (q.purpose is not None and r.purpose != q.purpose) \
                    or (q.since is not None and r.time < q.since) or (q.until is not None and r.time >= q.until):
                continue
            yield r

    def summary(self, query: UsageQuery) -> list[dict[str, Any]]:
        groups: dict[Any, dict[str, Any]] = {}
        for r in self._matching(query):
            value = group_value(r, query.group_by)
            g = groups.get(value)
            if g is None:
                g = groups[value] = dict(EMPTY)
                if query.group_by is not None:
                    g = groups[value] = {group_field(query.group_by): value, **g}
            g["requests"] += 1
            g["errors"] += 1 if r.failed else 0
            g["input_tokens"] += r.input_tokens
            g["output_tokens"] += r.output_tokens
            if r.cost is not None:
                g["cost"] = (g["cost"] or 0.0) + r.cost
            g["cache_hits"] += 1 if r.cache_hit else 0
            if r.saved_cost is not None:
                g["saved_cost"] = (g["saved_cost"] or 0.0) + r.saved_cost
        if query.group_by is None:   # one total, zeros included
            return [groups.get(None) or dict(EMPTY)]
        return [groups[k] for k in sorted(groups, key=lambda v: (v is None, v or ""))]

    def traffic(self, query: UsageQuery, step: int) -> list[dict[str, Any]]:
        spread.check(query.group_by, step)
        rows: dict[tuple[int, Any], dict[str, Any]] = {}
        for r in self._matching(query):
            key = (spread.slot_of(r.time, step), group_value(r, query.group_by))
            row = rows.get(key)
            if row is None:
                row = rows[key] = spread.new_row(*key)
            row["requests"] += 1
            row["errors"] += 1 if r.failed else 0
            row["latency_ms"][spread.bucket_of(r.latency_ms)] += 1
            if r.ttfb_ms is not None:
                row["ttfb_ms"][spread.bucket_of(r.ttfb_ms)] += 1
        return spread.ordered(rows.values())

    def records(self, query: UsageQuery, limit: int) -> list[LedgerRecord]:
        out = sorted(self._matching(query), key=lambda r: r.time)
        return out[:limit]

    def for_request(self, request_id: str) -> list[LedgerRecord]:
        return sorted((r for r in self._records if r.request_id == request_id), key=lambda r: r.time)

    def purge(self, before: float) -> int:
        kept = [r for r in self._records if r.time >= before]
        gone = len(self._records) - len(kept)
        self._records = deque(kept, maxlen=self._records.maxlen)
        self._ids = {r.record_id for r in kept}
        return gone

    def close(self) -> None:
        pass


def group_field(group_by: str) -> str:
    """The name a group's value goes by in a summary row."""
    return GROUP_FIELDS.get(group_by, group_by)


def group_value(rec: LedgerRecord, group_by: str | None) -> Any:
    if group_by is None:
        return None
    if group_by == "day":
        return time.strftime("%Y-%m-%d", time.gmtime(rec.time))
    if group_by == "hour":
        return time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(rec.time))
    return getattr(rec, GROUP_FIELDS[group_by])
