"""The usage stores' ``traffic``: memory, SQLite and PostgreSQL spread the same records over time slots
and latency buckets identically (PostgreSQL is a real server, ``tests/postgres.py``)."""

from __future__ import annotations

import calendar
import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, Iterator

import pytest

from switchyard.actors.ledger import traffic
from switchyard.actors.ledger.record import LedgerRecord, UsageQuery
from switchyard.protocol.stores import sql
from switchyard.protocol.stores.memory import MemoryStore
from switchyard.protocol.stores.postgresql import PostgresStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests import postgres

pg_server, pg_url = postgres.pg_server, postgres.pg_url   # the fixtures this module uses

T0 = float(calendar.timegm((2026, 12, 1, 0, 0, 0)))   # 2026-12-01T00:00:00Z, a multiple of every step here


def rec(n: int, at: float, **fields: Any) -> LedgerRecord:
    base: dict[str, Any] = dict(request_id=f"req-{n}", time=at, key_id="k1", organization_id="o1",
                                endpoint="chat", model="m1", served_model="m1", backend="b1", attempts=1,
                                status=200, error_code=None, latency_ms=100.0)
    return LedgerRecord(**{**base, **fields})


def histogram(**counts: int) -> list[int]:
    """A histogram with ``b<index>=count`` set."""
    h = traffic.empty()
    for name, n in counts.items():
        h[int(name[1:])] = n
    return h


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        s: Any = MemoryStore()
    elif request.param == "sqlite":
        s = SqliteStore(tmp_path / "usage.db")
    else:
        s = PostgresStore(request.getfixturevalue("pg_url"))
    s.open()
    yield s
    s.close()


def test_an_empty_ledger_has_no_traffic_rows(store):
    assert store.traffic(UsageQuery(), 60) == []
    assert store.traffic(UsageQuery(group_by="model"), 60) == []


def test_records_are_counted_per_slot_with_errors_and_both_histograms(store):
    store.write([rec(0, T0 + 1, latency_ms=0.5, ttfb_ms=1.0),
                 rec(1, T0 + 59.999, latency_ms=1.0, status=502),
                 rec(2, T0 + 60, latency_ms=7.5, ttfb_ms=2.5, status=429),
                 rec(3, T0 + 61, latency_ms=700_000.0, status=399)])
    assert store.traffic(UsageQuery(), 60) == [
        {"slot": int(T0) // 60, "group": None, "requests": 2, "errors": 1,
         "latency_ms": histogram(b0=2), "ttfb_ms": histogram(b0=1)},
        {"slot": int(T0) // 60 + 1, "group": None, "requests": 2, "errors": 1,
         "latency_ms": histogram(b4=1, b37=1), "ttfb_ms": histogram(b2=1)}]


