"""The simulated engine's KV cache (protocol/simulated/kv_cache.py): prefix hits, eviction, its events."""

from __future__ import annotations

from switchyard.actors.kv.events import BlockRemoved, BlockStored
from switchyard.protocol.simulated.kv_cache import BlockCache

A = list(range(100, 112))         # three blocks of 4
B = list(range(200, 212))


def test_keys_chain_full_blocks_only_and_differ_per_engine():
    cache = BlockCache(8, 4, "engine-0")
    keys = cache.keys(A + [1, 2])            # the partial fourth block has no key
    assert len(keys) == 3
    assert cache.keys(A[:8]) == keys[:2]     # a block's key depends on what came before, nothing after
    assert cache.keys([999] + A[1:])[1:] != keys[1:]   # ... and on every block before it
    assert BlockCache(8, 4, "engine-1").keys(A) != keys   # each engine hashes with its own seed


def test_hits_are_the_leading_cached_blocks_never_the_last_token():
    cache = BlockCache(8, 4, "e")
    hit, held, _ = cache.admit(A)
    assert hit == 0
    cache.release(held)
    assert cache.admit(A + [7])[0] == 3          # all three blocks: the last token is the 13th
    assert cache.admit(A)[0] == 2                # the 12th token is the last: its block is computed again
    assert cache.admit([1] + A[1:])[0] == 0      # a different first block: nothing after it counts


def test_stores_then_evicts_the_least_recently_used_free_blocks_tail_first():
    cache = BlockCache(4, 4, "e")
    keys_a, keys_b = cache.keys(A), cache.keys(B)
    _, held_a, events = cache.admit(A)
    assert events == [BlockStored(block_hashes=tuple(keys_a), parent_block_hash=None, token_ids=tuple(A),
                                  block_size=4, medium="GPU")]
    cache.release(held_a)
    _, held_b, events = cache.admit(B)    # 3 new blocks, 1 free slot: two of A's go, its tail first
    assert events == [BlockRemoved(block_hashes=(keys_a[2],), medium="GPU"),
                      BlockRemoved(block_hashes=(keys_a[1],), medium="GPU"),
                      BlockStored(block_hashes=tuple(keys_b), parent_block_hash=None, token_ids=tuple(B),
                                  block_size=4, medium="GPU")]
    assert cache.holds(keys_a[0]) and cache.used == 3 and cache.cached == 4
    assert cache.admit(A + [0])[0] == 1   # A's first block outlived its continuation


def test_blocks_in_use_are_never_evicted_the_rest_are_not_kept():
    cache = BlockCache(4, 4, "e")
    _, held_a, _ = cache.admit(A)          # A runs: its 3 blocks in use
    _, held_b, events = cache.admit(B)     # room for one of B's
    assert [type(e) for e in events] == [BlockStored]
    assert events[0].block_hashes == tuple(cache.keys(B)[:1])
    assert cache.used == 4 and all(cache.holds(k) for k in cache.keys(A))


def test_a_continuation_is_stored_under_its_parent():
    cache = BlockCache(8, 4, "e")
    _, held, _ = cache.admit(A)
    keys = cache.keys(A + B[:4])
    events = cache.store(keys, A + B[:4], 3, held)
    assert events == [BlockStored(block_hashes=(keys[3],), parent_block_hash=keys[2], token_ids=tuple(B[:4]),
                                  block_size=4, medium="GPU")]
    cache.release(held)
    assert cache.used == 0 and cache.cached == 4
