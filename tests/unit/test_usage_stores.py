"""The usage stores: memory, SQLite and PostgreSQL answer every query the same way.

The rules shared by all three run once per store (the memory store is the
reference: ``protocol/stores/memory.py``); the SQL stores' own rules
(migrations, atomic batches, their failures) follow, then each store's.
PostgreSQL is a real server (``tests/postgres.py``), a fresh database per test.
"""

from __future__ import annotations

import calendar
import random
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs
import psycopg
import pytest

from switchyard.actors.ledger.record import FIELDS, LedgerRecord, RecordRefused, StoreUnavailable, UsageQuery
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores import migrations, open_store, postgresql, sql
from switchyard.protocol.stores.memory import MemoryStore
from switchyard.protocol.stores.postgresql import PostgresStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests import postgres

pg_server, pg_url = postgres.pg_server, postgres.pg_url   # the fixtures this module uses

T0 = float(calendar.timegm((2026, 12, 1, 0, 0, 0)))   # 2026-12-01T00:00:00Z
HOUR = 3600.0
DAY = 86_400.0
ZERO = {"requests": 0, "errors": 0, "input_tokens": 0, "output_tokens": 0, "cost": None, "cache_hits": 0,
        "saved_cost": None}


def rec(n: int = 0, **fields: Any) -> LedgerRecord:
    base: dict[str, Any] = dict(request_id=f"req-{n}", time=T0 + n, key_id="k1", organization_id="o1",
                                endpoint="chat", model="m1", served_model="m1", backend="b1", attempts=1,
                                status=200, error_code=None)
    return LedgerRecord(**{**base, **fields})


class Ledger:
    """One ledger's location: new stores on it, and the raw database under them."""

    def __init__(self, kind: str, target: Any) -> None:
        self.kind = kind
        self.target = target   # a Path (sqlite), a URL (postgresql)

    def new(self) -> SqliteStore | PostgresStore:
        return SqliteStore(self.target) if self.kind == "sqlite" else PostgresStore(self.target)

    def query(self, statement: str) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            with closing(sqlite3.connect(self.target)) as conn, conn:
                return conn.execute(statement).fetchall()
        with psycopg.connect(self.target, autocommit=True) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description else []


def ledger_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Ledger:
    if kind == "sqlite":
        return Ledger(kind, tmp_path / "usage.db")
    return Ledger(kind, request.getfixturevalue("pg_url"))


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    s = MemoryStore() if request.param == "memory" else ledger_for(request.param, request, tmp_path).new()
    s.open()
    yield s
    s.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Ledger:
    return ledger_for(request.param, request, tmp_path)


@pytest.fixture
def sql_store(ledger: Ledger) -> Iterator[SqliteStore | PostgresStore]:
    s = ledger.new()
    s.open()
    yield s
    s.close()


# -- every store ------------------------------------------------------------------------------------


def test_an_empty_ledger_totals_one_row_of_zeros_and_no_groups(store):
    assert store.summary(UsageQuery()) == [ZERO]
    assert store.summary(UsageQuery(group_by="model")) == []
    assert store.records(UsageQuery(), 10) == [] and store.for_request("req-0") == []


def test_summary_totals_requests_errors_tokens_and_cost(store):
    store.write([rec(0, input_tokens=10, output_tokens=3, cost=0.5),
                 rec(1, input_tokens=5, output_tokens=2, cost=0.25, status=502),
                 rec(2, input_tokens=1, output_tokens=0)])
    assert store.summary(UsageQuery()) == [
        {"requests": 3, "errors": 1, "input_tokens": 16, "output_tokens": 5, "cost": 0.75, "cache_hits": 0,
         "saved_cost": None}]


def test_summary_totals_cache_hits_and_the_cost_they_saved_per_group(store):
    store.write([rec(0, model="m", cost=0.5), rec(1, model="m", cost=0.0, cache_hit=True, saved_cost=0.5),
                 rec(2, model="m", cost=0.0, cache_hit=True, saved_cost=0.25),
                 rec(3, model="free", cost=0.0, cache_hit=True)])
    assert [(g["model"], g["cache_hits"], g["saved_cost"]) for g in store.summary(UsageQuery(group_by="model"))] \
        == [("free", 1, None), ("m", 2, 0.75)]


