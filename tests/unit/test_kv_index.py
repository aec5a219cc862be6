"""The KV index (actors/routing/kv_index.py) at exact instants: one test per rule."""

from switchyard.actors.routing.kv_blocks import chain
from switchyard.actors.routing.kv_index import (
    APPROXIMATE,
    BLOCK_SIZE_MISMATCH,
    EVENTS,
    MALFORMED,
    NOT_SYNCED,
    UNKNOWN,
    UNKNOWN_BLOCK,
    UNKNOWN_PARENT,
    KvIndex,
)

TOKENS = list(range(16))          # four blocks of 4
KEYS = chain(TOKENS, 4)
HASHES = [101, 102, 103, 104]     # the engine's own hashes of those blocks


def index(backends=None, block_size=4, max_entries=100, tier_weights=None) -> KvIndex:
    out = KvIndex(block_size, max_entries, tier_weights)
    out.configure(backends if backends is not None else {"fed": True, "own": False}, block_size=block_size,
                  max_entries=max_entries, tier_weights=tier_weights or {})
    return out


def fed(**kw) -> KvIndex:
    out = index(**kw)
    out.synced("fed", True)
    return out


def store(ix: KvIndex, hashes=HASHES, parent=None, tokens=TOKENS, block_size=4, medium=None, backend="fed"):
    return ix.stored(backend, hashes, parent, tokens, block_size, medium)


# --- states -------------------------------------------------------------------------------

def test_a_backend_with_a_source_is_unknown_until_synced_and_held_answers_none():
    ix = index()
    assert ix.state("fed") == UNKNOWN and ix.held("fed", KEYS, 0.0) is None
    ix.synced("fed", True)
    assert ix.state("fed") == EVENTS and ix.held("fed", KEYS, 0.0) == 0


def test_a_backend_without_a_source_is_approximate():
    assert index().state("own") == APPROXIMATE


def test_a_source_lost_makes_its_backend_unknown_and_drops_its_entries():
    ix = fed()
    store(ix)
    ix.synced("fed", False)
    assert ix.held("fed", KEYS, 0.0) is None and ix.view("fed").entries == 0


def test_a_source_synced_again_starts_empty():
    ix = fed()
    store(ix)
    ix.synced("fed", True)
    assert ix.held("fed", KEYS, 0.0) == 0


def test_a_sync_report_for_a_backend_without_a_source_changes_nothing():
    ix = index()
    ix.synced("own", True)
    assert ix.state("own") == APPROXIMATE


# --- events ---------------------------------------------------------------------------------

def test_stored_blocks_are_held_by_our_keys_from_the_events_token_ids():
    ix = fed()
    assert store(ix) is None
    assert ix.held("fed", KEYS, 0.0) == 4


def test_held_counts_only_the_leading_blocks():
    ix = fed()
    store(ix, hashes=HASHES[:2], tokens=TOKENS[:8])
    assert ix.held("fed", KEYS, 0.0) == 2
    assert ix.held("fed", [12345, KEYS[1]], 0.0) == 0       # a block held after a miss does not count


def test_a_stored_event_chains_from_its_parents_key():
    ix = fed()
    store(ix, hashes=HASHES[:2], tokens=TOKENS[:8])
    assert store(ix, hashes=HASHES[2:], parent=HASHES[1], tokens=TOKENS[8:]) is None
    assert ix.held("fed", KEYS, 0.0) == 4


def test_an_unknown_parent_is_skipped_and_counted():
    ix = fed()
    assert store(ix, hashes=HASHES[2:], parent=999, tokens=TOKENS[8:]) == UNKNOWN_PARENT
    assert ix.skipped[("fed", UNKNOWN_PARENT)] == 1 and ix.view("fed").entries == 0


def test_another_block_size_is_skipped_and_counted():
    ix = fed()
    assert store(ix, hashes=HASHES[:2], block_size=8) == BLOCK_SIZE_MISMATCH
    assert ix.skipped[("fed", BLOCK_SIZE_MISMATCH)] == 1 and ix.held("fed", KEYS, 0.0) == 0


def test_token_ids_that_do_not_fill_the_blocks_are_skipped_as_malformed():
    ix = fed()
    assert store(ix, tokens=TOKENS[:15]) == MALFORMED


def test_events_for_a_backend_not_synced_are_skipped():
    ix = index()
    assert store(ix) == NOT_SYNCED and store(ix, backend="own") == NOT_SYNCED
    assert ix.removed("fed", HASHES, None) == NOT_SYNCED and ix.cleared("own") == NOT_SYNCED


def test_removed_blocks_are_no_longer_held():
    ix = fed()
    store(ix)
    assert ix.removed("fed", [HASHES[1]], None) is None
    assert ix.held("fed", KEYS, 0.0) == 1 and ix.view("fed").entries == 3


def test_removing_a_hash_never_seen_is_counted():
    ix = fed()
    assert ix.removed("fed", [555], "GPU") == UNKNOWN_BLOCK
    assert ix.skipped[("fed", UNKNOWN_BLOCK)] == 1


