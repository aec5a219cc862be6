"""What the SQLite and PostgreSQL ledgers share: the columns, the queries and the migration runner.

The dialects differ in their placeholders, their UTC day and hour
expressions, how text sorts and how migrations are serialized; everything
else (filters, totals, order, duplicates) is one piece of SQL here, so both
stores total exactly as ``memory.MemoryStore`` does.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any, Callable, Iterator, Protocol, Sequence

from attrs import frozen

from switchyard.actors.ledger import traffic as spread
from switchyard.actors.ledger.record import FIELDS, GROUP_FIELDS, GROUPS, LedgerRecord, StoreUnavailable, UsageQuery
from switchyard.protocol.stores.memory import group_field
from switchyard.protocol.stores.migrations import Migration

TABLE = "usage_records"
COLUMNS = ", ".join(FIELDS)
BOOLEANS = frozenset(a.name for a in LedgerRecord.__attrs_attrs__ if a.type in ("bool", bool))
# seq breaks ties in time: records of one instant come back in the order they were written
ORDER = "time, seq"
SCHEMA_VERSION = ("CREATE TABLE IF NOT EXISTS schema_version "
                  "(version integer PRIMARY KEY, applied_at double precision NOT NULL)")


class Cursor(Protocol):
    """The part of a DB-API cursor the shared code uses (sqlite3's and psycopg's both fit)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...


@frozen
class Dialect:
    name: str
    placeholder: str                 # "?" or "%s"
    day: str                         # the UTC day of ``time``, as 2026-12-01
    hour: str                        # the UTC hour of ``time``, as 2026-12-01T13:00:00Z
    collate: str                     # after a group in ORDER BY: text sorts by code point, as Python's sort does
    slot: str                        # floor(time / <one placeholder: the step>), an integer
    migrations: tuple[Migration, ...]
    lock: str | None = None          # run first in each migration's transaction, so one instance migrates at a time

    def params(self, n: int) -> str:
        return ", ".join([self.placeholder] * n)


def insert(d: Dialect, rows: int = 1) -> str:
    """An insert of ``rows`` records; a record_id already there is skipped (only that: a NOT NULL violation
    still fails)."""
    one = f"({d.params(len(FIELDS))})"
    return f"INSERT INTO {TABLE} ({COLUMNS}) VALUES {', '.join([one] * rows)} ON CONFLICT (record_id) DO NOTHING"


# What ``ping`` writes and rolls back: a record every store takes, when it takes any.
PROBE = LedgerRecord(request_id="ping", time=0.0, key_id=None, organization_id=None, endpoint="ping", model=None,
                     served_model=None, backend=None, attempts=0, status=0, error_code=None, record_id="ping")


def chunks(records: Sequence[LedgerRecord], size: int) -> Iterator[tuple[int, list[Any]]]:
    """``records`` in pieces of at most ``size``: (how many, their column values in one flat list)."""
    for start in range(0, len(records), size):
        piece = records[start:start + size]
        yield len(piece), [value for rec in piece for value in row_of(rec)]


def row_of(rec: LedgerRecord) -> tuple[Any, ...]:
    return tuple(getattr(rec, name) for name in FIELDS)


def record_of(row: Sequence[Any]) -> LedgerRecord:
    data = dict(zip(FIELDS, row, strict=False))
    for name in BOOLEANS:
        data[name] = bool(data[name])
    return LedgerRecord(**data)


