"""Frozen config for what happens when backends misbehave: timeouts, retry, fallback.

Split from ``schema.py`` because it is one idea of its own: every budget and
every second chance a call gets. Defaults follow the specification's tuning
guide where it names one.
"""

from __future__ import annotations

from typing import Mapping

import attrs
from attrs import frozen

DEFAULT_CONTINUATION_PROMPT = (
    "Continue from where you left off exactly. Do not repeat any previously generated content."
)


@frozen
class StandardTimeouts:
    """Non-streaming calls: until the response headers, and the whole call."""

    first_byte: float = 60.0
    total: float = 300.0


@frozen
class StreamingTimeouts:
    first_byte: float = 120.0      # request sent -> first SSE data event
    chunk_interval: float = 30.0   # silence allowed between data events
    total: float = 600.0           # the whole stream, one attempt


@frozen
class ModelTimeouts:
    """Per-model overrides; ``None`` keeps the general value."""

    standard_first_byte: float | None = None
    standard_total: float | None = None
    first_byte: float | None = None
    chunk_interval: float | None = None
    total: float | None = None


@frozen
class Timeouts:
    connection: float = 10.0
    standard: StandardTimeouts = StandardTimeouts()
    streaming: StreamingTimeouts = StreamingTimeouts()
    model_overrides: Mapping[str, ModelTimeouts] = attrs.field(factory=dict)
    max_chunk_interval: float = 60.0               # timeouts.limits.max_chunk_interval
    streaming_fallback_budget_multiplier: float = 2.0


MAX_CHUNK_INTERVAL_CEILING = 300.0
RETRYABLE_ERRORS = ("ConnectionError", "TimeoutError")


@frozen
class RetryPolicy:
    max_attempts: int = 3                 # tries on one route, the first included
    initial_delay: float = 0.1
    max_delay: float = 30.0
    backoff_multiplier: float = 2.0
    jitter: bool = True
    retryable_status_codes: frozenset[int] = frozenset({429, 500, 502, 503, 504, 529})
    retryable_errors: frozenset[str] = frozenset(RETRYABLE_ERRORS)
    timeout: float | None = None          # retry_override only: caps each attempt on that backend


@frozen
class TriggerConditions:
    error_codes: frozenset[int] = frozenset({429, 500, 502, 503, 504, 529})
    timeout: bool = True
    connection_error: bool = True
    model_not_found: bool = True
    backend_unhealthy: bool = True
    context_window_exceeded: bool = True


@frozen
class FallbackPolicy:
    trigger_conditions: TriggerConditions = TriggerConditions()
    max_fallback_attempts: int = 3
    fallback_timeout_multiplier: float = 1.5
    preserve_parameters: bool = True
    max_concurrent_dials_per_backend: int = 50
    content_policy_fallback: bool = False


@frozen
class EmptyReplyRetry:
    enabled: bool = False
    max_extra_hops: int = 1


@frozen
class ModelFallbackSettings:
    fallback_enabled: bool = True
    notify_on_fallback: bool = True


@frozen
class Fallback:
    enabled: bool = False
    mid_stream_enabled: bool = True
    fallback_chains: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    fallback_policy: FallbackPolicy = FallbackPolicy()
    empty_reply_retry: EmptyReplyRetry = EmptyReplyRetry()
    model_settings: Mapping[str, ModelFallbackSettings] = attrs.field(factory=dict)


@frozen
class MidStreamFallback:
    enabled: bool = True                  # continuation (true) vs always restart (false)
    min_accumulated_tokens: int = 50
    max_fallback_attempts: int = 2
    continuation_prompt: str = DEFAULT_CONTINUATION_PROMPT
    same_model_first: bool = False
    # How a continuation is asked for: "auto" (assistant prefill where the
    # target takes it, else restart with the repeated part suppressed) or
    # "prompt" (the partial answer plus continuation_prompt as a user turn).
    continuation_style: str = "auto"


@frozen
class Streaming:
    mid_stream_fallback: MidStreamFallback = MidStreamFallback()
