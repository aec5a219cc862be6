"""``usage.ledger: sqlite``: the embedded ledger, one SQLite file (``<data_dir>/usage.db`` by default).

WAL with ``synchronous=NORMAL``: a committed batch survives a crash of the
process (a power cut may lose the last ones), and readers never block the
writer. Every failure of the file (a directory that cannot be made, a file
that is not a database, a lock held past the busy timeout) is a
``StoreUnavailable`` naming the path.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Sequence, TypeVar

from switchyard.actors.ledger.record import FIELDS, LedgerRecord, RecordRefused, StoreUnavailable
from switchyard.protocol.stores import migrations, sql

DIALECT = sql.Dialect(
    name="sqlite",
    placeholder="?",
    # CAST truncates to the second (as time.gmtime does; strftime alone would round to the millisecond)
    day="strftime('%Y-%m-%d', CAST(time AS INTEGER), 'unixepoch')",
    hour="strftime('%Y-%m-%dT%H:00:00Z', CAST(time AS INTEGER), 'unixepoch')",
    collate="",   # BINARY: UTF-8 bytes, which sort as code points do
    slot="CAST(time / ? AS INTEGER)",   # truncation is floor for the positive times a ledger holds
    migrations=migrations.SQLITE,
    # BEGIN IMMEDIATE takes the write lock: two processes opening one file migrate one after the other
)


T = TypeVar("T")

# As many rows a statement as stay under SQLite's oldest limit of 999 parameters, whatever the columns
# (38 rows of 26 now; a fixed 40 passed it once the ledger gained columns).
ROWS_PER_INSERT = 999 // len(FIELDS)


class SqliteStore(sql.Reads):
    """One connection, opened with ``check_same_thread=False``: the ledger calls the store from
    ``trio.to_thread`` worker threads, each kind of call behind a CapacityLimiter of 1. The lock makes
    every call wait for the one in progress, so a read and a write from two threads never interleave
    on the connection (nor in one transaction)."""

    name = "sqlite"
    dialect = DIALECT

    def __init__(self, path: Path, busy_timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout   # seconds a call waits for another process's write lock
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def open(self) -> None:
        with self._lock:
            if self._conn is not None:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # isolation_level=None: no implicit transactions; _transaction says where each begins
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                                       check_same_thread=False)
            except (OSError, sqlite3.Error) as exc:
                self._fail(exc)
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                self._wal(conn)
                conn.execute("PRAGMA synchronous = NORMAL")
                self._conn = conn
                sql.migrate(DIALECT, self._transaction, str(self.path))
            except BaseException as exc:
                self._conn = None
                conn.close()
                if isinstance(exc, sqlite3.Error):
                    self._fail(exc)
                raise

    def _wal(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL, waiting out another process doing the same: the workers of one instance open a new
        file together, and this pragma fails at once with "database is locked" instead of using busy_timeout."""
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.005
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            # Only ever in a worker thread (the ledger opens the store through trio.to_thread): the wait
            # holds that thread, never the event loop.
            threading.Event().wait(pause)
            pause = min(pause * 2, 0.1)

    def write(self, records: Sequence[LedgerRecord]) -> None:
        if not records:
            return
        # Many rows a statement, not executemany's one: each step lets go of the GIL, and a batch
        # stepped row by row waits for the event loop's thread hundreds of times.
        with self._lock, self._errors(), _refused(), self._transaction() as cur:
            for count, values in sql.chunks(records, ROWS_PER_INSERT):
                cur.execute(self._insert(count), values)

    def ping(self) -> None:
        """The probe record inserted under the write lock, then rolled back."""
        with self._lock, self._errors():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(self._insert(1), sql.row_of(sql.PROBE))
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

    @staticmethod
    @functools.lru_cache(maxsize=ROWS_PER_INSERT)
    def _insert(rows: int) -> str:
        return sql.insert(DIALECT, rows)

    def transact(self, work: Callable[[sqlite3.Cursor], T]) -> T:
        """``work`` on a cursor in one write transaction (the stored-response owner map's statements)."""
        with self._lock, self._errors(), self._transaction() as cur:
            return work(cur)

    def purge(self, before: float) -> int:
        with self._lock, self._errors(), self._transaction() as cur:
            return cur.execute(sql.purge(DIALECT), [before]).rowcount

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def _fetch(self, statement: str, params: list[Any]) -> list[Any]:
        with self._lock, self._errors():
            return self._connection().execute(statement, params).fetchall()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreUnavailable(f"usage ledger {self.path}: not open")
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """BEGIN IMMEDIATE: the write lock at once, so a busy file waits the busy timeout here and
        never fails half-way through; COMMIT, or ROLLBACK on any error."""
        conn = self._connection()
        cur = conn.execute("BEGIN IMMEDIATE")
        try:
            yield cur
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with suppress(sqlite3.Error):   # the first error is the one to tell
                    conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> NoReturn:
        raise StoreUnavailable(f"usage ledger {self.path}: {exc}") from exc


@contextmanager
def _refused() -> Iterator[None]:
    """What SQLite says of a value, not of the file: an integer past 64 bits, text it cannot encode, a type
    it cannot bind, a constraint. Everything else (locked, full, read-only, corrupt) is the store's."""
    try:
        yield
    except (OverflowError, UnicodeEncodeError, ValueError, TypeError, sqlite3.DataError, sqlite3.IntegrityError,
            sqlite3.InterfaceError) as exc:
        raise RecordRefused(f"{type(exc).__name__}: {exc}") from exc
    except sqlite3.ProgrammingError as exc:   # a value of a type it cannot bind; not a closed database
        if not str(exc).startswith("Error binding parameter"):
            raise
        raise RecordRefused(f"{type(exc).__name__}: {exc}") from exc
