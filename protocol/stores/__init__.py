"""The usage ledger's stores behind ``actors.ports.UsageStore``: SQLite (the embedded default),
PostgreSQL (one ledger for a fleet) and memory; ``open_store`` picks one by ``usage.ledger``."""

from __future__ import annotations

from pathlib import Path

from switchyard.actors.ports import UsageStore
from switchyard.config.usage import UsageConfig

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
