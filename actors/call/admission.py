"""What is settled about a call before its first selection: who may reach what, and the policy.

The RequestActor asks; nothing here reads its state. ``admit`` runs once,
before any selection and before any byte reaches the client, and either
refuses the call or returns the call every attempt (retries and fallback
hops alike) will use:

- the API key's reach: its ``allowed_models`` judged on the name the client
  asked for (and on each fallback chain model), its ``allowed_backends`` on
  every candidate;
- the client's ``provider`` filters (``only``, ``ignore``, ``max_price``),
  applied only to what the key already allows: an intersection, never a
  union; a filter that empties a non-empty set is the client's error (400),
  never a quiet switch to a backend it excluded;
- the ``request_params`` scope of the routed model, applied to the body once
  and refused (``unsupported_request_parameter``) when a backend the call may
  reach cannot carry a field the policy set.

The per-model allowlists (``Reach``, computed once per model when first
asked) narrow ``BackendPool.choose``; the client's ``order``/``sort``
(``provider_ranking``) rank what is left on every attempt.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable

import attrs
import trio

from switchyard.actors.errors import GatewayError, PermissionDenied, UnsupportedRequestParameter
from switchyard.actors.messages import Call
from switchyard.actors.params import (
    Applied,
    Outcome,
    ParamOutcomes,
    apply_policy,
    carried_everywhere,
    check_carriable,
    limited_only,
)
from switchyard.actors.provider_prefs import unsatisfiable
from switchyard.actors.routing import provider_rank, variants
from switchyard.actors.signals import engine_window
from switchyard.config.access import ApiKey
from switchyard.config.endpoints import AUDIO, IMAGES, SCORING, Endpoint
from switchyard.config.schema import BackendConfig, Snapshot

log = logging.getLogger("switchyard.route")

# The policy's parameters a Responses body takes, and their names there.
RESPONSES_NAMES = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_output_tokens"}


if TYPE_CHECKING:
    from switchyard.actors.discovery import ModelDiscoveryActor
    from switchyard.actors.events import CallTrace
    from switchyard.actors.pool import BackendPool
    from switchyard.actors.runtime import Runtime


def _policy_view(call: "Call") -> dict[str, Any]:
    """The body as the policy reads it: a Responses body's max_output_tokens under the chat name."""
    if call.endpoint != Endpoint.RESPONSES or "max_output_tokens" not in call.payload:
        return call.payload
    payload = dict(call.payload)
    payload["max_tokens"] = payload.pop("max_output_tokens")
    return payload


def admit(call: Call, routed: str, variant: variants.Variant | None, refusal: Callable[[], GatewayError | None],
          reach: "Reach", trace: "CallTrace", outcomes: ParamOutcomes) -> Call:
    """Refuse the call (raise its GatewayError), or return it with its reach fixed and its
    policy-shaped body; ``routed`` is the model it is routed as, ``refusal`` says its variant's,
    ``outcomes`` counts what its request_params policy did."""
    key = call.key
    if key is not None:
        _check_models(call, key, variant)
    refused = refusal()
    if refused is not None:
        raise refused
    reach.of(routed, primary=True)
    if call.endpoint == Endpoint.COMPACT:   # compaction takes no generation settings: the policy has nothing to set
        return call
    if call.endpoint == Endpoint.EMBEDDINGS or call.endpoint in IMAGES | SCORING | AUDIO:
        # the policy's parameters are text generation settings: none apply here
        return call
    view = _policy_view(call)
    applied = apply_policy(view, call.snapshot.request_params, routed)
    changed = applied.payload is not view
    outcome = _Outcome(outcomes, routed, trace)
    if call.endpoint == Endpoint.RESPONSES and changed:
        applied = _for_responses(applied, outcome)
    if applied.managed and not applied.managed <= _carried_everywhere(call.snapshot):
        try:
            check_carriable(applied.managed, reach.route_backends(routed), limited_only(applied.tokens))
        except UnsupportedRequestParameter as err:
            outcome("rejected", applied.tokens, err.message)
            raise
    if applied.tokens:
        outcome("applied", applied.tokens)
    if changed:
        return attrs.evolve(call, payload=applied.payload, body=json.dumps(applied.payload).encode(),
                            param_tokens=applied.tokens, managed_params=applied.managed)
    return call


