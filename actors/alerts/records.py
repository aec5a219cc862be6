"""An alert as the alerts table keeps it, and the store port ``AlertActor`` claims and updates it through.

The claim is the row itself: ``(event, owner, owner_id, bucket, threshold)``
is unique, so of every worker of every instance that sees the same crossing,
exactly one inserts the row and delivers it; the others' inserts do nothing.
A row left pending by a sender that stopped is taken over the same way: by
the one update that finds it unchanged since it was read (``take``).
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

import attrs
from attrs import frozen

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


@frozen
class Alert:
    event: str                        # budget.threshold | key.revoked | key.expiring
    owner: str                        # key | organization
    owner_id: str
    bucket: str                       # budget.threshold: "<period>:<bucket>" (month:2026-12); keys: the instant
    threshold: float                  # budget.threshold: the fraction crossed; 0 for the key events
    created_at: float                 # Unix seconds
    details: Mapping[str, Any] = attrs.field(factory=dict)   # what the webhook is told beyond the above
    status: str = PENDING             # pending | delivered | failed
    attempts: int = 0
    last_error: str | None = None
    updated_at: float = 0.0
    seq: int | None = None            # its place in the table, once claimed

    def body(self) -> dict[str, Any]:
        """The JSON a ``format: json`` webhook receives."""
        return {"event": self.event, "owner": self.owner, "owner_id": self.owner_id, "bucket": self.bucket,
                "threshold": self.threshold if self.event == "budget.threshold" else None,
                "created_at": self.created_at, **self.details}

    def text(self) -> str:
        """One line for a person (a Slack-compatible webhook's ``text``)."""
        d = self.details
        if self.event == "budget.threshold":
            spent = (f"${d.get('spent_usd', 0):.2f} of ${d['limit_usd']:.2f}" if d.get("unit") == "usd"
                     else f"{d.get('spent_tokens', 0)} of {d.get('limit_tokens')} tokens")
            return (f"Switchyard: {self.owner} {self.owner_id} has spent {round(self.threshold * 100):d}% "
                    f"of its {d.get('period')} budget ({spent}, period {d.get('period_bucket')}).")
        if self.event == "key.revoked":
            return f"Switchyard: key {self.owner_id} was revoked."
        return f"Switchyard: key {self.owner_id} expires at {d.get('expires_at_iso')}."


class AlertStore(Protocol):
    """The alerts table in the usage ledger's database (``protocol/stores/alerts.py``); blocking methods, run
    in worker threads; each may raise ``StoreUnavailable``."""

    name: str

    def open(self) -> None: ...

    def claim(self, alert: Alert) -> int | None:
        """Insert ``alert`` (pending, no attempts): its seq, or None when the row exists (another claimed it)."""
        ...

    def update(self, seq: int, status: str, attempts: int, last_error: str | None, at: float) -> None: ...

    def stale(self, before: float, limit: int) -> list[Alert]:
        """Up to ``limit`` pending alerts whose row was last written before ``before`` (oldest first): their
        sender stopped, or lost the store, mid-delivery."""
        ...

    def take(self, alert: Alert, at: float) -> bool:
        """Mark the stale ``alert`` as this worker's (``updated_at`` set to ``at``): True only for the one
        worker whose update found the row unchanged since it read it."""
        ...

    def prune(self, before: float, keep_bucket: str) -> int:
        """Delete the alerts created before ``before``, except those of bucket ``keep_bucket``; how many."""
        ...

    def list(self, filters: Mapping[str, Any], limit: int) -> list[Alert]:
        """The newest alerts first, each of ``filters`` (``event``, ``owner``, ``owner_id``, ``status``) equal."""
        ...

    def close(self) -> None: ...
