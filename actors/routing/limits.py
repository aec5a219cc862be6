"""Client rate limits and budgets as pure decisions: GCRA, leases, budget buckets.

No trio, no clock, no I/O: ``now`` (monotonic seconds: windows and leases)
and ``wall`` (Unix seconds: budget periods, which are UTC calendar buckets)
come in as arguments (the budget periods' buckets are in budget_periods.py).
``LocalLimiter`` (actors/limits/local.py) owns one ``Counters`` and decides
with ``decide``/``settle``; the Redis script implements the same rules
(docs/limits.md).

- requests per second/minute: GCRA. Limit L per period T, emission interval
  e = T/L, state TAT (starts at 0). At ``now``: tat = max(TAT, now); allowed
  iff tat + e - now <= T (a burst of L, then one every e); on allow TAT = tat + e.
- tokens per minute: GCRA with cost c (the reservation): allowed iff
  tat + c*e - now <= 60; settle moves TAT back by (c - used)*e, never below
  the settle time. c > L is refused outright (it could never fit).
- max_concurrent: a lease per call id, ended by settle or 10 minutes after admission.
- budgets: per owner and UTC period bucket, ``spent`` + ``reserved``; a call
  reserves its worst case and settles to its real cost.

Counters are keyed by scope, never by config revision: a reload keeps them.
A window's state is time owed (TAT), so after a limit changes the calls
already counted weigh what they weighed when admitted; a settle gives back
by the limits its call was admitted under.

A decision is all or nothing: every scope and budget is checked first and
applied only if all admit. The refusal reported is the first failing one in
this order: the budgets (key, then organization), then the scopes in
``SCOPE_KINDS`` order, within a scope ``DIMENSIONS`` order.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import attrs
from attrs import frozen

from switchyard.actors.routing.budget_periods import Bucket, bucket_expiry, bucket_of
from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.config.access import ApiKey
from switchyard.config.limits import Budget, Organization, RateLimit, RateLimiting

SCOPE_KINDS = ("global", "client_ip", "key", "organization", "model")   # refusal order of the rate scopes
OWNER_KINDS = ("key", "organization")                                   # refusal order of the budgets
DIMENSIONS = ("max_concurrent", "requests_per_second", "requests_per_minute", "tokens_per_minute")
PERIOD_SECONDS = {"requests_per_second": 1.0, "requests_per_minute": 60.0, "tokens_per_minute": 60.0}
LEASE_SECONDS = 600.0      # a lease not settled by then is dropped (a crashed call never holds a slot)


# --- the shapes the port speaks (re-exported by actors/limits/tickets.py) ----------------------

@frozen
class Scope:
    kind: str          # global | client_ip | key | organization | model
    name: str          # "" for global; the ip, key id, organization id or model
    limit: RateLimit


@frozen
class BudgetLine:
    owner: str         # key | organization
    owner_id: str
    budget: Budget
    worst_usd: float   # the call's worst-case cost (0 for an unpriced model)
    tokens: int        # the call's worst-case tokens (input estimate + max output)


@frozen
class Demand:
    call_id: str
    scopes: tuple[Scope, ...]
    tokens: int                          # the tokens_per_minute reservation
    budgets: tuple[BudgetLine, ...] = ()


@frozen
class Refusal:
    scope: str            # a SCOPE_KINDS entry, or the budget's owner kind
    name: str
    dimension: str        # a DIMENSIONS entry, budget_usd or budget_tokens
    limit: float
    retry_after: float | None   # seconds; None: waiting does not help (or not before the period ends)
    message: str


@frozen
class Quota:
    limit: int
    remaining: int
    reset: float          # seconds until the window is full again


@frozen
class Decision:
    """What ``decide`` says: the refusal (nothing was changed) or the buckets it reserved in."""

    refusal: Refusal | None
    requests: Quota | None     # the key scope's tightest request dimension, after the decision
    tokens: Quota | None       # the key scope's tokens_per_minute, after the decision
    buckets: tuple[str, ...]   # the period bucket of each of demand.budgets


# --- what a call reserves ---------------------------------------------------------------------

DEFAULT_MAX_OUTPUT = 4096
OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def max_output_of(payload: Mapping[str, Any], model_max_output: int | None) -> int:
    """The most output a call may produce: its own cap, else the model's ``limits.max_output``, else 4096."""
    for name in OUTPUT_FIELDS:
        value = payload.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    if model_max_output:
        return model_max_output
    return DEFAULT_MAX_OUTPUT