def test_errors_count_statuses_of_400_and_above(store):
    store.write([rec(n, status=status) for n, status in enumerate((200, 204, 399, 400, 429, 499, 500))])
    assert store.summary(UsageQuery())[0]["errors"] == 4


def test_cost_is_none_when_no_record_was_priced(store):
    store.write([rec(0, model="priced", cost=0.5), rec(1, model="priced"), rec(2, model="unpriced"),
                 rec(3, model="unpriced")])
    assert [(g["model"], g["cost"]) for g in store.summary(UsageQuery(group_by="model"))] == [
        ("priced", 0.5), ("unpriced", None)]
    assert store.summary(UsageQuery(model="unpriced"))[0]["cost"] is None


def test_a_free_call_costs_zero_not_none(store):
    store.write([rec(0, cost=0.0)])
    assert store.summary(UsageQuery())[0]["cost"] == 0.0


@pytest.mark.parametrize("group_by, column", [("key", "key_id"), ("org", "organization_id"), ("model", "model"),
                                              ("backend", "backend")])
def test_summary_groups_by_an_identity_sorted_by_code_point_with_none_last(store, group_by, column):
    values = ["b", None, "B", "a", "é", "a"]
    store.write([rec(n, **{column: v}) for n, v in enumerate(values)])
    groups = store.summary(UsageQuery(group_by=group_by))
    assert [(g[column], g["requests"]) for g in groups] == [("B", 1), ("a", 2), ("b", 1), ("é", 1), (None, 1)]
    assert all(set(g) == {column, *ZERO} for g in groups)


def test_summary_groups_by_endpoint_with_each_endpoints_totals(store):
    store.write([rec(0, endpoint="embeddings", input_tokens=8, cost=0.001),
                 rec(1, endpoint="chat", input_tokens=10, output_tokens=4, cost=0.5),
                 rec(2, endpoint="messages", input_tokens=3, output_tokens=2, status=529),
                 rec(3, endpoint="chat", input_tokens=1, output_tokens=1, cost=0.25, status=502),
                 rec(4, endpoint="embeddings", input_tokens=2, cost=0.002)])
    assert store.summary(UsageQuery(group_by="endpoint")) == [
        {"endpoint": "chat", "requests": 2, "errors": 1, "input_tokens": 11, "output_tokens": 5, "cost": 0.75,
         "cache_hits": 0, "saved_cost": None},
        {"endpoint": "embeddings", "requests": 2, "errors": 0, "input_tokens": 10, "output_tokens": 0,
         "cost": pytest.approx(0.003), "cache_hits": 0, "saved_cost": None},
        {"endpoint": "messages", "requests": 1, "errors": 1, "input_tokens": 3, "output_tokens": 2, "cost": None,
         "cache_hits": 0, "saved_cost": None}]


def test_summary_groups_by_day_in_utc(store):
    store.write([rec(0, time=T0 - 0.5), rec(1, time=T0), rec(2, time=T0 + DAY - 0.0001), rec(3, time=T0 + DAY)])
    assert [(g["day"], g["requests"]) for g in store.summary(UsageQuery(group_by="day"))] == [
        ("2026-11-30", 1), ("2026-12-01", 2), ("2026-12-02", 1)]


def test_summary_groups_by_hour_in_utc(store):
    store.write([rec(0, time=T0 + 13 * HOUR), rec(1, time=T0 + 14 * HOUR - 0.0001), rec(2, time=T0 + 14 * HOUR),
                 rec(3, time=T0 - 1)])
    assert [(g["hour"], g["requests"]) for g in store.summary(UsageQuery(group_by="hour"))] == [
        ("2026-11-30T23:00:00Z", 1), ("2026-12-01T13:00:00Z", 2), ("2026-12-01T14:00:00Z", 1)]


