"""The KV-overlap scorer: among the healthy candidates, the one holding the longest prefix of this
prompt, traded against load, under a bound so one hot prefix cannot pile onto one engine.

For a prompt of ``total`` full blocks, each candidate whose index state is
known holds ``held`` leading blocks of it (``kv_index.KvIndex.held``). Its
score, higher is better::

    overlap_weight * held / total - engine - load_weight * in_flight / max in_flight

``engine`` is ``routing.engine_load``'s score of the candidate (its
weighted, normalized queue and KV usage; fresh samples only, 0 without one)
when that term is enabled, and the in-flight term is 0 when nothing is in
flight. The rules, in order (``REASONS``):

1. ``no_blocks``: the prompt is shorter than one block; nothing to score.
2. ``unknown``: no candidate's state is known (each has a source not synced).
3. ``below_threshold``: no known candidate holds ``min_overlap`` of the
   prompt's blocks; the index decides nothing.
4. The bound (``prefix_routing.load_factor_epsilon``, as cache affinity's):
   a candidate whose in-flight count plus this call would pass
   ``ceil((1 + epsilon) * (all in flight + 1) / candidates)`` is over it.
   ``overlap``: the longest holder is within the bound, and the known
   candidate within the bound with the best score is chosen.
   ``overloaded``: every longest holder is over the bound; the best known
   candidate within it is chosen, or, if none is known, the choice is left
   to the rest of the pick among the candidates within the bound.

An unknown candidate is never chosen for its entries; the index leaves it
to the rest of the pick when it decides nothing. Ties go to the larger
``held``, then the fewer in flight, then the candidates' order.

Pure: no trio, no I/O, no clock.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from attrs import frozen

from switchyard.actors.routing import engine_load

OVERLAP = "overlap"
OVERLOADED = "overloaded"
BELOW_THRESHOLD = "below_threshold"
UNKNOWN = "unknown"
NO_BLOCKS = "no_blocks"
REASONS = (OVERLAP, OVERLOADED, BELOW_THRESHOLD, UNKNOWN, NO_BLOCKS)


@frozen
class Weights:
    overlap_weight: float = 1.0
    load_weight: float = 0.5
    min_overlap: float = 0.1
    epsilon: float = 0.25          # prefix_routing.load_factor_epsilon


@frozen
class KvDecision:
    """One pick's verdict. ``chosen``: the backend the index chose (None: the rest of the pick decides);
    ``keep``: when not None, the candidates the rest of the pick may choose among (those within the bound)."""

    reason: str
    total: int
    held: Mapping[str, float | None]
    chosen: str | None = None
    keep: tuple[str, ...] | None = None
    scores: Mapping[str, float] = {}


def decide(candidates: Sequence[str], held: Mapping[str, float | None], total: int,
           in_flight: Mapping[str, int], weights: Weights, engine: Mapping[str, float] = {}) -> KvDecision:
    """The index's verdict over ``candidates`` (names, healthy, in order); ``held`` per candidate (None:
    unknown), ``engine`` the engine-load scores (lower is better) of those with a fresh sample."""
    if total <= 0:
        return KvDecision(NO_BLOCKS, 0, held)
    known = [c for c in candidates if held.get(c) is not None]
    if not known:
        return KvDecision(UNKNOWN, total, held)
    fraction = {c: (held[c] or 0.0) / total for c in known}
    longest = max(fraction.values())
    if longest < weights.min_overlap or longest <= 0.0:
        return KvDecision(BELOW_THRESHOLD, total, held)
    capacity = math.ceil((1.0 + weights.epsilon) * (sum(in_flight.get(c, 0) for c in candidates) + 1)
                         / len(candidates))
    within = [c for c in candidates if in_flight.get(c, 0) + 1 <= capacity]
    busiest = max((in_flight.get(c, 0) for c in candidates), default=0)
    scores = {c: weights.overlap_weight * fraction[c] - engine.get(c, 0.0)
              - (weights.load_weight * in_flight.get(c, 0) / busiest if busiest else 0.0)
              for c in known if c in within}
    overloaded = all(c not in scores for c in known if fraction[c] == longest)
    reason = OVERLOADED if overloaded else OVERLAP
    if not scores:
        return KvDecision(reason, total, held, keep=tuple(within))
    order = {c: i for i, c in enumerate(candidates)}
    chosen = max(scores, key=lambda c: (scores[c], fraction[c], -in_flight.get(c, 0), -order[c]))
    return KvDecision(reason, total, held, chosen=chosen, scores=scores)


def engine_terms(candidates: Sequence[str], samples: Mapping[str, engine_load.EngineLoadSample], now: float, *,
                 window: float, weight: float) -> dict[str, float]:
    """``routing.engine_load``'s score of each candidate with a fresh sample (lower is better)."""
    fresh: dict[str, engine_load.EngineLoadSample] = {}
    for name in candidates:
        sample = samples.get(name)
        if engine_load.is_fresh(sample, now, window):
            fresh[name] = sample
    return engine_load.scores(fresh, weight)
