"""What the event readers' tests share: a sink recording what a reader told the index, a source's config."""

from __future__ import annotations

from typing import Callable

import attrs
import trio

from switchyard.actors.kv.events import EventBatch, SourceState


@attrs.frozen
class Source:
    """One ``kv_cache_index.event_sources`` entry (protocol/kv/sink.py ``EventSourceConfig``)."""

    endpoint: str
    transport: str = "zmq"
    replay_endpoint: str | None = None
    topic: str = ""
    reconnect_interval_ms: int = 200


class RecordingSink:
    """The index's actor as a reader sees it: every batch and state, in order."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.batches: list[EventBatch] = []

    def apply(self, backend: str, batch: EventBatch) -> None:
        self.batches.append(batch)
        self.log.append((backend, batch.seq))

    def state(self, state: SourceState) -> None:
        self.log.append((state.backend, "up" if state.up else f"down: {state.reason}"))

    def seqs(self) -> list[int]:
        return [b.seq for b in self.batches]

    def since(self, start: int) -> list[tuple]:
        return self.log[start:]


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.01)
