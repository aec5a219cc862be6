"""The simulated engines' KV events in vLLM's wire format (protocol/simulated/kv_wire.py).

The expected bytes are vLLM's own msgspec output for one batch of each event (v0.26's schema), as laid
out in the research on vLLM's publisher: the legacy array form (before vLLM PR #42892) and the map
form (since). vLLM's example sets ``group_idx`` 0 on the stored event; the simulated engine leaves it
None, so that byte is ``c0`` (nil) here and the map form has no ``group_idx`` key.
"""

from __future__ import annotations

import msgspec

from switchyard.actors.kv.events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch
from switchyard.protocol.simulated.kv_wire import frames, payload

BATCH = EventBatch(seq=7, ts=1.5, data_parallel_rank=0, events=(
    BlockStored(block_hashes=(0x0102030405060708,), parent_block_hash=None, token_ids=(1, 300), block_size=2,
                medium="GPU"),
    BlockRemoved(block_hashes=(7,), medium="GPU"),
    AllBlocksCleared(),
))


def s(text: str) -> str:
    """A msgpack fixstr: its length byte, then the text."""
    return f"{0xa0 + len(text):02x}" + text.encode().hex()


HEAD = "93" + "cb3ff8000000000000" + "93"   # [ts=1.5 (float64), [3 events], ...]
ARRAY = HEAD + (
    "9c" + s("BlockStored") + "91cf0102030405060708" + "c0" + "9201cd012c" + "02" + "c0" + s("GPU") + "c0"
    + "c0c0c0c0"
    + "94" + s("BlockRemoved") + "9107" + s("GPU") + "c0"
    + "91" + s("AllBlocksCleared")) + "00"
MAP = HEAD + (
    "88" + s("type") + s("BlockStored") + s("block_hashes") + "91cf0102030405060708" + s("parent_block_hash")
    + "c0" + s("token_ids") + "9201cd012c" + s("block_size") + "02" + s("lora_id") + "c0" + s("medium") + s("GPU")
    + s("lora_name") + "c0"
    + "83" + s("type") + s("BlockRemoved") + s("block_hashes") + "9107" + s("medium") + s("GPU")
    + "81" + s("type") + s("AllBlocksCleared")) + "00"


def test_the_payload_is_vllms_msgpack_in_array_form():
    assert payload(BATCH).hex() == ARRAY


def test_the_payload_is_vllms_msgpack_in_map_form():
    assert payload(BATCH, inner="map").hex() == MAP


def test_frames_are_topic_sequence_payload_and_decode_to_the_same_values():
    topic, seq, body = frames(BATCH, topic="kv@e0@m")
    assert (topic, seq) == (b"kv@e0@m", (7).to_bytes(8, "big"))
    ts, events, rank = msgspec.msgpack.decode(body)
    assert (ts, rank) == (1.5, 0)
    tag, hashes, parent, token_ids, block_size, _lora_id, medium, *_ = events[0]
    assert BlockStored(tuple(hashes), parent, tuple(token_ids), block_size, medium) == BATCH.events[0]
    assert BlockRemoved(tuple(events[1][1]), events[1][2]) == BATCH.events[1]
    assert (tag, events[1][0], events[2]) == ("BlockStored", "BlockRemoved", ["AllBlocksCleared"])


def test_a_hash_past_63_bits_stays_unsigned_and_a_bytes_hash_is_bin():
    big = EventBatch(seq=0, ts=0.0, events=(BlockRemoved(block_hashes=(2**64 - 1, b"\x01" * 32), medium="GPU"),))
    assert "92cfffffffffffffffffc420" + "01" * 32 in payload(big).hex()
