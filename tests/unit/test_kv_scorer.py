"""The KV-overlap scorer (actors/routing/kv_scorer.py): one test per rule."""

import pytest
from attrs import frozen

from switchyard.actors.routing.kv_scorer import (
    BELOW_THRESHOLD,
    NO_BLOCKS,
    OVERLAP,
    OVERLOADED,
    UNKNOWN,
    Weights,
    decide,
    engine_terms,
)

W = Weights()   # overlap 1.0, load 0.5, min_overlap 0.1, epsilon 0.25


def verdict(held, total=10, in_flight=None, weights=W, engine=None, candidates=None):
    return decide(candidates or list(held), held, total, in_flight or {}, weights, engine or {})


def test_a_prompt_shorter_than_one_block_decides_nothing():
    d = verdict({"a": 0.0, "b": 0.0}, total=0)
    assert (d.reason, d.chosen, d.keep) == (NO_BLOCKS, None, None)


def test_every_candidate_unknown_decides_nothing():
    d = verdict({"a": None, "b": None})
    assert (d.reason, d.chosen) == (UNKNOWN, None)


def test_below_min_overlap_decides_nothing():
    d = verdict({"a": 0.9, "b": 0.0})            # 0.09 of 10 blocks < 0.1
    assert (d.reason, d.chosen) == (BELOW_THRESHOLD, None)


def test_min_overlap_itself_is_enough():
    assert verdict({"a": 1.0, "b": 0.0}).chosen == "a"


def test_nothing_held_anywhere_is_below_threshold_even_at_min_overlap_zero():
    assert verdict({"a": 0.0, "b": 0.0}, weights=Weights(min_overlap=0.0)).reason == BELOW_THRESHOLD


def test_the_longest_holder_is_chosen():
    d = verdict({"a": 2.0, "b": 8.0, "c": 5.0})
    assert (d.reason, d.chosen) == (OVERLAP, "b")
    assert d.scores == {"a": 0.2, "b": 0.8, "c": 0.5}


def test_an_unknown_candidate_is_never_chosen_for_its_entries():
    d = verdict({"a": None, "b": 3.0})
    assert (d.reason, d.chosen) == (OVERLAP, "b")
    assert "a" not in d.scores


def test_load_trades_against_overlap():
    # b holds more, but is the busiest: 0.6 - 0.5 < 0.4 - 0.25
    d = verdict({"a": 4.0, "b": 6.0}, in_flight={"a": 1, "b": 2})
    assert d.chosen == "a" and d.reason == OVERLAP
    assert d.scores == pytest.approx({"a": 0.15, "b": 0.1})


def test_the_engine_load_term_is_subtracted():
    d = verdict({"a": 6.0, "b": 5.0}, engine={"a": 0.3})
    assert d.chosen == "b" and d.scores == pytest.approx({"a": 0.3, "b": 0.5})


def test_a_longest_holder_over_the_load_bound_gives_the_call_to_the_next_best():
    # capacity ceil(1.25 * (3 + 1) / 2) = 3: a's 3 + 1 > 3
    d = verdict({"a": 9.0, "b": 4.0}, in_flight={"a": 3, "b": 0})
    assert (d.reason, d.chosen) == (OVERLOADED, "b")


def test_the_load_bound_admits_a_holder_at_capacity():
    # capacity ceil(1.25 * (2 + 1) / 2) = 2: a's 1 + 1 fits
    d = verdict({"a": 9.0, "b": 0.0}, in_flight={"a": 1, "b": 1})
    assert (d.reason, d.chosen) == (OVERLAP, "a")


def test_without_a_known_candidate_within_the_bound_the_rest_of_the_pick_chooses_among_those_within_it():
    d = verdict({"a": 9.0, "b": None, "c": None}, in_flight={"a": 4, "b": 0, "c": 0})
    assert (d.reason, d.chosen, d.keep) == (OVERLOADED, None, ("b", "c"))


def test_ties_go_to_the_larger_held_then_fewer_in_flight_then_the_candidates_order():
    assert verdict({"a": 5.0, "b": 5.0}, weights=Weights(load_weight=0.0), in_flight={"a": 1}).chosen == "b"
    assert verdict({"a": 5.0, "b": 5.0}, candidates=["b", "a"]).chosen == "b"
    same = Weights(overlap_weight=0.0)
    assert verdict({"a": 2.0, "b": 5.0}, weights=same).chosen == "b"


@frozen
class Sample:
    waiting: int
    total_slots: int | None = None
    kv_cache_usage: float | None = None
    observed_at: float = 100.0


def test_engine_terms_read_fresh_samples_only():
    samples = {"a": Sample(10, kv_cache_usage=0.5), "b": Sample(0, kv_cache_usage=0.1, observed_at=0.0)}
    terms = engine_terms(["a", "b", "c"], samples, 100.0, window=45.0, weight=0.3)
    assert terms == pytest.approx({"a": 0.3 * (1.0 + 0.5)})   # b stale, c has none