def token_reservation(payload: Mapping[str, Any], model_max_output: int | None) -> int:
    """The tokens_per_minute reservation: the input estimate (images 1000 each) plus the output cap."""
    return sum(reserved_tokens(payload, model_max_output))


def reserved_tokens(payload: Mapping[str, Any], model_max_output: int | None) -> tuple[int, int]:
    """The reservation's two parts: the input estimate (images 1000 each) and the output cap."""
    return estimate_tokens(payload, image_tokens=1000), max_output_of(payload, model_max_output)


def scopes_for(limits: RateLimiting, organizations: Mapping[str, Organization], key: ApiKey | None,
               client_ip: str | None, model: str | None) -> tuple[Scope, ...]:
    """Every scope a call is judged in, in refusal order (a scope with no limit is left out).

    ``model`` is the model that will run (after presets, aliases and variants);
    a key's own ``rate_limit`` replaces the dimensions it names of ``per_key``,
    an organization's those of ``per_organization``.
    """
    out: list[Scope] = []
    if limits.global_ is not None:
        out.append(Scope("global", "", limits.global_))
    if limits.per_client_ip is not None and client_ip:
        out.append(Scope("client_ip", client_ip, limits.per_client_ip))
    if key is not None:
        own = key.rate_limit.over(limits.per_key) if key.rate_limit is not None else limits.per_key
        if own is not None:
            out.append(Scope("key", key.id, own))
        if key.organization_id is not None:
            org = organizations.get(key.organization_id)
            base = limits.per_organization
            own = org.rate_limit.over(base) if org is not None and org.rate_limit is not None else base
            if own is not None:
                out.append(Scope("organization", key.organization_id, own))
    if model is not None and model in limits.per_model:
        out.append(Scope("model", model, limits.per_model[model]))
    return tuple(out)


def budgets_for(organizations: Mapping[str, Organization], key: ApiKey | None, worst_usd: float,
                tokens: int) -> tuple[BudgetLine, ...]:
    """The budgets a call draws on: its key's, then its organization's."""
    out: list[BudgetLine] = []
    if key is None:
        return ()
    if key.budget is not None:
        out.append(BudgetLine("key", key.id, key.budget, worst_usd, tokens))
    org = organizations.get(key.organization_id) if key.organization_id is not None else None
    if org is not None and org.budget is not None:
        out.append(BudgetLine("organization", org.id, org.budget, worst_usd, tokens))
    return tuple(out)


# --- the counters -----------------------------------------------------------------------------

EPSILON = 1e-6       # seconds of slack in a GCRA comparison, so L requests of T/L each fit in T despite rounding
USD_EPSILON = 1e-9   # dollars of slack in a budget comparison, for the same reason


@attrs.define
class BudgetState:
    """One owner's bucket. ``seed_*``: the ledger's settled spend when the bucket was first used;
    ``spent_*``/``reserved_*``: what this limiter settled and holds since."""

    seed_usd: float = 0.0
    seed_tokens: int = 0
    spent_usd: float = 0.0
    spent_tokens: int = 0
    reserved_usd: float = 0.0
    reserved_tokens: int = 0
    seeded: bool = False
    expires: float | None = None     # wall time it may be dropped (None: never)


