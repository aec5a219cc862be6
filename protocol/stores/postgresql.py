"""``usage.ledger: postgresql://...``: one ledger for a fleet of gateways, on PostgreSQL.

psycopg 3 and a ``psycopg_pool.ConnectionPool`` (the sync API: the ledger
calls from ``trio.to_thread`` worker threads). ``open()`` connects once to
say clearly why a server cannot be used (host, port and database, never the
password) and to migrate under an advisory lock, so instances starting
together do not race; then it opens the pool. A pooled connection is checked
before each use, so a server that restarted costs no failed write, and a
server that is down costs a call at most ``timeout`` seconds.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, TypeVar

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from switchyard.actors.ledger.record import LedgerRecord, RecordRefused, StoreUnavailable
from switchyard.protocol.stores import migrations, sql

LOCK_KEY = 0x5377_7964_4C65_6467   # "SwydLedg": the advisory lock instances take to migrate one at a time
T = TypeVar("T")
DEADLOCK_TRIES = 5                   # a batch the server aborted to break a deadlock is tried again

DIALECT = sql.Dialect(
    name="postgresql",
    placeholder="%s",
    # floor: to the second, as time.gmtime does (to_timestamp would round to the microsecond)
    day="to_char(to_timestamp(floor(time)) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
    hour="""to_char(to_timestamp(floor(time)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24":00:00Z"')""",
    collate=' COLLATE "C"',   # code point order, whatever the database's locale
    slot="FLOOR(time / %s::double precision)::bigint",
    migrations=migrations.POSTGRESQL,
    lock=f"SELECT pg_advisory_xact_lock({LOCK_KEY})",
)


class PostgresStore(sql.Reads):
    name = "postgresql"
    dialect = DIALECT

    def __init__(self, url: str, timeout: float = 5.0, max_size: int = 4, statement_timeout: float | None = None
                 ) -> None:
        """``statement_timeout``: seconds the server gives each statement (None: the server's own setting)."""
        self._url = url
        self.where = describe(url)   # for messages: the URL without its password or options
        self.timeout = timeout       # seconds to connect, or to wait for a pooled connection
        self.max_size = max_size
        self._kwargs = connect_kwargs(url, timeout)
        if statement_timeout is not None:
            self._kwargs["options"] = f"-c statement_timeout={round(statement_timeout * 1000)}"
        self._pool = self._new_pool()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    def _new_pool(self) -> ConnectionPool:
        return ConnectionPool(self._url, kwargs=self._kwargs, open=False, min_size=1, max_size=self.max_size,
                              name="usage-ledger", timeout=self.timeout, check=ConnectionPool.check_connection,
                              # a server down longer than this is retried afresh at the next call
                              reconnect_timeout=max(self.timeout * 2, 10.0))

    def open(self) -> None:
        try:
            with psycopg.connect(self._url, autocommit=True, **self._kwargs) as conn:
                sql.migrate(DIALECT, lambda: _transaction(conn), self.where)
            self._pool.open(wait=True, timeout=self.timeout)
        except psycopg.Error as exc:
            self._pool.close()
            self._pool = self._new_pool()   # a pool that was opened cannot be opened again
            raise self._unavailable(exc) from None
        except StoreUnavailable:
            self._pool.close()
            self._pool = self._new_pool()
            raise

    def write(self, records: Sequence[LedgerRecord]) -> None:
        """One transaction; ``executemany`` sends the batch in one pipeline, in the order given (records of
        one instant read back in the order written). Two instances writing overlapping batches (a replay)
        in different orders can deadlock: the server aborts one, which is tried again and skips what the
        other wrote."""
        if not records:
            return
        rows = [sql.row_of(r) for r in records]
        with self._errors(), _refused():
            for attempt in range(1, DEADLOCK_TRIES + 1):
                try:
                    with self._pool.connection() as conn, _transaction(conn) as cur:
                        cur.executemany(sql.insert(DIALECT), rows)
                    return
                except psycopg.errors.DeadlockDetected:
                    if attempt == DEADLOCK_TRIES:
                        raise

    def ping(self) -> None:
        """The probe record inserted on a pooled connection, in a transaction rolled back."""
        with self._errors(), self._pool.connection() as conn, conn.transaction(force_rollback=True), \
                conn.cursor() as cur:
            cur.execute(sql.insert(DIALECT), sql.row_of(sql.PROBE))

    def transact(self, work: Callable[[psycopg.Cursor[Any]], T]) -> T:
        """``work`` on a cursor in one transaction (the stored-response owner map's statements)."""
        with self._errors(), self._pool.connection() as conn, _transaction(conn) as cur:
            return work(cur)

    def purge(self, before: float) -> int:
        with self._errors(), self._pool.connection() as conn, _transaction(conn) as cur:
            return cur.execute(sql.purge(DIALECT), [before]).rowcount

    def close(self) -> None:
        self._pool.close()

    def _fetch(self, statement: str, params: list[Any]) -> list[Any]:
        with self._errors(), self._pool.connection() as conn:
            return conn.execute(statement, params).fetchall()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:   # the pool's timeouts and closed pool are psycopg errors too
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        """Not chained to the driver's exception: nothing of the URL travels further than ``where``."""
        reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
        for secret in _passwords(self._url):
            reason = reason.replace(secret, "***")
        return StoreUnavailable(f"usage ledger {self.where}: {reason}")


@contextmanager
def _refused() -> Iterator[None]:
    """What the server (or psycopg, adapting a value) says of a value, not of the store: a number out of its
    column's range, text it cannot take (NUL, an encoding), a constraint, a row past its limits. Everything
    else (connection, pool, timeouts, a read-only or full server) is the store's."""
    try:
        yield
    except (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.ProgramLimitExceeded, UnicodeEncodeError,
            ValueError, TypeError, OverflowError) as exc:
        raise RecordRefused(f"{type(exc).__name__}: {exc}") from exc
    except psycopg.ProgrammingError as exc:   # a value of a type it cannot adapt; not a statement of ours
        if not str(exc).startswith("cannot adapt type"):
            raise
        raise RecordRefused(f"{type(exc).__name__}: {exc}") from exc


@contextmanager
def _transaction(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Cursor[Any]]:
    with conn.transaction(), conn.cursor() as cur:
        yield cur


def describe(url: str) -> str:
    """``postgresql://user@host:port/db``: who and where, without the password and the options."""
    rest = url.split("://", 1)[-1]
    netloc, _, path = rest.partition("/")
    user_info, _, hosts = netloc.rpartition("@")
    user = user_info.split(":", 1)[0]
    return f"postgresql://{user + '@' if user else ''}{hosts}/{path.split('?', 1)[0]}"


def connect_kwargs(url: str, timeout: float) -> dict[str, Any]:
    """A connect timeout and an application name, unless the URL sets its own."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.Error:
        given = {}   # open() says what is wrong with it
    kwargs: dict[str, Any] = {}
    if "connect_timeout" not in given:
        kwargs["connect_timeout"] = max(2, round(timeout))   # libpq's shortest
    if "application_name" not in given:
        kwargs["application_name"] = "switchyard-ledger"
    return kwargs


def _passwords(url: str) -> list[str]:
    found: list[str] = []
    user_info = url.split("://", 1)[-1].partition("/")[0].rpartition("@")[0]
    if ":" in user_info:
        found.append(user_info.split(":", 1)[1])
    try:
        found.append(str(conninfo_to_dict(url).get("password") or ""))
    except psycopg.Error:
        pass
    return [p for p in found if p]
