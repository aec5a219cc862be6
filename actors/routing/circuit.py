"""Passive health per backend and model: a circuit breaker fed by real traffic.

Active checks ask ``/health``; a backend can answer that happily while its
chat route fails. Real calls' failures open the circuit of that (backend,
model) once they say the backend is sick, not that some caller keeps
sending a request it cannot serve: the route must still be failing without
its ``min_callers - 1`` worst callers. Within a ``window`` anchored at its
first failure, the failures of the callers with the most failures are left
out, from the failures and from the calls alike; what is left must hold
at least ``failure_threshold`` failures, at least ``minimum_calls`` calls
and a failed share of at least ``failure_rate``. A failure no request
content can cause (the connection could not be opened) is every caller's
and is never left out. After a cooldown a few calls are let through as
probes (half-open): enough successes close the circuit, a failure opens it
again with a doubled cooldown, capped so a recovered backend is back within
seconds, except a failure of a caller that was left out when it opened (a
"suspect"): that proves nothing about the backend, and the next call probes
again. The numbers come from a ``Policy`` (the config's
``circuit_breaker``), passed in on every event so a reload changes them for
the next event without touching any circuit.

What readers need (state, failures, cooldown, probes) is the ``Circuit``;
what a closed circuit counts (calls, failures per caller) is its
``Window``, kept apart so that its owner can count a success without
publishing anything. Nothing is counted before a window's first failure: a
route with no failure in its window has no circuit (``CLEAN``) and no
window, so a success there costs its caller one lookup.
"""

from __future__ import annotations

from enum import Enum

import attrs
from attrs import frozen

BASE_COOLDOWN = 2.0
MAX_COOLDOWN = 16.0
TRACKED_CALLERS = 16   # callers a window counts one by one (min_callers of them, when that is more)

# Who made a failed call, as the circuit tells callers apart (``actors/call/verdicts.py``: the API key's id,
# else the client's address). These two are not anyone's identity:
ANONYMOUS = "anonymous"          # a call with neither key nor address (in-process, a Unix socket): one caller
EVERY_CALLER = "every caller"    # a failure no request can cause: never left out as one caller's


@frozen
class Policy:
    """How circuits open and close; the defaults are the config's (``circuit_breaker``)."""

    failure_threshold: int = 3            # failures within the window that open a closed circuit
    window: float = 30.0                  # seconds from a window's first failure until it expires
    failure_rate: float = 0.5             # ... and at least this share of the window's calls failed
    minimum_calls: int = 1                # ... out of at least this many calls (1, or up to failure_threshold:
                                          # no more than the failures themselves make)
    min_callers: int = 2                  # ... all three without the failures of the min_callers - 1 worst callers
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
    """A route's circuit as readers see it."""

    state: CircuitState = CircuitState.CLOSED
    failures: int = 0               # failures since the window's first one (open too)
    opened_at: float = 0.0
    cooldown: float = BASE_COOLDOWN
    probes: int = 0                 # half-open: probes in flight
    successes: int = 0              # half-open: probes that succeeded
    suspects: frozenset[str] = frozenset()   # open, half-open: the callers left out when it opened

    def admits(self, now: float, max_probes: int = 1) -> bool:
        """Whether a call may go here now (an open circuit past its cooldown admits a probe,
        a half-open one as many as ``max_probes`` at once)."""
        if self.state is CircuitState.CLOSED:
            return True
        if self.state is CircuitState.HALF_OPEN:
            return self.probes < max_probes
        return now >= self.opened_at + self.cooldown


CLEAN = Circuit()   # a closed circuit with no window open: a route that has none is this one


