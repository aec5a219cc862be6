"""Client filters and rank groups (actors/routing/provider_rank.py): pure, no clock."""

import math

from attrs import frozen
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.actors.provider_prefs import parse_provider
from switchyard.actors.routing.provider_prefs import MaxPrice, ProviderPrefs
from switchyard.actors.routing.provider_rank import (
    client_filter,
    combined_price,
    emptied_by,
    filter_stages,
    rank_groups,
    top_group,
)
from switchyard.actors.routing.variants import ThroughputSample, fresh_throughput


@frozen
class B:
    name: str


A, BB, C, D, E = B("a"), B("b"), B("c"), B("d"), B("e")
FLEET = [A, BB, C, D]
PRICES = {"a": (1.0, 2.0), "b": (0.5, 5.0), "c": (None, 1.0), "d": None}


def price(c):
    return PRICES.get(c.name)


def names(cs):
    return [c.name for c in cs]


def groups(gs):
    return [names(g) for g in gs]


def no_price(c):
    raise AssertionError("price is read only for max_price")


# --- filters -------------------------------------------------------------------------------

def test_only_intersects_never_unions():
    prefs = parse_provider({"only": ["c", "a", "zzz"]})
    assert names(client_filter(prefs, FLEET, no_price)) == ["a", "c"]      # input order kept, zzz never added


def test_ignore_removes_listed_backends():
    assert names(client_filter(parse_provider({"ignore": ["b", "zzz"]}), FLEET, no_price)) == ["a", "c", "d"]


def test_ignore_wins_over_only():
    prefs = parse_provider({"only": ["a", "b"], "ignore": ["a"]})
    assert names(client_filter(prefs, FLEET, no_price)) == ["b"]


def test_empty_only_filters_everything_out():
    prefs = parse_provider({"only": []})
    assert client_filter(prefs, FLEET, no_price) == []
    assert emptied_by(prefs, FLEET, no_price) == "only"


def test_no_filters_keep_every_candidate():
    prefs = parse_provider({"order": ["d"], "sort": "price"})
    assert client_filter(prefs, FLEET, no_price) == FLEET
    assert filter_stages(prefs, FLEET, no_price) == []


def test_max_price_keeps_candidates_at_or_under_both_ceilings():
    prefs = ProviderPrefs(max_price=MaxPrice(prompt=1.0, completion=2.0))
    assert names(client_filter(prefs, FLEET, price)) == ["a"]          # exactly at the ceiling passes
    prefs = ProviderPrefs(max_price=MaxPrice(completion=2.0))
    assert names(client_filter(prefs, FLEET, price)) == ["a", "c"]     # c's prompt price is not asked


def test_unknown_price_does_not_pass_a_max_price_ceiling():
    prefs = ProviderPrefs(max_price=MaxPrice(prompt=100.0))
    # c's prompt price is unknown and d has no price at all: neither can be shown to be under it.
    assert names(client_filter(prefs, FLEET, price)) == ["a", "b"]


def test_empty_max_price_filters_nothing():
    assert client_filter(ProviderPrefs(max_price=MaxPrice()), FLEET, no_price) == FLEET


def test_emptied_by_names_the_filter_that_left_nothing():
    assert emptied_by(parse_provider({"only": ["a"], "ignore": ["a"]}), FLEET, no_price) == "ignore"
    assert emptied_by(ProviderPrefs(max_price=MaxPrice(prompt=0.1)), FLEET, price) == "max_price"
    assert emptied_by(parse_provider({"only": ["a"]}), FLEET, no_price) is None
    assert emptied_by(parse_provider({"only": ["a"]}), [], no_price) is None       # nothing to empty


def test_filter_stages_are_successive_subsets():
    prefs = ProviderPrefs(only=("a", "b", "c"), ignore=("c",), max_price=MaxPrice(prompt=0.75))
    assert [(f, names(left)) for f, left in filter_stages(prefs, FLEET, price)] == [
        ("only", ["a", "b", "c"]), ("ignore", ["a", "b"]), ("max_price", ["b"])]


