"""The batch store on SQLite and PostgreSQL (migration 12 of ``migrations.py``): files, batches, their lines.

One class over the ledger's database (``side_database``, a connection of its
own), as ``alerts.py`` is. A file's bytes up to ``batches.inline_bytes`` stay
in its row; a larger file is written under ``batches.directory``
(``batch_disk.py``) and only its name is in the row, so a fleet shares those
through a shared mount. Deleting the row deletes the file.

The leases are what make a fleet safe: ``claim`` reads the oldest runnable
batch and takes it with one conditional UPDATE (lease free or lapsed), in one
transaction; PostgreSQL's ``FOR UPDATE SKIP LOCKED`` lets workers claiming
together each take another batch instead of queueing on one, SQLite's write
lock serializes them. ``finish_line`` locks the batch's row, checks the lease
is still the worker's, and writes the line only if it is still pending: a
line is finished once, whoever else ran it. Each method blocks (callers run
them in worker threads) and raises ``StoreUnavailable`` within the store's
deadlines.
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import attrs

from switchyard.actors.batches.records import CANCELLING, DONE, PENDING, RUNNABLE, TERMINAL, Batch, Line, StoredFile
from switchyard.actors.batches.store import BatchStore
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.batches import BatchesConfig
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores import side_database
from switchyard.protocol.stores.batch_disk import FileDirectory, files_directory
from switchyard.protocol.stores.batches_memory import MemoryBatchStore, cancelled, updated

if TYPE_CHECKING:
    from switchyard.protocol.stores.postgresql import PostgresStore
    from switchyard.protocol.stores.sqlite import SqliteStore

DEADLINE = 3.0     # seconds any call may take (a lock waited for, a connection, a statement)
POOL = 4           # PostgreSQL connections of one worker's store

FILE_COLUMNS = ("id", "owner", "purpose", "filename", "bytes", "created_at", "expires_at", "backend", "upstream_id",
                "lines")
BATCH_COLUMNS = ("id", "owner", "endpoint", "input_file_id", "completion_window", "status", "created_at",
                 "expires_at", "total", "completed", "failed", "metadata", "model", "output_file_id", "error_file_id",
                 "errors", "times", "backend", "upstream_id", "lease_owner", "lease_until")
LINE_COLUMNS = ("batch_id", "number", "custom_id", "url", "body", "status", "result")
# what update() writes (a relayed batch's counts too)
WRITTEN = ("status", "times", "output_file_id", "error_file_id", "errors", "model", "backend", "upstream_id",
           "total", "completed", "failed")


def _in(statuses: frozenset[str]) -> str:
    """Our own status names as an SQL list (never a client's value)."""
    return ", ".join(f"'{s}'" for s in sorted(statuses))


class SqlBatchStore:
    def __init__(self, db: SqliteStore | PostgresStore, directory: Path, inline_bytes: int) -> None:
        self.db = db
        self.name = db.name
        self.disk = FileDirectory(directory)
        self.inline_bytes = inline_bytes
        postgres = db.name == "postgresql"
        self._p = p = db.dialect.placeholder
        self._lock = " FOR UPDATE" if postgres else ""   # SQLite: BEGIN IMMEDIATE holds the file's write lock
        self._skip = " FOR UPDATE SKIP LOCKED" if postgres else ""
        self._id = f"id{db.dialect.collate}"
        self._files = ", ".join(FILE_COLUMNS)
        self._batches = ", ".join(BATCH_COLUMNS)
        self._lines = ", ".join(LINE_COLUMNS)
        # an output file written again (a finalize a lapsed worker began, finished by another) replaces itself
        kept = ", ".join(f"{c} = excluded.{c}" for c in (*FILE_COLUMNS[1:], "content", "path"))
        self._add_file = (f"INSERT INTO batch_files ({self._files}, content, path) "
                          f"VALUES ({db.dialect.params(len(FILE_COLUMNS) + 2)}) ON CONFLICT (id) DO UPDATE SET {kept}")
        self._add_batch = f"INSERT INTO batches ({self._batches}) VALUES ({db.dialect.params(len(BATCH_COLUMNS))})"
        self._add_line = f"INSERT INTO batch_lines ({self._lines}) VALUES ({db.dialect.params(len(LINE_COLUMNS))})"
        self._one_batch = f"SELECT {self._batches} FROM batches WHERE id = {p}"
        self._runnable = (f"SELECT {self._batches} FROM batches WHERE backend IS NULL AND status IN ({_in(RUNNABLE)}) "
                          f"AND (lease_owner IS NULL OR lease_until < {p}) ORDER BY created_at, {self._id} "
                          f"LIMIT 1{self._skip}")
        self._take = (f"UPDATE batches SET lease_owner = {p}, lease_until = {p} WHERE id = {p} "
                      f"AND (lease_owner IS NULL OR lease_until < {p})")
        self._write = (f"UPDATE batches SET {', '.join(f'{c} = {p}' for c in WRITTEN)} WHERE id = {p}")

    def __repr__(self) -> str:
        return f"SqlBatchStore({self.db!r}, {str(self.disk.path)!r})"

    def open(self) -> None:
        """Connect, and migrate as the ledger does (the tables come with the ledger's schema)."""
        self.db.open()

    def close(self) -> None:
        self.db.close()

    # --- files --------------------------------------------------------------------

    def add_file(self, file: StoredFile, content: bytes | None) -> None:
        inline, path = content, None
        if content is not None and len(content) > self.inline_bytes:
            inline, path = None, self.disk.write(file.id, content)
        row = (*(getattr(file, c) for c in FILE_COLUMNS), inline, path)
        try:
            self.db.transact(lambda cur: cur.execute(self._add_file, row))
        except BaseException:
            if path is not None:
                with suppress(StoreUnavailable):   # the row's failure is the one to tell
                    self.disk.delete(path)
            raise

    def file(self, owner: str | None, file_id: str) -> StoredFile | None:
        clause, params = self._owned(owner, file_id)
        rows = self.db._fetch(f"SELECT {self._files} FROM batch_files WHERE {clause}", params)
        return _file(rows[0]) if rows else None

    def files(self, owner: str, purpose: str | None, after: str | None, limit: int,
              newest_first: bool = True) -> list[StoredFile]:
        p = self._p
        where, params = f"owner = {p}", [owner]
        if purpose is not None:
            where += f" AND purpose = {p}"
            params.append(purpose)
        rows = self.db._fetch(*self._page("batch_files", self._files, where, params, after, limit, newest_first))
        return [_file(row) for row in rows]

    def content(self, file_id: str) -> bytes | None:
        rows = self.db._fetch(f"SELECT content, path FROM batch_files WHERE id = {self._p}", [file_id])
        if not rows:
            return None
        inline: bytes | None = rows[0][0]
        path: str | None = rows[0][1]
        if inline is not None:
            return bytes(inline)
        if path is None:
            return None   # a relayed file: its backend holds the bytes
        return self.disk.read(path)

    def delete_file(self, owner: str, file_id: str) -> bool:
        p = self._p
        rows = self.db.transact(lambda cur: cur.execute(
            f"DELETE FROM batch_files WHERE id = {p} AND owner = {p} RETURNING path", [file_id, owner]).fetchall())
        if not rows:
            return False
        if rows[0][0] is not None:   # once the row is gone: a failure leaves a stray file, never a row without one
            self.disk.delete(rows[0][0])
        return True

    # --- batches ------------------------------------------------------------------

    def add_batch(self, batch: Batch, lines: Sequence[Line]) -> None:
        rows = [tuple(getattr(line, c) for c in LINE_COLUMNS) for line in lines]

        def work(cur: Any) -> None:
            cur.execute(self._add_batch, _batch_row(batch))
            if rows:
                cur.executemany(self._add_line, rows)
        self.db.transact(work)

    def batch(self, owner: str | None, batch_id: str) -> Batch | None:
        clause, params = self._owned(owner, batch_id)
        rows = self.db._fetch(f"SELECT {self._batches} FROM batches WHERE {clause}", params)
        return _batch(rows[0]) if rows else None

    def batches(self, owner: str, after: str | None, limit: int) -> list[Batch]:
        rows = self.db._fetch(*self._page("batches", self._batches, f"owner = {self._p}", [owner], after, limit,
                                          True))
        return [_batch(row) for row in rows]

    def cancel(self, owner: str, batch_id: str, at: float) -> Batch | None:
        def work(cur: Any) -> Batch | None:
            found = self._locked(cur, batch_id)
            if found is None or found.owner != owner:
                return None
            if found.status in TERMINAL or found.status == CANCELLING:
                return found
            return self._store(cur, cancelled(found, at))
        return self.db.transact(work)

    # --- the workers that run batches ---------------------------------------------

    def claim(self, worker: str, now: float, until: float) -> Batch | None:
        def work(cur: Any) -> Batch | None:
            row = cur.execute(self._runnable, [now]).fetchone()
            if row is None:
                return None
            found = _batch(row)
            if cur.execute(self._take, [worker, until, found.id, now]).rowcount != 1:
                return None
            return attrs.evolve(found, lease_owner=worker, lease_until=until)
        return self.db.transact(work)

    def renew(self, batch_id: str, worker: str, until: float) -> Batch | None:
        p = self._p
        return self.db.transact(lambda cur: _maybe(cur.execute(
            f"UPDATE batches SET lease_until = {p} WHERE id = {p} AND lease_owner = {p} RETURNING {self._batches}",
            [until, batch_id, worker]).fetchone()))

    def release(self, batch_id: str, worker: str) -> None:
        p = self._p
        self.db.transact(lambda cur: cur.execute(
            f"UPDATE batches SET lease_owner = NULL, lease_until = 0 WHERE id = {p} AND lease_owner = {p}",
            [batch_id, worker]))

    def lines(self, batch_id: str, status: str, after: int, limit: int) -> list[Line]:
        p = self._p
        rows = self.db._fetch(f"SELECT {self._lines} FROM batch_lines WHERE batch_id = {p} AND status = {p} "
                              f"AND number > {p} ORDER BY number LIMIT {p}", [batch_id, status, after, limit])
        return [Line(*row) for row in rows]

    def finish_line(self, line: Line, worker: str) -> bool:
        p = self._p

        def work(cur: Any) -> bool:
            held = cur.execute(f"SELECT lease_owner FROM batches WHERE id = {p}{self._lock}",
                               [line.batch_id]).fetchone()
            if held is None or held[0] != worker:
                return False
            if cur.execute(f"UPDATE batch_lines SET status = {p}, result = {p} WHERE batch_id = {p} AND number = {p} "
                           f"AND status = '{PENDING}'",
                           [line.status, line.result, line.batch_id, line.number]).rowcount != 1:
                return False
            counted = "completed" if line.status == DONE else "failed"
            cur.execute(f"UPDATE batches SET {counted} = {counted} + 1 WHERE id = {p}", [line.batch_id])
            return True
        return bool(self.db.transact(work))

    def update(self, batch: Batch, worker: str | None) -> bool:
        def work(cur: Any) -> bool:
            found = self._locked(cur, batch.id)
            if found is None or (worker is not None and found.lease_owner != worker):
                return False
            self._store(cur, updated(found, batch))
            return True
        return bool(self.db.transact(work))

    def update_open(self, batch: Batch) -> bool:
        def work(cur: Any) -> bool:
            found = self._locked(cur, batch.id)   # the row locked: of writers racing, one sees it not terminal
            if found is None or found.status in TERMINAL:
                return False
            self._store(cur, updated(found, batch))
            return True
        return bool(self.db.transact(work))

    def purge(self, now: float, limit: int) -> int:
        p = self._p
        rows = self.db.transact(lambda cur: cur.execute(
            f"DELETE FROM batch_files WHERE id IN (SELECT id FROM batch_files WHERE expires_at IS NOT NULL "
            f"AND expires_at <= {p} LIMIT {p}) RETURNING path", [now, limit]).fetchall())
        for (path,) in rows:
            if path is not None:
                self.disk.delete(path)
        self.db.transact(lambda cur: cur.execute(
            f"DELETE FROM batch_lines WHERE batch_id IN (SELECT id FROM batches WHERE status IN ({_in(TERMINAL)}))"))
        return len(rows)

    def relayed_open(self, limit: int) -> list[Batch]:
        rows = self.db._fetch(f"SELECT {self._batches} FROM batches WHERE backend IS NOT NULL "
                              f"AND status NOT IN ({_in(TERMINAL)}) ORDER BY created_at, {self._id} LIMIT {self._p}",
                              [limit])
        return [_batch(row) for row in rows]

    # --- the pieces ---------------------------------------------------------------

    def _owned(self, owner: str | None, row_id: str) -> tuple[str, list[Any]]:
        p = self._p
        return (f"id = {p}", [row_id]) if owner is None else (f"id = {p} AND owner = {p}", [row_id, owner])

    def _page(self, table: str, columns: str, where: str, params: list[Any], after: str | None, limit: int,
              newest_first: bool) -> tuple[str, list[Any]]:
        """Rows in order of creation (ties by id), past the row ``after`` names under the same filter (a row
        that is not there: none)."""
        direction, past = ("DESC", "<") if newest_first else ("ASC", ">")
        if after is not None:
            where = (f"{where} AND (created_at, {self._id}) {past} "
                     f"(SELECT created_at, {self._id} FROM {table} WHERE {where} AND id = {self._p})")
            params = [*params, *params, after]
        return (f"SELECT {columns} FROM {table} WHERE {where} "
                f"ORDER BY created_at {direction}, {self._id} {direction} LIMIT {self._p}", [*params, limit])

    def _locked(self, cur: Any, batch_id: str) -> Batch | None:
        """The batch's row, locked until the transaction ends (PostgreSQL; SQLite's transaction holds the file)."""
        return _maybe(cur.execute(f"{self._one_batch}{self._lock}", [batch_id]).fetchone())

    def _store(self, cur: Any, batch: Batch) -> Batch:
        row = _batch_row(batch)
        cur.execute(self._write, [row[BATCH_COLUMNS.index(c)] for c in WRITTEN] + [batch.id])
        return batch


def _file(row: Sequence[Any]) -> StoredFile:
    data = dict(zip(FILE_COLUMNS, row, strict=True))
    return StoredFile(**{**data, "bytes": int(data["bytes"]), "lines": int(data["lines"]),
                         "created_at": float(data["created_at"])})


def _batch_row(batch: Batch) -> tuple[Any, ...]:
    encoded = {"metadata": json.dumps(dict(batch.metadata), sort_keys=True),
               "errors": json.dumps([dict(e) for e in batch.errors]), "times": json.dumps(dict(batch.times))}
    return tuple(encoded[c] if c in encoded else getattr(batch, c) for c in BATCH_COLUMNS)


def _batch(row: Sequence[Any]) -> Batch:
    data = dict(zip(BATCH_COLUMNS, row, strict=True))
    data["metadata"] = json.loads(data["metadata"])
    data["errors"] = tuple(json.loads(data["errors"]))
    data["times"] = json.loads(data["times"])
    for name in ("total", "completed", "failed"):
        data[name] = int(data[name])
    for name in ("created_at", "expires_at", "lease_until"):
        data[name] = float(data[name])
    return Batch(**data)


def _maybe(row: Sequence[Any] | None) -> Batch | None:
    return None if row is None else _batch(row)


def open_batch_store(usage: UsageConfig, batches: BatchesConfig, data_dir: Path) -> BatchStore:
    """The files and batches beside the ledger ``usage.ledger`` names, constructed but not connected; this
    worker's memory with ``memory``."""
    db = side_database(usage, data_dir, DEADLINE, pool=POOL)
    if db is None:
        return MemoryBatchStore()
    return SqlBatchStore(db, files_directory(batches, data_dir), batches.inline_bytes)