def test_since_is_inclusive_until_exclusive(store):
    store.write([rec(n, time=T0 + 10 * n) for n in range(4)])
    q = UsageQuery(since=T0 + 10, until=T0 + 30)
    assert [r.time for r in store.records(q, 10)] == [T0 + 10, T0 + 20]
    assert store.summary(q)[0]["requests"] == 2
    assert store.summary(UsageQuery(since=T0 + 30))[0]["requests"] == 1
    assert store.summary(UsageQuery(until=T0))[0]["requests"] == 0


@pytest.mark.parametrize("query, expected", [
    (UsageQuery(key="k2"), [1, 3]),
    (UsageQuery(org="o2"), [2, 3]),
    (UsageQuery(model="m2"), [3]),
    (UsageQuery(backend="b2"), [3]),
    (UsageQuery(endpoint="embeddings"), [3]),
    (UsageQuery(endpoint="chat", key="k2"), [1]),
    (UsageQuery(endpoint="messages"), []),
    (UsageQuery(key="k2", org="o2"), [3]),
    (UsageQuery(key="k2", org="o1"), [1]),
    (UsageQuery(key="k2", model="m1"), [1]),
    (UsageQuery(key="nobody"), []),
])
def test_filters_and_together(store, query, expected):
    store.write([rec(0), rec(1, key_id="k2"), rec(2, organization_id="o2"),
                 rec(3, key_id="k2", organization_id="o2", model="m2", backend="b2", endpoint="embeddings")])
    assert [r.request_id for r in store.records(query, 10)] == [f"req-{n}" for n in expected]
    assert store.summary(query)[0]["requests"] == len(expected)


def test_purpose_is_client_unless_asked_and_none_means_every_purpose(store):
    store.write([rec(0), rec(1, purpose="classifier"), rec(2, purpose="classifier")])
    assert store.summary(UsageQuery())[0]["requests"] == 1
    assert store.summary(UsageQuery(purpose="classifier"))[0]["requests"] == 2
    assert store.summary(UsageQuery(purpose=None))[0]["requests"] == 3
    assert len(store.records(UsageQuery(purpose=None), 10)) == 3


def test_records_come_oldest_first_at_most_limit(store):
    order = list(range(6))
    random.Random(7).shuffle(order)
    store.write([rec(n) for n in order])
    assert [r.request_id for r in store.records(UsageQuery(), 4)] == ["req-0", "req-1", "req-2", "req-3"]
    assert store.records(UsageQuery(), 0) == []


def test_records_of_one_instant_come_back_in_the_order_written(store):
    store.write([rec(n, time=T0) for n in (3, 1, 2)])
    store.write([rec(0, time=T0)])
    assert [r.request_id for r in store.records(UsageQuery(), 10)] == ["req-3", "req-1", "req-2", "req-0"]


def test_a_record_reads_back_with_every_field(store):
    full = LedgerRecord(request_id="req-full", time=T0 + 0.123456, key_id="key-1", organization_id="org-1",
                        endpoint="responses", model="alias", served_model="real-model", backend="gpu-1",
                        attempts=3, status=503, error_code="upstream_unavailable", input_tokens=1234,
                        output_tokens=567, cached_tokens=89, reasoning_tokens=10, cost=0.000123, estimated=True,
                        latency_ms=1234.5, ttfb_ms=98.25, stream=True, purpose="client", trace_id="0af7651916cd43dd")
    bare = LedgerRecord(request_id="req-bare", time=T0 + 1, key_id=None, organization_id=None, endpoint="chat",
                        model=None, served_model=None, backend=None, attempts=0, status=400, error_code=None)
    store.write([full, bare])
    got = store.records(UsageQuery(), 10)
    assert got == [full, bare]
    assert [type(getattr(got[0], name)) for name in ("estimated", "stream", "time", "cost")] == [bool, bool, float,
                                                                                                float]


def test_for_request_gives_every_record_of_the_request_oldest_first(store):
    store.write([rec(0, request_id="req-x", time=T0 + 2), rec(1, request_id="req-x", purpose="classifier", time=T0),
                 rec(2, request_id="req-y", time=T0 + 1)])
    assert [(r.purpose, r.time) for r in store.for_request("req-x")] == [("classifier", T0), ("client", T0 + 2)]


