"""Engine-load-aware selection and the saturation admission gate, as pure functions.

The engine-stats poller publishes one sample per backend (queue depth, slots,
KV cache usage, when it was read). ``rank`` turns those samples into a
narrowing of the live candidate set; ``admission_refuses`` says when every
candidate is saturated and queueing one more request would only make it wait.

Two uses. With ``kv_cache_index`` enabled, ``scores`` is a term of the
KV-overlap scorer (``kv_scorer.py``): subtracted from each candidate's
overlap score, so the engine holding a prefix is traded against its queue.
When that scorer decides nothing, and always without the index, ``rank`` is
a narrowing rather than a score added to another one: it sets aside the
fresh candidates that are clearly busier and leaves the rest to whichever
``selection_strategy`` is configured, which rotates (or hashes) among what
is left. How it decides:

* Freshness: a sample is fresh while ``now - observed_at <= interval *
  max_staleness_intervals`` (the boundary instant is still fresh). A stale or
  missing sample counts as absent.
* Dead band: over the fresh candidates' ``waiting``, the term ranks only when
  BOTH ``max - min > balance_abs_threshold`` AND ``max / min >
  balance_rel_threshold`` (strict; ``max / 0`` is infinite when ``max > 0``).
  Queues that are merely jittering never move traffic.
* Score (lower is better) of a fresh candidate: ``engine_load_weight *
  (waiting_term + kv_term)``. ``waiting_term`` is ``waiting / total_slots``
  when EVERY fresh candidate reports ``total_slots`` (> 0), else ``waiting /
  max waiting`` over the fresh candidates (not clamped, so a queue several
  times the slot count still ranks by depth). ``kv_term`` is
  ``kv_cache_usage`` when every fresh candidate reports it, else 0 for all
  (a missing KV figure must not read as an empty cache).
* Narrowing: the fresh candidates with the lowest score are kept, the other
  fresh ones are set aside; candidates without fresh data are always kept
  (neither preferred nor excluded). The weight only scales the score: with a
  single term, order does not depend on it, and weight 0 makes every fresh
  candidate tie (nothing is set aside).

Pure: no clock, no I/O, no trio. Time comes in as an argument.
"""

from __future__ import annotations

import math
from typing import Mapping, Protocol, Sequence, TypeGuard

from attrs import frozen

# Reasons for routing_engine_load_decisions_total{backend,reason}, one per candidate per pick.
APPLIED = "applied"          # the term ranked the set and kept this backend (lowest score)
OUTRANKED = "outranked"      # the term ranked the set and set this backend aside for this pick
DEAD_BAND = "dead_band"      # fresh data, but the spread stayed inside the dead band: no ranking
STALE = "stale"              # a sample exists but is older than the freshness window
NO_DATA = "no_data"          # no sample at all for this backend
REASONS = (APPLIED, OUTRANKED, DEAD_BAND, STALE, NO_DATA)


class EngineLoadSample(Protocol):
    """What the term reads from one engine snapshot; the poller's snapshot type fits."""

    @property
    def waiting(self) -> int: ...
    @property
    def total_slots(self) -> int | None: ...
    @property
    def kv_cache_usage(self) -> float | None: ...
    @property
    def observed_at(self) -> float: ...


@frozen
class Decision:
    """One pick's outcome: the candidates to hand to the strategy, and why.

    ``preferred`` keeps the input order (a strategy's rotation stays stable);
    ``scores`` holds the fresh candidates' scores when the term ranked.
    """

    preferred: tuple[str, ...]
    reasons: Mapping[str, str]
    ranked: bool = False
    scores: Mapping[str, float] = {}


def max_age(interval: float, max_staleness_intervals: int) -> float:
    """The freshness window, in seconds."""
    return interval * max_staleness_intervals


def is_fresh(sample: EngineLoadSample | None, now: float, window: float) -> TypeGuard[EngineLoadSample]:
    """True while the sample is at most ``window`` seconds old (the boundary is fresh)."""
    return sample is not None and now - sample.observed_at <= window


