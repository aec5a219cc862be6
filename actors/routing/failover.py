"""What to do after an attempt failed: the pure half of retries and fallback.

A failure is first classified (``classify_status`` for HTTP answers; the
actor maps timeouts and connection errors itself). ``RoutePlan.decide`` then
answers with one step:

- ``Retry(delay)``: the same backend and model again after ``delay``;
- ``MoveOn(sibling, chain)``: another backend for the same model if
  ``sibling``, else the next model of the fallback chain if ``chain``;
- ``Stop``: the failure is the answer.

Rules (see docs/failover.md): a request that got no answer at all is never
retried on the same route; 429/503 get at most two tries on one route; a
Retry-After that does not fit the budget or ``max_delay`` moves on instead
of waiting; context-length and content-policy rejections never retry the
same model; ``replay: disabled`` backends never see a request twice; and
every wait is backoff with jitter, never a burst.
"""

from __future__ import annotations

import json
from enum import Enum

from attrs import frozen

from switchyard.config.resilience import Fallback, RetryPolicy
from switchyard.config.schema import BackendConfig


class Kind(str, Enum):
    STATUS = "status"                           # an HTTP error status worth another try
    CLIENT_ERROR = "client_error"               # 4xx: the request itself is wrong
    CONTEXT_WINDOW = "context_window_exceeded"
    CONTENT_POLICY = "content_policy"
    MODEL_NOT_FOUND = "model_not_found"
    TIMEOUT = "timeout"
    CONNECTION = "connection_error"
    PROTOCOL = "protocol_error"
    UNHEALTHY = "backend_unhealthy"             # nothing routable, or the dial bound is full
    EMPTY_REPLY = "empty_reply"
    QUALITY_CHECK = "quality_check_failed"      # a whole answer that failed fallback.quality_check


@frozen
class Failure:
    kind: Kind
    status: int | None = None
    retry_after: float | None = None
    timeout: str | None = None                  # first_byte | chunk_interval | total


@frozen
class Retry:
    delay: float


@frozen
class MoveOn:
    sibling: bool                               # another backend of the same model may take it
    chain: bool                                 # the next fallback model may take it


@frozen
class Stop:
    pass


Step = Retry | MoveOn | Stop

# 429 and 503 say "not now": retrying one route more than this is a burst.
PERSISTENT_STATUSES = frozenset({429, 503})
PERSISTENT_MAX_TRIES = 2

_CONTEXT_CODES = frozenset({"context_length_exceeded", "context_window_exceeded", "string_above_max_length"})
_CONTEXT_PHRASES = ("maximum context length", "context length", "context window", "prompt is too long",
                    "too many tokens", "reduce the length")
_POLICY_CODES = POLICY_CODES = frozenset({"content_filter", "content_policy_violation", "content_policy"})
_POLICY_PHRASES = ("content management policy", "content filter", "content policy")


def classify_status(status: int, body: bytes) -> Kind:
    """An HTTP error answer's kind, from its status and (if JSON) its error object."""
    code, message = _error_fields(body)
    if 400 <= status < 500 and status not in (408, 409, 429):
        if code in _CONTEXT_CODES or any(p in message for p in _CONTEXT_PHRASES):
            return Kind.CONTEXT_WINDOW
        if code in _POLICY_CODES or any(p in message for p in _POLICY_PHRASES):
            return Kind.CONTENT_POLICY
        if status == 404 and (code == "model_not_found" or "model" in message):
            return Kind.MODEL_NOT_FOUND
        return Kind.CLIENT_ERROR
    return Kind.STATUS


def _error_fields(body: bytes) -> tuple[str, str]:
    try:
        err = json.loads(body).get("error")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return "", body[:500].decode("utf-8", "replace").lower()
    if not isinstance(err, dict):
        return "", str(err or "").lower()
    return str(err.get("code") or err.get("type") or ""), str(err.get("message") or "").lower()


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds form; dates are ignored)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def backoff(policy: RetryPolicy, tries: int, draw: float) -> float:
    """Delay before try number ``tries + 1``; jitter keeps retries from lining up."""
    delay = min(policy.max_delay, policy.initial_delay * policy.backoff_multiplier ** (tries - 1))
    return delay * (0.5 + 0.5 * draw) if policy.jitter else delay