def test_duplicate_record_id_is_written_once(store):
    a, b = rec(0), rec(1)
    store.write([a])
    store.write([a, b])
    store.write([b, attrs.evolve(b, status=500)])   # a replay: the record_id decides, not the content
    assert store.records(UsageQuery(), 10) == [a, b]
    assert store.summary(UsageQuery())[0]["requests"] == 2


def test_purge_deletes_records_older_than_before_and_counts_them(store):
    store.write([rec(n, time=T0 + n) for n in range(4)])
    assert store.purge(T0 + 2) == 2
    assert [r.time for r in store.records(UsageQuery(), 10)] == [T0 + 2, T0 + 3]
    assert store.purge(T0 + 2) == 0


# -- the SQL stores ---------------------------------------------------------------------------------


def versions(ledger: Ledger) -> list[int]:
    return [row[0] for row in ledger.query("SELECT version FROM schema_version ORDER BY version")]


def test_migrations_apply_once_and_record_their_version(ledger):
    known = len(migrations.SQLITE if ledger.kind == "sqlite" else migrations.POSTGRESQL)
    for _ in range(2):   # a second open finds the schema current and applies nothing
        s = ledger.new()
        s.open()
        s.write([rec(_)])
        s.close()
    assert versions(ledger) == list(range(1, known + 1))
    assert ledger.query("SELECT COUNT(*) FROM usage_records") == [(2,)]


def test_every_dialect_has_the_same_number_of_migrations():
    assert len(migrations.SQLITE) == len(migrations.POSTGRESQL)


