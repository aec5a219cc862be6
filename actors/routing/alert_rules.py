"""Which budget threshold an owner's spend has crossed: pure (the spend and the limits come in)."""

from __future__ import annotations

from typing import Sequence

from switchyard.config.limits import Budget


def crossed(budget: Budget, spent_usd: float, spent_tokens: int,
            thresholds: Sequence[float]) -> tuple[float, str] | None:
    """The highest fraction of ``thresholds`` that the spend reached in either unit, and the unit
    (``usd`` or ``tokens``) that reached it furthest; None below the lowest. Only the highest is sent: a
    spend that leaps past 50 % and 80 % at once is one alert, of 80 %."""
    shares = []
    if budget.limit_usd is not None:
        shares.append((spent_usd / budget.limit_usd, "usd"))
    if budget.limit_tokens is not None:
        shares.append((spent_tokens / budget.limit_tokens, "tokens"))
    if not shares:
        return None
    share, unit = max(shares)
    reached = [t for t in thresholds if share >= t]
    return (max(reached), unit) if reached else None