def dead_band(waitings: Sequence[float], abs_threshold: float, rel_threshold: float) -> bool:
    """True when the queues are too close to rank: the gate needs BOTH thresholds crossed.

    Fewer than two values never cross (nothing to compare). ``max / 0`` with
    ``max > 0`` is infinite, so an idle engine next to a busy one passes the
    ratio test and only the absolute threshold decides.
    """
    if len(waitings) < 2:
        return True
    hi, lo = max(waitings), min(waitings)
    ratio = math.inf if lo == 0 and hi > 0 else (1.0 if hi == 0 else hi / lo)
    return not (hi - lo > abs_threshold and ratio > rel_threshold)


def scores(fresh: Mapping[str, EngineLoadSample], weight: float) -> dict[str, float]:
    """Each fresh candidate's score, lower is better (see the module docstring)."""
    if not fresh:
        return {}
    samples = fresh.values()
    by_slots = all(s.total_slots is not None and s.total_slots > 0 for s in samples)
    with_kv = all(s.kv_cache_usage is not None for s in samples)
    top = max(s.waiting for s in samples)
    out: dict[str, float] = {}
    for name, s in fresh.items():
        if by_slots and s.total_slots:   # by_slots: every sample has some
            waiting = s.waiting / s.total_slots
        else:
            waiting = s.waiting / top if top > 0 else 0.0
        kv = float(s.kv_cache_usage) if with_kv and s.kv_cache_usage is not None else 0.0
        out[name] = weight * (waiting + kv)
    return out


def rank(candidates: Sequence[str], samples: Mapping[str, EngineLoadSample], now: float, *,
         window: float, weight: float, abs_threshold: float, rel_threshold: float) -> Decision:
    """Narrow ``candidates`` (backend names, already healthy) by engine load.

    ``window`` is ``max_age(engine_stats.interval, max_staleness_intervals)``.
    Returns every candidate when the term does not decide (no fresh data,
    dead band); never returns an empty set.
    """
    reasons: dict[str, str] = {}
    fresh: dict[str, EngineLoadSample] = {}
    for name in candidates:
        sample = samples.get(name)
        if sample is None:
            reasons[name] = NO_DATA
        elif not is_fresh(sample, now, window):
            reasons[name] = STALE
        else:
            fresh[name] = sample
    if dead_band([s.waiting for s in fresh.values()], abs_threshold, rel_threshold):
        reasons.update((name, DEAD_BAND) for name in fresh)
        return Decision(tuple(candidates), reasons)
    scored = scores(fresh, weight)
    best = min(scored.values())
    # Engines whose queue is within the dead band of the best one's are not "clearly busier":
    # they stay, so the strategy spreads the load instead of herding it onto one engine.
    best_waiting = min(fresh[n].waiting for n, sc in scored.items() if sc == best)
    for name, score in scored.items():
        close = dead_band([best_waiting, fresh[name].waiting], abs_threshold, rel_threshold)
        reasons[name] = APPLIED if score == best or close else OUTRANKED
    preferred = tuple(n for n in candidates if reasons[n] != OUTRANKED)
    return Decision(preferred, reasons, ranked=True, scores=scored)


def admission_refuses(candidates: Sequence[str], samples: Mapping[str, EngineLoadSample], now: float, *,
                      threshold: float, window: float) -> bool:
    """True only when EVERY candidate reports a fresh ``kv_cache_usage`` above ``threshold``.

    A candidate without a fresh sample, or whose sample lacks KV usage, always
    admits: the gate refuses on evidence of saturation, never on silence. An
    empty candidate set is not refused here (that is "no healthy backend").
    """
    if not candidates:
        return False
    for name in candidates:
        sample = samples.get(name)
        if not is_fresh(sample, now, window):
            return False
        kv = sample.kv_cache_usage
        if kv is None or not kv > threshold:
            return False
    return True