def test_all_blocks_cleared_empties_the_backend():
    ix = fed()
    store(ix)
    assert ix.cleared("fed") is None
    assert ix.held("fed", KEYS, 0.0) == 0 and ix.view("fed").entries == 0
    assert store(ix, hashes=HASHES[1:], parent=HASHES[0], tokens=TOKENS[4:]) == UNKNOWN_PARENT  # the map too


# --- tiers ------------------------------------------------------------------------------------

def test_a_block_only_in_a_lower_tier_counts_its_weight():
    ix = fed(tier_weights={"CPU": 0.5})
    store(ix)
    store(ix, hashes=HASHES[2:], tokens=[], block_size=0, medium="CPU")   # offloaded copies: a tier update
    ix.removed("fed", HASHES[2:], "GPU")
    assert ix.held("fed", KEYS, 0.0) == 3.0       # 1 + 1 + 0.5 + 0.5


def test_a_lower_tier_without_a_weight_stops_the_count():
    ix = fed()                                   # storage_offloading off: no weights
    store(ix)
    store(ix, hashes=HASHES[1:2], tokens=[], block_size=0, medium="CPU")
    ix.removed("fed", HASHES[1:2], None)
    assert ix.held("fed", KEYS, 0.0) == 1


def test_a_tier_update_of_an_unknown_hash_is_counted():
    ix = fed()
    assert store(ix, hashes=[7], tokens=[], block_size=0, medium="CPU") == UNKNOWN_BLOCK


# --- the approximate record ----------------------------------------------------------------------

def test_a_recorded_prompt_is_held_until_its_ttl_ends():
    ix = index()
    ix.record("own", KEYS, now=100.0, ttl=60.0)
    assert ix.held("own", KEYS, 159.999) == 4
    assert ix.held("own", KEYS, 160.0) == 0       # expired at the instant


def test_a_new_use_renews_the_entries():
    ix = index()
    ix.record("own", KEYS, now=100.0, ttl=60.0)
    ix.record("own", KEYS[:2], now=150.0, ttl=60.0)
    assert ix.held("own", KEYS, 200.0) == 2


def test_the_record_is_kept_for_approximate_backends_only():
    ix = fed()
    ix.record("fed", KEYS, now=0.0, ttl=60.0)
    assert ix.held("fed", KEYS, 1.0) == 0


def test_expired_entries_are_dropped_at_the_next_record():
    ix = index()
    ix.record("own", KEYS[:2], now=0.0, ttl=10.0)
    ix.record("own", KEYS[2:], now=20.0, ttl=10.0)
    assert ix.view("own").entries == 2


# --- bounds -----------------------------------------------------------------------------------

def test_entries_are_bounded_by_max_entries_oldest_first():
    ix = fed(max_entries=3)
    store(ix)
    assert ix.view("fed").entries == 3
    assert ix.held("fed", KEYS, 0.0) == 0         # the first block went first
    assert ix.held("fed", KEYS[1:], 0.0) == 3


def test_the_engine_hash_map_is_bounded_too():
    ix = fed(max_entries=2)
    store(ix)
    assert store(ix, hashes=[105], parent=HASHES[0], tokens=TOKENS[:4]) == UNKNOWN_PARENT


def test_a_smaller_max_entries_evicts_at_once():
    ix = fed()
    store(ix)
    ix.configure({"fed": True, "own": False}, block_size=4, max_entries=2, tier_weights={})
    assert ix.view("fed").entries == 2


# --- reconfiguration --------------------------------------------------------------------------

def test_a_new_block_size_empties_every_backend():
    ix = fed()
    store(ix)
    ix.record("own", KEYS, now=0.0, ttl=60.0)
    ix.configure({"fed": True, "own": False}, block_size=8, max_entries=100, tier_weights={})
    assert ix.view("fed").entries == 0 and ix.view("own").entries == 0
    assert ix.state("fed") == EVENTS      # still synced: its next events are keyed at the new size


def test_a_backend_removed_by_a_reload_is_dropped():
    ix = fed()
    ix.configure({"own": False}, block_size=4, max_entries=100, tier_weights={})
    assert ix.view("fed") is None and ix.state("fed") is None


def test_a_backend_whose_source_came_or_went_starts_again():
    ix = fed()
    store(ix)
    ix.configure({"fed": False, "own": True}, block_size=4, max_entries=100, tier_weights={})
    assert ix.state("fed") == APPROXIMATE and ix.view("fed").entries == 0
    assert ix.state("own") == UNKNOWN


# --- hit ratio --------------------------------------------------------------------------------

def test_the_hit_ratio_is_the_picks_that_held_some_of_the_prompt():
    ix = index()
    ix.picked("own", 3.0)
    ix.picked("own", 0.0)
    ix.picked("fed", None)                  # unknown: not counted
    assert ix.view("own").hit_ratio == 0.5
    assert ix.view("fed").hit_ratio is None
