"""The live-signal terms of selection, applied by the BackendPool after health and preferences.

Order within one pick (``routing`` config; each term off by default):

1. the admission gate (``engine_load.admission``), before any preference
   narrows the set: when every healthy candidate reports fresh KV usage above the threshold, the pick is refused
   with ``EnginesSaturated``, a retryable 503 the route loop treats like "no
   healthy backend" (so a fallback chain takes over);
   (the pool then applies the client's preferences and the KV-overlap scorer,
   ``actors/kv/pick.py``, whose choice ends the pick; what it leaves goes on)
2. engine load (``engine_load``): the candidates with the lightest fresh
   queue and KV pressure, once the spread leaves the dead band;
3. usage weight (``usage_weight``, with ``quota_aware`` observations): the
   one backend with strictly the most declared or observed quota left
   decides the pick outright;
4. otherwise the configured strategy picks among what is left.

The pure decisions live in ``actors/routing/engine_load.py``,
``usage_weight.py`` and ``quota.py``; this module reads the views, counts
each decision for ``/metrics`` and nothing else.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

from attrs import frozen

from switchyard.actors.errors import NoHealthyBackend
from switchyard.actors.routing import engine_load, quota, usage_weight
from switchyard.actors.routing.engine_metrics import EngineSnapshot
from switchyard.actors.routing.quota import QuotaSnapshot
from switchyard.config.schema import BackendConfig, Snapshot

Decisions = defaultdict[tuple[str, str], int]


class EnginesSaturated(NoHealthyBackend):
    """Every candidate engine reports its KV cache full: queueing there would only wait."""

    code = "engines_saturated"


@frozen
class Signals:
    """What the terms read for one pick: the views as the caller found them."""

    engines: Mapping[str, EngineSnapshot] = {}
    quota: Mapping[str, QuotaSnapshot] = {}


NO_SIGNALS = Signals()


class SignalTerms:
    """The pool's live-signal state: the usage meter and the decision counts."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.meter = usage_weight.TumblingMeter(snapshot.routing.usage_weight.staleness_interval)
        self.engine_load_decisions: Decisions = defaultdict(int)
        self.usage_weight_decisions: Decisions = defaultdict(int)
        self.quota_decisions: Decisions = defaultdict(int)

    def reconfigure(self, snapshot: Snapshot) -> None:
        self.meter.reconfigure(snapshot.routing.usage_weight.staleness_interval, (b.name for b in snapshot.backends))

    def record_usage(self, backend: str, tokens: int, now: float) -> None:
        """One attempt that completed and reported its token usage."""
        self.meter.record(backend, tokens, now)

    def admit(self, snapshot: Snapshot, model: str, healthy: Sequence[BackendConfig], signals: Signals,
              now: float) -> None:
        """The admission gate over every healthy candidate (before any preference narrows them)."""
        load = snapshot.routing.engine_load
        if not load.admission.enabled:
            return
        names = [b.name for b in healthy]
        if engine_load.admission_refuses(names, signals.engines, now, threshold=load.admission.kv_usage_threshold,
                                         window=engine_window(snapshot)):
            raise EnginesSaturated(
                f"Every backend for model '{model}' reports its KV cache above "
                f"{load.admission.kv_usage_threshold:g} (checked: {', '.join(names)}); retry shortly")

    def rank(self, snapshot: Snapshot, candidates: list[BackendConfig], signals: Signals, now: float,
             in_flight: Mapping[str, int] = {}) -> tuple[list[BackendConfig], BackendConfig | None]:
        """The candidates left after engine load, and the backend usage weight chose (None: the strategy picks)."""
        routing = snapshot.routing
        load = routing.engine_load
        if load.enabled and len(candidates) > 1:
            decision = engine_load.rank([b.name for b in candidates], signals.engines, now,
                                        window=engine_window(snapshot),
                                        weight=load.engine_load_weight, abs_threshold=load.balance_abs_threshold,
                                        rel_threshold=load.balance_rel_threshold)
            _count(self.engine_load_decisions, decision.reasons)
            if decision.ranked:
                keep = set(decision.preferred)
                candidates = [b for b in candidates if b.name in keep]
        usage = routing.usage_weight
        if not usage.enabled or len(candidates) < 2:
            return candidates, None
        observed: Mapping[str, QuotaSnapshot] = {}
        if routing.quota_aware.enabled:
            observed, reasons = quota.observe_all((b.name for b in candidates), signals.quota, now,
                                                  routing.quota_aware.ttl)
            _count(self.quota_decisions, reasons)
        fractions = usage_weight.remaining_fractions(candidates, self.meter, observed, now, in_flight)
        chosen, reasons = usage_weight.decide([b.name for b in candidates], fractions, usage.weight)
        _count(self.usage_weight_decisions, reasons)
        if chosen is None:
            return candidates, None
        return candidates, next(b for b in candidates if b.name == chosen)


def engine_window(snapshot: Snapshot) -> float:
    """How old an engine snapshot (or the throughput it gave) may be and still count."""
    return engine_load.max_age(snapshot.engine_stats.interval, snapshot.routing.engine_load.max_staleness_intervals)


def _count(counts: Decisions, reasons: Mapping[str, str]) -> None:
    for backend, reason in reasons.items():
        counts[(backend, reason)] += 1
