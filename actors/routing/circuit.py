"""Passive health per backend and model: a circuit breaker fed by real traffic.

Active checks ask ``/health``; a backend can answer that happily while its
chat route fails. Consecutive failures of real calls (within ``window`` when
one is set) open the circuit of that (backend, model) at once. After a
cooldown a few calls are let through as probes (half-open): enough successes
close the circuit, a failure opens it again with a doubled cooldown, capped
so a recovered backend is back within seconds. The numbers come from a
``Policy`` (the config's ``circuit_breaker``), passed in on every event so a
reload changes them for the next failure without touching any circuit.
"""

from __future__ import annotations

from enum import Enum

import attrs
from attrs import frozen

BASE_COOLDOWN = 2.0
MAX_COOLDOWN = 16.0


@frozen
class Policy:
    """How circuits open and close; the defaults are the numbers Switchyard always used."""

    failure_threshold: int = 3            # consecutive failures that open a closed circuit
    window: float | None = None           # ... all within this many seconds (None: however far apart)
    timeout: float = BASE_COOLDOWN        # how long a circuit stays open before its first probe
    max_timeout: float = MAX_COOLDOWN     # the cap of the doubling after failed probes
    half_open_max_requests: int = 1       # probes in flight at once
    half_open_success_threshold: int = 1  # successful probes that close the circuit


DEFAULT_POLICY = Policy()


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
    first_failure_at: float = 0.0   # when the current run of failures began (for the window)
    probes: int = 0                 # half-open: probes in flight
    successes: int = 0              # half-open: probes that succeeded

    def admits(self, now: float, max_probes: int = 1) -> bool:
        """Whether a call may go here now (an open circuit past its cooldown admits a probe,
        a half-open one as many as ``max_probes`` at once)."""
        if self.state is CircuitState.CLOSED:
            return True
        if self.state is CircuitState.HALF_OPEN:
            return self.probes < max_probes
        return now >= self.opened_at + self.cooldown


def on_failure(c: Circuit, now: float, policy: Policy = DEFAULT_POLICY) -> Circuit:
    if c.state is CircuitState.HALF_OPEN:
        return Circuit(CircuitState.OPEN, c.failures + 1, now, min(c.cooldown * 2, policy.max_timeout))
    if c.state is CircuitState.OPEN:
        return attrs.evolve(c, failures=c.failures + 1)
    if c.failures == 0 or (policy.window is not None and now - c.first_failure_at > policy.window):
        c = Circuit(failures=0, first_failure_at=now)   # a new run of failures starts here
    failures = c.failures + 1
    if failures >= policy.failure_threshold:
        return Circuit(CircuitState.OPEN, failures, now, policy.timeout, c.first_failure_at)
    return attrs.evolve(c, failures=failures)


def on_probe(c: Circuit) -> Circuit:
    """A probe goes out: the first one turns an open circuit half-open."""
    if c.state is CircuitState.OPEN:
        return attrs.evolve(c, state=CircuitState.HALF_OPEN, probes=1, successes=0)
    return attrs.evolve(c, probes=c.probes + 1)


def on_probe_abandoned(c: Circuit) -> Circuit:
    """A probe that never finished proves nothing: its place goes to the next call."""
    if c.state is not CircuitState.HALF_OPEN:
        return c
    probes = max(0, c.probes - 1)
    if probes == 0 and c.successes == 0:
        return attrs.evolve(c, state=CircuitState.OPEN, probes=0)
    return attrs.evolve(c, probes=probes)


def on_success(c: Circuit, policy: Policy = DEFAULT_POLICY) -> Circuit:
    if c.state is CircuitState.HALF_OPEN and c.successes + 1 < policy.half_open_success_threshold:
        return attrs.evolve(c, probes=max(0, c.probes - 1), successes=c.successes + 1)
    return Circuit()
