"""An engine's KV-cache events as the index reads them, whatever the wire they came over.

vLLM publishes them (``--kv-events-config``) as msgpack over ZMQ; the
spec's ``sse`` event sources send the same batches as JSON. Both readers
(``protocol/kv/``) decode into these values: a batch of events with its
sequence number, which the index's actor applies in order. Block hashes are
the engine's own (an int, or bytes with ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``):
the index never reproduces them, it keys blocks by its own chain over
``token_ids`` and keeps the engine's hash only to apply removals.
"""

from __future__ import annotations

from attrs import frozen

EngineHash = int | bytes


@frozen
class BlockStored:
    block_hashes: tuple[EngineHash, ...]
    parent_block_hash: EngineHash | None
    token_ids: tuple[int, ...]
    block_size: int
    medium: str | None = None        # GPU (None: GPU), or an offload tier (CPU, DISK, ...)
    lora_name: str | None = None


@frozen
class BlockRemoved:
    block_hashes: tuple[EngineHash, ...]
    medium: str | None = None


@frozen
class AllBlocksCleared:
    pass


Event = BlockStored | BlockRemoved | AllBlocksCleared


@frozen
class EventBatch:
    """One message of a source: its sequence number (per source and data-parallel rank), the engine's
    timestamp, its events in order."""

    seq: int
    ts: float
    events: tuple[Event, ...]
    data_parallel_rank: int | None = None


@frozen
class SourceState:
    """What a source's reader tells the index's actor besides batches: ``up`` (synced: from now on the
    backend's entries are what its events say) or down (``reason``: the backend is unknown until synced)."""

    backend: str
    up: bool
    reason: str = ""
