"""Usage-weighted selection: tumbling windows, remaining fractions, the strictly-better rule."""

import pytest
from attrs import frozen

from switchyard.actors.routing.usage_weight import (
    APPLIED,
    NO_DECLARATION,
    NO_DIFFERENTIATION,
    TumblingMeter,
    Used,
    decide,
    remaining_fraction,
    remaining_fractions,
)


@frozen
class Observed:
    requests_ratio: float | None = None
    tokens_ratio: float | None = None


@frozen
class Backend:
    name: str
    provider_tpm: int | None = None
    provider_rpm: int | None = None


# --- the meter ----------------------------------------------------------------------------------

def test_new_meter_starts_at_zero():
    assert TumblingMeter(60.0).used("a", 12345.0) == Used(0, 0)


def test_window_rolls_over_at_the_exact_boundary_instant():
    m = TumblingMeter(60.0)
    m.record("a", 100, 0.0)
    m.record("a", 50, 59.999999)
    assert m.used("a", 59.999999) == Used(150, 2)
    assert m.used("a", 60.0) == Used(0, 0)        # the boundary instant opens the next window
    m.record("a", 7, 60.0)
    assert m.used("a", 119.999) == Used(7, 1)
    assert m.used("a", 120.0) == Used(0, 0)


def test_windows_are_aligned_to_the_clock_not_first_use():
    m = TumblingMeter(60.0)
    m.record("a", 10, 119.0)      # first use late in window 1
    assert m.used("a", 120.0) == Used(0, 0)


@pytest.mark.parametrize("interval, at, window", [
    (60.0, 0.0, 0), (60.0, 59.999, 0), (60.0, 60.0, 1), (1.0, 3.0, 3), (1.5, 3.0, 2), (1.5, 2.999, 1),
    (3600.0, 3599.9, 0),
])
def test_window_index_table(interval, at, window):
    assert TumblingMeter(interval).window(at) == window


def test_backends_are_metered_apart_and_negative_tokens_count_zero():
    m = TumblingMeter(60.0)
    m.record("a", 10, 1.0)
    m.record("b", -5, 1.0)
    assert (m.used("a", 2.0), m.used("b", 2.0)) == (Used(10, 1), Used(0, 1))


def test_reconfigure_keeps_counts_for_same_interval_and_restarts_on_change():
    m = TumblingMeter(60.0)
    m.record("a", 10, 1.0)
    m.record("gone", 10, 1.0)
    m.reconfigure(60.0, ["a"])
    assert (m.used("a", 2.0), m.used("gone", 2.0)) == (Used(10, 1), Used(0, 0))
    m.reconfigure(30.0, ["a"])
    assert m.used("a", 2.0) == Used(0, 0)
    assert m.interval == 30.0


def test_meter_refuses_a_non_positive_interval():
    with pytest.raises(ValueError):
        TumblingMeter(0.0)


# --- remaining fractions ------------------------------------------------------------------------

@pytest.mark.parametrize("tpm, rpm, used, observed, expected", [
    (None, None, Used(), None, None),                          # nothing declared or observed
    (1000, None, Used(250, 1), None, 0.75),
    (None, 10, Used(999, 4), None, 0.6),
    (1000, 10, Used(250, 8), None, 0.2),                       # the smallest declared axis
    (1000, None, Used(5000, 1), None, 0.0),                    # over budget clamps to 0
    (1000, None, Used(0, 0), None, 1.0),
    # observed axes replace the local estimate for their axis
    (1000, None, Used(900, 1), Observed(tokens_ratio=0.8), 0.8),
    (1000, 10, Used(0, 9), Observed(tokens_ratio=0.5), 0.1),   # requests stays local
    (1000, 10, Used(0, 9), Observed(requests_ratio=0.7), 0.7),
    # observed data takes part without declarations
    (None, None, Used(), Observed(requests_ratio=0.3, tokens_ratio=0.6), 0.3),
    (None, None, Used(), Observed(tokens_ratio=0.6), 0.6),
    (None, None, Used(), Observed(), None),                    # an observation with no axis says nothing
])
def test_remaining_fraction_table(tpm, rpm, used, observed, expected):
    got = remaining_fraction(tpm, rpm, used, observed)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_declared_limits_scale_to_the_window():
    # 600 tokens per minute is 300 per 30 s window
    assert remaining_fraction(600, None, Used(150, 1), window=30.0) == pytest.approx(0.5)
    assert remaining_fraction(600, None, Used(150, 1), window=60.0) == pytest.approx(0.75)


def test_remaining_fractions_reads_the_meter_at_now():
    m = TumblingMeter(60.0)
    m.record("a", 500, 10.0)
    backends = [Backend("a", provider_tpm=1000), Backend("b"), Backend("c")]
    got = remaining_fractions(backends, m, {"c": Observed(tokens_ratio=0.4)}, now=30.0)
    assert got == {"a": 0.5, "b": None, "c": 0.4}
    assert remaining_fractions(backends, m, {}, now=60.0)["a"] == 1.0   # next window


# --- the decision -------------------------------------------------------------------------------

@pytest.mark.parametrize("fractions, weight, chosen, reasons", [
    ({"a": 0.9, "b": 0.5}, 0.2, "a", {"a": APPLIED, "b": APPLIED}),
    ({"a": 0.5, "b": 0.5}, 0.2, None, {"a": NO_DIFFERENTIATION, "b": NO_DIFFERENTIATION}),
    ({"a": 0.9, "b": 0.9, "c": 0.1}, 0.2, None,                 # a tie at the top: nobody strictly better
     {"a": NO_DIFFERENTIATION, "b": NO_DIFFERENTIATION, "c": NO_DIFFERENTIATION}),
    ({"a": 0.3, "b": None}, 0.2, "a", {"a": APPLIED, "b": NO_DECLARATION}),
    ({"a": 0.0, "b": None}, 0.2, None, {"a": NO_DIFFERENTIATION, "b": NO_DECLARATION}),  # exhausted = 0.0
    ({"a": None, "b": None}, 0.2, None, {"a": NO_DECLARATION, "b": NO_DECLARATION}),
    ({"a": 0.9, "b": 0.5}, 0.0, None, {"a": NO_DIFFERENTIATION, "b": NO_DIFFERENTIATION}),  # weight 0
    ({"a": 0.9}, 0.2, None, {"a": NO_DIFFERENTIATION}),           # a single candidate: nothing to decide
    ({}, 0.2, None, {}),
])
def test_decide_table(fractions, weight, chosen, reasons):
    assert decide(list(fractions), fractions, weight) == (chosen, reasons)


def test_candidates_missing_from_fractions_score_zero():
    assert decide(["a", "b"], {"a": 0.4}, 1.0) == ("a", {"a": APPLIED, "b": NO_DECLARATION})


def test_usage_shifts_the_choice_within_a_window_and_resets_at_the_next():
    m = TumblingMeter(60.0)
    backends = [Backend("a", provider_tpm=1000), Backend("b", provider_tpm=1000)]

    def pick(now):
        return decide(["a", "b"], remaining_fractions(backends, m, {}, now), 0.2)[0]

    assert pick(0.0) is None                 # both untouched: a tie
    m.record("a", 400, 1.0)
    assert pick(2.0) == "b"
    m.record("b", 600, 3.0)
    assert pick(4.0) == "a"
    assert pick(60.0) is None                # a new window: both back to full
