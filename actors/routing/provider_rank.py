"""The client's ``provider`` preferences over routing candidates: hard filters, then rank groups.

Filters (``only``, ``ignore``, ``max_price``) only ever remove candidates
from a set the caller already narrowed (visibility, the API key, policy):
the result is a subset, so a client can never widen what it may reach.

Ranks (``order``, then ``sort``) split what is left into groups of
candidates equal on every stated key. The caller hands the first group to
the configured strategy, so equal prices or equal order ranks still rotate
instead of pinning the first candidate. A candidate with no value for the
sort signal joins one trailing group (within its ``order`` tier), so a
fleet with no telemetry is one group and the strategy decides as before.

Pure and generic over anything with a ``.name`` (the backend name the
client lists): no trio, no I/O, no clock. Prices and telemetry come in as
functions.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, TypeVar

from switchyard.actors.routing.variants import price_per_million

if TYPE_CHECKING:
    from switchyard.actors.routing.provider_prefs import ProviderPrefs


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)

# (prompt, completion) USD per million tokens; None (or a None side) when unknown.
PriceOf = Callable[[T], tuple[float | None, float | None] | None]
Signal = Callable[[T], float | None]

# Which end of each sort signal is best.
ASCENDING, DESCENDING = "ascending", "descending"
SORT_DIRECTION = {"price": ASCENDING, "latency": ASCENDING, "throughput": DESCENDING}


# --- filters -------------------------------------------------------------------------------

def filter_stages(prefs: ProviderPrefs, candidates: Sequence[T], price: PriceOf[T]) -> list[tuple[str, list[T]]]:
    """What is left after each stated filter, in the order applied: only, ignore, max_price.

    Unstated filters are skipped. Each stage is a subset of the one before,
    in the input order.
    """
    stages: list[tuple[str, list[T]]] = []
    left = list(candidates)
    if prefs.only is not None:
        allowed = set(prefs.only)
        left = [c for c in left if c.name in allowed]
        stages.append(("only", left))
    if prefs.ignore:
        blocked = set(prefs.ignore)
        left = [c for c in left if c.name not in blocked]
        stages.append(("ignore", left))
    ceiling = prefs.max_price
    if ceiling is not None and not ceiling.empty:
        left = [c for c in left if _under(price(c), ceiling.prompt, ceiling.completion)]
        stages.append(("max_price", left))
    return stages


def client_filter(prefs: ProviderPrefs, candidates: Sequence[T], price: PriceOf[T]) -> list[T]:
    """The candidates the client's filters keep: a subset of ``candidates``, order kept.

    ``price`` is asked only when ``max_price`` is stated.
    """
    stages = filter_stages(prefs, candidates, price)
    return stages[-1][1] if stages else list(candidates)


def emptied_by(prefs: ProviderPrefs, candidates: Sequence[T], price: PriceOf[T]) -> str | None:
    """The field whose filter left nothing of a non-empty set (for the 400's ``param``); else None."""
    if not candidates:
        return None
    for field, left in filter_stages(prefs, candidates, price):
        if not left:
            return field
    return None


def _under(known: tuple[float | None, float | None] | None, prompt: float | None,
           completion: float | None) -> bool:
    """Within both stated ceilings. An unknown price cannot be shown to be under a ceiling: it fails."""
    have_prompt, have_completion = known if known is not None else (None, None)
    return _within(have_prompt, prompt) and _within(have_completion, completion)


def _within(price: float | None, ceiling: float | None) -> bool:
    return ceiling is None or (price is not None and price <= ceiling)


# --- rank groups ---------------------------------------------------------------------------

def rank_groups(prefs: ProviderPrefs, candidates: Sequence[T], signal: Signal[T] | None = None) -> list[list[T]]:
    """``candidates`` split into rank groups, best first; together they are exactly the input.

    Keys, in order: the ``order`` rank (a listed name by its index; every
    unlisted name after all listed ones, as one tier), then the ``sort``
    signal in its direction (``SORT_DIRECTION``). A missing or non-finite
    signal sorts after every known value of its tier, as one group. No
    ``order`` and no ``sort`` (or no ``signal``): one group. Each group
    keeps the input order.
    """
    if not candidates:
        return []
    ranked_by = signal if prefs.sort is not None else None
    if not prefs.order and ranked_by is None:
        return [list(candidates)]
    position = {name: i for i, name in enumerate(prefs.order)}
    unlisted = len(prefs.order)
    sign = -1.0 if SORT_DIRECTION.get(prefs.sort or "", ASCENDING) == DESCENDING else 1.0

    def key(c: T) -> tuple[float, ...]:
        tier = position.get(c.name, unlisted)
        if ranked_by is None:
            return (tier,)
        value = ranked_by(c)
        if value is None or not math.isfinite(value):
            return (tier, 1, 0.0)
        return (tier, 0, sign * value + 0.0)     # + 0.0: -0.0 and 0.0 are one value

    keyed = sorted(((key(c), i, c) for i, c in enumerate(candidates)), key=lambda t: (t[0], t[1]))
    groups: list[list[T]] = []
    last: tuple[float, ...] | None = None
    for k, _, c in keyed:
        if groups and k == last:
            groups[-1].append(c)
        else:
            groups.append([c])
            last = k
    return groups


def top_group(prefs: ProviderPrefs, candidates: Sequence[T], signal: Signal[T] | None = None) -> list[T]:
    """The best rank group (for ``BackendPool.choose``'s ``prefer`` hook); [] for no candidates."""
    groups = rank_groups(prefs, candidates, signal)
    return groups[0] if groups else []


def combined_price(known: tuple[float | None, float | None] | None) -> float | None:
    """The ``sort: price`` signal: prompt + completion per million, as ``:floor`` ranks; None unless both known."""
    if known is None:
        return None
    return price_per_million(*known)