# (a snapshot, what every one of its backends carries): a snapshot never changes, and walking the
# backends a call may reach to check them cost about 38k instructions a call with a policy.
_EVERYWHERE: tuple[Snapshot, frozenset[str]] | None = None


def _carried_everywhere(snapshot: Snapshot) -> frozenset[str]:
    global _EVERYWHERE
    held = _EVERYWHERE
    if held is None or held[0] is not snapshot:
        held = _EVERYWHERE = (snapshot, carried_everywhere(snapshot.backends))
    return held[1]


def _for_responses(applied: Applied, outcome: "_Outcome") -> Applied:
    """The policy's outcome in a Responses body: max_tokens back under its Responses name; a
    field /v1/responses does not take under any name is refused, never sent to be rejected."""
    other = sorted(applied.managed - RESPONSES_NAMES.keys())
    if other:
        err = UnsupportedRequestParameter(
            f"The request parameter policy sets '{other[0]}', which /v1/responses does not take; the "
            f"request is refused rather than sent with a field the API rejects", param=other[0])
        outcome("rejected", applied.tokens, err.message)
        raise err
    payload = dict(applied.payload)
    if "max_tokens" in payload:
        payload["max_output_tokens"] = payload.pop("max_tokens")
    return attrs.evolve(applied, payload=payload)


def _check_models(call: Call, key: ApiKey, variant: variants.Variant | None) -> None:
    """The key's ``allowed_models``: the requested name (a variant's base, since that is what is
    routed), and every name of a ``models`` list an aggregator backend would fall back to."""
    name = variant.base if variant is not None else call.model
    if not key.allows_model(name):
        raise PermissionDenied(f"The API key '{key.id}' may not use the model '{call.model}'",
                               param="model", code="model_not_allowed")
    listed = call.payload.get("models")
    if isinstance(listed, list):
        for i, other in enumerate(listed):
            if not isinstance(other, str) or not key.allows_model(other):
                raise PermissionDenied(f"The API key '{key.id}' may not use the model {other!r} listed in "
                                       f"'models'", param=f"models[{i}]", code="model_not_allowed")


class _Outcome:
    """request_params' applied/rejected outcome, alike in the trace, the log and the metric."""

    def __init__(self, counts: ParamOutcomes, routed: str, trace: "CallTrace") -> None:
        self.counts, self.routed, self.trace = counts, routed, trace

    def __call__(self, outcome: Outcome, tokens: tuple[str, ...], why: str = "") -> None:
        self.counts.add(outcome)
        self.trace.add(f"request_params_{outcome}", model=self.routed, actions=list(tokens))
        if outcome == "rejected":
            log.info("request_params rejected for model %r: %s", self.routed, why)
        else:
            log.debug("request_params applied for model %r: %s", self.routed, ",".join(tokens))


