"""The map of which backend created which stored response: per key, bounded in count and age."""

from __future__ import annotations

from switchyard.actors.response_owners import ANONYMOUS, ResponseOwners, owner_of
from switchyard.config.stored_responses import StoredResponses


def owners(max_entries: int = 100, max_age: float = 60.0) -> ResponseOwners:
    return ResponseOwners(StoredResponses(max_entries=max_entries, max_age=max_age))


def test_an_id_is_found_only_under_the_key_that_created_it():
    found = owners()
    found.remember("a", "resp_1", "sim-a", 0.0)
    assert found.backend_of("a", "resp_1", 1.0) == "sim-a"
    assert found.backend_of("b", "resp_1", 1.0) is None


def test_the_same_id_under_two_keys_stays_apart():
    found = owners()
    found.remember("a", "resp_1", "sim-a", 0.0)
    found.remember("b", "resp_1", "sim-b", 0.0)
    assert (found.backend_of("a", "resp_1", 1.0), found.backend_of("b", "resp_1", 1.0)) == ("sim-a", "sim-b")


def test_an_id_older_than_max_age_is_forgotten():
    found = owners(max_age=60.0)
    found.remember("a", "resp_1", "sim-a", 0.0)
    found.remember("a", "resp_2", "sim-a", 30.0)
    assert found.backend_of("a", "resp_1", 59.9) == "sim-a"
    assert found.backend_of("a", "resp_1", 60.0) is None and found.backend_of("a", "resp_2", 60.0) == "sim-a"
    assert len(found) == 1


def test_past_max_entries_the_oldest_is_forgotten_first():
    found = owners(max_entries=2)
    for i in range(3):
        found.remember("a", f"resp_{i}", "sim-a", float(i))
    assert [found.backend_of("a", f"resp_{i}", 3.0) for i in range(3)] == [None, "sim-a", "sim-a"]


def test_another_owner_holding_an_id_is_known_until_it_is_forgotten():
    found = owners()
    found.remember("a", "resp_1", "sim-a", 0.0)
    assert found.known_to_other("b", "resp_1", 1.0) and not found.known_to_other("a", "resp_1", 1.0)
    found.forget("a", "resp_1")
    assert not found.known_to_other("b", "resp_1", 1.0)


def test_a_reload_applies_new_bounds_at_the_next_use():
    found = owners(max_entries=10)
    for i in range(5):
        found.remember("a", f"resp_{i}", "sim-a", 0.0)
    found.reconfigure(StoredResponses(max_entries=2, max_age=60.0))
    assert found.backend_of("a", "resp_0", 1.0) is None and len(found) == 2


def test_with_keys_off_every_caller_is_the_same_owner():
    class Key:
        id = "team"
    assert owner_of(None) == ANONYMOUS and owner_of(Key()) == "team"
