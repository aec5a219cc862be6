"""Passive health per backend and model: a circuit breaker fed by real traffic.

Active checks ask ``/health``; a backend can answer that happily while its
chat route fails. Real calls' failures open the circuit of that (backend,
model) once they say the backend is sick, not that one caller keeps sending
a request it cannot serve: within a ``window`` anchored at its first
failure, at least ``failure_threshold`` failures, at least ``minimum_calls``
calls, a failed share of at least ``failure_rate``, and failures from at
least ``min_callers`` distinct callers. A failure no request content can
cause (the connection could not be opened) counts as every caller's. After
a cooldown a few calls are let through as probes (half-open): enough
successes close the circuit, a failure opens it again with a doubled
cooldown, capped so a recovered backend is back within seconds. The numbers
come from a ``Policy`` (the config's ``circuit_breaker``), passed in on every
event so a reload changes them for the next event without touching any
circuit.

Nothing is counted before a window's first failure: a route with no
failure in its window has no circuit at all (``Circuit()``), so a success
there costs its caller one lookup. A window counts its calls, failures and
(up to ``min_callers`` of) its failing callers until it expires; a success
after that forgets it.
"""

from __future__ import annotations

from enum import Enum

import attrs
from attrs import frozen

BASE_COOLDOWN = 2.0
MAX_COOLDOWN = 16.0

# Who made a failed call, as the circuit tells callers apart (``actors/call/verdicts.py``: the API key's id,
# else the client's address). These two are not anyone's identity:
ANONYMOUS = "anonymous"          # a call with neither key nor address (in-process, a Unix socket): one caller
EVERY_CALLER = "every caller"    # a failure no request can cause: it satisfies min_callers by itself


@frozen
class Policy:
    """How circuits open and close; the defaults are the config's (``circuit_breaker``)."""

    failure_threshold: int = 3            # failures within the window that open a closed circuit
    window: float = 30.0                  # seconds from a window's first failure until it expires
    failure_rate: float = 0.5             # ... and at least this share of the window's calls failed
    minimum_calls: int = 1                # ... out of at least this many calls (1, or up to failure_threshold:
                                          # no more than the failures themselves make)
    min_callers: int = 2                  # ... coming from at least this many callers
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
    first_failure_at: float = 0.0   # when the current window began (its first failure)
    probes: int = 0                 # half-open: probes in flight
    successes: int = 0              # half-open: probes that succeeded
    calls: int = 0                  # calls that ended in the window, its failures included
    callers: frozenset[str] = frozenset()   # the window's failing callers, at most min_callers of them

    def admits(self, now: float, max_probes: int = 1) -> bool:
        """Whether a call may go here now (an open circuit past its cooldown admits a probe,
        a half-open one as many as ``max_probes`` at once)."""
        if self.state is CircuitState.CLOSED:
            return True
        if self.state is CircuitState.HALF_OPEN:
            return self.probes < max_probes
        return now >= self.opened_at + self.cooldown


CLEAN = Circuit()   # a closed circuit with no window open: a route that has none is this one


def _trips(failures: int, calls: int, callers: frozenset[str], policy: Policy) -> bool:
    """Whether a closed window with these counts says the backend, not one caller, is failing."""
    return (failures >= policy.failure_threshold and calls >= policy.minimum_calls
            and failures / calls >= policy.failure_rate
            and (EVERY_CALLER in callers or len(callers) >= policy.min_callers))


def on_failure(c: Circuit, now: float, policy: Policy = DEFAULT_POLICY, caller: str = ANONYMOUS) -> Circuit:
    """A call by ``caller`` (``EVERY_CALLER``: a failure no request can cause) failed on this route."""
    if c.state is CircuitState.HALF_OPEN:
        return Circuit(CircuitState.OPEN, c.failures + 1, now, min(c.cooldown * 2, policy.max_timeout))
    if c.state is CircuitState.OPEN:
        return attrs.evolve(c, failures=c.failures + 1)
    if c.failures == 0 or now - c.first_failure_at > policy.window:
        c = Circuit(first_failure_at=now)   # a new window starts with this failure
    failures, calls, callers = c.failures + 1, c.calls + 1, c.callers
    if caller not in callers and len(callers) < policy.min_callers:   # enough to know there are that many
        callers = callers | {caller}
    if _trips(failures, calls, callers, policy):
        return Circuit(CircuitState.OPEN, failures, now, policy.timeout, c.first_failure_at, calls=calls,
                       callers=callers)
    return Circuit(failures=failures, first_failure_at=c.first_failure_at, calls=calls, callers=callers)


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


def on_success(c: Circuit, now: float, policy: Policy = DEFAULT_POLICY) -> Circuit:
    """A call succeeded on this route: a closed window counts it (until it expires); anything else closes."""
    if c.state is CircuitState.CLOSED:
        if c.failures == 0 or now - c.first_failure_at > policy.window:
            return CLEAN
        return Circuit(failures=c.failures, first_failure_at=c.first_failure_at, calls=c.calls + 1,
                       callers=c.callers)
    if c.state is CircuitState.HALF_OPEN and c.successes + 1 < policy.half_open_success_threshold:
        return attrs.evolve(c, probes=max(0, c.probes - 1), successes=c.successes + 1)
    return CLEAN

