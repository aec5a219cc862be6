"""Where an answer's time went: the gateway's own, and the wait on upstreams, for ``Server-Timing``.

Every HTTP request gets one ``Timing`` when it arrives (``App.http``); a
call's trace holds it (``CallTrace.timing``) and notes on it, with instants
the call takes anyway, each *wait* on an upstream: an attempt from its dial
(after any fallback dial permit) until its answer is in hand, or until it
failed; a stream's attempt until the backend's stream ended (relaying each
chunk happens while the backend still answers, and is counted as the
upstream's); a retry's backoff; a deduplicated follower's wait on the
flight it joined. The gateway's own time is the rest: reading and
checking the request, admission, the features in force (a guardrail's
webhook or moderation model, smart routing's classifier, the semantic
cache's embeddings call, the tool loop's searches and tool calls),
translating and writing the answer.

Pure: instants are arguments (seconds on ``trio.current_time()``'s clock).
The header follows the W3C Server Timing grammar: ``name;dur=<ms>``
metrics, comma-separated.
"""

from __future__ import annotations

HEADER = b"server-timing"


class Timing:
    """One request's instants: when it was in, the upstream waits so far, and the one open now, if any."""

    __slots__ = ("arrived", "waited", "dialed", "reached", "cached")

    def __init__(self, arrived: float) -> None:
        self.arrived = arrived              # the request is in (its body read): the gateway's time starts
        self.waited: float | None = None    # seconds of ended waits; None: no upstream was waited on yet
        self.dialed: float | None = None    # the open wait's start (None: none is open)
        self.reached: float | None = None   # the open wait's answer in hand, about to go out to the client
        self.cached = False                 # answered from the response cache

    def dial(self, at: float) -> None:
        """A wait on an upstream begins at ``at`` (an attempt dialed, a backoff or a dedup follow began)."""
        self.dialed, self.reached = at, None

    def reach(self, at: float) -> None:
        """The open wait's answer is in hand at ``at``, its first byte about to go to the client."""
        if self.dialed is not None and self.reached is None:
            self.reached = at

    def hang_up(self, at: float) -> None:
        """The open wait ended at ``at``."""
        if self.dialed is not None:
            self.waited = (self.waited or 0.0) + (at - self.dialed)
            self.dialed = self.reached = None

    def upstream(self, now: float) -> float | None:
        """Seconds waited on upstreams by ``now``: an open wait counts to its answer, or to ``now``."""
        if self.dialed is None:
            return self.waited
        end = self.reached if self.reached is not None else now
        return (self.waited or 0.0) + (end - self.dialed)

    def gateway(self, now: float) -> float:
        """The gateway's own seconds by ``now``: since the request was in, less the upstream waits."""
        return max(0.0, now - self.arrived - (self.upstream(now) or 0.0))

    def header(self, now: float, whole: bool) -> bytes:
        """The ``Server-Timing`` value of an answer whose headers go out at ``now``; ``whole``: its body goes
        with them (``total`` is known), else a stream's headers with what is known at its first byte."""
        return server_timing(now - self.arrived, self.upstream(now), whole, self.cached)


def server_timing(total: float, upstream: float | None, whole: bool, cached: bool = False) -> bytes:
    """``gateway;dur=…`` alone when no upstream was waited on (a refusal, a cache hit: ``cache;desc=hit``);
    else with ``upstream;dur=…``, and ``total;dur=…`` for a whole answer. Milliseconds to the microsecond,
    counted in whole microseconds so that gateway and upstream add up to the total exactly."""
    total_us = int(total * 1e6 + 0.5) if total > 0 else 0
    if upstream is None:
        value = b"gateway;dur=%.3f" % (total_us / 1000)
    else:
        upstream_us = int(upstream * 1e6 + 0.5)
        gateway_us = total_us - upstream_us if total_us > upstream_us else 0
        if whole:
            value = b"gateway;dur=%.3f, upstream;dur=%.3f, total;dur=%.3f" % (
                gateway_us / 1000, upstream_us / 1000, total_us / 1000)
        else:
            value = b"gateway;dur=%.3f, upstream;dur=%.3f" % (gateway_us / 1000, upstream_us / 1000)
    return value + b", cache;desc=hit" if cached else value
