"""Provider rate-limit headers as a per-backend quota snapshot, as pure functions.

Providers report on every response how much of the key's quota is left.
``parse`` reads the Anthropic and OpenAI headers into a ``QuotaSnapshot``;
``observed`` says whether a snapshot may stand in for the router's own usage
estimate at ``now``. Recognized headers:

* Anthropic ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining}``
  and the ``anthropic-ratelimit-unified-{requests,tokens}-{limit,remaining}`` aliases;
* OpenAI ``x-ratelimit-{limit,remaining}-{requests,tokens}``.

Each pair (remaining, limit) of one family is an axis source. A source is
usable only when both values parse and ``limit > 0``; its ratio is
``remaining / limit`` clamped to 0..1. A remaining without its limit stays in
``raw`` and ``sources`` for the admin view but never ranks, so an invented
ratio cannot outrank the router's own metering. The requests axis is the
smallest usable ratio among the request sources, the tokens axis the smallest
among the token sources (tokens, input tokens, output tokens, unified tokens,
OpenAI tokens): the tightest limit is the one that bites.

Malformed values (empty, non-numeric, negative, not finite, above
``MAX_VALUE``) are ignored header by header; parsing never raises.

Pure: no clock, no I/O, no trio. Time comes in as an argument.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from attrs import frozen

REQUESTS, TOKENS = "requests", "tokens"

# family -> (axis, remaining header, limit header); the family names the source in the admin view.
SOURCES: Mapping[str, tuple[str, str, str]] = {
    "anthropic-ratelimit-requests": (REQUESTS, "anthropic-ratelimit-requests-remaining",
                                     "anthropic-ratelimit-requests-limit"),
    "anthropic-ratelimit-tokens": (TOKENS, "anthropic-ratelimit-tokens-remaining",
                                   "anthropic-ratelimit-tokens-limit"),
    "anthropic-ratelimit-input-tokens": (TOKENS, "anthropic-ratelimit-input-tokens-remaining",
                                         "anthropic-ratelimit-input-tokens-limit"),
    "anthropic-ratelimit-output-tokens": (TOKENS, "anthropic-ratelimit-output-tokens-remaining",
                                          "anthropic-ratelimit-output-tokens-limit"),
    "anthropic-ratelimit-unified-requests": (REQUESTS, "anthropic-ratelimit-unified-requests-remaining",
                                             "anthropic-ratelimit-unified-requests-limit"),
    "anthropic-ratelimit-unified-tokens": (TOKENS, "anthropic-ratelimit-unified-tokens-remaining",
                                           "anthropic-ratelimit-unified-tokens-limit"),
    "x-ratelimit-requests": (REQUESTS, "x-ratelimit-remaining-requests", "x-ratelimit-limit-requests"),
    "x-ratelimit-tokens": (TOKENS, "x-ratelimit-remaining-tokens", "x-ratelimit-limit-tokens"),
}
RECOGNIZED = frozenset(h for _, rem, lim in SOURCES.values() for h in (rem, lim))
# Cheap prefix test for the request path: only these headers are worth handing to the observer.
PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")

MAX_VALUE = 10**15          # larger counts are not a real quota; ignore them
MAX_RAW_LENGTH = 64         # a raw value kept for the admin view is cut to this many characters
_NUMBER = re.compile(r"[0-9]{1,16}(?:\.[0-9]{1,9})?")

# Reasons for routing_quota_aware_decisions_total{backend,reason}, one per candidate per pick.
OBSERVED_USED = "observed_used"   # a fresh snapshot with a usable axis replaced the local estimate
STALE = "stale"                   # the snapshot is older than quota_aware.ttl: the local estimate stands
ABSENT = "absent"                 # no snapshot for this backend
UNUSABLE = "unusable"             # fresh, but no axis had both remaining and a limit > 0
REASONS = (OBSERVED_USED, STALE, ABSENT, UNUSABLE)


@frozen
class Source:
    """One family's pair as parsed; ``ratio`` is None unless the pair is usable."""

    axis: str
    remaining: float | None
    limit: float | None
    ratio: float | None