name_lists = st.lists(st.sampled_from("abcdefg"), max_size=8)
prefs_st = st.builds(
    ProviderPrefs,
    order=name_lists.map(tuple),
    only=st.none() | name_lists.map(tuple),
    ignore=name_lists.map(tuple),
    sort=st.none() | st.sampled_from(["price", "throughput", "latency"]),
    max_price=st.none() | st.builds(MaxPrice, prompt=st.none() | st.floats(0, 10),
                                    completion=st.none() | st.floats(0, 10)),
)
price_st = st.none() | st.tuples(st.none() | st.floats(0, 10), st.none() | st.floats(0, 10))


@settings(max_examples=300)
@given(prefs_st, st.lists(st.sampled_from("abcdefgh"), unique=True).map(lambda ns: [B(n) for n in ns]),
       st.dictionaries(st.sampled_from("abcdefgh"), price_st))
def test_client_filter_never_widens(prefs, cands, prices):
    out = client_filter(prefs, cands, lambda c: prices.get(c.name))
    assert set(names(out)) <= set(names(cands))
    assert out == [c for c in cands if c in out]                       # a subsequence: order kept
    if prefs.only is not None:
        assert set(names(out)) <= set(prefs.only)
    assert not set(names(out)) & set(prefs.ignore)


# --- rank groups -------------------------------------------------------------------------

def test_no_order_and_no_sort_is_a_single_group():
    assert groups(rank_groups(ProviderPrefs(), FLEET)) == [["a", "b", "c", "d"]]
    # sort stated but no signal function: nothing to rank by
    assert groups(rank_groups(ProviderPrefs(sort="price"), FLEET)) == [["a", "b", "c", "d"]]


def test_order_ranks_listed_names_by_index_and_unlisted_as_one_last_tier():
    prefs = parse_provider({"order": ["c", "zzz", "a"]})
    assert groups(rank_groups(prefs, FLEET)) == [["c"], ["a"], ["b", "d"]]


def test_order_ranks_only_what_is_left():
    prefs = parse_provider({"order": ["c", "a"]})
    # c is excluded (tried, unhealthy): the next attempt ranks a first, not a pin on c
    assert names(top_group(prefs, [A, BB, D])) == ["a"]
    assert names(top_group(prefs, [BB, D])) == ["b", "d"]


def test_sort_price_ascending_uses_the_combined_price():
    def signal(c):
        return combined_price(price(c))
    prefs = ProviderPrefs(sort="price")
    # a: 1 + 2 = 3, b: 0.5 + 5 = 5.5; c (prompt unknown) and d (no price) trail as one group
    assert groups(rank_groups(prefs, FLEET, signal)) == [["a"], ["b"], ["c", "d"]]


def test_combined_price_needs_both_sides():
    assert combined_price((1.0, 2.0)) == 3.0
    assert combined_price((None, 2.0)) is None
    assert combined_price(None) is None


def test_sort_latency_ascending():
    latency = {"a": 0.3, "b": 0.1, "c": 0.2}
    def signal(c):
        return latency.get(c.name)
    assert groups(rank_groups(ProviderPrefs(sort="latency"), FLEET, signal)) == [["b"], ["c"], ["a"], ["d"]]


def test_sort_throughput_descending():
    now = 100.0
    view = {"a": ThroughputSample(50.0, now - 1), "b": ThroughputSample(80.0, now - 2),
            "c": ThroughputSample(500.0, now - 60)}                     # c's sample is stale
    def signal(c):
        return fresh_throughput(view, c.name, now, 45.0)
    assert groups(rank_groups(ProviderPrefs(sort="throughput"), FLEET, signal)) == [["b"], ["a"], ["c", "d"]]


