"""What the limiter port (``actors/ports.py``'s ``Limiter``) is asked and answers.

A call's ``Demand`` names every scope it is judged in and every budget it
draws on; ``admit`` decides them all at once (all or nothing) and returns an
``Admission``: the refusal, or a ``Ticket`` that ``settle`` takes back when
the call ends, with its real tokens and cost. ``settle`` is a tell: it never
waits, so a call's end is never held up by the limiter.

The value shapes are the pure core's (``actors/routing/limits.py``),
re-exported here: one definition for the local limiter, the Redis one and
the call path.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from attrs import frozen

from switchyard.actors.ledger.record import UsageQuery
from switchyard.actors.routing.limits import BudgetLine as BudgetLine
from switchyard.actors.routing.limits import Demand as Demand
from switchyard.actors.routing.limits import Quota as Quota
from switchyard.actors.routing.limits import Refusal as Refusal
from switchyard.actors.routing.limits import Scope as Scope
from switchyard.config.access import ApiKey
from switchyard.config.schema import Snapshot


def configured(snapshot: Snapshot, key: str | ApiKey) -> ApiKey:
    """``key`` itself, or the config's key with this id (``KeyError`` when it has none)."""
    if not isinstance(key, str):
        return key
    found = next((k for k in snapshot.api_keys.keys if k.id == key), None)
    if found is None:
        raise KeyError(key)
    return found


__all__ = ["configured", "Admission", "BudgetLine", "Demand", "Quota", "Refusal", "Scope", "Summary", "Ticket"]

Summary = Callable[[UsageQuery], Awaitable[list[dict[str, Any]]]]   # LedgerActor.summary: what budgets are seeded from


@frozen
class Ticket:
    """What ``settle`` needs of an admitted call."""

    demand: Demand
    buckets: tuple[str, ...]   # the period bucket of each of demand.budgets, fixed at admission
    admitted_at: float         # the admitting limiter's clock (monotonic for the local one)
    origin: str = "local"      # which limiter admitted it: a fallback's ticket is settled there


@frozen
class Admission:
    refusal: Refusal | None
    requests: Quota | None     # the key scope's tightest request dimension (None: not limited)
    tokens: Quota | None       # the key scope's tokens_per_minute (None: not limited)
    ticket: Ticket | None      # None when refused

    @property
    def admitted(self) -> bool:
        return self.refusal is None

