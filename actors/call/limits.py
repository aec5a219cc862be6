"""A call's rate limits and budgets: what it demands before dispatch, and what the client is told.

The demand is made once the model that will run is known (after presets,
aliases and variants), so a preset or an alias cannot slip past a
``per_model`` limit. It names every scope the call is judged in and every
budget it draws on, with the tokens it may use (its input estimate plus its
output cap) and the worst it may cost (those tokens at the priciest backend
serving the model); the limiter reserves them all or none. The answer to a
limited key carries OpenAI's ``x-ratelimit-*`` headers (Anthropic's
``anthropic-ratelimit-*`` under ``/anthropic/``); a refusal is a 429 in the
door's shape, and a budget's says ``x-should-retry: false`` so SDKs do not
retry what waiting cannot fix.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any, Mapping

from switchyard.actors.errors import BudgetExceeded, GatewayError, LimitExceeded, Unavailable
from switchyard.actors.ledger.counts import TokenCounts
from switchyard.actors.ledger.pricing import cost_of
from switchyard.actors.limits.tickets import Admission, Demand, Quota, Refusal
from switchyard.actors.routing.limits import budgets_for, reserved_tokens, scopes_for

if TYPE_CHECKING:
    from switchyard.actors.messages import Call
    from switchyard.config.limits import Organization
    from switchyard.config.schema import Snapshot

log = logging.getLogger("switchyard.route")

ANTHROPIC_ROUTE = "/anthropic/v1/messages"
UNAVAILABLE = "rate_limiter_unavailable"
TOTAL_RETRY_AFTER = 86_400


def demand_for(call: "Call", model: str, client_ip: str | None,
               organizations: "Mapping[str, Organization] | None" = None) -> Demand | None:
    """What ``call`` asks of the limiter when it runs as ``model``; None when nothing limits it.
    ``organizations``: those the call is judged by (the config's and the database's), else the config's."""
    snap = call.snapshot
    key = call.key
    orgs = snap.organizations if organizations is None else organizations
    scopes = scopes_for(snap.rate_limiting, orgs, key, client_ip, model)
    budgeted = key is not None and (key.budget is not None or _org_budget(orgs, key))
    if not scopes and not budgeted:
        return None
    payload = call.payload if isinstance(call.payload, dict) else {}
    meta = snap.metadata_for(model)
    model_max = meta.limits.max_output if meta is not None and meta.limits is not None else None
    estimate, output = reserved_tokens(payload, model_max)   # the prompt is read once for both
    tokens = estimate + output                                 # token_reservation
    budgets = budgets_for(orgs, key, _worst(snap, model, TokenCounts(input=estimate, output=output)),
                          tokens) if budgeted else ()
    return Demand(call.request_id, scopes, tokens, budgets)


def _org_budget(organizations: "Mapping[str, Organization]", key: Any) -> bool:
    org = organizations.get(key.organization_id) if key.organization_id is not None else None
    return org is not None and org.budget is not None


def worst_cost(snap: "Snapshot", model: str, payload: dict[str, Any], model_max: int | None) -> float:
    """The most the call can cost: its input estimate and output cap at the priciest pricing of ``model``
    on any enabled backend (and in the metadata files); 0 for a model nobody prices."""
    estimate, output = reserved_tokens(payload, model_max)
    return _worst(snap, model, TokenCounts(input=estimate, output=output))


def _worst(snap: "Snapshot", model: str, counts: TokenCounts) -> float:
    worst = None
    for pricing in _pricings(snap, model):
        cost = cost_of(pricing, counts)
        if cost is not None and (worst is None or cost > worst):
            worst = cost
    return float(worst) if worst is not None else 0.0


# snapshot id -> (the snapshot, model -> its distinct pricings): a snapshot never changes, so what its
# layers say of a model is merged once per model, not on every budgeted call (the last few snapshots)
_PRICINGS: dict[int, tuple["Snapshot", dict[str, tuple[Any, ...]]]] = {}
PRICINGS_MOST = 4096   # models remembered per snapshot (a client names any model it likes)


