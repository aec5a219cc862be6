"""What is settled about a call before its first selection: who may reach what, and the policy.

Part of the RequestActor (mixed in). ``admit`` runs once, before any
selection and before any byte reaches the client, and either refuses the
call or fixes what every attempt (retries and fallback hops alike) will use:

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

The per-model allowlists computed here narrow ``BackendPool.choose``; the
client's ``order``/``sort`` rank what is left on every attempt.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Callable

import attrs
import trio

from switchyard.actors.messages import Call
from switchyard.actors.routing import provider_rank, variants
from switchyard.actors.signals import engine_window
from switchyard.config.access import ApiKey
from switchyard.config.schema import BackendConfig
from switchyard.actors.errors import PermissionDenied, UnsupportedRequestParameter
from switchyard.actors.params import Applied, apply_policy, check_carriable, limited_only
from switchyard.actors.provider_prefs import unsatisfiable

log = logging.getLogger("switchyard.route")

# The policy's parameters a Responses body takes, and their names there.
RESPONSES_NAMES = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_output_tokens"}


def _policy_view(call: "Call") -> dict:
    """The body as the policy reads it: a Responses body's max_output_tokens under the chat name."""
    if call.endpoint != "responses" or "max_output_tokens" not in call.payload:
        return call.payload
    payload = dict(call.payload)
    payload["max_tokens"] = payload.pop("max_output_tokens")
    return payload

if TYPE_CHECKING:
    from switchyard.actors.call.request import RequestActor

    _Base = RequestActor
else:
    _Base = object