def test_traffic_groups_by_model_or_backend_sorted_with_none_last(store):
    store.write([rec(0, T0, model="b", backend="x"), rec(1, T0, model=None, backend=None),
                 rec(2, T0 + 300, model="a", backend="x"), rec(3, T0, model="a", backend="y")])
    by_model = store.traffic(UsageQuery(group_by="model"), 60)
    assert [(r["group"], r["slot"] - int(T0) // 60, r["requests"]) for r in by_model] == [
        ("a", 0, 1), ("a", 5, 1), ("b", 0, 1), (None, 0, 1)]
    by_backend = store.traffic(UsageQuery(group_by="backend"), 3600)
    assert [(r["group"], r["requests"]) for r in by_backend] == [("x", 2), ("y", 1), (None, 1)]


def test_traffic_groups_by_endpoint_and_filters_by_it(store):
    store.write([rec(0, T0, endpoint="embeddings", latency_ms=5.0), rec(1, T0 + 60, endpoint="chat", status=502),
                 rec(2, T0 + 61, endpoint="embeddings", latency_ms=5.0), rec(3, T0 + 62, endpoint="messages")])
    by_endpoint = store.traffic(UsageQuery(group_by="endpoint"), 60)
    assert [(r["group"], r["slot"] - int(T0) // 60, r["requests"], r["errors"]) for r in by_endpoint] == [
        ("chat", 1, 1, 1), ("embeddings", 0, 1, 0), ("embeddings", 1, 1, 0), ("messages", 1, 1, 0)]
    only = store.traffic(UsageQuery(endpoint="embeddings", group_by="model"), 3600)
    assert [(r["group"], r["requests"], r["latency_ms"]) for r in only] == [("m1", 2, histogram(b3=2))]


def test_traffic_keeps_the_filters_since_inclusive_until_exclusive(store):
    store.write([rec(0, T0 - 0.001), rec(1, T0), rec(2, T0 + 10, key_id="k2"), rec(3, T0 + 20, purpose="classifier"),
                 rec(4, T0 + 120)])
    rows = store.traffic(UsageQuery(key="k1", since=T0, until=T0 + 120), 60)
    assert [(r["slot"] - int(T0) // 60, r["requests"]) for r in rows] == [(0, 1)]
    everything = store.traffic(UsageQuery(purpose=None), 86_400)
    assert sum(r["requests"] for r in everything) == 5


def test_a_ttfb_histogram_counts_only_records_that_have_one(store):
    store.write([rec(0, T0, ttfb_ms=None), rec(1, T0, ttfb_ms=40.0), rec(2, T0, ttfb_ms=40.0001)])
    [row] = store.traffic(UsageQuery(), 60)
    assert row["requests"] == 3 and row["ttfb_ms"] == histogram(b9=1, b10=1)


def test_every_store_gives_identical_rows_for_the_same_random_records(tmp_path, pg_url):
    """The reference is the memory store; a value on a bucket bound and a time on a slot edge included."""
    rng = random.Random(22)
    bounds = list(traffic.BOUNDS_MS)
    records = []
    for n in range(400):
        latency = rng.choice([rng.choice(bounds), rng.uniform(0, 700_000), rng.expovariate(1 / 300)])
        ttfb = rng.choice([None, rng.choice(bounds), rng.uniform(0, latency)])
        at = T0 + rng.choice([rng.uniform(0, 7200), rng.randrange(0, 7200, 60) + 0.0])
        records.append(rec(n, at, latency_ms=latency, ttfb_ms=ttfb, status=rng.choice([200, 200, 400, 500, 499]),
                           model=rng.choice(["m1", "m2", "Ünï", None]), backend=rng.choice(["b1", "b2", None]),
                           endpoint=rng.choice(["chat", "embeddings", "messages"]),
                           purpose=rng.choice(["client", "client", "classifier"])))
    stores = [MemoryStore(), SqliteStore(tmp_path / "usage.db"), PostgresStore(pg_url)]
    for s in stores:
        s.open()
        s.write(records)
    try:
        for group_by in (None, "model", "backend", "endpoint"):
            for step in (10, 60, 3600):
                for endpoint in (None, "embeddings"):
                    query = UsageQuery(group_by=group_by, endpoint=endpoint, since=T0 + 600, until=T0 + 6000)
                    answers = [s.traffic(query, step) for s in stores]
                    assert answers[0] and answers[1] == answers[0] and answers[2] == answers[0], \
                        (group_by, step, endpoint)
    finally:
        for s in stores:
            s.close()


@pytest.mark.parametrize("group_by", ["key", "day", "served_model"])
def test_traffic_refuses_a_grouping_it_has_no_series_for(store, group_by):
    with pytest.raises(ValueError, match="group_by must be one of model, backend, endpoint"):
        store.traffic(UsageQuery(group_by=group_by), 60)


@pytest.mark.parametrize("step", [0, -60, 1.5, True])
def test_traffic_refuses_a_step_that_is_not_whole_seconds(store, step):
    with pytest.raises(ValueError, match="step must be a whole number"):
        store.traffic(UsageQuery(), step)


@pytest.mark.parametrize("endpoint, group_by", [(None, "model"), ("embeddings", "endpoint")])
def test_the_last_hour_is_read_through_the_time_index_on_sqlite(tmp_path, endpoint, group_by):
    """An endpoint filter needs no index of its own: the hour is read through the time index, as ever."""
    path = tmp_path / "usage.db"
    s = SqliteStore(path)
    s.open()
    s.close()
    query = UsageQuery(since=T0, until=T0 + 3600, endpoint=endpoint, group_by=group_by)
    statement, params = sql.traffic(SqliteStore.dialect, query, 60)
    with closing(sqlite3.connect(path)) as conn:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
    searches = [p for p in plan if "usage_records" in p]
    assert len(searches) == 2 and all("USING INDEX usage_records_time" in p for p in searches), plan
