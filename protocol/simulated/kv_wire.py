"""A simulated engine's KV events as vLLM publishes them on ZMQ: three frames, the batch in msgpack.

The structs mirror vLLM's (``vllm/distributed/kv_events.py``, as of v0.26:
every field it declares, in its order), encoded by msgspec as vLLM encodes
them, so the bytes are the engine's: an ``EventBatch`` array ``[ts, events,
data_parallel_rank]``; each event tagged with its class name, as an array
(``inner="array"``, vLLM before PR #42892) or as a map without the fields
left at their None default (``inner="map"``, since). The frames are
``[topic, seq as 8 bytes big-endian, payload]``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from switchyard.actors.kv import events as ev

Hash = int | bytes


class _Batch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[msgspec.Struct]
    data_parallel_rank: int | None = None


def _event_structs(array_like: bool) -> tuple[type[msgspec.Struct], ...]:
    options = {"array_like": array_like, "omit_defaults": True, "gc": False}

    class BlockStored(msgspec.Struct, tag="BlockStored", **options):
        block_hashes: list[Hash]
        parent_block_hash: Hash | None
        token_ids: list[int]
        block_size: int
        lora_id: int | None
        medium: str | None
        lora_name: str | None
        extra_keys: list[tuple[Any, ...] | None] | None = None
        group_idx: int | None = None
        kv_cache_spec_kind: str | None = None
        kv_cache_spec_sliding_window: int | None = None

    class BlockRemoved(msgspec.Struct, tag="BlockRemoved", **options):
        block_hashes: list[Hash]
        medium: str | None
        group_idx: int | None = None

    class AllBlocksCleared(msgspec.Struct, tag="AllBlocksCleared", **options):
        pass

    return BlockStored, BlockRemoved, AllBlocksCleared


_STRUCTS = {"array": _event_structs(True), "map": _event_structs(False)}
_ENCODER = msgspec.msgpack.Encoder()


def payload(batch: ev.EventBatch, inner: Literal["array", "map"] = "array") -> bytes:
    """The batch's msgpack payload, its events in ``inner`` form."""
    stored, removed, cleared = _STRUCTS[inner]
    out: list[msgspec.Struct] = []
    for e in batch.events:
        if isinstance(e, ev.BlockStored):
            out.append(stored(block_hashes=list(e.block_hashes), parent_block_hash=e.parent_block_hash,
                              token_ids=list(e.token_ids), block_size=e.block_size, lora_id=None,
                              medium=e.medium, lora_name=e.lora_name))
        elif isinstance(e, ev.BlockRemoved):
            out.append(removed(block_hashes=list(e.block_hashes), medium=e.medium))
        else:
            out.append(cleared())
    return _ENCODER.encode(_Batch(ts=float(batch.ts), events=out, data_parallel_rank=batch.data_parallel_rank))


def frames(batch: ev.EventBatch, topic: str = "", inner: Literal["array", "map"] = "array") -> list[bytes]:
    """The three frames of one ZMQ message: topic, sequence number, payload."""
    return [topic.encode(), batch.seq.to_bytes(8, "big"), payload(batch, inner)]
