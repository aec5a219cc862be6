"""Frozen config for what happens when backends misbehave: timeouts, retry, fallback, circuits.

Split from ``schema.py`` because it is one idea of its own: every budget and
every second chance a call gets. Defaults follow the specification's tuning
guide where it names one.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs
from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, section
from switchyard.config.quality_check import QualityCheck

DEFAULT_CONTINUATION_PROMPT = (
    "Continue from where you left off exactly. Do not repeat any previously generated content."
)


@frozen
class StandardTimeouts:
    """Non-streaming calls: until the response headers, and the whole call."""

    first_byte: float = field(60.0, rules.duration())
    total: float = field(300.0, rules.duration())


@frozen
class StreamingTimeouts:
    first_byte: float = field(120.0, rules.duration())      # request sent -> first SSE data event
    chunk_interval: float = field(30.0, rules.duration())   # silence allowed between data events
    total: float = field(600.0, rules.duration())           # the whole stream, one attempt


@frozen
class ModelTimeouts:
    """Per-model overrides; ``None`` keeps the general value."""

    standard_first_byte: float | None = None
    standard_total: float | None = None
    first_byte: float | None = None
    chunk_interval: float | None = None
    total: float | None = None


MAX_CHUNK_INTERVAL_CEILING = 300.0


@frozen
class Timeouts:
    """YAML nests ``standard`` and ``streaming`` under ``request`` and the ceiling
    under ``limits``: ``load_resilience.timeouts`` reads those, with their checks."""

    connection: float = field(10.0, rules.duration(maximum=300), restart=True)   # the shared client's, at start
    standard: StandardTimeouts = StandardTimeouts()
    streaming: StreamingTimeouts = StreamingTimeouts()
    model_overrides: Mapping[str, ModelTimeouts] = attrs.field(factory=dict)
    # timeouts.limits.max_chunk_interval
    max_chunk_interval: float = field(60.0, rules.duration(maximum=MAX_CHUNK_INTERVAL_CEILING))
    streaming_fallback_budget_multiplier: float = field(2.0, rules.number(1, 10))


RETRYABLE_ERRORS = ("ConnectionError", "TimeoutError")


def _error_names(value: Any) -> frozenset[str]:
    return frozenset(rules.string_list(values.words(*RETRYABLE_ERRORS))(value))


@frozen
class RetryPolicy:
    max_attempts: int = field(3, rules.integer(1, 10))        # tries on one route, the first included
    initial_delay: float = field(0.1, rules.duration(allow_zero=True))
    max_delay: float = field(30.0, rules.duration(allow_zero=True))
    backoff_multiplier: float = field(2.0, rules.number(1, 10))
    jitter: bool = field(True, rules.boolean)
    retryable_status_codes: frozenset[int] = field(frozenset({429, 500, 502, 503, 504, 529}),
                                                   values.HTTP_ERROR_STATUS)
    retryable_errors: frozenset[str] = field(frozenset(RETRYABLE_ERRORS), _error_names)
    # retry_override only: caps each attempt on that backend
    timeout: float | None = field(None, rules.duration())


@frozen
class TriggerConditions:
    error_codes: frozenset[int] = field(frozenset({429, 500, 502, 503, 504, 529}), values.HTTP_ERROR_STATUS)
    timeout: bool = field(True, rules.boolean)
    connection_error: bool = field(True, rules.boolean)
    model_not_found: bool = field(True, rules.boolean)
    backend_unhealthy: bool = field(True, rules.boolean)
    context_window_exceeded: bool = field(True, rules.boolean)


@frozen
class FallbackPolicy:
    trigger_conditions: TriggerConditions = section(TriggerConditions)
    max_fallback_attempts: int = field(3, rules.integer(0, 10))
    fallback_timeout_multiplier: float = field(1.5, rules.number(1, 10))
    preserve_parameters: bool = field(True, rules.boolean)
    max_concurrent_dials_per_backend: int = field(50, rules.integer(0, 10_000))
    content_policy_fallback: bool = field(False, rules.boolean)


@frozen
class EmptyReplyRetry:
    enabled: bool = field(False, rules.boolean)
    max_extra_hops: int = field(1, rules.integer(1, 5))


@frozen
class ModelFallbackSettings:
    fallback_enabled: bool = field(True, rules.boolean)
    notify_on_fallback: bool = field(True, rules.boolean)


@frozen
class Fallback:
    """``fallback_chains`` and ``model_settings`` are keyed by model name, and ``quality_check.models`` names
    chains' models: ``load_resilience.fallback``."""

    enabled: bool = field(False, rules.boolean)
    mid_stream_enabled: bool = field(True, rules.boolean)
    fallback_chains: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    fallback_policy: FallbackPolicy = section(FallbackPolicy)
    empty_reply_retry: EmptyReplyRetry = section(EmptyReplyRetry)
    model_settings: Mapping[str, ModelFallbackSettings] = attrs.field(factory=dict)
    quality_check: QualityCheck = QualityCheck()   # judged by no model unless it names some


def _failure_rate(value: Any) -> float:
    """A share of calls: above 0, at most 1."""
    rate = rules.number()(value)
    if not 0 < rate <= 1:
        raise rules.Invalid(f"must be greater than 0 and at most 1, got {value}")
    return rate


@frozen
class CircuitBreaker:
    """``circuit_breaker``: when real calls' failures take a (backend, model) out of rotation and how
    it comes back. Read by ``load_resilience.circuit_breaker`` (its cross-field checks)."""

    enabled: bool = field(True, rules.boolean)     # false: real calls never open a circuit
    # failures within the window that open a circuit; None: health_checks.unhealthy_threshold
    failure_threshold: int | None = field(None, rules.integer(1, 1000))
    # a window of counting begins at a failure and lasts this long
    window: float = field(30.0, rules.duration(minimum=0.1, maximum=86_400))
    # ... and the circuit opens only when at least this share of the window's calls failed
    failure_rate: float = field(0.5, _failure_rate)
    # ... out of at least this many calls in the window; None: the failure threshold
    minimum_calls: int | None = field(None, rules.integer(1, 100_000))
    # ... all three without the failures of the min_callers - 1 callers (API keys, else client addresses)
    # with the most; 1: nobody is left out
    min_callers: int = field(2, rules.integer(1, 100))
    timeout: float = field(2.0, rules.duration(minimum=0.01, maximum=3600))        # open before the first probe
    max_timeout: float = field(16.0, rules.duration(minimum=0.01, maximum=86_400))  # cap of the doubling
    half_open_max_requests: int = field(1, rules.integer(1, 1000))        # probes in flight at once
    half_open_success_threshold: int = field(1, rules.integer(1, 1000))   # successful probes that close it


@frozen
class MidStreamFallback:
    enabled: bool = field(True, rules.boolean)     # continuation (true) vs always restart (false)
    min_accumulated_tokens: int = field(50, rules.integer(0, 100_000))
    max_fallback_attempts: int = field(2, rules.integer(0, 10))
    continuation_prompt: str = field(DEFAULT_CONTINUATION_PROMPT, values.continuation_prompt)
    same_model_first: bool = field(False, rules.boolean)
    # How a continuation is asked for: "auto" (assistant prefill where the
    # target takes it, else restart with the repeated part suppressed) or
    # "prompt" (the partial answer plus continuation_prompt as a user turn).
    continuation_style: str = field("auto", values.words("auto", "prompt"))


@frozen
class Streaming:
    mid_stream_fallback: MidStreamFallback = section(MidStreamFallback)