def test_candidates_equal_on_every_stated_key_form_one_group():
    prefs = ProviderPrefs(sort="price")
    same = {"a": 3.0, "b": 1.0, "c": 3.0, "d": 1.0}
    assert groups(rank_groups(prefs, FLEET, lambda c: same[c.name])) == [["b", "d"], ["a", "c"]]
    # equal order rank (both unlisted) and equal price: one group; the strategy rotates within it
    prefs = ProviderPrefs(order=("e",), sort="price")
    assert groups(rank_groups(prefs, [A, BB, C, D, E], lambda c: same.get(c.name, 9.0))) == [
        ["e"], ["b", "d"], ["a", "c"]]


def test_groups_keep_the_input_order_inside():
    prefs = ProviderPrefs(sort="latency")
    assert groups(rank_groups(prefs, [D, C, BB, A], lambda c: 1.0)) == [["d", "c", "b", "a"]]


def test_order_is_the_first_key_and_sort_the_second():
    prefs = ProviderPrefs(order=("d", "c"), sort="price")
    p = {"a": 1.0, "b": 2.0, "c": 5.0, "d": 9.0}
    assert groups(rank_groups(prefs, FLEET, lambda c: p[c.name])) == [["d"], ["c"], ["a"], ["b"]]


def test_missing_signal_joins_one_trailing_group():
    prefs = ProviderPrefs(sort="latency")
    latency = {"b": 0.2}
    assert groups(rank_groups(prefs, FLEET, lambda c: latency.get(c.name))) == [["b"], ["a", "c", "d"]]
    # non-finite values say nothing either
    odd = {"a": math.nan, "b": 0.2, "c": math.inf}
    assert groups(rank_groups(prefs, FLEET, lambda c: odd.get(c.name))) == [["b"], ["a", "c", "d"]]


def test_missing_signal_trails_within_its_order_tier():
    prefs = ProviderPrefs(order=("a",), sort="latency")
    latency = {"b": 0.2, "c": 0.1}
    assert groups(rank_groups(prefs, FLEET, lambda c: latency.get(c.name))) == [["a"], ["c"], ["b"], ["d"]]


def test_fleet_with_no_telemetry_is_one_group_and_the_strategy_decides():
    for sort in ("price", "throughput", "latency"):
        prefs = ProviderPrefs(sort=sort)
        assert groups(rank_groups(prefs, FLEET, lambda c: None)) == [["a", "b", "c", "d"]]
        assert top_group(prefs, FLEET, lambda c: None) == FLEET


def test_default_sort_none_leaves_the_configured_strategy_unchanged():
    prefs = parse_provider({"only": ["a", "b"]})          # filters, but no order and no sort
    assert prefs.sort is None
    assert rank_groups(prefs, FLEET, lambda c: {"a": 9.0}.get(c.name)) == [FLEET]


def test_zero_and_negative_zero_are_one_value():
    prefs = ProviderPrefs(sort="throughput")
    assert groups(rank_groups(prefs, [A, BB], lambda c: 0.0 if c.name == "a" else -0.0)) == [["a", "b"]]


def test_top_group_of_nothing_is_empty():
    assert top_group(ProviderPrefs(sort="price"), [], lambda c: 1.0) == []
    assert rank_groups(ProviderPrefs(), []) == []


@settings(max_examples=300)
@given(prefs_st, st.lists(st.sampled_from("abcdefgh"), unique=True).map(lambda ns: [B(n) for n in ns]),
       st.dictionaries(st.sampled_from("abcdefgh"), st.none() | st.floats(allow_nan=True)))
def test_rank_groups_partition_the_candidates(prefs, cands, signals):
    gs = rank_groups(prefs, cands, lambda c: signals.get(c.name))
    flat = [c for g in gs for c in g]
    assert sorted(names(flat)) == sorted(names(cands))
    assert all(g for g in gs)
    for g in gs:                                              # each group keeps the input order
        assert g == [c for c in cands if c in g]
    assert top_group(prefs, cands, lambda c: signals.get(c.name)) == (gs[0] if gs else [])
