"""Client rate limits and budgets as pure decisions: GCRA, leases, budget buckets.

No trio, no clock, no I/O: ``now`` (monotonic seconds: windows and leases)
and ``wall`` (Unix seconds: budget periods, which are UTC calendar buckets)
come in as arguments. ``LocalLimiter`` (actors/limits/local.py) owns one
``Counters`` and decides with ``decide``/``settle``; the Redis script
implements the same rules (docs/limits.md).

- requests per second/minute: GCRA. Limit L per period T, emission interval
  e = T/L, state TAT (starts at 0). At ``now``: tat = max(TAT, now); allowed
  iff tat + e - now <= T (a burst of L, then one every e); on allow TAT = tat + e.
- tokens per minute: GCRA with cost c (the reservation): allowed iff
  tat + c*e - now <= 60; settle moves TAT back by (c - used)*e, never below
  the settle time. c > L is refused outright (it could never fit).
- max_concurrent: a lease per call id, ended by settle or 10 minutes after admission.
- budgets: per owner and UTC period bucket, ``spent`` + ``reserved``; a call
  reserves its worst case and settles to its real cost.

A decision is all or nothing: every scope and budget is checked first and
applied only if all admit. The refusal reported is the first failing one in
``ORDER``.
"""

from __future__ import annotations


from attrs import frozen

from switchyard.config.limits import Budget, RateLimit

SCOPE_KINDS = ("global", "client_ip", "key", "organization", "model")   # refusal order of the rate scopes
OWNER_KINDS = ("key", "organization")                                   # refusal order of the budgets
DIMENSIONS = ("max_concurrent", "requests_per_second", "requests_per_minute", "tokens_per_minute")
PERIOD_SECONDS = {"requests_per_second": 1.0, "requests_per_minute": 60.0, "tokens_per_minute": 60.0}
LEASE_SECONDS = 600.0      # a lease not settled by then is dropped (a crashed call never holds a slot)


# --- the shapes the port speaks (re-exported by actors/limits/port.py) ----------------------

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
