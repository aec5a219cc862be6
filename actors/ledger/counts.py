"""An answer's usage, normalized: whatever shape its backend reported it in, the counts pricing reads."""

from __future__ import annotations

import math
from typing import Any

from attrs import frozen


@frozen
class TokenCounts:
    """One answer's usage, normalized: ``input`` counts every prompt token (cached and image ones
    included), ``output`` every generated one (reasoning included)."""

    input: int = 0
    output: int = 0
    cached: int = 0              # of input: read from the provider's cache
    cache_write: int = 0         # of input: written to the provider's cache (Anthropic's, Bedrock's)
    reasoning: int = 0           # of output
    image_input: int = 0         # of input: image tokens
    cached_image_input: int = 0  # of image_input: cached
    images: tuple[tuple[str | None, str | None, int], ...] = ()   # generated: (size, quality, n)
    search_units: int = 0        # rerank search units billed (reported, or counted: actors/scores_relay.py)
    audio_input: int = 0         # of input: audio tokens (gpt-4o-transcribe's, an audio chat model's)
    audio_seconds: float = 0.0   # audio transcribed or translated (priced per minute)
    characters: int = 0          # text spoken (speech: priced per character)

    def __add__(self, other: "TokenCounts") -> "TokenCounts":
        return TokenCounts(self.input + other.input, self.output + other.output, self.cached + other.cached,
                           self.cache_write + other.cache_write, self.reasoning + other.reasoning,
                           self.image_input + other.image_input, self.cached_image_input + other.cached_image_input,
                           self.images + other.images, self.search_units + other.search_units,
                           self.audio_input + other.audio_input, self.audio_seconds + other.audio_seconds,
                           self.characters + other.characters)


def _whole(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and math.isfinite(value) and value >= 0:
        return int(value)
    return 0


def counts_of(usage: Any) -> TokenCounts | None:
    """An answer's ``usage`` object as TokenCounts (None when there is none), in any of the shapes
    backends report: Chat Completions (``prompt_tokens``, ``*_tokens_details``), Responses
    (``input_tokens``, ``input_tokens_details``) or Anthropic (``input_tokens`` without the cache's
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens``, which are added). Cache writes are
    ``cache_write_tokens`` in the details (the Responses usage's name, which the wires give chat usage too)."""
    if not isinstance(usage, dict):
        return None
    # input_token_details: the audio API's spelling (gpt-4o-transcribe's usage)
    details_in = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") \
        or usage.get("input_token_details")
    details_out = usage.get("completion_tokens_details") or usage.get("output_tokens_details")
    details_in = details_in if isinstance(details_in, dict) else {}
    details_out = details_out if isinstance(details_out, dict) else {}
    written = _whole(details_in.get("cache_write_tokens"))
    if "prompt_tokens" in usage:
        prompt = _whole(usage.get("prompt_tokens"))
        cached = _whole(details_in.get("cached_tokens"))
    else:
        read, created = _whole(usage.get("cache_read_input_tokens")), _whole(usage.get("cache_creation_input_tokens"))
        prompt = _whole(usage.get("input_tokens")) + read + created
        cached = _whole(details_in.get("cached_tokens")) or read
        written = written or created
    output = _whole(usage["completion_tokens"] if "completion_tokens" in usage else usage.get("output_tokens"))
    cached = min(cached, prompt)
    return TokenCounts(input=prompt, output=output, cached=cached, cache_write=min(written, prompt - cached),
                       reasoning=_whole(details_out.get("reasoning_tokens")),
                       image_input=_whole(details_in.get("image_tokens")),
                       cached_image_input=_whole(details_in.get("cached_image_tokens")),
                       audio_input=min(_whole(details_in.get("audio_tokens")), prompt))