class Counters:
    """Every limiter count of one worker, keyed by scope (never by config revision: a reload keeps them).

    ``share`` n enforces 1/n of every limit (a worker's part of a fleet while
    the shared store is away): rates and concurrency divided by n (a slot at
    least), and each budget's local use counted n times against what the
    ledger had not already spent.
    """

    def __init__(self, share: int = 1) -> None:
        if isinstance(share, bool) or not isinstance(share, int) or share < 1:
            raise ValueError(f"share must be an integer >= 1, got {share!r}")
        self.share = share
        self.tat: dict[tuple[str, str, str], float] = {}           # (kind, name, dimension) -> TAT
        self.leases: dict[tuple[str, str], dict[str, float]] = {}   # (kind, name) -> call id -> expiry
        self.budgets: dict[tuple[str, str, str], BudgetState] = {}  # (owner, owner id, bucket) -> state

    def budget(self, owner: str, owner_id: str, bucket: Bucket) -> BudgetState:
        key = (owner, owner_id, bucket.name)
        state = self.budgets.get(key)
        if state is None:
            state = self.budgets[key] = BudgetState(expires=bucket_expiry(bucket))
        return state

    def live_leases(self, kind: str, name: str, now: float) -> dict[str, float]:
        held = self.leases.get((kind, name), {})
        for call_id in [c for c, expiry in held.items() if expiry <= now]:
            del held[call_id]
        return held

    def prune(self, now: float, wall: float) -> None:
        """Drop what no longer counts: idle windows (TAT past: the same as fresh), empty lease
        sets, and budget buckets two periods past their end."""
        for idle in [k for k, tat in self.tat.items() if tat <= now]:
            del self.tat[idle]
        for kind, name in list(self.leases):
            if not self.live_leases(kind, name, now):
                del self.leases[kind, name]
        for ended in [k for k, s in self.budgets.items() if s.expires is not None and s.expires <= wall]:
            del self.budgets[ended]


# --- deciding ---------------------------------------------------------------------------------

def rate(limit: RateLimit, dimension: str, share: int = 1) -> float | None:
    """A dimension's limit as this limiter enforces it (its 1/share part), or None."""
    value = getattr(limit, dimension)
    return None if value is None else value / share


