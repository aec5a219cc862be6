"""Engine-load ranking: freshness boundaries, normalization and hysteresis tables, the admission gate."""

import pytest
from attrs import frozen

from switchyard.actors.routing.engine_load import (
    APPLIED,
    DEAD_BAND,
    NO_DATA,
    OUTRANKED,
    STALE,
    admission_refuses,
    dead_band,
    is_fresh,
    max_age,
    rank,
    scores,
)


@frozen
class Sample:
    waiting: int
    total_slots: int | None = None
    kv_cache_usage: float | None = None
    observed_at: float = 1000.0


WINDOW = max_age(15.0, 3)   # the defaults: interval 15 s, max_staleness_intervals 3


def ranked(samples, candidates=None, now=1000.0, weight=0.3, abs_threshold=64, rel_threshold=1.5):
    candidates = list(samples) if candidates is None else candidates
    return rank(candidates, samples, now, window=WINDOW, weight=weight,
                abs_threshold=abs_threshold, rel_threshold=rel_threshold)


# --- freshness -----------------------------------------------------------------------------

def test_window_is_interval_times_max_staleness_intervals():
    assert WINDOW == 45.0
    assert max_age(2.0, 100) == 200.0


@pytest.mark.parametrize("age, fresh", [
    (0.0, True),
    (44.999999, True),
    (45.0, True),           # the boundary instant is still fresh
    (45.000001, False),
    (1e6, False),
    (-1.0, True),           # a sample stamped after `now` (clock skew between tasks) is fresh
])
def test_staleness_boundary_at_exact_instants(age, fresh):
    assert is_fresh(Sample(0, observed_at=1000.0), 1000.0 + age, WINDOW) is fresh


def test_boundary_instant_decides_ranking():
    samples = {"busy": Sample(200, observed_at=1000.0), "idle": Sample(0, observed_at=1000.0)}
    assert ranked(samples, now=1045.0).preferred == ("idle",)
    late = ranked(samples, now=1045.000001)
    assert late.preferred == ("busy", "idle")
    assert late.reasons == {"busy": STALE, "idle": STALE}


def test_stale_and_missing_keep_base_score_and_are_never_excluded():
    samples = {"busy": Sample(200), "idle": Sample(0), "old": Sample(0, observed_at=0.0)}
    d = ranked(samples, candidates=["busy", "idle", "old", "new"])
    assert d.preferred == ("idle", "old", "new")
    assert d.reasons == {"busy": OUTRANKED, "idle": APPLIED, "old": STALE, "new": NO_DATA}
    assert d.ranked


def test_all_stale_has_no_effect():
    samples = {"a": Sample(500, observed_at=0.0), "b": Sample(0, observed_at=0.0)}
    d = ranked(samples, candidates=["a", "b", "c"])
    assert (d.preferred, d.ranked) == (("a", "b", "c"), False)
    assert d.reasons == {"a": STALE, "b": STALE, "c": NO_DATA}


# --- hysteresis: both thresholds must be crossed ------------------------------------------------

@pytest.mark.parametrize("waitings, abs_t, rel_t, inside", [
    ([0, 0], 64, 1.5, True),          # nothing queued anywhere
    ([10, 10], 0, 1.0, True),         # equal queues never rank, even with zero thresholds
    ([0, 64], 64, 1.5, True),         # difference exactly abs: not over it
    ([0, 65], 64, 1.5, False),        # min 0: ratio infinite, abs decides
    ([100, 150], 49, 1.5, True),      # ratio exactly 1.5: not over it
    ([100, 151], 50, 1.5, False),     # both just over
    ([100, 151], 51, 1.5, True),      # abs exactly at the threshold
    ([1000, 1100], 64, 1.5, True),    # far apart absolutely, ratio 1.1 too close
    ([1, 3], 64, 1.5, True),          # ratio 3, difference 2: too small absolutely
    ([0, 1], 0, 1.0, False),          # zero thresholds: any difference ranks
    ([5, 70, 200], 64, 1.5, False),   # the gate reads max and min of the whole live set
    ([70], 0, 1.0, True),             # a single fresh candidate has nothing to compare
    ([], 0, 1.0, True),
])
def test_dead_band_table(waitings, abs_t, rel_t, inside):
    assert dead_band(waitings, abs_t, rel_t) is inside


def test_dead_band_reported_for_fresh_candidates_only():
    samples = {"a": Sample(100), "b": Sample(120), "c": Sample(0, observed_at=0.0)}
    d = ranked(samples)
    assert d.preferred == ("a", "b", "c")
    assert d.reasons == {"a": DEAD_BAND, "b": DEAD_BAND, "c": STALE}
    assert not d.ranked and d.scores == {}


def test_gate_is_computed_over_the_live_candidate_set():
    samples = {"a": Sample(0), "b": Sample(30), "c": Sample(500)}
    assert ranked(samples, candidates=["a", "b"]).reasons == {"a": DEAD_BAND, "b": DEAD_BAND}
    assert ranked(samples, candidates=["a", "b", "c"]).preferred == ("a", "b")   # b is not clearly busier than a


# --- normalization ------------------------------------------------------------------------------

