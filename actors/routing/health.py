"""Health state machine of one backend: pure transitions, time passed in.

States: UNKNOWN (never checked yet), WARMING (alive but not ready: the health
route answered 503, as vLLM does while loading weights), HEALTHY, UNHEALTHY.
UNKNOWN and HEALTHY receive traffic; UNKNOWN and WARMING are checked at the
faster warm-up interval so a starting backend joins as soon as it can.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import attrs
from attrs import frozen


class HealthState(str, Enum):
    UNKNOWN = "unknown"
    WARMING = "warming"
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"


class Outcome(str, Enum):
    OK = "ok"
    WARMING = "warming"
    FAIL = "fail"


ROUTABLE = frozenset({HealthState.UNKNOWN, HealthState.HEALTHY})


@frozen
class Thresholds:
    unhealthy: int
    healthy: int


@frozen
class BackendHealth:
    state: HealthState = HealthState.UNKNOWN
    since: float = 0.0
    successes: int = 0
    failures: int = 0
    last_error: str | None = None
    last_check: float | None = None

    @property
    def routable(self) -> bool:
        return self.state in ROUTABLE


def observe(h: BackendHealth, outcome: Outcome, now: float, t: Thresholds, error: str | None = None) -> BackendHealth:
    """The record after one active check or passive report."""
    if outcome is Outcome.OK:
        successes = h.successes + 1
        state = h.state
        if h.state is HealthState.UNKNOWN or (h.state is not HealthState.HEALTHY and successes >= t.healthy):
            state = HealthState.HEALTHY
        return _moved(h, state, now, successes=successes, failures=0, last_error=None, last_check=now)

    failures = h.failures + 1
    state = h.state
    if outcome is Outcome.WARMING:
        if h.state is not HealthState.HEALTHY or failures >= t.unhealthy:
            state = HealthState.WARMING
    elif failures >= t.unhealthy:
        state = HealthState.UNHEALTHY
    return _moved(h, state, now, successes=0, failures=failures, last_error=error, last_check=now)


def _moved(h: BackendHealth, state: HealthState, now: float, **changes: Any) -> BackendHealth:
    since = now if state is not h.state else h.since
    return attrs.evolve(h, state=state, since=since, **changes)


def next_check_delay(h: BackendHealth, interval: float, warmup_interval: float) -> float:
    if h.state in (HealthState.UNKNOWN, HealthState.WARMING):
        return warmup_interval
    return interval
