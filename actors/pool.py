"""BackendPool: the selection state that outlives any one strategy.

In-flight counts and latency averages live here, not in the picker, so a
strategy swapped on reload keeps them. The hot path calls ``choose`` with the
health and discovery views it read; nothing here waits or messages.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Callable, Mapping

import trio

from switchyard.actors.errors import ModelNotFound, NoHealthyBackend
from switchyard.actors.health import HealthView
from switchyard.actors.kv.pick import KvPick, KvRoute
from switchyard.actors.messages import Call
from switchyard.actors.routing.affinity import AffinityKey, CacheAffinity, Placement, affinity_key
from switchyard.actors.routing.candidates import serving
from switchyard.actors.routing.kv_index import KvIndex
from switchyard.actors.routing.strategies import PickContext, make_picker, prompt_prefix
from switchyard.actors.signals import NO_SIGNALS, Signals, SignalTerms
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig, Snapshot, Strategy

LATENCY_SMOOTHING = 0.3  # weight of the newest sample in the moving average
# The calls whose body may carry a prompt_cache_key or a conversation (routing.cache_affinity).
AFFINITY_ENDPOINTS = frozenset({Endpoint.CHAT, Endpoint.RESPONSES, Endpoint.COMPACT})


class BackendPool:
    def __init__(self, snapshot: Snapshot, rng: random.Random | None = None, kv_index: KvIndex | None = None) -> None:
        self.snapshot = snapshot
        self.picker = make_picker(snapshot.selection_strategy, snapshot.consistent_hash, snapshot.prefix_routing)
        self.in_flight: defaultdict[str, int] = defaultdict(int)
        self.latency: dict[str, float] = {}
        self.rng = rng or random.Random()
        self._serving: dict[str, list[BackendConfig]] = {}
        self._dials: dict[str, trio.Semaphore] = {}
        self.dial_saturated: defaultdict[str, int] = defaultdict(int)  # fallback_dial_bound_saturated_total
        self.no_prefill: set[tuple[str, str]] = set()   # (backend, model) pairs that refused a prefill
        self._serving_source: object = None
        self.signals = SignalTerms(snapshot)   # engine load, usage weight, quota: the live-signal terms
        # (backend, reason) -> picks, for routing_*_decisions_total
        self.engine_load_decisions = self.signals.engine_load_decisions
        self.usage_weight_decisions = self.signals.usage_weight_decisions
        self.quota_decisions = self.signals.quota_decisions
        self.affinity = CacheAffinity(snapshot.prefix_routing.virtual_nodes)
        # (backend, key kind, outcome) -> picks, for routing_cache_affinity_decisions_total
        self.affinity_decisions: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        # the KV index (the KvIndexActor's), read by each pick; its (backend, reason) -> routing_kv_decisions_total
        self.kv = KvPick(kv_index or KvIndex())
        self.kv_decisions = self.kv.decisions

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A new revision: in-flight counts and latency averages stay; the strategy is
        rebuilt only if its settings changed; new dials use the new dial limit."""
        old = self.snapshot
        self.snapshot = snapshot
        if (old.selection_strategy, old.consistent_hash, old.prefix_routing) != \
                (snapshot.selection_strategy, snapshot.consistent_hash, snapshot.prefix_routing):
            self.picker = make_picker(snapshot.selection_strategy, snapshot.consistent_hash,
                                      snapshot.prefix_routing)
        if old.fallback.fallback_policy.max_concurrent_dials_per_backend != \
                snapshot.fallback.fallback_policy.max_concurrent_dials_per_backend:
            self._dials = {}  # dials holding old permits finish on the old semaphores
        if old.prefix_routing.virtual_nodes != snapshot.prefix_routing.virtual_nodes:
            self.affinity = CacheAffinity(snapshot.prefix_routing.virtual_nodes)
        self._serving_source = None
        self.signals.reconfigure(snapshot)

    def serving(self, model: str, discovered: Mapping[str, frozenset[str]],
                snapshot: Snapshot | None = None) -> list[BackendConfig]:
        """Backends of ``snapshot`` (a call's own revision; default the newest) serving ``model``."""
        snapshot = snapshot or self.snapshot
        source = (discovered, snapshot)
        if self._serving_source != source:  # a new discovery mapping or config revision
            self._serving = {}
            self._serving_source = source
        found = self._serving.get(model)
        if found is None:
            found = serving(snapshot.backends, model, discovered)
            if len(self._serving) < 10_000:
                self._serving[model] = found
        return found

    def choose(self, call: Call, model: str, health: HealthView, discovered: Mapping[str, frozenset[str]],
               now: float, exclude: frozenset[str] = frozenset(),
               prefer: Callable[[list[BackendConfig]], list[BackendConfig]] | None = None,
               allowed: frozenset[str] | None = None, signals: Signals = NO_SIGNALS,
               placed: Callable[[Placement], None] | None = None,
               kv_routed: Callable[[KvRoute], None] | None = None) -> BackendConfig:
        """A backend for ``model``: visible, serving it, allowed, healthy, circuit closed, not excluded.

        ``allowed`` (the API key's and the client's reach; None: everything) narrows first.
        ``prefer`` (a variant's or the client's ranking) may narrow the admitted set before the
        strategy picks; it runs after health, so it never brings back a backend health ruled out.
        The KV index's scorer (``kv_cache_index``) comes next and may choose outright (``kv_routed``
        hears its verdict); then the live-signal terms (``actors/signals.py``) over what is left; then
        cache affinity, for a call with a key, among the candidates still equal (``placed`` hears where
        it put the call); the strategy picks the rest."""
        candidates = self.serving(model, discovered, call.snapshot)
        if allowed is not None:
            candidates = [b for b in candidates if b.name in allowed]
        if not candidates:
            raise ModelNotFound(f"The model '{model}' does not exist or no backend serves it", param="model")
        healthy = [b for b in candidates if b.name not in exclude and health.admits(b.name, model, now)]
        if not healthy:
            names = ", ".join(b.name for b in candidates)
            raise NoHealthyBackend(f"No healthy backend for model '{model}' (checked: {names})")
        self.signals.admit(call.snapshot, model, healthy, signals, now)
        if prefer is not None:
            healthy = prefer(healthy) or healthy
        consulted = self.kv.consult(call, model, healthy, signals.engines, self.in_flight, now)
        decision = consulted.decision if consulted is not None else None
        if decision is not None and decision.chosen is not None:
            chosen = next(b for b in healthy if b.name == decision.chosen)
        else:
            if decision is not None and decision.keep:
                healthy = [b for b in healthy if b.name in decision.keep]
            chosen = self._pick(call, healthy, signals, now, placed)
        if consulted is not None:
            route = self.kv.settle(consulted, call.snapshot, chosen.name, now)
            if kv_routed is not None:
                kv_routed(route)
        return chosen

    def _pick(self, call: Call, healthy: list[BackendConfig], signals: Signals, now: float,
              placed: Callable[[Placement], None] | None) -> BackendConfig:
        """The live-signal terms, cache affinity and the strategy, over ``healthy``."""
        healthy, decided = self.signals.rank(call.snapshot, healthy, signals, now, self.in_flight)
        if decided is not None:
            return decided
        key = self._affinity_key(call) if len(healthy) > 1 else None
        if key is not None:
            placement = self.affinity.place(healthy, key, self.in_flight,
                                            call.snapshot.prefix_routing.load_factor_epsilon)
            self.affinity_decisions[(placement.backend, placement.kind, placement.outcome)] += 1
            if placed is not None:
                placed(placement)
            return next(b for b in healthy if b.name == placement.backend)
        prefix = None
        cfg = self.snapshot.prefix_routing
        if self.snapshot.selection_strategy is Strategy.PREFIX_AWARE_HASH and cfg.enabled:
            prefix = prompt_prefix(call.payload.get("messages", ()), cfg.max_prefix_length) or None
        ctx = PickContext(random=self.rng.random(), hash_key=call.hash_key, prefix_key=prefix,
                          in_flight=self.in_flight, latency=self.latency)
        return self.picker.pick(healthy, ctx)

    def _affinity_key(self, call: Call) -> AffinityKey | None:
        """The call's ``routing.cache_affinity`` key (its own revision's settings), or None."""
        snap = call.snapshot
        cfg = snap.routing.cache_affinity
        if not cfg.enabled or call.endpoint not in AFFINITY_ENDPOINTS:
            return None
        prefix = snap.prefix_routing
        return affinity_key(call.payload, cfg.key, prefix.max_prefix_length if prefix.enabled else None)

    def dial_bound(self, backend: str) -> trio.Semaphore | None:
        """The permit pool limiting concurrent fallback dials to ``backend`` (None: unlimited)."""
        limit = self.snapshot.fallback.fallback_policy.max_concurrent_dials_per_backend
        if limit == 0:
            return None
        sem = self._dials.get(backend)
        if sem is None:
            sem = self._dials[backend] = trio.Semaphore(limit)
        return sem

    def dispatched(self, backend: str) -> _Dispatched:
        """Counts one call in flight on ``backend`` while entered (``with pool.dispatched(name):``)."""
        return _Dispatched(self, backend)

    def observe_latency(self, backend: str, seconds: float) -> None:
        old = self.latency.get(backend)
        self.latency[backend] = seconds if old is None else old + LATENCY_SMOOTHING * (seconds - old)


class _Dispatched:
    """``BackendPool.dispatched``: a class, not a generator-based context manager, since it stays
    entered for a whole call and a suspended generator per open stream costs about 0.3 KB."""

    __slots__ = ("backend", "pool")

    def __init__(self, pool: BackendPool, backend: str) -> None:
        self.pool, self.backend = pool, backend

    def __enter__(self) -> None:
        self.pool.in_flight[self.backend] += 1

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.pool.in_flight[self.backend] -= 1
