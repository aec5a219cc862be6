"""The port a ledger store fills (SQLite, PostgreSQL, memory: ``protocol/stores``), re-exported by
``actors.ports`` with the others. It is kept beside the ledger: ``actors.ports`` imports the ledger (the
records this port speaks, the per-call meter through ``CallTrace``), so the ledger cannot import it back."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from switchyard.actors.ledger.record import LedgerRecord, UsageQuery


class UsageStore(Protocol):
    """Where ledger records are kept. Blocking methods: the ledger runs them in a worker thread,
    behind a CapacityLimiter, never on the event loop. Every method may raise ``StoreUnavailable``.

    A group (``summary``) is ``{<group field>: value, "requests", "errors", "input_tokens",
    "output_tokens", "cost"}``: the group field is ``key_id``/``organization_id``/``model``/``backend``/
    ``endpoint`` for those groupings, ``day`` (``2026-12-01``) or ``hour`` (``2026-12-01T13:00:00Z``) in UTC, and
    absent without ``group_by``; ``errors`` counts status >= 400; ``cost`` is the sum of known costs
    (None when no record in the group had one). Groups come sorted by their field.
    """

    name: str   # "sqlite", "postgresql" or "memory": for logs and metrics

    def open(self) -> None:
        """Connect and apply the schema's migrations."""
        ...

    def write(self, records: Sequence[LedgerRecord]) -> None:
        """All of ``records`` or none; a record whose record_id is already there is skipped. A value the
        store refuses (not the store's own trouble) raises ``RecordRefused``."""
        ...

    def ping(self) -> None:
        """Raise unless a write would succeed now: a probe record written in a transaction rolled back (the
        ledger's probe of an outage when it has nothing to write)."""
        ...

    def summary(self, query: UsageQuery) -> list[dict[str, Any]]: ...

    def traffic(self, query: UsageQuery, step: int) -> list[dict[str, Any]]:
        """The matching records spread over time: one row per time slot (``floor(time / step)``, ``step``
        whole seconds) and group (``query.group_by``: ``model``, ``backend``, ``endpoint`` or None for one
        series) that has records: ``{"slot", "group", "requests", "errors", "latency_ms", "ttfb_ms"}``, the
        last two histograms over ``traffic.BOUNDS_MS`` (``ttfb_ms`` counts the records that have one). Rows come
        sorted by group (None last), then slot; every store answers the same rows for the same records."""
        ...

    def records(self, query: UsageQuery, limit: int) -> list[LedgerRecord]:
        """The matching records, oldest first, at most ``limit`` (group_by is ignored)."""
        ...

    def for_request(self, request_id: str) -> list[LedgerRecord]:
        """Every record of one request id (its client record, and its classifier tries), oldest first."""
        ...

    def purge(self, before: float) -> int:
        """Delete records older than ``before`` (Unix seconds); how many went."""
        ...

    def close(self) -> None: ...
