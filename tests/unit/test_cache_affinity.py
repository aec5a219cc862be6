"""routing.cache_affinity, the pure part: which key a call has, where the ring places it under the load
bound, and its settings (default off, each error with its path, the warning)."""

import pytest

from switchyard.actors.routing.affinity import AffinityKey, CacheAffinity, Placement, affinity_key
from switchyard.actors.routing.hashring import HashRing
from switchyard.actors.routing.strategies import prompt_prefix
from switchyard.config.load import ConfigError, load_text
from switchyard.config.telemetry import CacheAffinity as Settings

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


@pytest.mark.parametrize("payload, mode, length, key", [
    ({"prompt_cache_key": "k", "messages": MESSAGES}, "both", 256, AffinityKey("prompt_cache_key", "k")),
    ({"messages": MESSAGES}, "both", 256, AffinityKey("prefix", prompt_prefix(MESSAGES, 256))),
    ({"prompt_cache_key": "", "messages": MESSAGES}, "both", 256, AffinityKey("prefix", "system:Be brief.\nuser:hi\n")),
    ({"prompt_cache_key": 7, "messages": MESSAGES}, "both", 8, AffinityKey("prefix", "system:B")),
    ({"prompt_cache_key": "k", "messages": MESSAGES}, "prefix", 256,
     AffinityKey("prefix", prompt_prefix(MESSAGES, 256))),
    ({"messages": MESSAGES}, "prompt_cache_key", 256, None),
    ({"messages": MESSAGES}, "both", None, None),                 # prefix_routing.enabled: false
    ({"prompt_cache_key": "k"}, "both", None, AffinityKey("prompt_cache_key", "k")),
    ({"messages": []}, "both", 256, None),
    # a Responses body: instructions as the system turn, then the input
    ({"instructions": "Be brief.", "input": "hi"}, "both", 256, AffinityKey("prefix", "system:Be brief.\nuser:hi\n")),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}, "both", 256,
     AffinityKey("prefix", "user:hi\n")),
])
def test_the_key_of_a_call(payload, mode, length, key):
    assert affinity_key(payload, mode, length) == key


class B:
    def __init__(self, name):
        self.name, self.weight = name, 1


CANDS = [B("a"), B("b"), B("c")]


def test_a_key_is_placed_at_its_home_while_the_home_has_room():
    ring = HashRing(("a", "b", "c"), 160)
    placed = CacheAffinity(160).place(CANDS, AffinityKey("prompt_cache_key", "k"), {}, 0.25)
    assert placed == Placement("prompt_cache_key", ring.lookup("k"), ring.lookup("k"))
    assert (placed.moved, placed.outcome) == (False, "home")


def test_a_home_past_the_load_bound_passes_the_key_to_the_next_on_the_ring():
    ring = HashRing(("a", "b", "c"), 160)
    home, after = list(ring.walk("k"))[:2]
    # one in flight on the home: capacity ceil(1.25 * 2 / 3) = 1, the home would carry 2
    placed = CacheAffinity(160).place(CANDS, AffinityKey("prefix", "k"), {home: 1}, 0.25)
    assert (placed.home, placed.backend, placed.moved, placed.outcome) == (home, after, True, "moved")
    # a looser bound keeps it home: ceil(3.0 * 2 / 3) = 2
    assert not CacheAffinity(160).place(CANDS, AffinityKey("prefix", "k"), {home: 1}, 2.0).moved


def test_place_bounded_agrees_with_lookup_bounded():
    ring = HashRing(("a", "b", "c", "d"), 40)
    for loads in ({}, {"a": 3}, {"a": 2, "b": 2, "c": 1}):
        for key in ("x", "y", "z", "w"):
            assert ring.place_bounded(key, loads, 0.1)[1] == ring.lookup_bounded(key, loads, 0.1)
            assert ring.place_bounded(key, loads, 0.1)[0] == ring.lookup(key)


BACKEND = "backends: [{name: a, url: 'http://127.0.0.1:8000', models: [m]}]\n"


def test_off_by_default_and_key_both():
    assert load_text(BACKEND, env={}).snapshot.routing.cache_affinity == Settings(enabled=False, key="both")


@pytest.mark.parametrize("section, error", [
    ("routing: {cache_affinity: {key: session}}",
     "routing.cache_affinity.key: must be one of both, prompt_cache_key, prefix, got 'session'"),
    ("routing: {cache_affinity: {enabled: 1}}", "routing.cache_affinity.enabled: must be true or false, got integer"),
    ("routing: {cache_affinity: {epsilon: 1}}", "routing.cache_affinity.epsilon: unknown key"),
])
def test_errors_name_the_path(section, error):
    with pytest.raises(ConfigError) as info:
        load_text(BACKEND + section + "\n", env={})
    assert info.value.errors == [error]


def test_a_prefix_key_without_prefixes_is_warned_about():
    loaded = load_text(BACKEND + "prefix_routing: {enabled: false}\n"
                       "routing: {cache_affinity: {enabled: true, key: prefix}}\n", env={})
    assert [w for w in loaded.warnings if w.startswith("routing.cache_affinity")] == [
        "routing.cache_affinity.key: prefix while prefix_routing.enabled is false: no prefix is taken, so no call "
        "has an affinity key"]