def test_the_table_has_a_column_for_every_record_field(ledger):
    s = ledger.new()
    s.open()
    s.close()
    if ledger.kind == "sqlite":
        columns = {row[1] for row in ledger.query("PRAGMA table_info(usage_records)")}
    else:
        columns = {row[0] for row in ledger.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'usage_records'")}
    assert columns == {*FIELDS, "seq"}


def test_a_ledger_newer_than_the_code_is_store_unavailable(ledger):
    s = ledger.new()
    s.open()
    s.close()
    newer = len(migrations.SQLITE) + 1
    ledger.query(f"INSERT INTO schema_version (version, applied_at) VALUES ({newer}, 0)")
    with pytest.raises(StoreUnavailable, match=f"schema is at version {newer}, newer than"):
        ledger.new().open()


def test_a_batch_is_written_whole_or_not_at_all(sql_store):
    with pytest.raises(RecordRefused):   # the records' fault, not the store's (the ledger quarantines it)
        sql_store.write([rec(0), rec(1, request_id=None)])   # the second breaks NOT NULL
    assert sql_store.records(UsageQuery(), 10) == []


@pytest.mark.parametrize("field, value", [("input_tokens", 2 ** 70), ("cost", {"a": 1})])
def test_a_value_the_store_cannot_take_is_a_record_refused_never_store_unavailable(sql_store, field, value):
    with pytest.raises(RecordRefused):
        sql_store.write([rec(0, **{field: value})])
    sql_store.write([rec(1)])   # the store is fine
    assert len(sql_store.records(UsageQuery(), 10)) == 1


def test_an_unknown_group_by_is_refused_naming_it(sql_store):
    with pytest.raises(ValueError, match="group_by must be one of key, org, model, backend, endpoint, day, hour"):
        sql_store.summary(UsageQuery(group_by="time; DROP TABLE usage_records"))


def test_a_negative_limit_is_refused_naming_it(sql_store):
    with pytest.raises(ValueError, match="limit must be a whole number >= 0"):
        sql_store.records(UsageQuery(), -1)


def test_a_closed_store_is_unavailable(sql_store):
    sql_store.close()
    with pytest.raises(StoreUnavailable):
        sql_store.write([rec()])
    with pytest.raises(StoreUnavailable):
        sql_store.summary(UsageQuery())


# -- SQLite -----------------------------------------------------------------------------------------


def test_sqlite_in_unwritable_directory_is_store_unavailable(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")   # root may write anywhere, but not under a file
    path = tmp_path / "a-file" / "ledger" / "usage.db"
    with pytest.raises(StoreUnavailable, match=f"usage ledger {path}: "):
        SqliteStore(path).open()


def test_a_corrupt_sqlite_file_is_store_unavailable(tmp_path):
    path = tmp_path / "usage.db"
    path.write_bytes(b"this is not a database " * 512)
    with pytest.raises(StoreUnavailable, match=f"usage ledger {path}: file is not a database"):
        SqliteStore(path).open()


def test_sqlite_creates_its_parent_directories(tmp_path):
    s = SqliteStore(tmp_path / "a" / "b" / "usage.db")
    s.open()
    s.write([rec()])
    s.close()
    assert (tmp_path / "a" / "b" / "usage.db").is_file()


def test_sqlite_ledger_is_in_wal_mode(tmp_path):
    s = SqliteStore(tmp_path / "usage.db")
    s.open()
    s.close()
    assert Ledger("sqlite", tmp_path / "usage.db").query("PRAGMA journal_mode") == [("wal",)]


def test_a_locked_sqlite_ledger_is_store_unavailable_after_the_busy_timeout(tmp_path):
    path = tmp_path / "usage.db"
    s = SqliteStore(path, busy_timeout=0.1)
    s.open()
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")   # another process holds the write lock
        with pytest.raises(StoreUnavailable, match=f"usage ledger {path}: database is locked"):
            s.write([rec()])
        other.execute("ROLLBACK")
    s.write([rec()])   # and writes again once it is free
    assert s.summary(UsageQuery())[0]["requests"] == 1
    s.close()


# -- PostgreSQL -------------------------------------------------------------------------------------


def test_unreachable_postgresql_names_the_ledger_without_the_password():
    port = postgres.free_port()   # nothing listens there
    s = PostgresStore(f"postgresql://ledger:s3cret-pw@127.0.0.1:{port}/usage", timeout=2)
    with pytest.raises(StoreUnavailable) as caught:
        s.open()
    message = str(caught.value)
    assert message.startswith(f"usage ledger postgresql://ledger@127.0.0.1:{port}/usage: ")
    assert "s3cret-pw" not in message and caught.value.__cause__ is None and caught.value.__suppress_context__
    s.close()


def test_a_missing_postgresql_database_is_store_unavailable_naming_it(pg_server):
    s = PostgresStore(pg_server.url("no_such_db").replace("postgres@", "postgres:pw@"), timeout=2)
    with pytest.raises(StoreUnavailable, match='no_such_db.*database "no_such_db" does not exist'):
        s.open()


def run_together(*jobs: Callable[[], None]) -> None:
    """Each job in its own thread, started at once; the first failure is raised."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            barrier.wait(timeout=10)
            job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a writer did not finish within 60 s"
    if errors:
        raise errors[0]


def test_two_instances_migrate_one_postgresql_ledger_together(pg_url):
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    run_together(a.open, b.open)
    a.close(), b.close()
    assert versions(Ledger("postgresql", pg_url)) == list(range(1, len(migrations.POSTGRESQL) + 1))


def test_two_instances_write_one_postgresql_ledger(pg_url):
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    a.open(), b.open()
    both = [rec(n) for n in range(100)]              # a replay both send
    mine, theirs = [rec(n) for n in range(100, 200)], [rec(n) for n in range(200, 300)]
    a_batches = random.Random(1).sample(both + mine, 200)
    b_batches = random.Random(2).sample(both + theirs, 200)

    def writer(store: PostgresStore, rows: list[LedgerRecord]) -> Callable[[], None]:
        return lambda: [store.write(rows[i:i + 20]) for i in range(0, len(rows), 20)]

    run_together(writer(a, a_batches), writer(b, b_batches))
    assert a.summary(UsageQuery())[0]["requests"] == 300
    assert sorted(r.record_id for r in b.records(UsageQuery(), 1000)) == sorted(
        r.record_id for r in both + mine + theirs)
    a.close(), b.close()


def test_a_batch_the_server_aborts_to_break_a_deadlock_is_written_again(pg_url):
    x, y = rec(0), rec(1)
    s = PostgresStore(pg_url)
    s.open()
    with psycopg.connect(pg_url) as other, psycopg.connect(pg_url, autocommit=True) as watch:
        other.execute(sql.insert(postgresql.DIALECT), sql.row_of(x))   # another instance holds x ...
        failed: list[BaseException] = []

        def write() -> None:
            try:
                s.write([y, x])                                               # ... the store takes y, waits for x
            except BaseException as exc:
                failed.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        for _ in range(1000):
            waiting = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                    "AND application_name = 'switchyard-ledger'").fetchone()[0]
            if waiting:
                break
            time.sleep(0.01)
        # ... and the other now waits for y: a deadlock, which the server breaks (deadlock_timeout, 1 s) by
        # aborting the store's transaction, the one that waited first
        other.execute(sql.insert(postgresql.DIALECT), sql.row_of(y))
        other.commit()
        writer.join(timeout=30)
    assert not writer.is_alive() and failed == []
    assert [r.record_id for r in s.records(UsageQuery(), 10)] == [x.record_id, y.record_id]
    s.close()


def test_postgresql_store_writes_again_once_the_server_is_back(pg_server, pg_url):
    s = PostgresStore(pg_url, timeout=1)
    s.open()
    s.write([rec(0)])
    pg_server.stop()
    with pytest.raises(StoreUnavailable, match="usage ledger postgresql://postgres@127.0.0.1"):
        s.write([rec(1)])
    pg_server.start()
    for attempt in range(30):   # the pool reconnects on its own backoff (at most a few seconds)
        try:
            s.write([rec(1)])
            break
        except StoreUnavailable:
            if attempt == 29:
                raise
    assert s.summary(UsageQuery())[0]["requests"] == 2
    s.close()


# -- choosing a store -------------------------------------------------------------------------------


def test_open_store_picks_the_store_usage_ledger_names(tmp_path):
    assert isinstance(open_store(UsageConfig(ledger="memory"), tmp_path), MemoryStore)
    default = open_store(UsageConfig(), tmp_path)
    assert isinstance(default, SqliteStore) and default.path == tmp_path / "usage.db"
    named = open_store(UsageConfig(ledger=f"sqlite://{tmp_path}/elsewhere/ledger.db"), tmp_path)
    assert isinstance(named, SqliteStore) and named.path == tmp_path / "elsewhere" / "ledger.db"
    for scheme in ("postgresql", "postgres"):
        pg = open_store(UsageConfig(ledger=f"{scheme}://u:pw@db.internal:5433/usage"), tmp_path)
        assert isinstance(pg, PostgresStore) and pg.where == "postgresql://u@db.internal:5433/usage"
        pg.close()


def test_open_store_only_constructs(tmp_path):
    open_store(UsageConfig(), tmp_path / "data")
    assert not (tmp_path / "data").exists()   # open() makes the directory, in the caller's worker thread


def test_sqlite_stores_opened_together_on_a_new_file_both_open(tmp_path):
    """The workers of one instance open a new usage.db at once; switching it to WAL must not fail either."""
    import threading

    from switchyard.protocol.stores.sqlite import SqliteStore
    errors: list[BaseException] = []
    stores = [SqliteStore(tmp_path / "usage.db") for _ in range(6)]
    start = threading.Barrier(len(stores))

    def open_one(store):
        start.wait()
        try:
            store.open()
        except BaseException as exc:   # noqa: BLE001 - collected for the assertion
            errors.append(exc)
    threads = [threading.Thread(target=open_one, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in stores:
        s.close()
    assert errors == []


def test_a_sqlite_batch_writes_under_sqlites_oldest_parameter_limit(tmp_path):
    store = SqliteStore(tmp_path / "usage.db")
    store.open()
    try:
        store._conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)   # SQLite before 3.32 allowed no more
        store.write([rec(i) for i in range(100)])
        assert len(store.records(UsageQuery(purpose=None), 1000)) == 100
    finally:
        store.close()