@frozen
class QuotaSnapshot:
    """The quota one backend's provider reported on its latest response."""

    observed_at: float
    requests_ratio: float | None
    tokens_ratio: float | None
    raw: Mapping[str, str]            # recognized header -> value as received (cut to MAX_RAW_LENGTH)
    sources: Mapping[str, Source]     # family -> parsed pair, for every family with any header present

    @property
    def usable(self) -> bool:
        return self.requests_ratio is not None or self.tokens_ratio is not None


def number(text: str) -> float | None:
    """A non-negative count from a header value, or None when malformed."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if value <= MAX_VALUE else None


Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def pairs(headers: Headers) -> Iterable[tuple[str, str]]:
    """(lower-cased name, value) of a mapping, an ``httpx.Headers`` or raw pairs; bytes are latin-1."""
    if hasattr(headers, "multi_items"):      # httpx.Headers: repeated names stay apart
        items = headers.multi_items()
    else:
        items = headers.items() if isinstance(headers, Mapping) else headers
    for key, value in items:
        if isinstance(key, bytes):
            key = key.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(key, str) and isinstance(value, str):
            yield key.lower(), value


def rate_limit_headers(headers: Headers) -> tuple[tuple[str, str], ...]:
    """The headers worth keeping for ``parse``: a cheap prefix filter for the request path."""
    return tuple((k, v) for k, v in pairs(headers) if k.startswith(PREFIXES))


def recognized(headers: Headers) -> tuple[tuple[str, str], ...]:
    """The rate-limit headers among ``headers`` (lower-cased names); the last of a repeated name wins."""
    found: dict[str, str] = {}
    for key, value in pairs(headers):
        if key in RECOGNIZED:
            found[key] = value
    return tuple(found.items())


def parse(headers: Headers, now: float) -> QuotaSnapshot | None:
    """The snapshot ``headers`` describe, observed at ``now``; None when none is recognized."""
    raw = dict(recognized(headers))
    if not raw:
        return None
    sources: dict[str, Source] = {}
    best: dict[str, float] = {}
    for family, (axis, rem_header, lim_header) in SOURCES.items():
        if rem_header not in raw and lim_header not in raw:
            continue
        remaining = number(raw[rem_header]) if rem_header in raw else None
        limit = number(raw[lim_header]) if lim_header in raw else None
        ratio = None
        if remaining is not None and limit is not None and limit > 0:
            ratio = min(1.0, remaining / limit)
            best[axis] = min(ratio, best.get(axis, 1.0))
        sources[family] = Source(axis, remaining, limit, ratio)
    return QuotaSnapshot(observed_at=now, requests_ratio=best.get(REQUESTS), tokens_ratio=best.get(TOKENS),
                         raw={k: v[:MAX_RAW_LENGTH] for k, v in raw.items()}, sources=sources)


def age(snapshot: QuotaSnapshot, now: float) -> float:
    return now - snapshot.observed_at


def is_fresh(snapshot: QuotaSnapshot, now: float, ttl: float) -> bool:
    """True while the snapshot is at most ``ttl`` seconds old (the boundary instant is fresh)."""
    return age(snapshot, now) <= ttl


def observed(snapshot: QuotaSnapshot | None, now: float, ttl: float) -> tuple[QuotaSnapshot | None, str]:
    """The snapshot when it may replace the local estimate at ``now``, and the reason either way."""
    if snapshot is None:
        return None, ABSENT
    if not is_fresh(snapshot, now, ttl):
        return None, STALE
    if not snapshot.usable:
        return None, UNUSABLE
    return snapshot, OBSERVED_USED


def observe_all(candidates: Iterable[str], view: Mapping[str, QuotaSnapshot], now: float,
                ttl: float) -> tuple[dict[str, QuotaSnapshot], dict[str, str]]:
    """For one pick: the usable fresh snapshots by backend, and every candidate's reason."""
    usable: dict[str, QuotaSnapshot] = {}
    reasons: dict[str, str] = {}
    for name in candidates:
        snap, reasons[name] = observed(view.get(name), now, ttl)
        if snap is not None:
            usable[name] = snap
    return usable, reasons
