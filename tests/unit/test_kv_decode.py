"""vLLM's KV event batches decoded (actors/kv/decode.py): every shape its publisher has sent, the SSE
JSON form, and malformed input refused with one error naming the place. Pure."""

from __future__ import annotations

import json

import msgspec
import pytest

from switchyard.actors.kv.decode import Decoded, MalformedBatch, decode_json, decode_msgpack, decode_value
from switchyard.actors.kv.events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch


def s(text: str) -> str:
    """A msgpack fixstr, as hex."""
    return f"{0xa0 + len(text):02x}" + text.encode().hex()


# The research note's example batch (ts=1.5, rank 0, one event of each type; vLLM v0.26's schema), as
# msgspec encodes it: the events in the array form vLLM used until PR #42892, then in the map form.
ARRAY_FORM = bytes.fromhex(
    "93" "cb3ff8000000000000" "93"
    "9c" + s("BlockStored") + "91cf0102030405060708" "c0" "9201cd012c" "02" "c0" + s("GPU") + "c0" "c0" "00" "c0c0"
    "94" + s("BlockRemoved") + "9107" + s("GPU") + "c0"
    "91" + s("AllBlocksCleared") +
    "00")
MAP_FORM = bytes.fromhex(
    "93" "cb3ff8000000000000" "93"
    "89" + s("type") + s("BlockStored") + s("block_hashes") + "91cf0102030405060708" + s("parent_block_hash") + "c0"
    + s("token_ids") + "9201cd012c" + s("block_size") + "02" + s("lora_id") + "c0" + s("medium") + s("GPU")
    + s("lora_name") + "c0" + s("group_idx") + "00"
    "83" + s("type") + s("BlockRemoved") + s("block_hashes") + "9107" + s("medium") + s("GPU") +
    "81" + s("type") + s("AllBlocksCleared") +
    "00")
EXPECTED = EventBatch(7, 1.5, (BlockStored((0x0102030405060708,), None, (1, 300), 2, "GPU", None),
                               BlockRemoved((7,), "GPU"), AllBlocksCleared()), 0)


def stored(**over: object) -> dict:
    return {"type": "BlockStored", "block_hashes": [11, 12], "parent_block_hash": 10, "token_ids": [1, 2, 3, 4],
            "block_size": 2, "lora_id": None, "medium": "GPU", "lora_name": None, **over}


def batch(*events: object, **over: object) -> dict:
    return {"ts": 2.0, "events": list(events), "data_parallel_rank": None, **over}


def test_the_research_notes_array_form_bytes_decode():
    assert decode_msgpack(7, ARRAY_FORM) == Decoded(EXPECTED)


def test_the_research_notes_map_form_bytes_decode():
    assert decode_msgpack(7, MAP_FORM) == Decoded(EXPECTED)


def test_the_batch_itself_may_be_a_map():
    payload = msgspec.msgpack.encode({"ts": 1.5, "events": [["AllBlocksCleared"]], "data_parallel_rank": 3})
    assert decode_msgpack(1, payload).batch == EventBatch(1, 1.5, (AllBlocksCleared(),), 3)


def test_a_batch_from_before_data_parallel_ranks_has_two_elements():
    payload = msgspec.msgpack.encode([1.5, [["AllBlocksCleared"]]])
    assert decode_msgpack(0, payload).batch == EventBatch(0, 1.5, (AllBlocksCleared(),), None)


def test_v0_9_0_events_are_shorter_arrays():
    """BlockStored(hashes, parent, tokens, block_size, lora_id) and BlockRemoved(hashes): no medium yet."""
    payload = msgspec.msgpack.encode([1.0, [["BlockStored", [5], None, [1, 2], 2, None], ["BlockRemoved", [5]]]])
    assert decode_msgpack(0, payload).batch.events == (BlockStored((5,), None, (1, 2), 2), BlockRemoved((5,)))


def test_extra_trailing_elements_and_unknown_map_keys_are_ignored():
    long = ["BlockStored", [5], 4, [1, 2], 2, None, "GPU", "adapter", None, 0, "full_attention", None, "rack-1", 9]
    mapped = stored(locality="rack-1", some_future_field={"x": 1})
    events = decode_msgpack(0, msgspec.msgpack.encode([1.0, [long, mapped], 0, "extra"])).batch.events
    assert events == (BlockStored((5,), 4, (1, 2), 2, "GPU", "adapter"),
                      BlockStored((11, 12), 10, (1, 2, 3, 4), 2, "GPU", None))


def test_hashes_may_be_32_bytes_or_any_64_bit_integer():
    digest = bytes(range(32))
    payload = msgspec.msgpack.encode([1.0, [["BlockStored", [digest, 2**64 - 1, -5], digest, [1] * 6, 2, None]]])
    event = decode_msgpack(0, payload).batch.events[0]
    assert isinstance(event, BlockStored)
    assert event.block_hashes == (digest, 2**64 - 1, -5) and event.parent_block_hash == digest


def test_an_offload_event_may_carry_no_tokens():
    event = stored(token_ids=[], parent_block_hash=None, block_size=0, medium="CPU")
    assert decode_value(0, batch(event)).batch.events == (BlockStored((11, 12), None, (), 0, "CPU"),)


def test_other_kv_groups_of_a_hybrid_model_are_skipped_and_named():
    events = [stored(kv_cache_spec_kind="sliding_window", group_idx=0), stored(group_idx=1),
              stored(kv_cache_spec_kind="full_attention", group_idx=1), stored(group_idx=0),
              {"type": "BlockRemoved", "block_hashes": [3], "medium": "GPU", "group_idx": 2}]
    decoded = decode_value(0, batch(*events))
    assert len(decoded.batch.events) == 2
    assert decoded.skipped == ("events[0]: kv_cache_spec_kind 'sliding_window'", "events[1]: group_idx 1",
                               "events[4]: group_idx 2")


