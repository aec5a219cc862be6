"""Budget periods as UTC calendar buckets: which bucket a Unix time falls in, and when a bucket's
counters may be dropped. Pure: the time comes in as an argument."""

from __future__ import annotations

import datetime as dt
import functools
import math

from attrs import frozen

from switchyard.config.limits import Period

__all__ = ["Bucket", "bucket_expiry", "bucket_of"]


@frozen
class Bucket:
    name: str               # 2026-03-05 | 2026-W10 | 2026-03 | total
    start: float | None     # Unix seconds (None: total)
    end: float | None


TOTAL = Bucket("total", None, None)
EPOCH = dt.date(1970, 1, 1)
DAY_SECONDS = 86_400


def bucket_of(period: Period, wall: float) -> Bucket:
    """The UTC period bucket holding Unix time ``wall`` (each admission asks: one per period and UTC
    day is computed, then remembered; Unix time has no leap seconds, so its days are UTC days)."""
    if period is Period.TOTAL:
        return TOTAL
    return _bucket(period, math.floor(wall / DAY_SECONDS))


@functools.lru_cache(maxsize=64)
def _bucket(period: Period, unix_day: int) -> Bucket:
    day = EPOCH + dt.timedelta(days=unix_day)
    if period is Period.DAY:
        start, end, name = day, day + dt.timedelta(days=1), day.isoformat()
    elif period is Period.WEEK:
        start = day - dt.timedelta(days=day.weekday())
        year, week, _ = day.isocalendar()
        end, name = start + dt.timedelta(days=7), f"{year}-W{week:02d}"
    else:
        start = day.replace(day=1)
        end = (start + dt.timedelta(days=32)).replace(day=1)
        name = f"{start.year:04d}-{start.month:02d}"
    return Bucket(name, _midnight(start), _midnight(end))


def _midnight(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()


def bucket_expiry(bucket: Bucket) -> float | None:
    """When a bucket's counters may go: two periods after it ended (total: never)."""
    if bucket.start is None or bucket.end is None:
        return None
    return bucket.end + 2 * (bucket.end - bucket.start)