class AdmissionMixin(_Base):
    def admit(self) -> None:
        """Refuse the call (raise its GatewayError), or fix its reach and its policy-shaped body."""
        call = self.call
        key = call.key
        if key is not None:
            self._check_models(key)
        refusal = self._variant_refusal()
        if refusal is not None:
            raise refusal
        self._reach(self.model, primary=True)
        if call.endpoint == "embeddings":   # the policy's parameters are generation settings: none apply here
            return
        view = _policy_view(call)
        applied = apply_policy(view, call.snapshot.request_params, self.model)
        changed = applied.payload is not view
        if call.endpoint == "responses" and changed:
            applied = self._for_responses(applied)
        if applied.managed:
            try:
                check_carriable(applied.managed, self._route_backends(), limited_only(applied.tokens))
            except UnsupportedRequestParameter as err:
                self._policy_outcome("rejected", applied.tokens, err.message)
                raise
        if applied.tokens:
            self._policy_outcome("applied", applied.tokens)
        if changed:
            self.call = attrs.evolve(call, payload=applied.payload, body=json.dumps(applied.payload).encode(),
                                     param_tokens=applied.tokens, managed_params=applied.managed)

    def _for_responses(self, applied: Applied) -> Applied:
        """The policy's outcome in a Responses body: max_tokens back under its Responses name; a
        field /v1/responses does not take under any name is refused, never sent to be rejected."""
        other = sorted(applied.managed - RESPONSES_NAMES.keys())
        if other:
            err = UnsupportedRequestParameter(
                f"The request parameter policy sets '{other[0]}', which /v1/responses does not take; the "
                f"request is refused rather than sent with a field the API rejects", param=other[0])
            self._policy_outcome("rejected", applied.tokens, err.message)
            raise err
        payload = dict(applied.payload)
        if "max_tokens" in payload:
            payload["max_output_tokens"] = payload.pop("max_tokens")
        return attrs.evolve(applied, payload=payload)

    def _check_models(self, key: ApiKey) -> None:
        """The key's ``allowed_models``: the requested name (a variant's base, since that is what is
        routed), and every name of a ``models`` list an aggregator backend would fall back to."""
        call = self.call
        name = self.variant.base if self.variant is not None else call.model
        if not key.allows_model(name):
            raise PermissionDenied(f"The API key '{key.id}' may not use the model '{call.model}'",
                                   param="model", code="model_not_allowed")
        listed = call.payload.get("models")
        if isinstance(listed, list):
            for i, other in enumerate(listed):
                if not isinstance(other, str) or not key.allows_model(other):
                    raise PermissionDenied(f"The API key '{key.id}' may not use the model {other!r} listed in "
                                           f"'models'", param=f"models[{i}]", code="model_not_allowed")

    def _policy_outcome(self, outcome: str, tokens: tuple[str, ...], why: str = "") -> None:
        """request_params' applied/rejected outcome, alike in the trace, the log and the metric."""
        counts = self.runtime.request_params_outcomes
        counts[outcome] = counts.get(outcome, 0) + 1
        self.trace.add(f"request_params_{outcome}", model=self.model, actions=list(tokens))
        if outcome == "rejected":
            log.info("request_params rejected for model %r: %s", self.model, why)
        else:
            log.debug("request_params applied for model %r: %s", self.model, ",".join(tokens))

    def _reach(self, model: str, primary: bool = False) -> frozenset[str] | None:
        """The backends this call may use for ``model`` (None: no narrowing), computed once per model.

        For the client's own model an empty result is refused here; for a
        fallback chain model it only means the hop has no route.
        """
        if model in self._allowed:
            return self._allowed[model]
        call, rt = self.call, self.runtime
        key, prefs = call.key, call.prefs
        reach: frozenset[str] | None = None
        if key is not None or (prefs is not None and prefs.filters):
            visible = rt.pool.serving(model, rt.discovery.view, call.snapshot)
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
                price = self._price_of(model)
                chosen = provider_rank.client_filter(prefs, keyed, price)
                if primary and keyed and not chosen:
                    raise unsatisfiable(call.model, [b.name for b in keyed],
                                        provider_rank.emptied_by(prefs, keyed, price))
            reach = frozenset(b.name for b in chosen)
            if reach != {b.name for b in visible}:
                self.trace.add("reach_narrowed", model=model, allowed=sorted(reach))
        self._allowed[model] = reach
        return reach

    def _route_backends(self) -> list[BackendConfig]:
        """Every backend this call may reach: its own model's and its fallback chain's."""
        call, rt = self.call, self.runtime
        snap = call.snapshot
        models = [self.model]
        if snap.fallback.enabled:
            models += [m for m in snap.fallback.fallback_chains.get(self.model, ()) if m != self.model]
        out: list[BackendConfig] = []
        if call.pin is not None:   # the pin wins over the client's filters, so its backend is reachable too
            pinned = snap.backend(call.pin)
            if pinned is not None and pinned in rt.pool.serving(self.model, rt.discovery.view, snap):
                out.append(pinned)
        for model in models:
            reach = self._reach(model, primary=model == self.model)
            for b in rt.pool.serving(model, rt.discovery.view, snap):
                if (reach is None or b.name in reach) and b not in out:
                    out.append(b)
        return out

    def _price_of(self, model: str) -> Callable[[BackendConfig], tuple[float | None, float | None] | None]:
        snap = self.call.snapshot

        def price(b: BackendConfig) -> tuple[float | None, float | None] | None:
            entry = snap.model_entry(model, b.name)
            pricing = entry.metadata.pricing if entry is not None else None
            if pricing is None or (pricing.input_tokens is None and pricing.output_tokens is None):
                return None
            return pricing.input_tokens, pricing.output_tokens
        return price

    def _provider_rank(self, model: str) -> Callable[[list[BackendConfig]], list[BackendConfig]] | None:
        """The client's ``order``/``sort`` over the admitted candidates of every attempt (None: no ranking)."""
        prefs = self.call.prefs
        if prefs is None or not prefs.ranks:
            return None
        rt, now = self.runtime, trio.current_time()
        price = self._price_of(model)

        def signal(b: BackendConfig) -> float | None:
            if prefs.sort == "price":
                p = price(b)
                return variants.price_per_million(*p) if p is not None else None
            if prefs.sort == "throughput":
                return variants.fresh_throughput(rt.throughput, b.name, now, engine_window(self.call.snapshot))
            if prefs.sort == "latency":
                return rt.pool.latency.get(b.name)
            return None

        def rank(candidates: list[BackendConfig]) -> list[BackendConfig]:
            top = provider_rank.top_group(prefs, candidates, signal)
            self.trace.add("provider_ranked", model=model, candidates=[b.name for b in candidates],
                           preferred=[b.name for b in top])
            return top
        return rank
