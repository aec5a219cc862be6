"""The KV index's block keys (actors/routing/kv_blocks.py): one test per rule."""

from collections import OrderedDict

from switchyard.actors.routing.kv_blocks import (
    BYTES_PER_TOKEN,
    ROOT,
    KeyCache,
    block_key,
    byte_chain,
    canonical_chat,
    chain,
    digest64,
)


def test_digest64_is_blake2b_with_an_8_byte_digest_read_big_endian():
    # RFC 7693's BLAKE2b, digest size 8 (hashlib's own C code): fixed values any implementation gives
    assert digest64(b"") == 0xE4A6A0577479B2B4
    assert digest64(b"abc") == int.from_bytes(bytes.fromhex("d8bb14d833d59559"), "big")


def test_the_root_is_the_digest_of_the_project_seed():
    assert ROOT == digest64(b"switchyard-kv")


def test_a_block_key_hashes_the_parent_as_8_bytes_then_each_token_as_4_bytes_big_endian():
    encoded = ROOT.to_bytes(8, "big") + bytes([0, 0, 0, 1, 0, 0, 1, 44])
    assert block_key(ROOT, [1, 300]) == digest64(encoded)


def test_each_key_chains_from_the_one_before():
    tokens = list(range(48))
    keys = chain(tokens, 16)
    assert keys == [block_key(ROOT, tokens[:16]), block_key(keys[0], tokens[16:32]),
                    block_key(keys[1], tokens[32:])]


def test_only_full_blocks_are_keyed():
    assert len(chain(list(range(47)), 16)) == 2
    assert chain(list(range(15)), 16) == []


def test_a_chain_may_start_from_a_given_parent():
    tokens = list(range(32))
    assert chain(tokens[16:], 16, parent=chain(tokens[:16], 16)[0]) == chain(tokens, 16)[1:]


def test_a_shared_prefix_gives_the_same_leading_keys_and_a_different_block_differs_from_there():
    a, b = list(range(64)), list(range(40)) + [9] * 24
    ka, kb = chain(a, 16), chain(b, 16)
    assert ka[:2] == kb[:2] and ka[2] != kb[2] and ka[3] != kb[3]


def test_the_bytes_fallback_keys_blocks_of_block_size_times_four_bytes_one_byte_each():
    data = bytes(range(200))
    width = 16 * BYTES_PER_TOKEN
    keys = byte_chain(data, 16)
    assert len(keys) == 3   # 200 // 64
    assert keys[0] == digest64(ROOT.to_bytes(8, "big") + data[:width])
    assert keys[1] == digest64(keys[0].to_bytes(8, "big") + data[width:2 * width])


def test_the_key_cache_answers_what_the_hash_would():
    cache = KeyCache(size=4)
    tokens = list(range(160))
    assert chain(tokens, 16, cache=cache) == chain(tokens, 16)
    assert chain(tokens, 16, cache=cache) == chain(tokens, 16)   # served from the cache
    assert len(cache) == 4                                        # bounded: first in, first out


def test_a_full_key_cache_lets_its_oldest_key_go_first_and_keeps_its_size():
    # An OrderedDict: past its size the oldest key goes at once, however many went before it (a plain
    # dict's oldest, after many deletions, is found by a scan: what made a full cache slow).
    cache = KeyCache(size=3)
    for i in range(10):
        cache.key(i.to_bytes(72, "big"))
    assert len(cache) == 3 and list(cache._keys) == [i.to_bytes(72, "big") for i in (7, 8, 9)]
    assert isinstance(cache._keys, OrderedDict)


def test_the_key_cache_is_bounded_by_its_blocks_bytes_too():
    cache = KeyCache(size=1000, max_bytes=10_000)
    tokens = list(range(4096 * 3))
    assert chain(tokens, 4096, cache=cache) == chain(tokens, 4096)   # three 16 kB blocks: none kept
    assert len(cache) == 0 and cache.bytes == 0
    chain(list(range(16 * 500)), 16, cache=cache)                    # 72 bytes each: the last 138 kept
    assert len(cache) == 10_000 // 72 and cache.bytes <= 10_000


def test_a_conversations_next_turn_starts_with_the_whole_previous_one():
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    second = [*first, {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "Bye"}]
    assert canonical_chat(second).startswith(canonical_chat(first))


def test_the_canonical_text_keeps_roles_text_parts_tools_and_tool_calls():
    text = canonical_chat([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"},
                                                        {"type": "text", "text": "b"}]},
                           {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}],
                          tools=[{"type": "function"}])
    assert text == ('<|tools|>\n[{"type":"function"}]\n<|user|>\nab\n<|assistant|>\n\n[{"id":"1"}]\n'
                    "<|assistant|>\n")
