"""Usage-weighted selection: prefer the backend with the most of its provider quota left.

A backend may declare what its provider allows (``provider_tpm``,
``provider_rpm``); the router meters what it sent there itself in tumbling
windows of ``routing.usage_weight.staleness_interval``. A candidate's score
is ``weight * remaining fraction``; the term picks a backend only when one is
STRICTLY better than every other, and otherwise leaves the pick to the
configured strategy. Declarations are not enforced: past the limit the
fraction is 0.0 and the backend is still dispatched to.

Windows: window ``k`` covers ``[k * interval, (k + 1) * interval)`` on the
clock the caller passes (``now // interval``), so a window boundary is an
exact instant independent of traffic, and the instant itself belongs to the
new window. A new meter (a restart) starts every backend at zero.

Budget per window: the declared per-minute limits are scaled to the window,
``limit * interval / 60``; with the default 60 s window that is the declared
value itself.

Pure: no clock, no I/O, no trio. Time comes in as an argument.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol, Sequence

from attrs import frozen

# Reasons for routing_usage_weight_decisions_total{backend,reason}, one per candidate per pick.
APPLIED = "applied"                        # the term decided the pick; this backend was ranked in it
NO_DECLARATION = "no_declaration"          # no declared limit and no fresh observed quota: score 0.0
NO_DIFFERENTIATION = "no_differentiation"  # ranked, but no candidate was strictly better than all others
REASONS = (APPLIED, NO_DECLARATION, NO_DIFFERENTIATION)

MINUTE = 60.0


@frozen
class Used:
    tokens: int = 0
    requests: int = 0      # completed attempts that reported usage


@frozen
class _Window:
    index: int
    used: Used


class TumblingMeter:
    """Per-backend token and request counts in the current tumbling window.

    Time comes in as an argument; the owner (the pool) keeps one meter and
    records from the request path, which never waits on it.
    """

    def __init__(self, interval: float) -> None:
        if not interval > 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self._windows: dict[str, _Window] = {}

    def window(self, now: float) -> int:
        return int(now // self.interval)

    def record(self, backend: str, tokens: int, now: float) -> None:
        """One completed attempt that reported ``tokens`` of usage."""
        index = self.window(now)
        current = self._windows.get(backend)
        base = current.used if current is not None and current.index == index else Used()
        self._windows[backend] = _Window(index, Used(base.tokens + max(0, tokens), base.requests + 1))

    def used(self, backend: str, now: float) -> Used:
        current = self._windows.get(backend)
        if current is None or current.index != self.window(now):
            return Used()
        return current.used

    def reconfigure(self, interval: float, backends: Iterable[str]) -> None:
        """A new window length restarts every count; backends no longer configured are forgotten."""
        if not interval > 0:
            raise ValueError("interval must be positive")
        keep = set(backends) if interval == self.interval else set()
        self.interval = interval
        self._windows = {n: w for n, w in self._windows.items() if n in keep}


class ObservedQuota(Protocol):
    """The observed axes ``remaining_fraction`` reads; ``actors.routing.quota.QuotaSnapshot`` fits."""

    @property
    def requests_ratio(self) -> float | None: ...
    @property
    def tokens_ratio(self) -> float | None: ...


class Declares(Protocol):
    """A backend's declarations; ``BackendConfig`` fits."""

    @property
    def name(self) -> str: ...
    @property
    def provider_tpm(self) -> int | None: ...
    @property
    def provider_rpm(self) -> int | None: ...


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def _left(per_minute: int, spent: int, window: float) -> float:
    budget = per_minute * window / MINUTE
    return _clamp((budget - spent) / budget)


def remaining_fraction(declared_tpm: int | None, declared_rpm: int | None, used: Used,
                       observed: ObservedQuota | None = None, *, window: float = MINUTE) -> float | None:
    """The smallest remaining fraction over the axes known, 0..1; None when no axis is known.

    ``observed`` must already be fresh (see ``actors.routing.quota.observed``):
    each of its axes REPLACES the local estimate for that axis, so a backend
    with observed data takes part without declaring anything.
    """
    tokens = observed.tokens_ratio if observed is not None else None
    if tokens is None and declared_tpm:
        tokens = _left(declared_tpm, used.tokens, window)
    requests = observed.requests_ratio if observed is not None else None
    if requests is None and declared_rpm:
        requests = _left(declared_rpm, used.requests, window)
    axes = [_clamp(a) for a in (tokens, requests) if a is not None]
    return min(axes) if axes else None


def spent(used: Used, busy: int) -> Used:
    """``used`` plus ``busy`` attempts still in flight, each one request at the window's mean tokens.

    The meter learns an attempt's tokens only when it completes; counting the
    ones in flight keeps a burst from all going to the backend that looked
    least used before any of it finished."""
    if not busy:
        return used
    per_request = used.tokens / used.requests if used.requests else 0.0
    return Used(used.tokens + round(busy * per_request), used.requests + busy)


def remaining_fractions(backends: Sequence[Declares], meter: TumblingMeter, observed: Mapping[str, ObservedQuota],
                        now: float, in_flight: Mapping[str, int] = {}) -> dict[str, float | None]:
    """``remaining_fraction`` of each backend at ``now``; ``observed`` holds only fresh, usable snapshots."""
    return {b.name: remaining_fraction(b.provider_tpm, b.provider_rpm,
                                       spent(meter.used(b.name, now), in_flight.get(b.name, 0)),
                                       observed.get(b.name), window=meter.interval)
            for b in backends}


def decide(candidates: Sequence[str], fractions: Mapping[str, float | None],
           weight: float) -> tuple[str | None, dict[str, str]]:
    """The backend the term picks, or None to let the strategy pick; and each candidate's reason.

    Score = ``weight * fraction``; no fraction (nothing declared or observed)
    scores exactly 0.0, as does an exhausted budget. Only a candidate
    strictly above every other decides; a tie at the top, a single
    candidate, or weight 0 leaves the pick to the strategy.
    """
    reasons: dict[str, str] = {}
    score: dict[str, float] = {}
    for name in candidates:
        fraction = fractions.get(name)
        reasons[name] = NO_DECLARATION if fraction is None else NO_DIFFERENTIATION
        score[name] = weight * fraction if fraction is not None else 0.0
    if len(score) < 2:
        return None, reasons
    best = max(score.values())
    leaders = [n for n, s in score.items() if s == best]
    if len(leaders) != 1:
        return None, reasons
    for name in candidates:
        if reasons[name] != NO_DECLARATION:
            reasons[name] = APPLIED
    return leaders[0], reasons
