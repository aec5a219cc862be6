"""Passive health per backend and model: a circuit breaker fed by real traffic.

Active checks ask ``/health``; a backend can answer that happily while its
chat route fails. Consecutive failures of real calls open the circuit of that
(backend, model) at once. After a cooldown one call is let through as a
probe (half-open): success closes the circuit, failure opens it again with a
doubled cooldown, capped so a recovered backend is back within seconds.
"""

from __future__ import annotations

from enum import Enum

import attrs
from attrs import frozen

BASE_COOLDOWN = 2.0
MAX_COOLDOWN = 16.0


class CircuitState(str, Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@frozen
class Circuit:
    state: CircuitState = CircuitState.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    cooldown: float = BASE_COOLDOWN

    def admits(self, now: float) -> bool:
        """Whether a call may go here now (an open circuit past its cooldown admits a probe)."""
        if self.state is CircuitState.CLOSED:
            return True
        return self.state is CircuitState.OPEN and now >= self.opened_at + self.cooldown


def on_failure(c: Circuit, now: float, threshold: int) -> Circuit:
    if c.state is CircuitState.HALF_OPEN:
        return Circuit(CircuitState.OPEN, c.failures + 1, now, min(c.cooldown * 2, MAX_COOLDOWN))
    failures = c.failures + 1
    if c.state is CircuitState.CLOSED and failures >= threshold:
        return Circuit(CircuitState.OPEN, failures, now, BASE_COOLDOWN)
    return attrs.evolve(c, failures=failures)


def on_probe(c: Circuit) -> Circuit:
    return attrs.evolve(c, state=CircuitState.HALF_OPEN)


def on_success(c: Circuit) -> Circuit:
    return Circuit()
