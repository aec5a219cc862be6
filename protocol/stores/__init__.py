"""The usage ledger's stores behind ``actors.ports.UsageStore``: SQLite (the embedded default),
PostgreSQL (one ledger for a fleet) and memory; ``open_store`` picks one by ``usage.ledger``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from switchyard.actors.ports import UsageStore
from switchyard.config.usage import UsageConfig

if TYPE_CHECKING:
    from switchyard.protocol.stores.postgresql import PostgresStore
    from switchyard.protocol.stores.sqlite import SqliteStore

DEFAULT_SQLITE = "usage.db"   # under server.data_dir


def open_store(usage: UsageConfig, data_dir: Path) -> UsageStore:
    """The store ``usage.ledger`` names, constructed but not connected: the caller runs its
    ``open()`` in a worker thread (it may block on a file lock or a server)."""
    ledger = usage.ledger
    if ledger == "memory":
        from switchyard.protocol.stores.memory import MemoryStore
        return MemoryStore()
    if ledger == "sqlite" or ledger.startswith("sqlite:///"):
        from switchyard.protocol.stores.sqlite import SqliteStore
        path = Path(data_dir) / DEFAULT_SQLITE if ledger == "sqlite" else Path(ledger[len("sqlite://"):])
        return SqliteStore(path)
    if ledger.startswith(("postgresql://", "postgres://")):
        # imported here: a gateway on SQLite never loads libpq
        from switchyard.protocol.stores.postgresql import PostgresStore
        return PostgresStore(ledger)
    raise ValueError(f"usage.ledger must be sqlite, sqlite:///<absolute path>, memory or a postgresql:// URL, "
                     f"got {ledger!r}")


def side_database(usage: UsageConfig, data_dir: Path, deadline: float, pool: int
                  ) -> "SqliteStore | PostgresStore | None":
    """A connection of its own to the ledger's database, for a store kept beside the ledger (the stored
    responses' owner map, the control plane): every call within ``deadline`` seconds; None with ``memory``."""
    ledger = usage.ledger
    if ledger == "memory":
        return None
    if ledger == "sqlite" or ledger.startswith("sqlite:///"):
        from switchyard.protocol.stores.sqlite import SqliteStore
        path = Path(data_dir) / DEFAULT_SQLITE if ledger == "sqlite" else Path(ledger[len("sqlite://"):])
        return SqliteStore(path, busy_timeout=deadline)
    if ledger.startswith(("postgresql://", "postgres://")):
        from switchyard.protocol.stores.postgresql import PostgresStore
        return PostgresStore(ledger, timeout=deadline, max_size=pool, statement_timeout=deadline)
    raise ValueError(f"usage.ledger must be sqlite, sqlite:///<absolute path>, memory or a postgresql:// URL, "
                     f"got {ledger!r}")