def _pricings(snap: "Snapshot", model: str) -> tuple[Any, ...]:
    held = _PRICINGS.get(id(snap))
    if held is None or held[0] is not snap:
        if len(_PRICINGS) >= 4:
            _PRICINGS.clear()
        held = _PRICINGS[id(snap)] = (snap, {})
    known = held[1]
    found = known.get(model)
    if found is None:
        metas = [snap.metadata_for(model)] + [snap.metadata_for(model, b.name) for b in snap.backends if b.enabled]
        distinct: list[Any] = []
        for meta in metas:
            if meta is not None and meta.pricing is not None and meta.pricing not in distinct:
                distinct.append(meta.pricing)
        found = tuple(distinct)
        if len(known) >= PRICINGS_MOST:
            known.clear()
        known[model] = found
    return found


def refusal_error(refusal: Refusal, admission: Admission, anthropic: bool) -> GatewayError:
    """The 429 the client gets for ``refusal`` (with the rate headers of its key)."""
    retry = refusal.retry_after
    if refusal.dimension == UNAVAILABLE:   # Redis away under state.on_unavailable: fail_closed
        return unavailable_error()
    headers = rate_headers(admission, anthropic)
    if refusal.dimension.startswith("budget_"):
        # A total budget never renews: a day's Retry-After (and x-should-retry: false) says stop.
        return BudgetExceeded(refusal.message, retry_after=_seconds(retry) if retry is not None
                              else TOTAL_RETRY_AFTER, extra_headers=headers)
    kind = "tokens" if refusal.dimension == "tokens_per_minute" else "requests"
    # A refusal waiting cannot fix (max_concurrent, a reservation past the whole limit) still says when
    # to look again: a second.
    return LimitExceeded(refusal.message, kind=kind, retry_after=_seconds(retry) if retry is not None else 1,
                         extra_headers=headers)


def unavailable_error() -> Unavailable:
    return Unavailable("The rate limiter's shared state is unreachable and state.on_unavailable is fail_closed; "
                       "retry shortly", code=UNAVAILABLE)


def log_refusal(refusal: Refusal) -> None:
    log.info("request rejected by %s %s: %s %g", refusal.scope, refusal.name or "-", refusal.dimension,
             refusal.limit, extra={"event": "request_rejected"})


def _seconds(value: float) -> int:
    return max(1, math.ceil(value))


def rate_headers(admission: Admission, anthropic: bool) -> list[tuple[bytes, bytes]]:
    """OpenAI's ``x-ratelimit-*`` (Anthropic's ``anthropic-ratelimit-*``) for the key's windows."""
    out: list[tuple[bytes, bytes]] = []
    for kind, quota in (("requests", admission.requests), ("tokens", admission.tokens)):
        if quota is not None:
            out.extend(_anthropic(kind, quota) if anthropic else _openai(kind, quota))
    return out


def _openai(kind: str, q: Quota) -> list[tuple[bytes, bytes]]:
    return [(f"x-ratelimit-limit-{kind}".encode(), str(q.limit).encode()),
            (f"x-ratelimit-remaining-{kind}".encode(), str(max(0, q.remaining)).encode()),
            (f"x-ratelimit-reset-{kind}".encode(), duration(q.reset).encode())]


def _anthropic(kind: str, q: Quota) -> list[tuple[bytes, bytes]]:
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + max(0.0, q.reset)))
    return [(f"anthropic-ratelimit-{kind}-limit".encode(), str(q.limit).encode()),
            (f"anthropic-ratelimit-{kind}-remaining".encode(), str(max(0, q.remaining)).encode()),
            (f"anthropic-ratelimit-{kind}-reset".encode(), reset.encode())]


def duration(seconds: float) -> str:
    """OpenAI's reset format: ``1s``, ``6m0s``, ``1h2m3s``, ``120ms`` below a second."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
