"""The alerts table (migration 9 of ``migrations.py``) in the usage ledger's database: claims and statuses.

``claim`` is one ``INSERT ... ON CONFLICT DO NOTHING RETURNING seq`` on the
unique (event, owner, owner_id, bucket, threshold): whichever worker of the
fleet inserts first gets the seq and sends the alert; every other insert
returns no row. With ``usage.ledger: memory`` there is no table and no
alerts (``open_alert_store`` returns None). Each method blocks: the callers
run them in worker threads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from switchyard.actors.alerts.records import PENDING, Alert, AlertStore
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores import side_database

if TYPE_CHECKING:
    from switchyard.protocol.stores.postgresql import PostgresStore
    from switchyard.protocol.stores.sqlite import SqliteStore

TABLE = "alerts"
KEY = ("event", "owner", "owner_id", "bucket", "threshold")
COLUMNS = (*KEY, "created_at", "status", "attempts", "last_error", "updated_at", "details")
FILTERS = ("event", "owner", "owner_id", "status")
DEADLINE = 2.0   # seconds any call may take (a lock waited for, a connection, a statement)


class SqlAlertStore:
    def __init__(self, db: SqliteStore | PostgresStore) -> None:
        self.db = db
        self.name = db.name
        p = db.dialect.placeholder
        self._claim = (f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({db.dialect.params(len(COLUMNS))}) "
                       f"ON CONFLICT ({', '.join(KEY)}) DO NOTHING RETURNING seq")
        self._update = (f"UPDATE {TABLE} SET status = {p}, attempts = {p}, last_error = {p}, updated_at = {p} "
                        f"WHERE seq = {p}")
        self._take = (f"UPDATE {TABLE} SET updated_at = {p} WHERE seq = {p} AND status = '{PENDING}' "
                      f"AND updated_at = {p}")
        self._stale = (f"SELECT seq, {', '.join(COLUMNS)} FROM {TABLE} WHERE status = '{PENDING}' "
                       f"AND updated_at < {p} ORDER BY seq LIMIT {p}")
        self._prune = f"DELETE FROM {TABLE} WHERE created_at < {p} AND bucket <> {p}"

    def __repr__(self) -> str:
        return f"SqlAlertStore({self.db!r})"

    def open(self) -> None:
        """Connect, and migrate as the ledger does (the table comes with the ledger's schema)."""
        self.db.open()

    def claim(self, alert: Alert) -> int | None:
        row = (alert.event, alert.owner, alert.owner_id, alert.bucket, alert.threshold, alert.created_at,
               PENDING, 0, None, alert.created_at, json.dumps(dict(alert.details), sort_keys=True))

        def work(cur: Any) -> int | None:
            got = cur.execute(self._claim, row).fetchone()
            return None if got is None else int(got[0])
        return self.db.transact(work)

    def update(self, seq: int, status: str, attempts: int, last_error: str | None, at: float) -> None:
        self.db.transact(lambda cur: cur.execute(self._update, [status, attempts, last_error, at, seq]))

    def stale(self, before: float, limit: int) -> list[Alert]:
        return [_alert(row) for row in self.db._fetch(self._stale, [before, limit])]

    def take(self, alert: Alert, at: float) -> bool:
        assert alert.seq is not None
        return bool(self.db.transact(
            lambda cur: cur.execute(self._take, [at, alert.seq, alert.updated_at]).rowcount))

    def prune(self, before: float, keep_bucket: str) -> int:
        return int(self.db.transact(lambda cur: cur.execute(self._prune, [before, keep_bucket]).rowcount))

    def list(self, filters: Mapping[str, Any], limit: int) -> list[Alert]:
        p = self.db.dialect.placeholder
        clauses, params = [], []
        for name in FILTERS:
            if filters.get(name) is not None:
                clauses.append(f"{name} = {p}")
                params.append(filters[name])
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.db._fetch(f"SELECT seq, {', '.join(COLUMNS)} FROM {TABLE}{where} ORDER BY seq DESC LIMIT {p}",
                              [*params, limit])
        return [_alert(row) for row in rows]

    def close(self) -> None:
        self.db.close()


def _alert(row: Sequence[Any]) -> Alert:
    seq, event, owner, owner_id, bucket, threshold, created_at, status, attempts, last_error, updated_at, \
        details = row
    return Alert(event, owner, owner_id, bucket, float(threshold), float(created_at), json.loads(details),
                 status, int(attempts), last_error, float(updated_at), int(seq))


def open_alert_store(usage: UsageConfig, data_dir: Path) -> AlertStore | None:
    """The alerts table beside the ledger ``usage.ledger`` names, constructed but not connected; None with
    ``memory``."""
    db = side_database(usage, data_dir, DEADLINE, pool=2)
    return SqlAlertStore(db) if db is not None else None
