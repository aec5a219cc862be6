"""The control plane's key store in the ledger's database (SQLite and a real PostgreSQL): records read back
exactly, duplicates and stale edits refused, and one revision counter that every write, and only a write, moves."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs
import pytest

from switchyard.actors.control.records import AdminRecord, KeyRecord, PreviousSecret
from switchyard.actors.ledger.record import FIELDS, LedgerRecord, StoreUnavailable
from switchyard.actors.ports import ControlConflict
from switchyard.config.access import ApiKey
from switchyard.config.limits import Budget, Period, RateLimit
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores import postgresql, sqlite
from switchyard.protocol.stores.control import SqlControlStore, open_control_store
from switchyard.protocol.stores.control_rows import SETTINGS
from switchyard.protocol.stores.postgresql import PostgresStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests import postgres

pg_server, pg_url = postgres.pg_server, postgres.pg_url

T0 = 1_764_547_200.123456   # instants with a fraction: a double must come back bit for bit
Db = Callable[[], "SqliteStore | PostgresStore"]
New = Callable[[], SqlControlStore]


def digest(name: str) -> bytes:
    return hashlib.sha256(name.encode()).digest()


def record(n: int = 1, **changes: Any) -> KeyRecord:
    base = KeyRecord(key=ApiKey(id=f"key_{n}", key=""), prefix=f"syk_{n:08d}", digest=digest(f"secret-{n}"),
                     created_at=T0 + n, updated_at=T0 + n)
    return attrs.evolve(base, **changes)


FULL = KeyRecord(
    key=ApiKey(id="key_full", key="", organization_id="org-1", allowed_models=("gpt-4o*", "claude-3"),
               allowed_backends=("east", "west"), tier="gold",
               rate_limit=RateLimit(requests_per_second=5, requests_per_minute=300, tokens_per_minute=90_000,
                                    max_concurrent=8),
               budget=Budget(limit_usd=12.345, limit_tokens=1_000_000, period=Period.WEEK)),
    prefix="syk_Ab12Cd34", digest=digest("full"), created_at=T0, updated_at=T0 + 0.5, created_by="admin@example.com",
    expires_at=T0 + 86_400.25, metadata={"team": "ml", "환경": "prod"}, revoked_at=T0 + 3600.75,
    last_used_at=T0 + 60.001, previous=PreviousSecret(digest=digest("full-old"), prefix="syk_Zz99Yy88",
                                                      valid_until=T0 + 7200.5))


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Db:
    """A fresh database: a new ledger store on it at each call (each its own connection: two workers)."""
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "usage.db")
    url = request.getfixturevalue("pg_url")
    return lambda: PostgresStore(url, max_size=2)


@pytest.fixture
def new(db: Db) -> Iterator[New]:
    """Control stores on the one database, opened, as many as a test asks for."""
    made: list[SqlControlStore] = []

    def make() -> SqlControlStore:
        store = SqlControlStore(db())
        store.open()
        made.append(store)
        return store
    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(new: New) -> SqlControlStore:
    return new()


def execute(store: SqlControlStore, statement: str) -> list[Any]:
    """A statement of the test's own, on the store's connection."""
    return store.db.transact(lambda cur: cur.fetchall() if cur.execute(statement).description else [])


# -- the row codec ----------------------------------------------------------------------------------


def test_a_record_with_every_field_set_reads_back_exactly(store):
    store.insert(FULL)
    assert store.load()[1] == [FULL]
    assert store.find(FULL.digest) == FULL


def test_a_record_with_every_optional_field_none_reads_back_exactly(store):
    bare = record()
    assert all(getattr(bare.key, a.name) is None for a in attrs.fields(ApiKey) if a.name not in ("id", "key"))
    store.insert(bare)
    assert store.load()[1] == [bare]


def test_the_settings_json_holds_every_api_key_field_but_its_id_and_secret():
    assert set(SETTINGS) == {a.name for a in attrs.fields(ApiKey)} - {"id", "key"} | {"metadata"}


def test_settings_this_code_does_not_know_are_store_unavailable_naming_the_key(store):
    store.insert(record())
    execute(store, """UPDATE control_keys SET settings = '{"metadata":{},"max_images":3}'""")
    with pytest.raises(StoreUnavailable, match="key 'key_1'.*max_images"):
        store.load()


# -- writes -----------------------------------------------------------------------------------------


def test_insert_of_a_taken_id_is_a_conflict(store):
    store.insert(record(1))
    with pytest.raises(ControlConflict):
        store.insert(record(1, digest=digest("another")))


def test_insert_of_a_taken_digest_is_a_conflict(store):
    store.insert(record(1))
    with pytest.raises(ControlConflict):
        store.insert(record(2, digest=record(1).digest))


def test_a_constraint_other_than_a_duplicate_is_store_unavailable_not_a_conflict(store):
    with pytest.raises(StoreUnavailable, match="(?i)null"):
        store.insert(record(1, prefix=None))


def test_a_refused_write_changes_nothing_and_bumps_no_revision(store):
    store.insert(record(1))
    before = store.load()
    with pytest.raises(ControlConflict):
        store.insert(record(1, prefix="syk_other"))
    with pytest.raises(ControlConflict):
        store.replace(record(1, prefix="syk_other"), updated_at=0.0)
    assert store.load() == before


def test_replace_over_the_version_read_writes_every_field(store):
    store.insert(record(1))
    full_1 = attrs.evolve(FULL, key=attrs.evolve(FULL.key, id="key_1"))
    store.replace(full_1, updated_at=record(1).updated_at)
    assert store.load()[1] == [full_1]


def test_replace_over_a_stale_version_is_a_conflict(store):
    store.insert(record(1))
    store.replace(record(1, updated_at=T0 + 100), updated_at=T0 + 1)   # another admin's edit
    with pytest.raises(ControlConflict, match="key_1"):
        store.replace(record(1, updated_at=T0 + 200), updated_at=T0 + 1)
    assert store.find(record(1).digest).updated_at == T0 + 100


def test_replace_of_an_unknown_id_is_a_key_error(store):
    with pytest.raises(KeyError):
        store.replace(record(1), updated_at=record(1).updated_at)


def test_replace_never_moves_last_used_at_back(store):
    store.insert(record(1))
    store.touch({"key_1": T0 + 50})
    store.replace(record(1, updated_at=T0 + 2, last_used_at=T0 + 10), updated_at=record(1).updated_at)
    assert store.find(record(1).digest).last_used_at == T0 + 50


def test_delete_forgets_the_record_and_says_whether_there_was_one(store):
    store.insert(record(1))
    assert store.delete("key_1") is True
    assert store.find(record(1).digest) is None
    assert store.delete("key_1") is False


def test_every_write_bumps_the_revision_exactly_once(store):
    seen = [store.revision()]
    store.insert(record(1))
    seen.append(store.revision())
    store.replace(record(1, updated_at=T0 + 9), updated_at=record(1).updated_at)
    seen.append(store.revision())
    store.delete("key_1")
    seen.append(store.revision())
    store.delete("key_1")   # nothing there: nothing changed
    seen.append(store.revision())
    assert seen == [0, 1, 2, 3, 3]


def test_touch_only_moves_last_used_at_forward(store):
    store.insert(record(1))
    store.insert(record(2))
    store.touch({"key_1": T0 + 50, "key_2": T0 + 50})
    store.touch({"key_1": T0 + 40, "key_2": T0 + 60, "key_gone": T0 + 70})
    assert {r.id: r.last_used_at for r in store.load()[1]} == {"key_1": T0 + 50, "key_2": T0 + 60}


def test_touch_bumps_no_revision(store):
    store.insert(record(1))
    store.touch({"key_1": T0 + 50})
    assert store.revision() == 1


# -- reads ------------------------------------------------------------------------------------------


def test_find_matches_the_current_digest_and_nothing_else(store):
    store.insert(record(1))
    store.insert(record(2))
    assert store.find(record(2).digest) == record(2)
    assert store.find(digest("never issued")) is None


def test_find_matches_a_rotated_out_digest(store):
    rotated = record(1, digest=digest("new"), previous=PreviousSecret(record(1).digest, "syk_00000001", T0 + 60))
    store.insert(rotated)
    assert store.find(record(1).digest) == rotated


def test_a_current_digest_wins_over_another_keys_rotated_out_one(store):
    store.insert(record(1, previous=PreviousSecret(digest("shared"), "syk_00000001", T0 + 60)))
    store.insert(record(2, digest=digest("shared")))
    assert store.find(digest("shared")).id == "key_2"


def test_load_returns_the_revision_and_every_record(store):
    assert store.load() == (0, [])
    for n in (1, 2, 3):
        store.insert(record(n))
    store.delete("key_2")
    revision, records = store.load()
    assert (revision, sorted(records, key=lambda r: r.id)) == (4, [record(1), record(3)])


def test_a_second_store_on_the_database_sees_the_first_ones_writes(new):
    one, two = new(), new()
    assert two.revision() == 0
    one.insert(record(1))
    assert two.revision() == 1
    assert two.find(record(1).digest) == record(1)
    two.replace(record(1, updated_at=T0 + 5), updated_at=record(1).updated_at)
    assert one.load() == (2, [record(1, updated_at=T0 + 5)])


# -- the schema, and where the store lives ----------------------------------------------------------


# -- administrators' accounts -------------------------------------------------------------------------

ROOT = AdminRecord("root", "admin", "sya_Ab12Cd34", digest("root-token"), T0, T0 + 0.5, "cli:ops", T0 + 60.25)


def test_an_account_reads_back_exactly_and_its_writes_bump_the_revision(store):
    start = store.revision()
    store.insert_admin(ROOT)
    store.replace_admin(attrs.evolve(ROOT, role="viewer", updated_at=T0 + 1), ROOT.updated_at)
    assert store.load_admins() == [attrs.evolve(ROOT, role="viewer", updated_at=T0 + 1)]
    with pytest.raises(ControlConflict):   # over a stale version
        store.replace_admin(attrs.evolve(ROOT, role="operator"), ROOT.updated_at)
    with pytest.raises(ControlConflict):   # a taken token digest
        store.insert_admin(attrs.evolve(ROOT, id="other"))
    assert store.delete_admin("root") and not store.delete_admin("root")
    assert store.revision() == start + 3 and store.load_admins() == []


def test_an_accounts_role_this_code_does_not_know_is_store_unavailable(store):
    store.insert_admin(ROOT)
    execute(store, "UPDATE control_admins SET role = 'auditor'")
    with pytest.raises(StoreUnavailable, match="'root'.*auditor"):
        store.load_admins()


def control_migration(dialect: Any) -> int:
    """How many migrations come before the one that makes ``control_keys``."""
    return next(i for i, m in enumerate(dialect.migrations) if "CREATE TABLE control_keys" in m[0])


def write_with_columns_of_the_day(ledger: Any, module: Any, rec: LedgerRecord) -> None:
    """``rec`` written as the code of the older schema wrote it: only the columns its table has."""
    if isinstance(ledger, SqliteStore):
        listed = "SELECT name FROM pragma_table_info('usage_records')"
    else:
        listed = ("SELECT column_name FROM information_schema.columns WHERE table_name = 'usage_records' "
                  "AND table_schema = current_schema()")
    columns = [row[0] for row in ledger.transact(lambda cur: cur.execute(listed).fetchall()) if row[0] != "seq"]
    assert columns and set(columns) < set(FIELDS)   # an older schema: some of today's columns are missing
    insert = (f"INSERT INTO usage_records ({', '.join(columns)}) "
              f"VALUES ({module.DIALECT.params(len(columns))})")
    ledger.transact(lambda cur: cur.execute(insert, [getattr(rec, c) for c in columns]))


def test_a_ledger_made_before_the_control_tables_gains_them_and_keeps_its_records(db, monkeypatch):
    ledger = db()
    module: Any = sqlite if isinstance(ledger, SqliteStore) else postgresql
    old = attrs.evolve(module.DIALECT, migrations=module.DIALECT.migrations[:control_migration(module.DIALECT)])
    monkeypatch.setattr(module, "DIALECT", old)   # what open() migrates to: the schema before this one
    ledger.open()
    old_record = LedgerRecord(request_id="req_old", time=T0, key_id=None, organization_id=None, endpoint="chat",
                              model="demo", served_model="demo", backend="a", attempts=1, status=200,
                              error_code=None)
    write_with_columns_of_the_day(ledger, module, old_record)
    ledger.close()
    monkeypatch.undo()
    store = SqlControlStore(db())
    store.open()
    try:
        assert store.load() == (0, [])
        store.insert(record(1))
        assert store.find(record(1).digest) == record(1)
        assert store.db.for_request("req_old") == [old_record]   # the columns added since read as their defaults
        versions = [row[0] for row in execute(store, "SELECT version FROM schema_version ORDER BY version")]
        assert versions == list(range(1, len(module.DIALECT.migrations) + 1))
    finally:
        store.close()


def test_a_closed_store_is_unavailable(store):
    store.close()
    with pytest.raises(StoreUnavailable):
        store.revision()
    with pytest.raises(StoreUnavailable):
        store.insert(record(1))


def test_the_store_lives_where_usage_ledger_says(tmp_path: Path):
    assert open_control_store(UsageConfig(ledger="memory"), tmp_path) is None
    on_file = open_control_store(UsageConfig(ledger="sqlite"), tmp_path)
    assert isinstance(on_file, SqlControlStore) and on_file.db.path == tmp_path / "usage.db"
    pg = open_control_store(UsageConfig(ledger="postgresql://u@127.0.0.1:1/db"), tmp_path)
    assert isinstance(pg, SqlControlStore) and pg.name == "postgresql"
