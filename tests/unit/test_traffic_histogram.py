"""actors/ledger/traffic.py: latency buckets (``le`` semantics) and quantiles interpolated as Prometheus's
histogram_quantile does."""

import pytest

from switchyard.actors.ledger.traffic import BOUNDS_MS, BUCKETS, bucket_of, empty, merged, quantile, slot_of


def counts(**at: int) -> list[int]:
    h = empty()
    for name, n in at.items():
        h[int(name[1:])] = n
    return h


def test_a_value_on_a_bound_falls_in_that_bounds_bucket():
    assert [bucket_of(b) for b in BOUNDS_MS] == list(range(len(BOUNDS_MS)))


def test_a_value_just_above_a_bound_falls_in_the_next_bucket():
    assert bucket_of(1.000001) == 1 and bucket_of(7.5000001) == 5


def test_zero_falls_in_the_first_bucket_and_past_the_last_bound_in_the_open_one():
    assert bucket_of(0.0) == 0
    assert bucket_of(600_000.001) == BUCKETS - 1 == len(BOUNDS_MS)


def test_the_bounds_rise_and_each_bucket_is_at_most_half_its_upper_bound_wide():
    assert list(BOUNDS_MS) == sorted(set(BOUNDS_MS))
    assert all(BOUNDS_MS[i] - BOUNDS_MS[i - 1] <= BOUNDS_MS[i] / 2 for i in range(1, len(BOUNDS_MS)))


def test_an_empty_histogram_has_no_quantile():
    assert quantile(0.5, empty()) is None


def test_the_quantile_is_interpolated_inside_its_bucket():
    # 10 values in (100, 150]: the median is half-way through that bucket, p95 at 95% of it
    h = counts(b13=10)
    assert quantile(0.5, h) == pytest.approx(125.0)
    assert quantile(0.95, h) == pytest.approx(147.5)


def test_the_first_bucket_interpolates_from_zero():
    assert quantile(0.5, counts(b0=4)) == pytest.approx(0.5)


def test_the_rank_counts_the_buckets_below():
    # 50 in (0, 1], 50 in (10, 15]: p50 is the top of the first, p95 in the second: 45 of its 50
    h = counts(b0=50, b6=50)
    assert quantile(0.5, h) == pytest.approx(1.0)
    assert quantile(0.95, h) == pytest.approx(10 + 5 * 45 / 50)


def test_empty_buckets_between_are_skipped():
    h = counts(b2=1, b20=1)   # (2, 3] and (1000, 1500]
    assert quantile(1.0, h) == pytest.approx(1500.0)
    assert quantile(0.75, h) == pytest.approx(1250.0)


def test_a_rank_in_the_open_bucket_answers_its_lower_bound():
    assert quantile(0.95, counts(b0=1, b37=19)) == 600_000.0


def test_a_quantile_out_of_range_is_refused():
    with pytest.raises(ValueError, match="q must be in"):
        quantile(0.0, counts(b0=1))


def test_a_histogram_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="38 buckets"):
        quantile(0.5, [1, 2])


def test_merged_sums_bucket_by_bucket():
    assert merged([counts(b0=1, b3=2), counts(b3=1, b37=4)]) == counts(b0=1, b3=3, b37=4)
    assert merged([]) == empty()


def test_the_slot_is_the_floor_of_time_over_step():
    assert slot_of(119.999, 60) == 1 and slot_of(120.0, 60) == 2 and slot_of(0.0, 10) == 0
