"""What a call's model name and pin mean: variant suffixes, alias dispatch, ``x-backend``.

The RequestActor asks; nothing here reads its state. An exact alias no backend serves
literally is routed as its canonical id (``actors/routing/aliases.py``); an
``x-backend`` pin sends the first attempt to that backend. With ``proxy.variant_suffixes`` on, a
``base:variant`` name the router does not resolve as itself is routed as
``base`` (``actors/routing/variants.py``): ``:nitro``/``:floor`` narrow this
model's admitted candidates in ``RouteChoice.pick``, ``:thinking`` sets the reasoning
effort, ``:online`` and an unsupported ``:thinking`` are refused before any
selection; the answer carries the requested name and the
``x-continuum-model-variant`` headers. ``RouteChoice.pick`` chooses each attempt's
backend: the pool's choice among what the call may reach, ranked by the
client and the variant, never a fallback target known to lack what the call
needs.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable

import trio

from switchyard.actors.call.admission import price_of, provider_ranking
from switchyard.actors.errors import (
    GatewayError,
    InvalidRequest,
    ModelNotFound,
    NoHealthyBackend,
    PermissionDenied,
    RouteCapabilityUnavailable,
    UnsupportedModelVariant,
)
from switchyard.actors.kv.pick import KvRoute
from switchyard.actors.messages import Call
from switchyard.actors.routing import variants
from switchyard.actors.routing.affinity import Placement
from switchyard.actors.routing.aliases import alias_owner, dispatch_target, serves_literally
from switchyard.actors.routing.candidates import Discovered, public_backends
from switchyard.actors.routing.capabilities import Needs, missing, needs_of
from switchyard.actors.signals import EnginesSaturated, Signals, engine_window
from switchyard.actors.wire import unfit, unfit_refusal
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig

log = logging.getLogger("switchyard.route")

if TYPE_CHECKING:
    from switchyard.actors.call.admission import Reach
    from switchyard.actors.events import CallTrace
    from switchyard.actors.pool import BackendPool
    from switchyard.actors.runtime import Runtime


def resolve_variant(discovered: Discovered, call: Call, trace: "CallTrace") -> variants.Variant | None:
    """The ``base:variant`` the call names, if suffixes are on and the name is not known as itself
    (``discovered``: the discovery actor's view)."""
    # Only /v1/chat/completions reads suffixes; behind other doors a suffixed name is just unknown.
    if not call.snapshot.proxy.variant_suffixes.enabled or call.endpoint != Endpoint.CHAT or call.ingress:
        return None
    found = variants.parse(call.model, lambda name: _known(discovered, call, name))
    if found is not None:
        trace.add("variant_resolved", model=found.base, requested_model=call.model, variant=found.variant)
    return found


def _known(discovered: Discovered, call: Call, name: str) -> bool:
    """Whether the router resolves ``name`` as itself: served or declared, an alias, a catalogue id."""
    snap = call.snapshot
    if any(serves_literally(b, name, discovered) for b in public_backends(snap.backends)):
        return True
    if alias_owner(name, snap) is not None or snap.models.get(name) is not None or name in snap.models.aliases:
        return True
    return any(name in b.model_metadata or name in b.exact_models for b in snap.backends if b.enabled)


def variant_refusal(pool: BackendPool, discovered: Discovered, call: Call, variant: variants.Variant | None,
                    routed: str, searches: bool = False) -> GatewayError | None:
    """Why a variant cannot be answered (``:online`` without a search loop to serve it, ``:thinking``
    without thinking metadata), or None; ``searches``: the Runtime has the providers' clients."""
    v = variant
    if v is None:
        return None
    if v.variant == variants.ONLINE:
        return _online_refusal(pool, discovered, call, v, routed, searches)
    if v.variant == variants.THINKING and not _has_thinking(pool, discovered, call, v, routed):
        return UnsupportedModelVariant(
            f"The model '{v.requested}' asks for the ':thinking' variant, but '{v.base}' has no thinking "
            f"metadata (a thinking pattern); it is not answered as the base model", param="model")
    return None


def _online_refusal(pool: BackendPool, discovered: Discovered, call: Call, v: variants.Variant, routed: str,
                    searches: bool) -> GatewayError | None:
    """``:online`` is served by the buffered search loop only, on a backend that can be given its tool."""
    if call.snapshot.web_search is None or not searches:
        return UnsupportedModelVariant(
            f"The model '{v.requested}' asks for the ':online' variant, but no web-search executor is "
            f"configured; '{v.base}' is not answered without search", param="model")
    if call.stream:
        return UnsupportedModelVariant(
            f"The model '{v.requested}' asks for the ':online' variant on a streamed call; the web-search loop "
            f"runs on buffered calls only (send stream: false), and '{v.base}' is not answered without search",
            param="model")
    serving = pool.serving(routed, discovered, call.snapshot)
    tools = Needs(tools=True)
    if serving and all(missing(tools, call.snapshot.metadata_for(routed, b.name)) for b in serving):
        return UnsupportedModelVariant(
            f"The model '{v.requested}' asks for the ':online' variant, but every backend serving '{v.base}' "
            f"lacks tool calling (its metadata's capabilities), which the web-search loop needs", param="model")
    return None


def _has_thinking(pool: BackendPool, discovered: Discovered, call: Call, variant: variants.Variant,
                  routed: str) -> bool:
    snap = call.snapshot
    names = {variant.base, routed}
    names |= {snap.models.aliases[n] for n in list(names) if n in snap.models.aliases}
    for name in names:
        entries = [snap.model_entry(name)]
        entries += [snap.model_entry(name, b.name) for b in
                    pool.serving(name, discovered, snap)]
        for entry in entries:
            thinking = entry.metadata.thinking if entry is not None else None
            if thinking is not None and thinking.pattern:
                return True
    return False


def dispatch_model(discovered: Discovered, call: Call, name: str, trace: "CallTrace") -> str:
    """The model ``name`` is routed as: itself, or the canonical id of an alias no backend serves literally."""
    canonical = dispatch_target(name, call.snapshot, discovered)
    if canonical is None:
        return name
    log.info("Dispatching a model alias as the canonical id its backend serves: %s -> %s",
             name, canonical, extra={"requested_model": name, "canonical_model": canonical})
    trace.add("alias_dispatched", model=canonical, requested_model=name)
    if call.snapshot.fallback.fallback_chains.get(name):
        log.warning("Model alias %r has a fallback chain, which is ignored: chains are looked up by the "
                    "canonical id %r; key the chain by it", name, canonical)
    return canonical


class RouteChoice:
    """Each attempt's backend for a call routed as ``routed``: the pin, then the pool's choice.

    It keeps only what choosing learns along the call: the capabilities the
    call needs, the routes skipped for lacking one, and whether a variant's
    ranking had data; the call itself is passed in, as admitted.
    """

    def __init__(self, runtime: "Runtime", routed: str, variant: variants.Variant | None, reach: "Reach",
                 trace: "CallTrace") -> None:
        self.runtime, self.routed, self.variant, self.reach, self.trace = runtime, routed, variant, reach, trace
        self._needs: Needs | None = None               # computed on the first fallback dial
        self._skipped: list[dict[str, Any]] = []       # routes ruled out for a missing capability
        self._variant_applied: bool | None = None      # :nitro/:floor: did the last ranking have data
        self.variant_reported = False                  # what the response headers said (for the metric)
        self.holder: str | None = None                 # the backend holding the call's previous_response_id

    def _prefer(self, call: Call, model: str) -> Callable[[list[BackendConfig]], list[BackendConfig]] | None:
        """The ranking of a :nitro or :floor call, for its own model only (chain hops get none)."""
        v = self.variant
        if v is None or v.variant not in variants.RANKED or model != self.routed:
            return None
        now, price = trio.current_time(), price_of(call.snapshot, model)

        def score(b: BackendConfig) -> float | None:
            if v.variant == variants.NITRO:
                return variants.fresh_throughput(self.runtime.throughput, b.name, now, engine_window(call.snapshot))
            known = price(b)
            return variants.price_per_million(*known) if known is not None else None

        def prefer(candidates: list[BackendConfig]) -> list[BackendConfig]:
            narrowed = variants.narrow(candidates, score, "max" if v.variant == variants.NITRO else "min")
            self._variant_applied = narrowed is not None
            self.trace.add("variant_ranked", model=model, variant=v.variant, applied=narrowed is not None,
                           candidates=[b.name for b in candidates],
                           preferred=[b.name for b in narrowed] if narrowed is not None else None)
            return narrowed if narrowed is not None else candidates
        return prefer

    def variant_headers(self, model: str) -> list[tuple[bytes, bytes]]:
        """The ``x-continuum-model-variant`` headers of an answer from ``model``."""
        v = self.variant
        if v is None:
            return []
        if model != self.routed:
            applied = False                      # a chain hop: the suffix is not inherited
        elif v.variant in variants.RANKED:
            applied = bool(self._variant_applied)
        else:
            applied = True
        self.variant_reported = applied
        return [(b"x-continuum-model-variant", v.variant.encode()),
                (b"x-continuum-model-variant-applied", b"true" if applied else b"false")]

    def pinned(self, call: Call, model: str) -> BackendConfig | None:
        """The ``x-backend`` pin for the first attempt.

        A pin to a backend that does not exist, is not public or does not
        serve the model is the client's mistake (400); one the API key may not
        use is refused (403). The pin wins over the client's provider filters. A pinned backend that
        cannot take calls right now (unhealthy, circuit open, its engine over the
        admission gate's KV threshold) gives the pin up:
        the call is routed as usual rather than failed.
        """
        rt = self.runtime
        if call.key is not None and not call.key.allows_backend(call.pin or ""):
            raise PermissionDenied(f"The API key '{call.key.id}' may not use the backend '{call.pin}' named by "
                                   f"x-backend", param="x-backend", code="backend_not_allowed")
        serving = {b.name: b for b in rt.pool.serving(model, rt.discovery.view, call.snapshot)}
        backend = serving.get(call.pin or "")
        if backend is not None and unfit(call, [backend]):   # a backend of a type that cannot take this endpoint
            raise unfit_refusal(call, model, [backend])
        if backend is None:
            raise InvalidRequest(f"The backend '{call.pin}' named by x-backend does not serve the model "
                                 f"'{call.model}'", param="x-backend", code="invalid_backend_pin")
        now = trio.current_time()
        if not rt.health.view.admits(backend.name, model, now):
            self.trace.add("pin_unavailable", backend=backend.name, model=model)
            return None
        try:   # the admission gate holds for a pin too: a saturated engine gives the pin up
            rt.pool.signals.admit(call.snapshot, model, [backend], Signals(rt.engine_stats.view, rt.quota.view), now)
        except EnginesSaturated:
            self.trace.add("pin_unavailable", backend=backend.name, model=model, reason="engines_saturated")
            return None
        self.trace.add("pinned", backend=backend.name, model=model)
        self._variant_applied = False  # a pinned attempt is not ranked
        return backend

    def pick(self, call: Call, model: str, tried: set[str], fallback: bool = False) -> BackendConfig:
        """A backend for ``model``; on a fallback dial, never one known to lack what the call needs."""
        rt = self.runtime
        exclude = set(tried)
        serving = rt.pool.serving(model, rt.discovery.view, call.snapshot)
        wrong = unfit(call, serving)
        if wrong:   # a backend type without the call's API (/v1/responses) is no candidate
            if model == self.routed and len(wrong) == len(serving):
                raise unfit_refusal(call, model, wrong)
            exclude.update(b.name for b in wrong)
        # An :online round needs a backend it can give its tool to, on every dial (the loop's own rule).
        if fallback or self.variant is not None and self.variant.variant == variants.ONLINE:
            if self._needs is None:
                self._needs = needs_of(call.payload)
            for b in rt.pool.serving(model, rt.discovery.view, call.snapshot):
                lacks = missing(self._needs, call.snapshot.metadata_for(model, b.name))
                if lacks and b.name not in exclude:
                    exclude.add(b.name)
                    skip = {"backend": b.name, "model": model, "missing": lacks}
                    if skip not in self._skipped:
                        self._skipped.append(skip)
                        self.trace.add("route_skipped", backend=b.name, model=model, missing=lacks)
        try:
            return rt.pool.choose(call, model, rt.health.view, rt.discovery.view, trio.current_time(),
                                  exclude=frozenset(exclude), prefer=self._ranking(call, model),
                                  allowed=self.reach.of(model), signals=Signals(rt.engine_stats.view, rt.quota.view),
                                  placed=lambda p: self._placed(p, model),
                                  kv_routed=lambda r: self._kv_routed(r, model))
        except (ModelNotFound, NoHealthyBackend) as err:
            if model != call.model and model == self.routed:
                raise _naming(err, model, call.model) from None  # the client's name, not ours
            raise

    def _placed(self, placement: Placement, model: str) -> None:
        """``routing.cache_affinity`` chose the backend: which key kind, its home, whether the load bound moved it
        (never the key itself: a prompt or a client's identifier)."""
        self.trace.add("cache_affinity", backend=placement.backend, model=model, key=placement.kind,
                       home=placement.home, moved=placement.moved)

    def _kv_routed(self, route: KvRoute, model: str) -> None:
        """The KV index was consulted: its reason (None: one candidate), the prompt's full blocks and the
        leading blocks each candidate held (None: its state is unknown); never the prompt or its keys."""
        self.trace.add("kv_route", backend=route.backend, model=model, reason=route.reason,
                       total_blocks=route.total_blocks, held=dict(route.held))

    def _ranking(self, call: Call, model: str) -> Callable[[list[BackendConfig]], list[BackendConfig]] | None:
        """The client's provider ranking, then a variant's narrowing inside its best group."""
        client, variant = provider_ranking(self.runtime, call, model, self.trace), self._prefer(call, model)
        ranking = client or variant if client is None or variant is None else \
            (lambda candidates: variant(client(candidates)))
        holder = self.holder
        if holder is None or model != self.routed:
            return ranking

        def stored_first(candidates: list[BackendConfig]) -> list[BackendConfig]:
            """The backend holding ``previous_response_id`` when it can take the call; else the usual ranking."""
            own = [b for b in candidates if b.name == holder]
            if own:
                self.trace.add("stored_response_backend", backend=holder, model=model)
                return own
            return ranking(candidates) if ranking is not None else candidates
        return stored_first

    def fail_closed(self, cause: GatewayError) -> GatewayError:
        """The error when nothing is left: typed as a capability gap if routes were skipped for one."""
        if not self._skipped:
            return cause
        return RouteCapabilityUnavailable(
            "No fallback route has what this request needs; refusing a degraded answer",
            details={"skipped": self._skipped, "cause": _error_object(cause)})


def _error_object(err: GatewayError) -> Any:
    """The error object the client would have got (a backend's own, when it sent one)."""
    try:
        return json.loads(err.body()).get("error")
    except (ValueError, AttributeError):
        return err.envelope()["error"]


def _naming(err: GatewayError, routed: str, requested: str) -> GatewayError:
    """``err`` about the canonical id ``routed``, reworded to name the model the client asked for."""
    return err.evolve(message=err.message.replace(f"'{routed}'", f"'{requested}'"))
