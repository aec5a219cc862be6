"""Traffic over time from the ledger: latency histograms on fixed bucket bounds, and their quantiles.

A store answers "how were calls spread over time" with counts per time slot
and group, and two histograms (the latency, the time to first byte) over the
bounds below, never the records themselves: the answer stays small whatever
the traffic, and every store (SQLite, PostgreSQL, memory) buckets exactly
alike. Percentiles are then estimated from the histogram as Prometheus's
``histogram_quantile`` does: linear inside the bucket that holds the rank.
Pure: no trio, no I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any, Iterable, Sequence

# Upper bounds (ms) of the buckets; a value equal to a bound falls in its bucket (Prometheus's ``le``).
# Past the last one is one open bucket. Each bucket's width is at most half its upper bound (1 ms for
# the first): an estimate lies in the true value's bucket, so it is off by no more than that.
BOUNDS_MS: tuple[float, ...] = (
    1, 2, 3, 5, 7.5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000,
    4000, 5000, 7500, 10000, 15000, 20000, 30000, 45000, 60000, 90000, 120000, 180000, 300000, 600000)
BUCKETS = len(BOUNDS_MS) + 1   # the bounded ones and the open one
GROUPS = ("model", "backend", "endpoint")   # what traffic may be grouped by (None: one series)

Histogram = list[int]   # a count per bucket, BUCKETS long


def bucket_of(value_ms: float) -> int:
    """The bucket holding ``value_ms``: the first whose bound is >= it; BUCKETS - 1 past the last."""
    return bisect_left(BOUNDS_MS, value_ms)


def empty() -> Histogram:
    return [0] * BUCKETS


def merged(histograms: Sequence[Sequence[int]]) -> Histogram:
    """The bucket-by-bucket sum."""
    out = empty()
    for h in histograms:
        for i, n in enumerate(h):
            out[i] += n
    return out


def quantile(q: float, counts: Sequence[int]) -> float | None:
    """The ``q`` quantile (0 < q <= 1) of the values counted in ``counts``, None when it counts none.

    As ``histogram_quantile``: the rank ``q * total`` is found in the cumulative counts and the value
    interpolated linearly inside that bucket, from its lower bound (0 for the first) to its upper one.
    A rank in the open last bucket answers its lower bound (the largest bound): nothing is known above it.
    """
    if not 0 < q <= 1:
        raise ValueError(f"q must be in (0, 1], got {q!r}")
    if len(counts) != BUCKETS:
        raise ValueError(f"a histogram has {BUCKETS} buckets, got {len(counts)}")
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    below = 0
    for i, n in enumerate(counts):
        if below + n >= rank and n > 0:
            if i == len(BOUNDS_MS):
                return float(BOUNDS_MS[-1])
            lower = float(BOUNDS_MS[i - 1]) if i > 0 else 0.0
            return lower + (BOUNDS_MS[i] - lower) * (rank - below) / n
        below += n
    return float(BOUNDS_MS[-1])   # not reached: the last bucket holding a count takes the whole rank


def check(group_by: str | None, step: int) -> None:
    """What every store refuses the same way: a grouping traffic has no series for, a step that is not
    a whole number of seconds >= 1."""
    if group_by is not None and group_by not in GROUPS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPS)} or None, got {group_by!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"step must be a whole number of seconds >= 1, got {step!r}")


def slot_of(time: float, step: int) -> int:
    """The time slot of ``time``: ``floor(time / step)``, the division a SQL store does (not ``//``,
    which can land one slot off for a time just under a slot's edge)."""
    return math.floor(time / step)


def new_row(slot: int, group: str | None) -> dict[str, Any]:
    return {"slot": slot, "group": group, "requests": 0, "errors": 0, "latency_ms": empty(), "ttfb_ms": empty()}


def ordered(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by group (code point order, None last), then slot: the order every store answers in."""
    return sorted(rows, key=lambda r: (r["group"] is None, r["group"] or "", r["slot"]))
