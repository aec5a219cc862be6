"""What the event sources feed and how they are configured, as the readers see them.

``IndexSink`` is the KV index's actor as a source uses it: batches in
order, and the source's state (up: synced; down: the backend is unknown).
``EventSourceConfig`` is one entry of ``kv_cache_index.event_sources``.
``SourceStatus`` counts what a source did, for the admin views and metrics.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from switchyard.actors.kv.events import EventBatch, SourceState


class IndexSink(Protocol):
    def apply(self, backend: str, batch: EventBatch) -> None:
        """``batch`` of ``backend``'s engine, the next in its order."""
        ...

    def state(self, state: SourceState) -> None:
        """Down: the backend's entries may be stale (unknown until up). Up: synced again, starting empty."""
        ...


class EventSourceConfig(Protocol):
    endpoint: str                  # tcp://host:port (zmq) or http(s)://... (sse)
    transport: str                 # zmq | sse
    replay_endpoint: str | None    # zmq: the publisher's ROUTER (its replay_endpoint), if any
    topic: str                     # zmq: the topic prefix subscribed to ("" : every message)
    reconnect_interval_ms: int


@attrs.define
class SourceStatus:
    """What one source did since it started (its counters only grow)."""

    transport: str
    endpoint: str
    connected: bool = False
    up: bool = False
    batches: int = 0                # delivered to the index
    duplicates: int = 0             # seen again after a replay: dropped
    malformed: int = 0              # payloads that are not a batch: skipped
    skipped_events: int = 0         # unknown event types, other KV groups
    gaps: int = 0                   # sequence gaps seen
    replayed: int = 0               # batches recovered by replay
    floods: int = 0                 # times the index fell a whole channel behind
    resets: dict[str, int] = attrs.field(factory=dict)   # reason -> times the backend's entries were dropped
    last_error: str | None = None