class Reach:
    """The backends a call may use for each model (None: no narrowing), computed once per model.

    Its own cache, asked by admission and by every selection; the call's key,
    provider filters and pin are all it reads of the call.
    """

    def __init__(self, pool: "BackendPool", discovery: "ModelDiscoveryActor", call: Call, trace: "CallTrace") -> None:
        self.pool, self.discovery, self.call, self.trace = pool, discovery, call, trace
        self._allowed: dict[str, frozenset[str] | None] = {}   # model -> backends the key and the client allow

    def of(self, model: str, primary: bool = False) -> frozenset[str] | None:
        """For the client's own model an empty result is refused here; for a
        fallback chain model it only means the hop has no route."""
        if model in self._allowed:
            return self._allowed[model]
        call = self.call
        key, prefs = call.key, call.prefs
        reach: frozenset[str] | None = None
        if key is not None or (prefs is not None and prefs.filters):
            visible = self.pool.serving(model, self.discovery.view, call.snapshot)
            keyed = visible
            if key is not None:
                if not primary and not key.allows_model(model):
                    keyed = []          # a chain model the key may not use: the hop has no route
                else:
                    keyed = [b for b in visible if key.allows_backend(b.name)]
                if primary and visible and not keyed:
                    raise PermissionDenied(
                        f"The API key '{key.id}' may not use any backend that serves the model '{call.model}'",
                        param="model", code="backend_not_allowed")
            chosen = keyed
            if prefs is not None and prefs.filters:
                price = price_of(call.snapshot, model)
                chosen = provider_rank.client_filter(prefs, keyed, price)
                if primary and keyed and not chosen:
                    raise unsatisfiable(call.model, [b.name for b in keyed],
                                        provider_rank.emptied_by(prefs, keyed, price))
            reach = frozenset(b.name for b in chosen)
            if reach != {b.name for b in visible}:
                self.trace.add("reach_narrowed", model=model, allowed=sorted(reach))
        self._allowed[model] = reach
        return reach

    def route_backends(self, routed: str) -> list[BackendConfig]:
        """Every backend this call may reach: its own model's (``routed``) and its fallback chain's."""
        call, pool, discovered = self.call, self.pool, self.discovery.view
        snap = call.snapshot
        models = [routed]
        if snap.fallback.enabled:
            models += [m for m in snap.fallback.fallback_chains.get(routed, ()) if m != routed]
        out: list[BackendConfig] = []
        if call.pin is not None:   # the pin wins over the client's filters, so its backend is reachable too
            pinned = snap.backend(call.pin)
            if pinned is not None and pinned in pool.serving(routed, discovered, snap):
                out.append(pinned)
        for model in models:
            reach = self.of(model, primary=model == routed)
            for b in pool.serving(model, discovered, snap):
                if (reach is None or b.name in reach) and b not in out:
                    out.append(b)
        return out


def price_of(snapshot: Snapshot, model: str) -> Callable[[BackendConfig], tuple[float | None, float | None] | None]:
    """Each backend's (input, output) price for ``model`` from its metadata (None: unknown)."""
    def price(b: BackendConfig) -> tuple[float | None, float | None] | None:
        entry = snapshot.model_entry(model, b.name)
        pricing = entry.metadata.pricing if entry is not None else None
        if pricing is None or (pricing.input_tokens is None and pricing.output_tokens is None):
            return None
        return pricing.input_tokens, pricing.output_tokens
    return price


def provider_ranking(runtime: "Runtime", call: Call, model: str, trace: "CallTrace"
                     ) -> Callable[[list[BackendConfig]], list[BackendConfig]] | None:
    """The client's ``order``/``sort`` over the admitted candidates of every attempt (None: no ranking)."""
    prefs = call.prefs
    if prefs is None or not prefs.ranks:
        return None
    rt, now = runtime, trio.current_time()
    price = price_of(call.snapshot, model)

    def signal(b: BackendConfig) -> float | None:
        if prefs.sort == "price":
            p = price(b)
            return variants.price_per_million(*p) if p is not None else None
        if prefs.sort == "throughput":
            return variants.fresh_throughput(rt.throughput, b.name, now, engine_window(call.snapshot))
        if prefs.sort == "latency":
            return rt.pool.latency.get(b.name)
        return None

    def rank(candidates: list[BackendConfig]) -> list[BackendConfig]:
        top = provider_rank.top_group(prefs, candidates, signal)
        trace.add("provider_ranked", model=model, candidates=[b.name for b in candidates],
                  preferred=[b.name for b in top])
        return top
    return rank
