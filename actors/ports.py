"""What the actors need from below the wire, as interfaces the protocol layer fills at start.

The actors speak to backends through an ``Upstream`` and count their calls
through whatever ``metrics_for`` makes; they never import the HTTP client,
the transport or the metrics exporter that implement them
(``switchyard.protocol.serving.wiring`` assembles a Runtime with the real ones).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

import httpx

from switchyard.actors.ledger.record import LedgerRecord, UsageQuery
from switchyard.config.schema import Snapshot

if TYPE_CHECKING:
    from switchyard.actors.events import CallTrace


class Upstream(Protocol):
    """The one shared client to every backend, real or simulated."""

    client: httpx.AsyncClient   # for a backend's own routes: health, models, engine pages

    def request(self, method: str, url: httpx.URL, headers: list[tuple[str, str]],
                content: bytes) -> httpx.Request: ...

    async def send(self, request: httpx.Request) -> httpx.Response:
        """The request on its way, its answer unread (the caller closes it)."""
        ...

    def errors(self, backend: str) -> AbstractContextManager[None]:
        """A context that turns the transport's failures into ``actors.errors``' upstream errors."""
        ...

    def sync_simulated(self, snapshot: Snapshot) -> None:
        """After a reload: in-process simulators follow the new revision."""
        ...

    async def aclose(self) -> None: ...


class CallMetrics(Protocol):
    """Told of every finished call."""

    def observe(self, trace: CallTrace) -> None: ...


MetricsFor = Callable[[Any], CallMetrics]   # made for one Runtime, once it exists


class UsageStore(Protocol):
    """Where ledger records are kept. Blocking methods: the ledger runs them in a worker thread,
    behind a CapacityLimiter, never on the event loop. Every method may raise ``StoreUnavailable``.

    A group (``summary``) is ``{<group field>: value, "requests", "errors", "input_tokens",
    "output_tokens", "cost"}``: the group field is ``key_id``/``organization_id``/``model``/``backend``
    for those groupings, ``day`` (``2026-12-01``) or ``hour`` (``2026-12-01T13:00:00Z``) in UTC, and
    absent without ``group_by``; ``errors`` counts status >= 400; ``cost`` is the sum of known costs
    (None when no record in the group had one). Groups come sorted by their field.
    """

    name: str   # "sqlite", "postgresql" or "memory": for logs and metrics

    def open(self) -> None:
        """Connect and apply the schema's migrations."""
        ...

    def write(self, records: Sequence[LedgerRecord]) -> None:
        """All of ``records`` or none; a record whose record_id is already there is skipped."""
        ...

    def summary(self, query: UsageQuery) -> list[dict[str, Any]]: ...

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