def slots(limit: RateLimit, share: int = 1) -> int | None:
    return None if limit.max_concurrent is None else max(1, limit.max_concurrent // share)


def _refusal(scope: Scope, dimension: str, limit: float, retry_after: float | None, message: str) -> Refusal:
    return Refusal(scope.kind, scope.name, dimension, limit, retry_after, message)


def _who(kind: str, name: str) -> str:
    return "the global limit" if kind == "global" else f"{kind.replace('_', ' ')} {name!r}"


def _check_scope(c: Counters, scope: Scope, demand: Demand, now: float) -> Refusal | None:
    """The first dimension of ``scope`` that refuses ``demand`` at ``now``, in order."""
    most = slots(scope.limit, c.share)
    if most is not None and len(c.live_leases(scope.kind, scope.name, now)) >= most:
        return _refusal(scope, "max_concurrent", most, None,
                        f"{_who(scope.kind, scope.name)} has {most} call(s) in flight, its max_concurrent")
    for dimension in ("requests_per_second", "requests_per_minute", "tokens_per_minute"):
        limit = rate(scope.limit, dimension, c.share)
        if limit is None:
            continue
        period = PERIOD_SECONDS[dimension]
        cost = demand.tokens if dimension == "tokens_per_minute" else 1
        unit = "tokens" if dimension == "tokens_per_minute" else "requests"
        per = "second" if dimension == "requests_per_second" else "minute"
        whole = getattr(scope.limit, dimension)
        if cost > whole:
            return _refusal(scope, dimension, whole, None,
                            f"this call reserves {cost} tokens, more than the whole limit of {whole} {unit} "
                            f"per {per} of {_who(scope.kind, scope.name)}: ask for fewer output tokens")
        e = period / limit
        tat = max(c.tat.get((scope.kind, scope.name, dimension), 0.0), now)
        ahead = tat - now     # allowed iff ahead + cost*e <= period; under a share, at least one at a time
        tolerance = max(period - cost * e, 0.0)
        if ahead > tolerance + EPSILON:
            retry = ahead - tolerance
            return _refusal(scope, dimension, limit, retry,
                            f"{_who(scope.kind, scope.name)} allows {limit:g} {unit} per {per}; "
                            f"retry in {retry:.3g}s")
    return None


def _check_budget(c: Counters, line: BudgetLine, bucket: Bucket, wall: float) -> Refusal | None:
    state = c.budgets.get((line.owner, line.owner_id, bucket.name)) or BudgetState()
    retry = None if bucket.end is None else bucket.end - wall
    when = "in total" if bucket.end is None else f"this {line.budget.period.value} ({bucket.name})"
    who = f"{line.owner} {line.owner_id!r}"
    limit_usd, limit_tokens = line.budget.limit_usd, line.budget.limit_tokens
    if limit_usd is not None:
        used = state.seed_usd + c.share * (state.spent_usd + state.reserved_usd)
        if used + c.share * line.worst_usd > limit_usd + USD_EPSILON:
            return Refusal(line.owner, line.owner_id, "budget_usd", limit_usd, retry,
                           f"{who} has a budget of {limit_usd:g} USD {when}: {used:.6g} spent or reserved, "
                           f"and this call may cost up to {line.worst_usd:.6g}")
    if limit_tokens is not None:
        used_t = state.seed_tokens + c.share * (state.spent_tokens + state.reserved_tokens)
        if used_t + c.share * line.tokens > limit_tokens:
            return Refusal(line.owner, line.owner_id, "budget_tokens", limit_tokens, retry,
                           f"{who} has a budget of {limit_tokens} tokens {when}: {used_t} spent or reserved, "
                           f"and this call may use up to {line.tokens}")
    return None


def ordered_scopes(scopes: tuple[Scope, ...]) -> list[Scope]:
    return sorted(scopes, key=lambda s: SCOPE_KINDS.index(s.kind))


def ordered_budgets(lines: tuple[BudgetLine, ...]) -> list[tuple[int, BudgetLine]]:
    return sorted(enumerate(lines), key=lambda il: OWNER_KINDS.index(il[1].owner))


def decide(c: Counters, demand: Demand, now: float, wall: float) -> Decision:
    """Admit ``demand`` at ``now`` (monotonic) and ``wall`` (Unix) and reserve everything it
    asks, or refuse it changing nothing; the refusal is the first failing one in order."""
    buckets = tuple(bucket_of(line.budget.period, wall) for line in demand.budgets)
    refusal = None
    for i, line in ordered_budgets(demand.budgets):
        refusal = _check_budget(c, line, buckets[i], wall)
        if refusal is not None:
            break
    if refusal is None:
        for scope in ordered_scopes(demand.scopes):
            refusal = _check_scope(c, scope, demand, now)
            if refusal is not None:
                break
    if refusal is None:
        _apply(c, demand, buckets, now)
    requests, tokens = _quotas_of(c, demand, now)
    return Decision(refusal, requests, tokens, tuple(b.name for b in buckets))


def admitted(c: Counters, demand: Demand, buckets: tuple[Bucket, ...], now: float) -> tuple[Quota | None, Quota | None]:
    """What ``decide`` reserves and says of a demand already admitted on ``c`` (the shared limiter's
    script checked it on these counters): its reservation applied, and its key's quotas after it.
    ``buckets``: ``bucket_of`` each of demand.budgets, as ``decide`` takes them."""
    _apply(c, demand, buckets, now)
    return _quotas_of(c, demand, now)


def _quotas_of(c: Counters, demand: Demand, now: float) -> tuple[Quota | None, Quota | None]:
    key = next((s for s in demand.scopes if s.kind == "key"), None)
    return (None, None) if key is None else key_quotas(c, key.name, key.limit, now)


def _apply(c: Counters, demand: Demand, buckets: tuple[Bucket, ...], now: float) -> None:
    for scope in demand.scopes:
        if scope.limit.max_concurrent is not None:
            c.leases.setdefault((scope.kind, scope.name), {})[demand.call_id] = now + LEASE_SECONDS
        for dimension in ("requests_per_second", "requests_per_minute", "tokens_per_minute"):
            limit = rate(scope.limit, dimension, c.share)
            if limit is None:
                continue
            cost = demand.tokens if dimension == "tokens_per_minute" else 1
            key = (scope.kind, scope.name, dimension)
            c.tat[key] = max(c.tat.get(key, 0.0), now) + cost * PERIOD_SECONDS[dimension] / limit
    for line, bucket in zip(demand.budgets, buckets, strict=False):
        state = c.budget(line.owner, line.owner_id, bucket)
        state.reserved_usd += line.worst_usd
        state.reserved_tokens += line.tokens


def settle(c: Counters, demand: Demand, buckets: tuple[str, ...], tokens_used: int, cost_usd: float | None,
           now: float) -> None:
    """An admitted call ended: its leases end, its unused tokens go back (used beyond the
    reservation are charged), and its budget reservation becomes spend.

    The limits are the ones it was admitted under (``demand``'s), so a reload
    in between gives back exactly what was taken.
    """
    for scope in demand.scopes:
        held = c.leases.get((scope.kind, scope.name))
        if held is not None:
            held.pop(demand.call_id, None)
        limit = rate(scope.limit, "tokens_per_minute", c.share)
        key = (scope.kind, scope.name, "tokens_per_minute")
        if limit is not None:
            # From max(TAT, now), as an admission charges: a window that refilled (or was pruned) is full,
            # so overuse past the reservation is charged from now, never hidden in the past.
            base = max(c.tat.get(key, 0.0), now)
            c.tat[key] = max(base - (demand.tokens - tokens_used) * 60.0 / limit, now)
    for line, bucket in zip(demand.budgets, buckets, strict=False):
        state = c.budgets.get((line.owner, line.owner_id, bucket))
        if state is None:      # pruned: two periods on, nothing left to settle
            continue
        state.reserved_usd = max(0.0, state.reserved_usd - line.worst_usd)
        state.reserved_tokens = max(0, state.reserved_tokens - line.tokens)
        state.spent_usd += cost_usd or 0.0
        state.spent_tokens += tokens_used


# --- what is left -----------------------------------------------------------------------------

def quota(c: Counters, kind: str, name: str, limit: RateLimit, dimension: str, now: float) -> Quota | None:
    """One window's limit, what is left of it at ``now`` and the seconds until it is full again."""
    value = rate(limit, dimension, c.share)
    if value is None:
        return None
    period = PERIOD_SECONDS[dimension]
    e = period / value
    ahead = max(c.tat.get((kind, name, dimension), 0.0) - now, 0.0)
    remaining = math.floor((max(period, e) - ahead) / e + 1e-9)
    whole = max(1, math.floor(value + 1e-9))
    return Quota(whole, max(0, min(whole, remaining)), ahead)


def key_quotas(c: Counters, key_id: str, limit: RateLimit, now: float) -> tuple[Quota | None, Quota | None]:
    """The headers' two quotas of a key: the request window with the fewest left (per minute on a
    tie, the one clients read), and the token window."""
    rps = quota(c, "key", key_id, limit, "requests_per_second", now)
    rpm = quota(c, "key", key_id, limit, "requests_per_minute", now)
    requests = rpm if rps is None or (rpm is not None and rpm.remaining <= rps.remaining) else rps
    return requests, quota(c, "key", key_id, limit, "tokens_per_minute", now)


def budget_view(c: Counters, owner: str, owner_id: str, budget: Budget, wall: float) -> dict[str, Any]:
    """A budget's bucket as the admin API shows it: spent, reserved and left, in USD and tokens."""
    bucket = bucket_of(budget.period, wall)
    state = c.budgets.get((owner, owner_id, bucket.name)) or BudgetState()
    spent_usd = state.seed_usd + state.spent_usd
    spent_tokens = state.seed_tokens + state.spent_tokens
    out: dict[str, Any] = {"period": budget.period.value, "bucket": bucket.name, "resets_at": bucket.end,
                           "spent_usd": spent_usd, "reserved_usd": state.reserved_usd,
                           "spent_tokens": spent_tokens, "reserved_tokens": state.reserved_tokens}
    if budget.limit_usd is not None:
        out["limit_usd"] = budget.limit_usd
        out["left_usd"] = max(0.0, budget.limit_usd - spent_usd - state.reserved_usd)
    if budget.limit_tokens is not None:
        out["limit_tokens"] = budget.limit_tokens
        out["left_tokens"] = max(0, budget.limit_tokens - spent_tokens - state.reserved_tokens)
    return out


def scope_view(c: Counters, kind: str, name: str, limit: RateLimit, now: float) -> dict[str, Any]:
    """A scope's windows and its leases in flight, for the admin API."""
    windows = {}
    for dimension in ("requests_per_second", "requests_per_minute", "tokens_per_minute"):
        q = quota(c, kind, name, limit, dimension, now)
        if q is not None:
            windows[dimension] = {"limit": q.limit, "remaining": q.remaining, "reset": q.reset}
    out: dict[str, Any] = {"windows": windows, "in_flight": len(c.live_leases(kind, name, now))}
    most = slots(limit, c.share)
    if most is not None:
        out["max_concurrent"] = most
    return out