class RoutePlan:
    """Per-call retry and fallback state. No clock: ``budget_left`` comes in."""

    def __init__(self, model: str, fallback: Fallback, default_policy: RetryPolicy) -> None:
        self.fallback = fallback
        self.default_policy = default_policy
        chain = fallback.fallback_chains.get(model, ()) if fallback.enabled else ()
        settings = fallback.model_settings.get(model)
        if settings is not None and not settings.fallback_enabled:
            chain = ()
        self.models: tuple[str, ...] = (model, *chain)
        self.model_index = 0
        self.tries = 0            # attempts made on the current route
        self.extra_empty_hops = 0

    @property
    def model(self) -> str:
        return self.models[self.model_index]

    @property
    def hops(self) -> int:
        return self.model_index

    def policy(self, backend: BackendConfig) -> RetryPolicy:
        return backend.retry_override or self.default_policy

    def decide(self, failure: Failure, backend: BackendConfig, budget_left: float, draw: float) -> Step:
        policy = self.policy(backend)
        kind = failure.kind
        if kind is Kind.CLIENT_ERROR:
            return Stop()
        if kind in (Kind.CONTEXT_WINDOW, Kind.CONTENT_POLICY, Kind.EMPTY_REPLY, Kind.QUALITY_CHECK):
            # the model's answer, not the route, is at fault: another backend of the same model answers alike
            return MoveOn(sibling=False, chain=self.chain_allows(failure))
        retry = self._retry_delay(failure, policy, budget_left, draw) if backend.replay else None
        if retry is not None:
            return Retry(retry)
        return MoveOn(sibling=True, chain=self.chain_allows(failure))

    def _retry_delay(self, failure: Failure, policy: RetryPolicy, budget_left: float, draw: float) -> float | None:
        kind = failure.kind
        if kind is Kind.STATUS:
            if failure.status not in policy.retryable_status_codes:
                return None
            limit = policy.max_attempts
            if failure.status in PERSISTENT_STATUSES:
                limit = min(limit, PERSISTENT_MAX_TRIES)
        elif kind in (Kind.CONNECTION, Kind.PROTOCOL):
            if "ConnectionError" not in policy.retryable_errors:
                return None
            limit = policy.max_attempts
        else:  # timeouts (no answer: never the same route again), unhealthy, model not found
            return None
        if self.tries >= limit:
            return None
        if failure.retry_after is not None:
            if failure.retry_after > min(budget_left, policy.max_delay):
                return None
            return failure.retry_after
        delay = backoff(policy, self.tries, draw)
        return delay if delay < budget_left else None

    def chain_allows(self, failure: Failure) -> bool:
        """May this failure move the call to the next chain model (before the stream started)?"""
        if self.model_index + 1 >= len(self.models):
            return False
        if self.hops >= self.fallback.fallback_policy.max_fallback_attempts:
            return False
        return self.triggered(failure)

    def triggered(self, failure: Failure) -> bool:
        """Is this failure one the trigger conditions send down the chain?"""
        policy = self.fallback.fallback_policy
        t = policy.trigger_conditions
        kind = failure.kind
        if kind is Kind.STATUS:
            return failure.status in t.error_codes
        if kind is Kind.TIMEOUT:
            return t.timeout
        if kind in (Kind.CONNECTION, Kind.PROTOCOL):
            return t.connection_error
        if kind is Kind.UNHEALTHY:
            return t.backend_unhealthy
        if kind is Kind.MODEL_NOT_FOUND:
            return t.model_not_found
        if kind is Kind.CONTEXT_WINDOW:
            return t.context_window_exceeded
        if kind is Kind.CONTENT_POLICY:
            return policy.content_policy_fallback
        if kind is Kind.EMPTY_REPLY:
            empty = self.fallback.empty_reply_retry
            return empty.enabled and self.extra_empty_hops < empty.max_extra_hops
        return kind is Kind.QUALITY_CHECK   # turned on per model by fallback.quality_check

    # --- moves, made by the actor once it knows what is routable -------------

    def attempted(self) -> None:
        self.tries += 1

    def moved_to_sibling(self) -> None:
        self.tries = 0

    def moved_to_next_model(self, failure: Failure) -> str:
        if failure.kind is Kind.EMPTY_REPLY:
            self.extra_empty_hops += 1
        self.model_index += 1
        self.tries = 0
        return self.model
