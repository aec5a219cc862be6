"""The stored-response owner map in the usage ledger's database: one table every worker and instance sharing
the ledger reads, so a response created through one is found through any other, and after a restart.

``stored_response_owners`` (migration 2 of ``migrations.py``) holds one row
per (owner, response id): the backend that created it and when (Unix
seconds). It lives where ``usage.ledger`` says: the SQLite file under
``server.data_dir`` (the workers of one machine) or PostgreSQL (a fleet).
With ``usage.ledger: memory`` there is no shared store and ``open_owner_store``
returns None: each worker keeps its own map in memory.

The bounds hold at every lookup (an id older than ``max_age``, or with
``max_entries`` rows written after it, is not found) and ``prune`` deletes
what they exclude; both statements are idempotent, so every worker may prune.
Each method blocks: ``actors/stored_owners.py`` calls them in worker threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from switchyard.actors.owner_writes import Op
from switchyard.actors.ports import Found, OwnerStore
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores import side_database

if TYPE_CHECKING:
    import sqlite3

    import psycopg

    from switchyard.protocol.stores.postgresql import PostgresStore
    from switchyard.protocol.stores.sqlite import SqliteStore

TABLE = "stored_response_owners"
# Seconds any call to the map's store may take, its own deadline (a lock waited for, a connection, a
# statement): the request path waits on a store that is away no longer than this (actors/stored_owners.py).
DEADLINE = 2.0


class SqlOwnerStore:
    """The owner map on a ledger store (``SqliteStore`` or ``PostgresStore``) of its own: a connection apart
    from the ledger's, so a lookup never waits behind a batch of records."""

    def __init__(self, db: SqliteStore | PostgresStore) -> None:
        self.db = db
        self.name = db.name
        p = db.dialect.placeholder
        self._delete = f"DELETE FROM {TABLE} WHERE owner = {p} AND response_id = {p}"
        self._insert = f"INSERT INTO {TABLE} (owner, response_id, backend, created) VALUES ({p}, {p}, {p}, {p})"
        # the seq of the newest row past the newest max_entries: it and older ones are forgotten (NULL: none)
        past = f"(SELECT seq FROM {TABLE} ORDER BY seq DESC LIMIT 1 OFFSET {p})"
        self._find = (f"SELECT owner, backend FROM {TABLE} WHERE response_id = {p} AND created > {p} "
                      f"AND seq > COALESCE({past}, 0)")
        self._old = f"DELETE FROM {TABLE} WHERE created <= {p}"
        self._over = f"DELETE FROM {TABLE} WHERE seq <= {past}"

    def __repr__(self) -> str:
        return f"SqlOwnerStore({self.db!r})"

    def open(self) -> None:
        """Connect, and migrate as the ledger does (the table comes with the ledger's schema)."""
        self.db.open()

    def apply(self, ops: Sequence[Op]) -> None:
        """Each op in order, in one transaction: a row written anew (the newest again, if the owner had the
        id already), or deleted. No ops: an empty transaction, which proves the store takes writes."""
        def work(cur: Any) -> None:
            for op in ops:
                cur.execute(self._delete, (op.owner, op.response_id))
                if op.backend is not None:
                    cur.execute(self._insert, (op.owner, op.response_id, op.backend, op.created))
        self.db.transact(work)

    def remember(self, owner: str, response_id: str, backend: str, created: float) -> None:
        self.apply([Op(owner, response_id, backend, created)])

    def lookup(self, owner: str, response_id: str, since: float, max_entries: int) -> Found:
        """One read, outside any write transaction (a lookup never takes SQLite's write lock)."""
        mine: str | None = None
        other = False
        for row_owner, backend in self.db._fetch(self._find, [response_id, since, max_entries]):
            if row_owner == owner:
                mine = backend
            else:
                other = True
        return Found(mine, other)

    def forget(self, owner: str, response_id: str) -> None:
        self.apply([Op(owner, response_id, None, 0.0)])

    def prune(self, before: float, max_entries: int) -> int:
        """Delete the rows created at or before ``before`` and those past the newest ``max_entries``; how many."""
        def work(cur: sqlite3.Cursor | psycopg.Cursor[Any]) -> int:
            return cur.execute(self._old, (before,)).rowcount + cur.execute(self._over, (max_entries,)).rowcount
        return self.db.transact(work)

    def close(self) -> None:
        self.db.close()


def open_owner_store(usage: UsageConfig, data_dir: Path) -> OwnerStore | None:
    """The owner map's store beside the ledger ``usage.ledger`` names, constructed but not connected; None
    with ``memory`` (nothing shared: each worker's own memory is the map)."""
    db = side_database(usage, data_dir, DEADLINE, pool=4)
    return SqlOwnerStore(db) if db is not None else None
