"""The stored-response owner map in the ledger's database (SQLite and a real PostgreSQL): per key, bounded
in age and count at every lookup, pruned idempotently by any number of workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchyard.actors.ports import Found
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores.postgresql import PostgresStore
from switchyard.protocol.stores.response_owners import SqlOwnerStore, open_owner_store
from switchyard.protocol.stores.sqlite import SqliteStore
from tests import postgres

pg_server, pg_url = postgres.pg_server, postgres.pg_url

FAR = 10**9   # max_entries that bounds nothing


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request, tmp_path):
    """Two stores on one database, as two workers (or instances) open it."""
    if request.param == "sqlite":
        made = [SqlOwnerStore(SqliteStore(tmp_path / "usage.db")) for _ in range(2)]
    else:
        url = request.getfixturevalue("pg_url")
        made = [SqlOwnerStore(PostgresStore(url)) for _ in range(2)]
    for store in made:
        store.open()
    yield made
    for store in made:
        store.close()


def rows(store: SqlOwnerStore) -> int:
    return store.db.transact(lambda cur: cur.execute("SELECT COUNT(*) FROM stored_response_owners").fetchone()[0])


def test_an_id_written_by_one_worker_is_found_by_another_under_its_key_only(stores):
    one, two = stores
    one.remember("a", "resp_1", "sim-a", 100.0)
    assert two.lookup("a", "resp_1", 0.0, FAR) == Found("sim-a", False)
    assert two.lookup("b", "resp_1", 0.0, FAR) == Found(None, True)   # another key's: not found, but known
    assert two.lookup("b", "resp_never", 0.0, FAR) == Found(None, False)


def test_the_same_id_under_two_keys_stays_apart(stores):
    one, two = stores
    one.remember("a", "resp_1", "sim-a", 100.0)
    two.remember("b", "resp_1", "sim-b", 100.0)
    assert one.lookup("a", "resp_1", 0.0, FAR) == Found("sim-a", True)
    assert one.lookup("b", "resp_1", 0.0, FAR) == Found("sim-b", True)


def test_a_forgotten_id_is_gone_for_every_worker(stores):
    one, two = stores
    one.remember("a", "resp_1", "sim-a", 100.0)
    two.forget("a", "resp_1")
    assert one.lookup("a", "resp_1", 0.0, FAR) == Found(None, False)


def test_an_id_past_max_age_is_not_found_before_any_prune(stores):
    one, _ = stores
    one.remember("a", "resp_old", "sim-a", 100.0)
    one.remember("a", "resp_new", "sim-a", 200.0)
    assert one.lookup("a", "resp_old", 100.0, FAR).backend is None   # created at the bound: forgotten
    assert one.lookup("a", "resp_new", 100.0, FAR).backend == "sim-a"


def test_past_max_entries_the_oldest_written_is_not_found_before_any_prune(stores):
    one, two = stores
    for n in range(3):
        (one, two)[n % 2].remember("a", f"resp_{n}", "sim-a", 100.0)
    assert one.lookup("a", "resp_0", 0.0, 2).backend is None
    assert [one.lookup("a", f"resp_{n}", 0.0, 2).backend for n in (1, 2)] == ["sim-a", "sim-a"]


def test_remembering_an_id_again_makes_it_the_newest(stores):
    one, _ = stores
    for n in range(2):
        one.remember("a", f"resp_{n}", "sim-a", 100.0)
    one.remember("a", "resp_0", "sim-a", 101.0)
    assert one.lookup("a", "resp_0", 0.0, 1).backend == "sim-a"
    assert rows(one) == 2


def test_prune_deletes_by_age_and_count_and_is_idempotent_across_workers(stores):
    one, two = stores
    for n in range(5):
        one.remember("a", f"resp_{n}", "sim-a", 100.0 + n)
    assert one.prune(before=100.0, max_entries=3) == 2   # resp_0 by age, resp_1 by count
    assert two.prune(before=100.0, max_entries=3) == 0   # another worker pruning the same finds nothing left
    assert rows(one) == 3
    assert [one.lookup("a", f"resp_{n}", 0.0, FAR).backend for n in range(5)] == [None, None, "sim-a", "sim-a",
                                                                                  "sim-a"]


def test_the_map_lives_where_usage_ledger_says(tmp_path: Path):
    assert open_owner_store(UsageConfig(ledger="memory"), tmp_path) is None
    sqlite = open_owner_store(UsageConfig(ledger="sqlite"), tmp_path)
    assert isinstance(sqlite, SqlOwnerStore) and sqlite.db.path == tmp_path / "usage.db"
    pg = open_owner_store(UsageConfig(ledger="postgresql://u@127.0.0.1:1/db"), tmp_path)
    assert isinstance(pg, SqlOwnerStore) and pg.name == "postgresql"
