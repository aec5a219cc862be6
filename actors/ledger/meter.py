"""What one call has spent so far, attempt by attempt: tokens and cost, for the ledger and the client.

Every attempt that consumed tokens counts: a stream cut half-way and
continued on another backend is two priced attempts. An attempt is priced
on the usage its backend reported; without one (a stream cut before its
usage chunk, a backend that reports none) its tokens are estimated -- the
prompt by the shared estimator (``routing/token_estimate.py``), the answer
as one token per streamed chunk or by the estimator over a buffered
answer's text -- and the call is marked estimated. An attempt that failed
before any answer consumed nothing.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs
from attrs import frozen

from switchyard.actors.ledger.counts import TokenCounts, counts_of
from switchyard.actors.ledger.pricing import cost_of, priced
from switchyard.actors.routing.token_estimate import estimate_tokens, text_tokens
from switchyard.config.kinds import kind_of
from switchyard.config.metadata import Pricing

Images = tuple[tuple[str | None, str | None, int], ...]   # an images answer's (size, quality, n)
IMAGE_TOKENS = 1000   # an image part of a prompt, estimated as fallback's context check counts it


@frozen
class AudioUse:
    """What an audio answer is billed on besides tokens: seconds heard (a transcription's, a translation's)
    or characters spoken (speech's); ``estimated`` when the seconds are a guess from the upload's size."""

    seconds: float = 0.0
    characters: int = 0
    estimated: bool = False


class CallMeter:
    __slots__ = ("payload", "snapshot", "batch", "counts", "cost", "estimated", "_pricing", "_discounted",
                 "_prompt_estimate")

    def __init__(self, payload: Any, snapshot: Any, batch: bool = False) -> None:
        self.payload = payload
        self.snapshot = snapshot
        self.batch = batch                        # a batch line's: priced with the model's batch_discount
        self.counts = TokenCounts()
        self.cost: Decimal | None = None          # None until a priced attempt consumed something
        self.estimated = False
        self._pricing: Pricing | None = None      # the attempt in progress's model on its backend
        self._discounted = False                  # ... a batch line's, on a backend its batch price holds for
        self._prompt_estimate: int | None = None

    def begin(self, model: str, backend: str) -> None:
        meta = self.snapshot.metadata_for(model, backend)
        self._pricing = meta.pricing if meta is not None else None
        if self.batch:   # a provider's regular API bills a batch line whole (config/kinds/base.py batch_priced)
            config = self.snapshot.backend(backend)
            self._discounted = config is None or kind_of(config).batch_priced

    def _estimate(self, output: int) -> TokenCounts:
        if self._prompt_estimate is None:
            self._prompt_estimate = estimate_tokens(self.payload, image_tokens=IMAGE_TOKENS) \
                if isinstance(self.payload, dict) else 0
        return TokenCounts(input=self._prompt_estimate, output=output)

    def _counts(self, usage: Any, output_estimate: int | None, images: Images = (), search_units: int = 0,
                audio: AudioUse | None = None) -> tuple[TokenCounts, bool] | None:
        found = self._reported(usage, output_estimate, images, audio)
        if found is None or not search_units:
            return found
        return attrs.evolve(found[0], search_units=search_units), found[1]

    def _reported(self, usage: Any, output_estimate: int | None, images: Images,
                  audio: AudioUse | None) -> tuple[TokenCounts, bool] | None:
        counts = counts_of(usage)
        if audio is not None:   # an audio answer: its seconds or characters, and the tokens it reported or none
            guessed = audio.estimated and self._pricing is not None and self._pricing.per_audio_minute is not None
            return attrs.evolve(counts or TokenCounts(), audio_seconds=audio.seconds,
                                characters=audio.characters), guessed
        if images:   # an images answer: its images, and the tokens it reported (gpt-image-1) or none
            return attrs.evolve(counts or TokenCounts(), images=images), False
        if counts is not None:
            return counts, False
        if output_estimate is None:
            return None
        return self._estimate(output_estimate), True

    def total_with(self, usage: Any, output_estimate: int | None = None, images: Images = (),
                   search_units: int = 0, audio: AudioUse | None = None) -> Decimal | None:
        """The call's cost if the attempt in progress ends with ``usage`` (for the client's header or
        usage chunk), ``images`` (an images answer's (size, quality, n)) and ``search_units`` (a rerank
        answer's); None when nothing priced is involved."""
        if not priced(self._pricing):   # this attempt adds no cost: its usage need not be read here
            return self.cost
        found = self._counts(usage, output_estimate, images, search_units, audio)
        this = cost_of(self._pricing, found[0], self._discounted) if found is not None else None
        if this is None:
            return self.cost
        return this if self.cost is None else self.cost + this

    def settle(self, usage: Any, output_estimate: int | None, images: Images = (), search_units: int = 0,
               audio: AudioUse | None = None) -> None:
        """The attempt in progress is over: ``usage`` as its backend reported it (None: none came),
        ``output_estimate`` its answer's tokens as seen (None: no answer came, nothing consumed),
        ``images`` what an images answer generated, ``search_units`` what a rerank answer billed, ``audio``
        what an audio answer heard or spoke."""
        found = self._counts(usage, output_estimate, images, search_units, audio)
        pricing, self._pricing = self._pricing, None
        if found is None:
            return
        counts, estimated = found
        self.counts = self.counts + counts
        self.estimated = self.estimated or estimated
        cost = cost_of(pricing, counts, self._discounted)
        if cost is not None:
            self.cost = cost if self.cost is None else self.cost + cost

    @property
    def priced(self) -> bool:
        return priced(self._pricing)


def answer_tokens(payload: Any) -> int:
    """A buffered answer's generated tokens, estimated from its text (no usage came back)."""
    total = 0
    if not isinstance(payload, dict):
        return 0
    for choice in payload.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") or {}
        text = choice.get("text")
        if isinstance(text, str):
            total += text_tokens(text)
        if isinstance(message, dict):
            for field in ("content", "reasoning_content"):
                value = message.get(field)
                if isinstance(value, str):
                    total += text_tokens(value)
            for call in message.get("tool_calls") or ():
                args = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
                if isinstance(args, str):
                    total += text_tokens(args)
    return total