@pytest.mark.parametrize("samples, expected", [
    # every fresh candidate reports total_slots: waiting / total_slots
    ({"a": Sample(100, total_slots=200), "b": Sample(50, total_slots=50)}, {"a": 0.5, "b": 1.0}),
    # one lacks total_slots: waiting / the candidates' max waiting
    ({"a": Sample(100, total_slots=200), "b": Sample(50)}, {"a": 1.0, "b": 0.5}),
    # total_slots 0 counts as not reported
    ({"a": Sample(100, total_slots=0), "b": Sample(50, total_slots=50)}, {"a": 1.0, "b": 0.5}),
    # a queue over the slot count is not clamped, so depth still ranks
    ({"a": Sample(300, total_slots=100), "b": Sample(150, total_slots=100)}, {"a": 3.0, "b": 1.5}),
    # KV usage adds when every fresh candidate reports it
    ({"a": Sample(100, kv_cache_usage=0.5), "b": Sample(0, kv_cache_usage=0.9)}, {"a": 1.5, "b": 0.9}),
    # one candidate without KV usage: the KV term counts for nobody
    ({"a": Sample(100, kv_cache_usage=0.5), "b": Sample(0)}, {"a": 1.0, "b": 0.0}),
    # nothing waiting anywhere
    ({"a": Sample(0), "b": Sample(0)}, {"a": 0.0, "b": 0.0}),
])
def test_normalization_table(samples, expected):
    got = scores(samples, weight=1.0)
    assert got == pytest.approx(expected)


def test_weight_scales_scores_but_not_the_order():
    samples = {"a": Sample(100, kv_cache_usage=0.5), "b": Sample(0, kv_cache_usage=0.9)}
    assert scores(samples, 0.3) == pytest.approx({"a": 0.45, "b": 0.27})
    assert ranked(samples, weight=0.3, abs_threshold=10).preferred == ("b",)
    assert ranked(samples, weight=1.0, abs_threshold=10).preferred == ("b",)


def test_weight_zero_sets_nothing_aside():
    samples = {"a": Sample(500), "b": Sample(0)}
    d = ranked(samples, weight=0.0)
    assert d.preferred == ("a", "b")
    assert d.reasons == {"a": APPLIED, "b": APPLIED}


@pytest.mark.parametrize("samples, preferred", [
    # slots decide against raw depth: 200/1000 beats 100/100
    ({"big": Sample(200, total_slots=1000), "small": Sample(100, total_slots=100), "idle": Sample(10, total_slots=10)},
     ("big",)),
    # equal lowest scores are all kept; the strategy rotates among them
    ({"a": Sample(0), "b": Sample(0), "c": Sample(300)}, ("a", "b")),
    # KV pressure outweighs a slightly shorter queue once the gate is open
    ({"a": Sample(0, kv_cache_usage=0.99), "b": Sample(70, kv_cache_usage=0.1), "c": Sample(700, kv_cache_usage=0.1)},
     ("b",)),
])
def test_ranking_table(samples, preferred):
    assert ranked(samples).preferred == preferred


def test_preferred_keeps_candidate_order_and_never_empties():
    samples = {"z": Sample(0), "y": Sample(500), "x": Sample(0)}
    d = ranked(samples, candidates=["z", "y", "x", "w"])
    assert d.preferred == ("z", "x", "w")
    assert ranked({}, candidates=["a"]).preferred == ("a",)


# --- admission gate -------------------------------------------------------------------------------

def gate(samples, now=1000.0, threshold=0.98, candidates=None):
    candidates = list(samples) if candidates is None else candidates
    return admission_refuses(candidates, samples, now, threshold=threshold, window=WINDOW)


@pytest.mark.parametrize("kvs, refuses", [
    ([0.99, 0.995], True),       # every candidate saturated
    ([0.99, 0.97], False),       # one has room
    ([0.98, 0.99], False),       # exactly at the threshold is not over it
    ([0.99, None], False),       # a sample without KV usage admits
    ([1.0], True),
    ([], False),                 # no candidate: not the gate's call
])
def test_admission_table(kvs, refuses):
    samples = {f"b{i}": Sample(0, kv_cache_usage=kv) for i, kv in enumerate(kvs)}
    assert gate(samples) is refuses


def test_candidate_without_fresh_data_always_admits():
    samples = {"a": Sample(0, kv_cache_usage=0.99), "b": Sample(0, kv_cache_usage=0.99, observed_at=0.0)}
    assert not gate(samples)                              # b is stale
    assert not gate(samples, candidates=["a", "new"])     # new has no sample
    assert gate(samples, candidates=["a"])                # an unhealthy b is not a candidate


def test_gate_closes_and_reopens_with_time_and_fresh_samples():
    saturated = {"a": Sample(0, kv_cache_usage=0.99, observed_at=1000.0),
                 "b": Sample(0, kv_cache_usage=0.995, observed_at=1010.0)}
    assert gate(saturated, now=1000.0)           # refusing
    assert gate(saturated, now=1045.0)           # a's sample exactly at the window: still fresh
    assert not gate(saturated, now=1045.000001)  # a's sample stale: admits again
    relieved = {**saturated, "b": Sample(0, kv_cache_usage=0.5, observed_at=1020.0)}
    assert not gate(relieved, now=1020.0)        # a fresh sample with room admits at once


def test_threshold_one_never_refuses():
    assert not gate({"a": Sample(0, kv_cache_usage=1.0)}, threshold=1.0)


def test_idle_engine_beside_busy_one_passes_any_ratio_threshold():
    # min 0, max > 0: the ratio is infinite, so only the absolute threshold holds traffic back
    assert dead_band([0, 65], 64, 1e300) is False
    assert dead_band([0, 65], 65, 1.0) is True


def test_engines_within_the_dead_band_of_the_best_stay_so_load_spreads():
    samples = {"a": Sample(10), "b": Sample(40), "c": Sample(400), "d": Sample(80)}
    decision = ranked(samples, candidates=["a", "b", "c", "d"])
    # b: 30 above a (<= 64) stays; d: 70 above a and 8x its queue is clearly busier; c too
    assert decision.preferred == ("a", "b")
    assert decision.reasons == {"a": APPLIED, "b": APPLIED, "c": OUTRANKED, "d": OUTRANKED}
