"""SmartRouter: ``model: "auto"`` becomes a model, before the RequestActor is built.

The pipeline is classify (ClassifierActor) -> policy (first match) -> model
in tier (``actors/routing/smart_policy.py``). The candidate pool is the
user-facing model list seen through the caller's key and the health view,
so a key never gets a model it may not use, and admission checks the
chosen model again like any other. The decision is fixed for the whole
call: retries and fallback work on the chosen model as if the client had
named it.
"""

from __future__ import annotations

import json
import logging
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Protocol

import attrs
import trio
from attrs import frozen

from switchyard.actors.classifier import ClassifierActor, Verdict, shadow_header
from switchyard.actors.errors import NoHealthyBackend, RouteCapabilityUnavailable
from switchyard.actors.messages import Call
from switchyard.actors.routing.classification import Classification
from switchyard.actors.routing.smart_policy import Choice, RequestFacts, choose, match_policy
from switchyard.actors.routing.tiers import CandidatePool, TierCache, candidate_pool
from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.config.schema import Snapshot
from switchyard.config.smart_routing import MAX_HEADER_VALUE, RoutingPolicy

if TYPE_CHECKING:
    from switchyard.actors.discovery import ModelDiscoveryActor
    from switchyard.actors.health import BackendHealthActor
    from switchyard.actors.ports import Upstream
    from switchyard.actors.usage import UsageLedger
    from switchyard.config.access import ApiKey

log = logging.getLogger("switchyard.smart_routing")

BYPASS = b"x-smart-route-bypass"
DEFAULT_POLICY = "(default_tier)"   # no policy matched: default_tier; not a name a policy can collide with


@frozen
class Decision:
    """One smart-routing decision; what ``/admin/smart-routing/simulate`` returns and the trace records."""

    verdict: Verdict
    policy: RoutingPolicy | None
    choice: Choice | None
    input_tokens: int | None
    pool: CandidatePool

    @property
    def classification(self) -> Classification:
        return self.verdict.result

    def describe(self) -> dict[str, Any]:
        c = self.classification
        return {
            "classification": {"complexity": c.complexity, "domain": c.domain, "confidence": c.confidence,
                               "required_capabilities": sorted(c.required_capabilities), "language": c.language,
                               "score": c.score, "source": c.source, "signals": list(c.signals)},
            "method": self.verdict.method, "fallback": self.verdict.fallback,
            "shadow": None if self.verdict.shadow is None else {
                "complexity": self.verdict.shadow.complexity, "domain": self.verdict.shadow.domain,
                "confidence": self.verdict.shadow.confidence, "source": self.verdict.shadow.source},
            "policy": self.policy.name if self.policy is not None else None,
            "tier": self.choice.tier if self.choice is not None else None,
            "requested_tier": self.choice.requested_tier if self.choice is not None else None,
            "model": self.choice.model if self.choice is not None else None,
            "reason": self.choice.reason if self.choice is not None else None,
            "input_tokens": self.input_tokens,
        }


def bypassed(headers: Mapping[bytes, bytes]) -> bool:
    return headers.get(BYPASS, b"").strip().lower() == b"true"


def uses_input_tokens(policies: tuple[RoutingPolicy, ...]) -> bool:
    return any(p.when.input_tokens is not None for p in policies)


class Routable(Protocol):
    """What smart routing needs of the Runtime: the revision, the views it picks by, the classifier's wire."""

    snapshot: Snapshot
    health: "BackendHealthActor"
    discovery: "ModelDiscoveryActor"
    upstream: "Upstream"
    usage: "UsageLedger"


