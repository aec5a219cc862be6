"""Smart routing's decision: which policy applies, then which model of the pool.

Policies are tried top to bottom and the first match applies; within a
``when`` block every field that is set must match (AND) and one of a
field's values is enough (OR). Identity conditions fail closed: a request
without a key tier, an organization, a language or the named header never
matches them, so a policy meant for some callers is never opened to all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

import attrs
from attrs import frozen

from switchyard.actors.routing.capabilities import TOOL_NAMES
from switchyard.actors.routing.classification import Classification
from switchyard.actors.routing.tiers import Candidate, CandidatePool
from switchyard.config.smart_routing import MAX_HEADER_VALUE, PolicyWhen, RouteTo, RoutingPolicy

# A required capability and the metadata capabilities that meet it.
MEETS = {"tools": TOOL_NAMES, "vision": frozenset({"vision"})}
DOMAIN_POINTS = 0.4      # the classified domain is one of the candidate's domains
PREFER_POINTS = 0.3      # times the share of route_to.prefer_domains the candidate has
COST_POINTS = 0.3        # at most, for the input cost relative to the tier's dearest
NEUTRAL_COST_POINTS = 0.15   # a candidate without a known cost


@frozen
class RequestFacts:
    """What policies look at. ``headers``: lower-cased names -> raw values. ``input_tokens``: a
    thunk, called at most once and only when a policy reaches an ``input_tokens`` condition
    (None: no estimate, and ``input_tokens`` conditions match nothing)."""

    classification: Classification
    key_tier: str | None = None
    org: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=lambda: MappingProxyType({}))
    input_tokens: Callable[[], int] | None = None


class _Estimate:
    def __init__(self, thunk: Callable[[], int] | None) -> None:
        self.thunk = thunk
        self.value: int | None = None

    def get(self) -> int | None:
        if self.value is None and self.thunk is not None:
            self.value = self.thunk()
        return self.value


def match_policy(policies: Iterable[RoutingPolicy], facts: RequestFacts) -> RoutingPolicy | None:
    """The first policy whose ``when`` matches; None: no policy (the caller uses ``default_tier``)."""
    estimate = _Estimate(facts.input_tokens)
    for policy in policies:
        if _matches(policy.when, facts, estimate):
            return policy
    return None


def _matches(when: PolicyWhen, facts: RequestFacts, estimate: _Estimate) -> bool:
    c = facts.classification
    if when.complexity is not None and c.complexity not in when.complexity:
        return False
    if when.domain is not None and c.domain not in when.domain:
        return False
    if when.requires is not None and not any(r in c.required_capabilities for r in when.requires):
        return False
    if when.key_tier is not None and (facts.key_tier is None or facts.key_tier not in when.key_tier):
        return False
    if when.org is not None and (facts.org is None or facts.org not in when.org):
        return False
    if when.language is not None:
        language = primary_subtag(c.language)
        if language is None or language not in when.language:
            return False
    if when.header is not None and not headers_match(when.header, facts.headers):
        return False
    if when.input_tokens is not None:   # last: the estimate is the only costly fact
        tokens = estimate.get()
        if tokens is None or not when.input_tokens.contains(tokens):
            return False
    return True


def primary_subtag(language: str | None) -> str | None:
    """``ko`` for ``ko``, ``KO`` and ``ko-KR``; None (no letters in the request) stays None,
    ``und`` (letters of no language we tell apart) stays ``und``."""
    if not language:
        return None
    return language.replace("_", "-").split("-", 1)[0].lower() or None


def header_bytes(value: str) -> int:
    """A header value's size on the wire: latin-1 text is those bytes; other text is sent as UTF-8."""
    try:
        return len(value.encode("latin-1"))
    except UnicodeEncodeError:
        return len(value.encode("utf-8", "surrogatepass"))


