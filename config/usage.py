"""The usage ledger's settings (``usage``): where every call's record goes and for how long.

``ledger`` names the store: ``sqlite`` (the default: ``<server.data_dir>/usage.db``,
or ``sqlite:///an/absolute/path.db``), ``postgresql://...`` (one ledger for a
fleet) or ``memory`` (nothing persisted, per worker). Records reach it in
batches off the request path; ``flush_interval`` bounds what a ``kill -9``
can lose.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field
from switchyard.config.rules import Invalid

DAY = 86_400.0


def ledger_url(value: Any) -> str:
    """``sqlite``, ``sqlite:///absolute/path``, ``memory`` or a ``postgresql://`` (``postgres://``) URL."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"must be sqlite, memory or a postgresql:// URL, got {values.quoted_url(value)}")
    text = value.strip()
    if text in ("sqlite", "memory"):
        return text
    if text.startswith("sqlite:///") and len(text) > len("sqlite:///"):
        return text
    if text.startswith(("postgresql://", "postgres://")) and len(text.split("://", 1)[1]) > 0:
        return text
    raise Invalid("must be sqlite, sqlite:///<absolute path>, memory or a postgresql:// URL, "
                  f"got {values.quoted_url(value)}")


@frozen
class UsageConfig:
    ledger: str = field("sqlite", ledger_url)
    # records older than this are purged (0: kept for ever)
    retention: float = field(90 * DAY, rules.duration(maximum=36_500 * DAY, allow_zero=True))
    # the longest a record waits before its batch is written: what a kill -9 can lose
    flush_interval: float = field(1.0, rules.duration(minimum=0.01, maximum=60))
    batch_size: int = field(500, rules.integer(1, 100_000))
    # records waiting for the store; past this they spill to <data_dir>/usage-spill.jsonl
    queue_size: int = field(10_000, rules.integer(1, 10_000_000))
    # the spill file's (and the quarantine file's) bound; past it, records are dropped and counted
    spill_max_bytes: int = field(1024**3, rules.size(64 * 1024, 1024**4))
    # spilled records older than this are dropped when the file is replayed, or to make room in it
    spill_max_age: float = field(7 * DAY, rules.duration(minimum=60, maximum=36_500 * DAY))
    # distinct key ids and models in the usage metrics' labels; the rest are counted as "other"
    metrics_max_label_values: int = field(100, rules.integer(0, 100_000))