def where(d: Dialect, q: UsageQuery) -> tuple[str, list[Any]]:
    """The query's filters, ANDed; ``since`` inclusive, ``until`` exclusive, ``purpose`` None for all."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("key_id", q.key), ("organization_id", q.org), ("model", q.model),
                          ("backend", q.backend), ("endpoint", q.endpoint), ("purpose", q.purpose)):
        if value is not None:
            clauses.append(f"{column} = {d.placeholder}")
            params.append(value)
    if q.since is not None:
        clauses.append(f"time >= {d.placeholder}")
        params.append(q.since)
    if q.until is not None:
        clauses.append(f"time < {d.placeholder}")
        params.append(q.until)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


TOTALS = ("COUNT(*), COALESCE(SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), 0), "
          "COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), SUM(cost), "
          "COALESCE(SUM(CASE WHEN cache_hit THEN 1 ELSE 0 END), 0), SUM(saved_cost)")
# cache_hits: calls answered by the response cache; saved_cost: what they would have cost (None: nothing priced)
TOTAL_NAMES = ("requests", "errors", "input_tokens", "output_tokens", "cost", "cache_hits", "saved_cost")


def group_expression(d: Dialect, group_by: str) -> str:
    if group_by == "day":
        return d.day
    if group_by == "hour":
        return d.hour
    if group_by in GROUP_FIELDS:
        return GROUP_FIELDS[group_by]
    raise ValueError(f"group_by must be one of {', '.join(GROUPS)} or None, got {group_by!r}")


def summary(d: Dialect, q: UsageQuery) -> tuple[str, list[Any]]:
    """The totals, one row per group, sorted by the group with None last; without ``group_by`` one row,
    even over no records (COUNT and the COALESCEd sums are 0 then, and SUM(cost) NULL)."""
    filters, params = where(d, q)
    if q.group_by is None:
        return f"SELECT {TOTALS} FROM {TABLE}{filters}", params
    g = group_expression(d, q.group_by)
    return (f"SELECT {g}, {TOTALS} FROM {TABLE}{filters} GROUP BY {g} "
            f"ORDER BY {g} IS NULL, {g}{d.collate}"), params


def summary_rows(q: UsageQuery, rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    if q.group_by is None:
        return [dict(zip(TOTAL_NAMES, rows[0], strict=False))]
    name = group_field(q.group_by)
    return [{name: row[0], **dict(zip(TOTAL_NAMES, row[1:], strict=False))} for row in rows]


def bucket_case(column: str) -> str:
    """The histogram bucket of ``column`` as ``traffic.bucket_of`` gives it, from the same bounds (ours,
    never a user's value, so they are written into the SQL)."""
    whens = " ".join(f"WHEN {column} <= {bound!r} THEN {i}" for i, bound in enumerate(spread.BOUNDS_MS))
    return f"CASE {whens} ELSE {len(spread.BOUNDS_MS)} END"


def traffic(d: Dialect, q: UsageQuery, step: int) -> tuple[str, list[Any]]:
    """One statement (one snapshot of the table): rows ``(kind, slot, group, bucket, count, errors)``,
    kind 0 counting records by latency bucket (with their errors), kind 1 by time-to-first-byte bucket
    (records with one). At most slots x groups x buckets rows, whatever the traffic."""
    spread.check(q.group_by, step)
    filters, params = where(d, q)
    group = GROUP_FIELDS[q.group_by] if q.group_by is not None else "NULL"
    with_ttfb = f"{filters} AND ttfb_ms IS NOT NULL" if filters else " WHERE ttfb_ms IS NOT NULL"
    parts = []
    for kind, column, rows in ((0, "latency_ms", filters), (1, "ttfb_ms", with_ttfb)):
        errors = "SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END)" if kind == 0 else "0"
        parts.append(f"SELECT {kind}, slot, g, b, COUNT(*), {errors} FROM "
                     f"(SELECT {d.slot} AS slot, {group} AS g, {bucket_case(column)} AS b, status "
                     f"FROM {TABLE}{rows}) AS t{kind} GROUP BY slot, g, b")
    return " UNION ALL ".join(parts), [step, *params, step, *params]


def traffic_rows(rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    out: dict[tuple[int, Any], dict[str, Any]] = {}
    for kind, slot, group, bucket, count, errors in rows:
        key = (int(slot), group)
        row = out.get(key)
        if row is None:
            row = out[key] = spread.new_row(*key)
        if kind == 0:
            row["requests"] += int(count)
            row["errors"] += int(errors)
            row["latency_ms"][int(bucket)] += int(count)
        else:
            row["ttfb_ms"][int(bucket)] += int(count)
    return spread.ordered(out.values())


def records(d: Dialect, q: UsageQuery, limit: int) -> tuple[str, list[Any]]:
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a whole number >= 0, got {limit!r}")
    filters, params = where(d, q)
    return f"SELECT {COLUMNS} FROM {TABLE}{filters} ORDER BY {ORDER} LIMIT {d.placeholder}", [*params, limit]


def for_request(d: Dialect) -> str:
    return f"SELECT {COLUMNS} FROM {TABLE} WHERE request_id = {d.placeholder} ORDER BY {ORDER}"


def purge(d: Dialect) -> str:
    return f"DELETE FROM {TABLE} WHERE time < {d.placeholder}"


def migrate(d: Dialect, transaction: Callable[[], AbstractContextManager[Cursor]], where: str) -> int:
    """Apply the migrations the store lacks, in order, each in its own transaction (under ``d.lock``,
    re-reading the version inside it: another instance may have got there first); the version reached.
    A store at a version newer than this code knows is unavailable: writing to it could lose fields."""
    known = len(d.migrations)
    while True:
        with transaction() as cur:
            if d.lock is not None:
                cur.execute(d.lock)
            cur.execute(SCHEMA_VERSION)
            cur.execute("SELECT MAX(version) FROM schema_version")
            current = cur.fetchone()[0] or 0
            if current > known:
                raise StoreUnavailable(
                    f"usage ledger {where}: its schema is at version {current}, newer than the {known} this "
                    f"Switchyard knows; upgrade Switchyard, or point usage.ledger at another store")
            if current == known:
                return current
            for statement in d.migrations[current]:
                cur.execute(statement)
            cur.execute(f"INSERT INTO schema_version (version, applied_at) VALUES ({d.params(2)})",
                        (current + 1, time.time()))


class Reads:
    """The read side both SQL stores share; each gives its ``dialect`` and ``_fetch`` (rows of one query)."""

    dialect: Dialect

    def _fetch(self, statement: str, params: list[Any]) -> list[Any]:
        raise NotImplementedError

    def summary(self, query: UsageQuery) -> list[dict[str, Any]]:
        statement, params = summary(self.dialect, query)
        return summary_rows(query, self._fetch(statement, params))

    def traffic(self, query: UsageQuery, step: int) -> list[dict[str, Any]]:
        statement, params = traffic(self.dialect, query, step)
        return traffic_rows(self._fetch(statement, params))

    def records(self, query: UsageQuery, limit: int) -> list[LedgerRecord]:
        statement, params = records(self.dialect, query, limit)
        return [record_of(row) for row in self._fetch(statement, params)]

    def for_request(self, request_id: str) -> list[LedgerRecord]:
        return [record_of(row) for row in self._fetch(for_request(self.dialect), [request_id])]
