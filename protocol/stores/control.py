"""The control plane's keys in the usage ledger's database: what the admin API writes and every worker reads.

``control_keys`` (migration 5 of ``migrations.py``) holds one row per key
(``control_rows.py`` turns it into a ``KeyRecord`` and back); it lives where
``usage.ledger`` says, the SQLite file under ``server.data_dir`` (the workers
of one machine) or PostgreSQL (a fleet). With ``usage.ledger: memory``
nothing is shared and ``open_control_store`` returns None.

``control_revision`` is one row, one counter: insert, replace and delete bump
it in their own transaction, so a worker polling ``revision()`` and reloading
when it moves never misses a change. ``touch`` bumps nothing: it runs every
minute or so and writes only ``last_used_at``, which the data plane never
reads. ``replace`` is optimistic: it writes only over the version its caller
read (its ``updated_at``), so two admins editing one key cannot lose an edit.

Each method blocks: the callers run them in worker threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from switchyard.actors.control.records import AdminRecord, AuditEntry, KeyRecord, OrgRecord
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.actors.ports import ControlConflict, ControlStore
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores import side_database
from switchyard.protocol.stores.control_rows import (
    ADMIN_COLUMNS,
    ADMIN_TABLE,
    AUDIT_COLUMNS,
    AUDIT_TABLE,
    COLUMNS,
    ORG_COLUMNS,
    ORG_TABLE,
    TABLE,
    admin_record_of,
    admin_row_of,
    audit_of,
    audit_row_of,
    org_record_of,
    org_row_of,
    record_of,
    row_of,
)

if TYPE_CHECKING:
    from switchyard.protocol.stores.postgresql import PostgresStore
    from switchyard.protocol.stores.sqlite import SqliteStore

R = TypeVar("R")

REVISION = "control_revision"
# Seconds any call to the control store may take, its own deadline (a lock waited for, a connection, a
# statement): the admin API and a worker's reload of the keys wait on a store that is away no longer than this.
DEADLINE = 2.0


class SqlControlStore:
    """The control plane's records on a ledger store (``SqliteStore`` or ``PostgresStore``) of its own: a
    connection apart from the ledger's, so an admin's write or a reload never waits behind a batch of records."""

    def __init__(self, db: SqliteStore | PostgresStore) -> None:
        self.db = db
        self.name = db.name
        self._integrity = _integrity_error(db.dialect.name)
        p = db.dialect.placeholder
        self._revision = f"SELECT revision FROM {REVISION}"
        self._bump = f"UPDATE {REVISION} SET revision = revision + 1"
        # one statement, so the revision and the rows are one snapshot; LEFT JOIN: the revision with no keys too
        self._load = (f"SELECT r.revision, {', '.join(f'k.{c}' for c in COLUMNS)} FROM {REVISION} r "
                      f"LEFT JOIN {TABLE} k ON 1 = 1 ORDER BY k.created_at, k.id")
        self._find = f"SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE digest = {p} OR previous_digest = {p}"
        self._insert = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({db.dialect.params(len(COLUMNS))})"
        # every column but the id; last_used_at never moves back (a touch may have come after the caller's read)
        sets = [f"{c} = {p}" for c in COLUMNS[1:] if c != "last_used_at"]
        sets.append(f"last_used_at = CASE WHEN last_used_at IS NULL OR last_used_at < {p} THEN {p} "
                    f"ELSE last_used_at END")
        self._replace = f"UPDATE {TABLE} SET {', '.join(sets)} WHERE id = {p} AND updated_at = {p}"
        self._exists = f"SELECT 1 FROM {TABLE} WHERE id = {p}"
        self._delete = f"DELETE FROM {TABLE} WHERE id = {p}"
        self._orgs = f"SELECT {', '.join(ORG_COLUMNS)} FROM {ORG_TABLE} ORDER BY id"
        self._org_insert = (f"INSERT INTO {ORG_TABLE} ({', '.join(ORG_COLUMNS)}) "
                            f"VALUES ({db.dialect.params(len(ORG_COLUMNS))})")
        self._org_replace = (f"UPDATE {ORG_TABLE} SET {', '.join(f'{c} = {p}' for c in ORG_COLUMNS[1:])} "
                             f"WHERE id = {p} AND updated_at = {p}")
        self._org_exists = f"SELECT 1 FROM {ORG_TABLE} WHERE id = {p}"
        self._org_delete = f"DELETE FROM {ORG_TABLE} WHERE id = {p}"
        self._admins = f"SELECT {', '.join(ADMIN_COLUMNS)} FROM {ADMIN_TABLE} ORDER BY id"
        self._admin_insert = (f"INSERT INTO {ADMIN_TABLE} ({', '.join(ADMIN_COLUMNS)}) "
                              f"VALUES ({db.dialect.params(len(ADMIN_COLUMNS))})")
        self._admin_replace = (f"UPDATE {ADMIN_TABLE} SET {', '.join(f'{c} = {p}' for c in ADMIN_COLUMNS[1:])} "
                               f"WHERE id = {p} AND updated_at = {p}")
        self._admin_exists = f"SELECT 1 FROM {ADMIN_TABLE} WHERE id = {p}"
        self._admin_delete = f"DELETE FROM {ADMIN_TABLE} WHERE id = {p}"
        self._audit_insert = (f"INSERT INTO {AUDIT_TABLE} ({', '.join(AUDIT_COLUMNS)}) "
                              f"VALUES ({db.dialect.params(len(AUDIT_COLUMNS))})")
        self._audit_old = f"DELETE FROM {AUDIT_TABLE} WHERE at < {p}"
        self._touch = (f"UPDATE {TABLE} SET last_used_at = {p} WHERE id = {p} "
                       f"AND (last_used_at IS NULL OR last_used_at < {p})")

    def __repr__(self) -> str:
        return f"SqlControlStore({self.db!r})"

    def open(self) -> None:
        """Connect, and migrate as the ledger does (the tables come with the ledger's schema)."""
        self.db.open()

    def revision(self) -> int:
        return int(self.db._fetch(self._revision, [])[0][0])

    def load(self) -> tuple[int, list[KeyRecord]]:
        rows = self.db._fetch(self._load, [])
        return int(rows[0][0]), [self._record(row[1:]) for row in rows if row[1] is not None]

    def find(self, digest: bytes) -> KeyRecord | None:
        """The record whose current digest is this one, else the one whose previous digest is (the caller
        checks its ``valid_until``)."""
        rows = self.db._fetch(self._find, [digest, digest])
        rows.sort(key=lambda row: bytes(row[1]) != digest)   # a current digest first
        return self._record(rows[0]) if rows else None

    def insert(self, record: KeyRecord, audit: AuditEntry | None = None) -> None:
        def work(cur: Any) -> None:
            cur.execute(self._insert, row_of(record))
        self._write(work, audit)

    def replace(self, record: KeyRecord, updated_at: float, audit: AuditEntry | None = None) -> None:
        row = row_of(record)
        last_used_at = row[COLUMNS.index("last_used_at")]
        values = [v for c, v in zip(COLUMNS[1:], row[1:], strict=True) if c != "last_used_at"]

        self._replace_row(self._replace, [*values, last_used_at, last_used_at], self._exists, "key", record.id,
                          updated_at, audit)

    def delete(self, key_id: str, audit: AuditEntry | None = None) -> bool:
        """Forget the record; False (and no revision bumped, no entry: nothing changed) when there was none."""
        return self._delete_row(self._delete, key_id, audit)

    # --- organizations (the same revision counts their changes) ----------------------------------------

    def load_organizations(self) -> list[OrgRecord]:
        """Every organization record, by id (read after ``load``: a change between the two reads shows as a
        revision newer than the one loaded, and the next poll reads both again)."""
        return self._loaded(self._orgs, org_record_of)

    def insert_organization(self, record: OrgRecord, audit: AuditEntry | None = None) -> None:
        def work(cur: Any) -> None:
            cur.execute(self._org_insert, org_row_of(record))
        self._write(work, audit)

    def replace_organization(self, record: OrgRecord, updated_at: float, audit: AuditEntry | None = None) -> None:
        self._replace_row(self._org_replace, list(org_row_of(record)[1:]), self._org_exists, "organization",
                          record.id, updated_at, audit)

    def delete_organization(self, org_id: str, audit: AuditEntry | None = None) -> bool:
        return self._delete_row(self._org_delete, org_id, audit)

    # --- administrators' accounts (the same revision counts their changes) ------------------------------

    def load_admins(self) -> list[AdminRecord]:
        """Every administrator's account, by id (read after ``load``, as the organizations are)."""
        return self._loaded(self._admins, admin_record_of)

    def insert_admin(self, record: AdminRecord, audit: AuditEntry | None = None) -> None:
        """``ControlConflict`` when the id (or the token's digest) exists."""
        def work(cur: Any) -> None:
            cur.execute(self._admin_insert, admin_row_of(record))
        self._write(work, audit)

    def replace_admin(self, record: AdminRecord, updated_at: float, audit: AuditEntry | None = None) -> None:
        self._replace_row(self._admin_replace, list(admin_row_of(record)[1:]), self._admin_exists, "administrator",
                          record.id, updated_at, audit)

    def delete_admin(self, admin_id: str, audit: AuditEntry | None = None) -> bool:
        return self._delete_row(self._admin_delete, admin_id, audit)

    # --- the audit log -----------------------------------------------------------------------------------

    def audit(self, filters: Mapping[str, Any], limit: int, before_seq: int | None = None) -> list[AuditEntry]:
        """The newest entries first (older than ``before_seq``), each of ``filters`` (``actor``, ``action``,
        ``target``, ``target_id`` equal; ``since``, ``until``: Unix seconds) holding."""
        p = self.db.dialect.placeholder
        clauses, params = [], []
        for name in ("actor", "action", "target", "target_id"):
            if filters.get(name) is not None:
                clauses.append(f"{name} = {p}")
                params.append(filters[name])
        if filters.get("since") is not None:
            clauses.append(f"at >= {p}")
            params.append(filters["since"])
        if filters.get("until") is not None:
            clauses.append(f"at < {p}")
            params.append(filters["until"])
        if before_seq is not None:
            clauses.append(f"seq < {p}")
            params.append(before_seq)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.db._fetch(f"SELECT seq, {', '.join(AUDIT_COLUMNS)} FROM {AUDIT_TABLE}{where} "
                              f"ORDER BY seq DESC LIMIT {p}", [*params, limit])
        return [audit_of(row) for row in rows]

    def prune_audit(self, before: float) -> int:
        """Delete the entries older than ``before`` (the ledger's retention); how many."""
        return self.db.transact(lambda cur: cur.execute(self._audit_old, [before]).rowcount)

    def touch(self, used: Mapping[str, float]) -> None:
        """Every key's ``last_used_at`` moved forward, in one transaction; an id no longer there is passed over."""
        if not used:
            return
        rows = [(at, key_id, at) for key_id, at in used.items()]
        self.db.transact(lambda cur: cur.executemany(self._touch, rows))

    def close(self) -> None:
        self.db.close()

    def _loaded(self, statement: str, record_of: Callable[[Any], R]) -> list[R]:
        """Every row of ``statement`` as its record; one that cannot be read makes the store unusable, named."""
        rows = self.db._fetch(statement, [])
        try:
            return [record_of(row) for row in rows]
        except ValueError as exc:
            raise StoreUnavailable(f"control store {self.db!r}: {exc}") from exc

    def _replace_row(self, statement: str, values: list[Any], exists: str, what: str, row_id: str,
                     updated_at: float, audit: AuditEntry | None) -> None:
        """``statement`` (its SET ``values``, then the id and the ``updated_at`` read) over the row read, or
        ``KeyError`` (no such row) or ``ControlConflict`` (changed since), with the revision and the audit entry."""
        def work(cur: Any) -> None:
            if cur.execute(statement, [*values, row_id, updated_at]).rowcount:
                return
            if cur.execute(exists, [row_id]).fetchone() is None:
                raise KeyError(row_id)
            raise ControlConflict(f"{what} {row_id!r} changed since it was read (updated_at {updated_at})")
        self._write(work, audit)

    def _delete_row(self, statement: str, row_id: str, audit: AuditEntry | None) -> bool:
        def work(cur: Any) -> bool:
            if not cur.execute(statement, [row_id]).rowcount:
                return False
            cur.execute(self._bump)
            if audit is not None:
                cur.execute(self._audit_insert, audit_row_of(audit))
            return True
        return self.db.transact(work)

    def _write(self, work: Callable[[Any], None], audit: AuditEntry | None = None) -> None:
        """``work``, then the revision bumped and the change's audit entry written, in one transaction; a
        duplicate id or digest is a ControlConflict."""
        def bumped(cur: Any) -> None:
            try:
                work(cur)
            except self._integrity as exc:
                if not _duplicate(exc):
                    raise
                raise ControlConflict(f"the id (or the key's secret) is taken: {_first_line(exc)}") from None
            cur.execute(self._bump)
            if audit is not None:
                cur.execute(self._audit_insert, audit_row_of(audit))
        self.db.transact(bumped)

    def _record(self, row: Any) -> KeyRecord:
        try:
            return record_of(row)
        except ValueError as exc:
            raise StoreUnavailable(f"control store {self.db!r}: {exc}") from exc


def _integrity_error(dialect: str) -> type[Exception]:
    """The driver's constraint error (imported here: a gateway on SQLite never loads libpq)."""
    if dialect == "postgresql":
        import psycopg
        return psycopg.IntegrityError
    import sqlite3
    return sqlite3.IntegrityError


def _duplicate(exc: Exception) -> bool:
    """A value a unique column has already (PostgreSQL's SQLSTATE 23505, SQLite's extended codes), not a
    constraint of another kind."""
    return getattr(exc, "sqlstate", None) == "23505" or getattr(exc, "sqlite_errorname", None) in (
        "SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def open_control_store(usage: UsageConfig, data_dir: Path) -> ControlStore | None:
    """The control store beside the ledger ``usage.ledger`` names, constructed but not connected; None with
    ``memory`` (nothing shared to keep keys in)."""
    db = side_database(usage, data_dir, DEADLINE, pool=2)
    return SqlControlStore(db) if db is not None else None