class SmartRouter:
    def __init__(self, runtime: Routable) -> None:
        self.runtime = runtime
        self.classifier = ClassifierActor(runtime.snapshot, runtime.upstream, runtime.usage)
        self.tiers = TierCache()
        self._tiers_for: object = None
        self.decisions: dict[tuple[str, str], int] = {}     # (policy name or DEFAULT_POLICY, tier) -> calls

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A reload (or an admin edit): rebuilt classifier tables, and inferred tiers forgotten."""
        self.classifier.reconfigure(snapshot)
        self.tiers.clear()

    def applies(self, call: Call, headers: Mapping[bytes, bytes]) -> bool:
        """Whether ``call`` goes through smart routing. The bypass header stops the classifier's own
        calls from being classified again when its backend is this router; under ``intercept_all``
        it is honoured only for the classifier's model, so a client cannot use it to step around
        the policies that route every request."""
        sr = call.snapshot.smart_routing
        if not sr.enabled or not (sr.intercept_all or call.model == sr.virtual_model):
            return False
        if bypassed(headers):
            return sr.intercept_all and call.model != sr.classifier.llm.model
        return True

    def pool(self, snapshot: Snapshot, key: "ApiKey | None") -> CandidatePool:
        rt = self.runtime
        if self._tiers_for is not snapshot.smart_routing:   # a new revision's profiles: infer afresh
            self.tiers.clear()
            self._tiers_for = snapshot.smart_routing
        view, now = rt.health.view, trio.current_time()
        return candidate_pool(snapshot, rt.discovery.view, lambda name, model: view.admits(name, model, now),
                              key, self.tiers)

    async def decide(self, snapshot: Snapshot, payload: Mapping[str, Any], *, key: "ApiKey | None",
                     key_tier: str | None, org: str | None, headers: Mapping[str, str], request_id: str,
                     load: str = "normal", pin: str | None = None, record: bool = True) -> Decision:
        """The whole decision, without dispatching; ``pin`` (``x-backend``) keeps only the models that
        backend serves; ``record`` False leaves the counters alone (the admin simulate)."""
        sr = snapshot.smart_routing
        view = self.runtime.health.view
        verdict = await self.classifier.classify(snapshot, payload, request_id=request_id,
                                                 key_id=key.id if key is not None else None, load=load,
                                                 healthy=view.routable, record=record)
        # Once per request, and only when a loaded policy has an input_tokens condition.
        tokens = estimate_tokens(payload) if uses_input_tokens(sr.routing_policies) else None
        facts = RequestFacts(verdict.result, key_tier, org, headers, None if tokens is None else lambda: tokens)
        policy = match_policy(sr.routing_policies, facts)
        pool = self.pool(snapshot, key)
        if pin is not None:
            pool = attrs.evolve(pool, candidates=tuple(c for c in pool.candidates if pin in c.backends))
        choice = choose(pool, policy.route_to if policy is not None else None, verdict.result, sr.default_tier)
        return Decision(verdict, policy, choice, tokens, pool)

    async def route(self, call: Call, headers: Mapping[bytes, bytes], load: str) -> Call:
        """``call`` with the chosen model in its name and body, and the decision on it; raises
        NoHealthyBackend when no candidate model is left for the call."""
        key = call.key
        decision = await self.decide(
            call.snapshot, call.payload, key=key, key_tier=key.tier if key is not None else None,
            org=key.organization_id if key is not None else None, headers=text_headers(headers),
            request_id=call.request_id, load=load, pin=call.pin)
        choice, policy = decision.choice, decision.policy
        label = (policy.name if policy is not None else DEFAULT_POLICY, str(choice.tier) if choice else "none")
        self.decisions[label] = self.decisions.get(label, 0) + 1
        described = decision.describe()
        if choice is None and policy is not None and policy.route_to.require_capabilities and decision.pool.candidates:
            raise RouteCapabilityUnavailable(
                f"Smart routing policy '{policy.name}' requires {', '.join(policy.route_to.require_capabilities)}, "
                f"and no candidate model the API key may use is known to have it",
                details={"policy": policy.name, "require_capabilities": list(policy.route_to.require_capabilities)})
        if choice is None:
            tier = policy.route_to.tier if policy is not None and policy.route_to.tier is not None \
                else call.snapshot.smart_routing.default_tier
            raise NoHealthyBackend(
                f"Smart routing found no model for '{call.model}': no healthy candidate the API key may use "
                f"in tier {tier} or any other")
        log.debug("Routing policy matched: policy=%s tier=%s model=%s input_tokens=%s", label[0], choice.tier,
                  choice.model, decision.input_tokens)
        payload = {**call.payload, "model": choice.model}
        return attrs.evolve(call, model=choice.model, payload=payload, body=json.dumps(payload).encode(),
                            smart_route=MappingProxyType(described), route_headers=self._headers(call.snapshot,
                                                                                                decision))

    @staticmethod
    def _headers(snapshot: Snapshot, decision: Decision) -> tuple[tuple[bytes, bytes], ...]:
        if not snapshot.smart_routing.debug_headers:
            return ()
        c, choice = decision.classification, decision.choice
        assert choice is not None
        out = [(b"x-smart-route-policy", (decision.policy.name if decision.policy else DEFAULT_POLICY).encode()),
               (b"x-smart-route-model", choice.model.encode()), (b"x-smart-route-tier", str(choice.tier).encode()),
               (b"x-smart-route-classification",
                f"complexity={c.complexity};domain={c.domain};confidence={c.confidence:.2f};source={c.source}"
                .encode())]
        if decision.input_tokens is not None:
            out.append((b"x-smart-route-input-tokens", str(decision.input_tokens).encode()))
        shadow = shadow_header(decision.verdict)
        if shadow is not None:
            out.append((b"x-smart-route-shadow", shadow))
        return tuple(out)


def text_headers(headers: Mapping[bytes, bytes]) -> dict[str, str]:
    """Request headers for ``when.header``: lower-case names, UTF-8 values (as the config's values
    are read); a value over 256 bytes counts as absent."""
    return {k.decode("latin-1").lower(): v.decode("utf-8", "replace") for k, v in headers.items()
            if len(v) <= MAX_HEADER_VALUE}
