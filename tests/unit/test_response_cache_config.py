"""``response_cache`` loads: every bad value a load error naming its path; the store waits for a restart."""

from __future__ import annotations

import pytest

from switchyard.config.load import ConfigError, load_text
from switchyard.config.response_cache import CacheStoreKind
from switchyard.config.watch import apply_live

BACKENDS = "backends: [{name: a, type: simulated, models: [demo]}]\n"


def errors(section: str, extra: str = "") -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_text(BACKENDS + f"response_cache: {section}\n" + extra)
    return caught.value.errors


def test_the_defaults_are_off_memory_and_every_model():
    cache = load_text(BACKENDS).snapshot.response_cache
    assert (cache.enabled, cache.store, cache.models, cache.keys) == (False, CacheStoreKind.MEMORY, ("*",), None)
    assert (cache.cache_temperature_above_zero, cache.shared_across_keys) == (False, False)


def test_a_redis_store_needs_state_redis_url():
    assert errors("{enabled: true, store: redis}") == [
        "response_cache.store: redis needs state.redis_url (the Redis the fleet shares); set it, or use store: memory"]
    loaded = load_text(BACKENDS + "response_cache: {store: redis}\nstate: {redis_url: 'redis://127.0.0.1:6379'}\n")
    assert loaded.snapshot.response_cache.store is CacheStoreKind.REDIS


@pytest.mark.parametrize("section, error", [
    ("{store: disk}", "response_cache.store: must be one of memory, redis, got 'disk'"),
    ("{ttl: soon}", "response_cache.ttl: must be a duration like 10s, 500ms or 1m30s, got 'soon'"),
    ("{max_entries: 0}", "response_cache.max_entries: must be at least 1, got 0"),
    ("{max_entry_bytes: 1}", "response_cache.max_entry_bytes: must be at least 256, got 1"),
    ("{models: [1]}", "response_cache.models: item [0] must be a string, got integer"),
    ("{keys: team}", "response_cache.keys: must be a list of strings, got string"),
    ("{shared_across_keys: yes please}", "response_cache.shared_across_keys: must be true or false, got string"),
    ("{semantic: true}", "response_cache.semantic: must be a mapping, got boolean"),
    ("{semantic: {enabled: true}}", "response_cache.semantic.embedding_model: required when semantic.enabled is "
                                    "true (an embeddings model this config serves)"),
    ("{destinations: [{name: d, backends: [a]}]}", "response_cache.destinations: item [0] destination 'd': "
                                                   "backends must name two or more distinct backends"),
])
def test_a_bad_value_is_a_load_error_naming_its_path(section, error):
    assert error in errors(section)


def test_the_store_and_the_memory_bounds_wait_for_a_restart_the_rest_reloads_live():
    running = load_text(BACKENDS + "response_cache: {enabled: true, max_entries: 5}\n").snapshot
    new = load_text(BACKENDS + "response_cache: {enabled: true, max_entries: 9, ttl: 1m, "
                               "store: redis}\nstate: {redis_url: 'redis://127.0.0.1:6379'}\n").snapshot
    applied = apply_live(running, new)
    assert {"response_cache.max_entries", "response_cache.store"} <= set(applied.pending_restart)
    cache = applied.snapshot.response_cache
    assert (cache.max_entries, cache.store, cache.ttl) == (5, CacheStoreKind.MEMORY, 60.0)
