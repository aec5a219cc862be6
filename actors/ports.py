"""What the actors need from below the wire, as interfaces the protocol layer fills at start.

The actors speak to backends through an ``Upstream`` and count their calls
through whatever ``metrics_for`` makes; they never import the HTTP client,
the transport or the metrics exporter that implement them
(``switchyard.protocol.serving.wiring`` assembles a Runtime with the real ones).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, Protocol

import httpx

from switchyard.actors.ledger.store import UsageStore as UsageStore  # the ledger's store, re-exported: a port
from switchyard.config.schema import Snapshot

if TYPE_CHECKING:
    from switchyard.actors.events import CallTrace
    from switchyard.actors.ledger.record import LedgerRecord


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
    """Told of every finished call, and of every ledger record."""

    def observe(self, trace: CallTrace) -> None: ...

    def observe_record(self, rec: LedgerRecord) -> None: ...

    def observe_admission(self, seconds: float, refusal: Any) -> None: ...


MetricsFor = Callable[[Any], CallMetrics]   # made for one Runtime, once it exists


class CallSpans(Protocol):
    """Told of every finished call (after the metrics), to export it as spans (``tracing.otlp``).

    ``observe`` never waits and never raises; ``close`` may block (it flushes
    what is queued, bounded by the export timeout) and runs in a worker
    thread when the Runtime stops.
    """

    def observe(self, trace: CallTrace) -> None: ...

    def close(self) -> None: ...


SpansFor = Callable[[Any], "CallSpans | None"]   # None: no export configured