@frozen
class Window:
    """What a closed circuit counts from its window's first failure until ``window`` after it."""

    began: float                                 # the window's first failure
    calls: int = 0                               # calls that ended in it, its failures included
    tally: tuple[tuple[str, int], ...] = ()      # (caller, failures), in the order of their first failure
    others: int = 0                              # failures never left out: every caller's, and the untracked

    def failed(self, caller: str, tracked: int) -> Window:
        """This window after a failure of ``caller``. When ``tracked`` callers are counted already, the one
        with the fewest failures (the earliest among equals) makes room: its failures go to ``others``."""
        others, tally = self.others, list(self.tally)
        if caller == EVERY_CALLER:
            others += 1
        else:
            for i, (who, n) in enumerate(tally):
                if who == caller:
                    tally[i] = (who, n + 1)
                    break
            else:
                if len(tally) >= tracked:
                    least = min(range(len(tally)), key=lambda i: tally[i][1])
                    others += tally.pop(least)[1]
                tally.append((caller, 1))
        return Window(self.began, self.calls + 1, tuple(tally), others)

    def worst(self, n: int) -> tuple[tuple[str, int], ...]:
        """The ``n`` callers with the most failures (the earliest among equals)."""
        if n <= 0:
            return ()
        return tuple(sorted(self.tally, key=lambda entry: -entry[1])[:n])


def suspects(c: Circuit, w: Window, policy: Policy) -> frozenset[str] | None:
    """The callers to leave out if the closed circuit ``c`` with window ``w`` opens now, or None while the
    route is not failing without them (they are the ``min_callers - 1`` with the most failures)."""
    worst = w.worst(policy.min_callers - 1)
    left_out = sum(n for _, n in worst)
    failures, calls = c.failures - left_out, w.calls - left_out
    if failures >= policy.failure_threshold and calls >= policy.minimum_calls \
            and failures / calls >= policy.failure_rate:
        return frozenset(who for who, _ in worst)
    return None


def proves_nothing(c: Circuit, caller: str) -> bool:
    """Whether a failed probe of ``caller`` says nothing about the backend: ``caller`` is a suspect (its own
    requests may be what fails)."""
    return c.state is CircuitState.HALF_OPEN and caller in c.suspects


def on_failure(c: Circuit, w: Window | None, now: float, policy: Policy = DEFAULT_POLICY,
               caller: str = ANONYMOUS) -> tuple[Circuit, Window | None]:
    """A call by ``caller`` (``EVERY_CALLER``: a failure no request can cause) failed on this route with
    circuit ``c`` and window ``w``: the circuit and the window after it (None: no window open)."""
    if c.state is CircuitState.HALF_OPEN:
        if proves_nothing(c, caller):   # as if the probe had been abandoned
            return on_probe_abandoned(attrs.evolve(c, failures=c.failures + 1)), None
        return Circuit(CircuitState.OPEN, c.failures + 1, now, min(c.cooldown * 2, policy.max_timeout),
                       suspects=c.suspects), None
    if c.state is CircuitState.OPEN:
        return attrs.evolve(c, failures=c.failures + 1), None
    if w is None or now - w.began > policy.window:
        c, w = CLEAN, Window(now)   # a new window starts with this failure
    c, w = Circuit(failures=c.failures + 1), w.failed(caller, max(TRACKED_CALLERS, policy.min_callers))
    left_out = suspects(c, w, policy)
    if left_out is not None:
        return Circuit(CircuitState.OPEN, c.failures, now, policy.timeout, suspects=left_out), None
    return c, w


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


def on_success(c: Circuit, w: Window | None, now: float,
               policy: Policy = DEFAULT_POLICY) -> tuple[Circuit, Window | None]:
    """A call succeeded on this route: a closed window counts it (until it expires: then it is forgotten),
    leaving the circuit itself as it was; anything else closes."""
    if c.state is CircuitState.CLOSED:
        if w is None or now - w.began > policy.window:
            return CLEAN, None
        return c, Window(w.began, w.calls + 1, w.tally, w.others)
    if c.state is CircuitState.HALF_OPEN and c.successes + 1 < policy.half_open_success_threshold:
        return attrs.evolve(c, probes=max(0, c.probes - 1), successes=c.successes + 1), None
    return CLEAN, None
