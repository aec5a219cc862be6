"""What a call cost, from the model metadata's pricing and the usage the upstream reported.

The rules (the model metadata section of the spec): rates are USD per 1M
tokens; ``cached_input_discount`` takes that fraction off the input rate for
cached input tokens, unless ``cache_read_input_tokens`` names their rate;
tokens written to the provider's prompt cache (Anthropic, Bedrock) are priced
at ``cache_write_input_tokens`` when it is set (else as input); image input tokens are priced at ``image_input_tokens``
(cached ones at ``cached_image_input_tokens``, an explicit rate, not a
discount) on top of the text tokens at the text rates; ``per_image`` is USD
per generated image, ``per_search_unit`` USD per rerank search unit; audio
input tokens are priced at ``audio_input_tokens`` when it is set (else as text
input); ``per_audio_minute`` prices the seconds of audio a transcription or
translation heard, ``input_characters`` (per 1M) the characters speech spoke;
when the prompt exceeds ``long_context.threshold_tokens``
the tier's rates apply to the whole call (equal to it: the base rates); a
batch line's cost (ledger purpose ``batch``) is the whole of it less the
``batch_discount`` fraction, as providers price their Batch APIs.
Decimal arithmetic, so a cost is exact to the last digit the rates allow.
A model without pricing has no cost (None), never 0. Pure: no I/O, no clock.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Mapping

from switchyard.actors.ledger.counts import TokenCounts
from switchyard.config.metadata import Pricing

MILLION = Decimal(1_000_000)
ZERO = Decimal(0)
SIXTY = Decimal(60)


def _rate(value: float | None) -> Decimal:
    return ZERO if value is None else Decimal(repr(value))


def priced(pricing: Pricing | None) -> bool:
    """Whether a model's pricing says anything a cost can be made of."""
    return pricing is not None and any(v is not None for v in (
        pricing.input_tokens, pricing.output_tokens, pricing.image_input_tokens,
        pricing.cached_image_input_tokens, pricing.per_image, pricing.cache_read_input_tokens,
        pricing.cache_write_input_tokens, pricing.per_search_unit, pricing.audio_input_tokens,
        pricing.per_audio_minute, pricing.input_characters))


def cost_of(pricing: Pricing | None, counts: TokenCounts, batch: bool = False) -> Decimal | None:
    """USD for ``counts`` at ``pricing`` (``batch``: a batch line's, ``batch_discount`` taken off); None when
    the model has no pricing."""
    if pricing is None or not priced(pricing):
        return None
    input_rate, output_rate = pricing.input_tokens, pricing.output_tokens
    tier = pricing.long_context
    if tier is not None and tier.threshold_tokens is not None and counts.input > tier.threshold_tokens:
        input_rate = tier.input_tokens if tier.input_tokens is not None else input_rate
        output_rate = tier.output_tokens if tier.output_tokens is not None else output_rate
    text_in = _rate(input_rate)
    has_image_rates = pricing.image_input_tokens is not None or pricing.cached_image_input_tokens is not None
    image = counts.image_input if has_image_rates else 0
    cached_image = min(counts.cached_image_input, image)
    audio = counts.audio_input if pricing.audio_input_tokens is not None else 0
    text_tokens = max(counts.input - image - audio, 0)
    cached_text = min(max(counts.cached - cached_image, 0), text_tokens)
    written = min(counts.cache_write, text_tokens - cached_text)
    read_rate = _rate(pricing.cache_read_input_tokens) if pricing.cache_read_input_tokens is not None \
        else text_in * (1 - _rate(pricing.cached_input_discount))
    write_rate = _rate(pricing.cache_write_input_tokens) if pricing.cache_write_input_tokens is not None else text_in
    total = (text_tokens - cached_text - written) * text_in + cached_text * read_rate + written * write_rate
    if image:
        image_rate = _rate(pricing.image_input_tokens)
        cached_rate = _rate(pricing.cached_image_input_tokens) if pricing.cached_image_input_tokens is not None \
            else image_rate
        total += (image - cached_image) * image_rate + cached_image * cached_rate
    total += audio * _rate(pricing.audio_input_tokens)
    total += counts.output * _rate(output_rate)
    total += counts.characters * _rate(pricing.input_characters)
    total = total / MILLION
    if counts.audio_seconds:
        total += Decimal(repr(counts.audio_seconds)) / SIXTY * _rate(pricing.per_audio_minute)
    for size, quality, n in counts.images:
        total += n * image_price(pricing.per_image, size, quality)
    if counts.search_units and pricing.per_search_unit is not None:
        total += counts.search_units * _rate(pricing.per_search_unit)
    if batch and pricing.batch_discount is not None:
        total *= 1 - _rate(pricing.batch_discount)
    return total


def image_price(per_image: Mapping[str, float | Mapping[str, float]] | None, size: str | None,
                quality: str | None) -> Decimal:
    """One generated image's price: ``per_image[size]``, ``per_image[tier]`` (the quality's name) or
    ``per_image[size][quality]``; 0 when the table has no entry for it."""
    if not per_image:
        return ZERO
    entry = per_image.get(size) if size is not None else None
    if entry is None and quality is not None:
        entry = per_image.get(quality)
    if isinstance(entry, Mapping):
        entry = entry.get(quality) if quality is not None else (next(iter(entry.values())) if len(entry) == 1 else None)
    return _rate(entry) if isinstance(entry, (int, float)) else ZERO


def decimal_text(cost: Decimal) -> str:
    """A cost as a plain decimal string (``0.00617``, ``0``): no exponent, no trailing zeros."""
    text = format(cost.normalize(), "f")
    return text if text != "-0" else "0"
