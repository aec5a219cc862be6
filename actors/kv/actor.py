"""KvIndexActor: the owner of the KV index, applying what the event sources decoded.

The readers of ``kv_cache_index.event_sources`` (``protocol/kv/``) hand it
batches in order (``apply``) and their sync state (``state``), or queue
both through its bounded mailbox (``offer``), which refuses when full, so
a flooding source costs a resync, never memory.
The request path reads the index synchronously (``actors/kv/pick.py``) and
never waits on this actor. A reload reconfigures the index: a new
``block_size`` empties every backend, a backend removed is dropped.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from switchyard.actors.kv.events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch, SourceState
from switchyard.actors.mailbox import Mailbox, queued
from switchyard.actors.routing.kv_index import KvIndex
from switchyard.config.schema import Snapshot

log = logging.getLogger("switchyard.kv")

MAILBOX_CAPACITY = 1024     # batches waiting; a source past it resyncs
Message = tuple[str, EventBatch] | SourceState


class KvIndexActor:
    name = "kv_index"

    def __init__(self, snapshot: Snapshot, capacity: int = MAILBOX_CAPACITY) -> None:
        cfg = snapshot.kv_cache_index
        self.index = KvIndex(cfg.block_size, cfg.max_entries, cfg.weights)
        self.mailbox: Mailbox[Message] = Mailbox("kv_index", capacity)
        self.reconfigure(snapshot)

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A new revision: the backends it declares, which of them have a source, the index's bounds."""
        cfg = snapshot.kv_cache_index
        backends = {b.name: b.name in cfg.event_sources for b in snapshot.backends}
        before = self.index.block_size
        self.index.configure(backends, block_size=cfg.block_size, max_entries=cfg.max_entries,
                             tier_weights=cfg.weights)
        if before != cfg.block_size:
            log.info("kv_cache_index.block_size changed from %d to %d: every backend's entries were dropped",
                     before, cfg.block_size)

    # --- what the sources' readers call ----------------------------------------------

    def apply(self, backend: str, batch: EventBatch) -> None:
        """One batch of ``backend``'s events, in order; what cannot be applied is skipped and counted."""
        index = self.index
        for event in batch.events:
            if isinstance(event, BlockStored):
                index.stored(backend, event.block_hashes, event.parent_block_hash, event.token_ids,
                             event.block_size, event.medium)
            elif isinstance(event, BlockRemoved):
                index.removed(backend, event.block_hashes, event.medium)
            elif isinstance(event, AllBlocksCleared):
                index.cleared(backend)

    def state(self, state: SourceState) -> None:
        """A source synced (its backend starts empty, then follows its events) or lost (unknown)."""
        was = self.index.state(state.backend)
        self.index.synced(state.backend, state.up)
        now = self.index.state(state.backend)
        if was != now:
            log.info("kv index: backend %s is %s%s", state.backend, now, f" ({state.reason})" if state.reason else "")

    def offer(self, message: Message) -> bool:
        """Queue ``(backend, batch)`` or a ``SourceState`` for ``run``, in order with the source's others;
        False when the mailbox is full (the reader then drops its state and resyncs)."""
        return self.mailbox.tell(message)

    # --- the actor ------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(self)
        inbox = self.mailbox.inbox
        async for first in inbox:
            for message in [first, *queued(inbox, 255)]:
                if isinstance(message, SourceState):
                    self.state(message)
                else:
                    self.apply(*message)