def headers_match(wanted: Mapping[str, tuple[str, ...]], headers: Mapping[str, str]) -> bool:
    """Every named header is present and, when values are listed, has one of them (any case).

    A value over 256 bytes counts as absent, never as its truncation: a long value that merely
    starts with a configured one must not match. An empty ``header: {}`` matches nothing.
    """
    if not wanted:
        return False
    for name, values in wanted.items():
        value = headers.get(name.lower())
        if value is None or header_bytes(value) > MAX_HEADER_VALUE:
            return False
        if values and value.strip().lower() not in {v.lower() for v in values}:
            return False
    return True


# --- the model within the tier ------------------------------------------------------------

@frozen
class Choice:
    """The chosen model. ``reason``: ``requested_tier``, or ``tier_fallback`` when the requested
    tier had no eligible candidate and the nearest tier that had one was used."""

    model: str
    tier: int
    requested_tier: int
    score: float
    reason: str


def meets(candidate: Candidate, required: Iterable[str]) -> bool:
    """Whether the candidate is known to have every required capability (unknown is not enough)."""
    required = tuple(required)
    if not required:
        return True
    if candidate.capabilities is None:
        return False
    caps = frozenset(candidate.capabilities)
    return all(caps & MEETS.get(r, frozenset({r})) for r in required)


def choose(pool: CandidatePool, route_to: RouteTo | None, classification: Classification,
           default_tier: int) -> Choice | None:
    """The best eligible candidate of the requested tier, else of the nearest tier that has one.

    Eligible: known to have every ``route_to.require_capabilities`` (``tools`` is met by tool,
    tools or function_calling). Requested tier: ``route_to.tier``, else ``default_tier``. Tier
    fallback tries distance 1, then 2; of two tiers at the same distance the more capable (lower
    number) first. Within the tier the highest score wins, ties by model id:

    - 0.4 when the classified domain is one of the candidate's domains;
    - 0.3 x the share of ``prefer_domains`` among the candidate's domains;
    - up to 0.3 for input cost: 0.3 x (1 - cost / (2 x the tier's highest known cost)), so a free
      model gets 0.3, the dearest 0.15 and the rest in between (every cost 0: 0.3 each); a
      candidate without a cost (no cost in its profile, or unprofiled) gets the neutral 0.15, so
      writing a model's price never makes it lose to an unpriced one.

    None: no eligible candidate in any tier (an empty pool, or nothing has what is required).
    """
    requested = route_to.tier if route_to is not None and route_to.tier is not None else default_tier
    required = route_to.require_capabilities if route_to is not None else ()
    eligible = [c for c in pool.candidates if meets(c, required)]
    if not eligible:
        return None
    tier = min({c.tier for c in eligible}, key=lambda t: (abs(t - requested), t))
    in_tier = [c for c in eligible if c.tier == tier]
    prefer = route_to.prefer_domains if route_to is not None else ()
    dearest = max((c.cost_in for c in in_tier if c.cost_in is not None), default=0.0)
    scored = sorted((-_score(c, dearest, classification.domain, prefer), c.model) for c in in_tier)
    best_score, model = scored[0]
    return Choice(model, tier, requested, -best_score, "requested_tier" if tier == requested else "tier_fallback")


def _score(candidate: Candidate, dearest: float, domain: str, prefer: tuple[str, ...]) -> float:
    score = DOMAIN_POINTS if domain in candidate.domains else 0.0
    wanted = set(prefer)
    if wanted:
        score += PREFER_POINTS * len(wanted & set(candidate.domains)) / len(wanted)
    score += cost_points(candidate.cost_in, dearest)
    return round(score, 9)   # equal scores compare equal whatever the float noise


def cost_points(cost: float | None, dearest: float) -> float:
    """``dearest``: the highest known input cost among the tier's eligible candidates."""
    if cost is None:
        return NEUTRAL_COST_POINTS
    if dearest <= 0:
        return COST_POINTS
    return COST_POINTS * (1 - cost / (2 * dearest))