def test_blocks_keyed_by_more_than_their_tokens_are_skipped_a_lora_name_alone_is_not():
    salted = stored(extra_keys=[["salt-1"], None])
    image = stored(extra_keys=[None, [["mm-hash", 0]]])
    lora = stored(lora_name="adapter", extra_keys=[["adapter"], ["adapter"]])
    plain = stored(extra_keys=[None, None])
    decoded = decode_value(0, batch(salted, image, lora, plain))
    assert decoded.batch.events == (BlockStored((11, 12), 10, (1, 2, 3, 4), 2, "GPU", "adapter"),
                                    BlockStored((11, 12), 10, (1, 2, 3, 4), 2, "GPU", None))
    assert [s.split(":")[0] for s in decoded.skipped] == ["events[0]", "events[1]"]
    assert "cache salt, multimodal input" in decoded.skipped[0]


def test_a_block_whose_extra_keys_are_not_a_list_is_skipped_too():
    decoded = decode_msgpack(0, msgspec.msgpack.encode(
        [1.0, [["BlockStored", [1], None, [1, 2], 2, None, "GPU", None, [7]], ["BlockRemoved", [3]]]]))
    assert decoded.batch.events == (BlockRemoved((3,), None),) and "extra_keys" in decoded.skipped[0]


def test_an_unknown_event_type_is_skipped_and_named_the_rest_kept():
    decoded = decode_value(0, batch({"type": "BlockPinned", "x": 1}, ["AllBlocksCleared"]))
    assert decoded.batch.events == (AllBlocksCleared(),)
    assert decoded.skipped == ("events[0]: unknown event type 'BlockPinned'",)


def test_the_sse_json_form_is_the_map_shape():
    data = json.dumps(batch(stored(), {"type": "BlockRemoved", "block_hashes": [11], "medium": None},
                            data_parallel_rank=1))
    assert decode_json(42, data) == Decoded(EventBatch(42, 2.0, (
        BlockStored((11, 12), 10, (1, 2, 3, 4), 2, "GPU"), BlockRemoved((11,))), 1))


def test_a_string_hash_in_json_is_kept_as_its_bytes():
    event = decode_json(0, json.dumps(batch(stored(block_hashes=["ab"], parent_block_hash="9f")))).batch.events[0]
    assert isinstance(event, BlockStored)
    assert event.block_hashes == (b"ab",) and event.parent_block_hash == b"9f"


@pytest.mark.parametrize("payload, message", [
    (b"\xc1", "not msgpack"),
    (msgspec.msgpack.encode("hello"), "batch: expected an array or a map, got str"),
    (msgspec.msgpack.encode(["1.0", []]), "ts: expected a number, got str"),
    (msgspec.msgpack.encode([1.0, {}]), "events: expected a list, got dict"),
    (msgspec.msgpack.encode([1.0, [], "0"]), "data_parallel_rank: expected an integer or null, got str"),
    (msgspec.msgpack.encode([1.0, [7]]), "events[0]: expected an array or a map, got int"),
    (msgspec.msgpack.encode([1.0, [[]]]), "events[0]: the event's type tag is missing or not a string"),
    (msgspec.msgpack.encode([1.0, [{"block_hashes": []}]]), "events[0]: the event's type tag is missing"),
    (msgspec.msgpack.encode([1.0, [["BlockStored", [1], None, [1, 2]]]]),
     "events[0] (BlockStored): block_size is missing"),
    (msgspec.msgpack.encode([1.0, [["BlockStored", [1.5], None, [1, 2], 2]]]),
     "events[0] (BlockStored).block_hashes[0]: a block hash is an integer or bytes, got float"),
    (msgspec.msgpack.encode([1.0, [["BlockStored", [1], None, [1, -2], 2]]]),
     "events[0] (BlockStored).token_ids: expected a list of non-negative integers"),
    (msgspec.msgpack.encode([1.0, [["BlockStored", [1], None, [1, 2], True]]]),
     "events[0] (BlockStored).block_size: expected a non-negative integer, got True"),
    (msgspec.msgpack.encode([1.0, [["BlockRemoved", [1], 5]]]),
     "events[0] (BlockRemoved).medium: expected a string or null, got int"),
    (msgspec.msgpack.encode([1.0, [["BlockRemoved", None]]]), "events[0] (BlockRemoved): block_hashes is missing"),
    (msgspec.msgpack.encode([1.0, [["BlockStored", [1], None, [1, 2], 2, None, "GPU", None, "salt"]]]),
     "events[0] (BlockStored).extra_keys: expected a list (one entry per block), got str"),
])
def test_malformed_payloads_raise_one_error_naming_the_place(payload, message):
    with pytest.raises(MalformedBatch) as refused:
        decode_msgpack(0, payload)
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize("decode, payload, message", [
    (decode_json, b'{"ts": 1' + b"0" * 400 + b', "events": []}', "ts: a number too large"),
    (decode_json, b"[" * 100_000 + b"]" * 100_000, "not JSON: nested too deeply"),
    (decode_msgpack, b"\x91" * 100_000 + b"\x90", "not msgpack: nested too deeply"),
])
def test_no_payload_raises_anything_but_the_malformed_error(decode, payload, message):
    # any other error would end the reader (started again after its interval: the backend's entries dropped)
    with pytest.raises(MalformedBatch, match=message):
        decode(0, payload)


def test_malformed_json_raises_the_same_error():
    with pytest.raises(MalformedBatch, match="not JSON"):
        decode_json(0, "{ts: 1")
