"""A call's prompt as token ids, the way its engine will see them: what the KV index keys blocks by.

A ``PromptTokenizer`` is the model's tokenizer (and chat template) the
operator provided (``kv_cache_index.tokenizers``), or the simulated engines'
own; without one, the prompt's canonical text is read as bytes (one "token"
per byte), which keys the gateway's own approximate record consistently but
never matches an engine's events.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence


class PromptTokenizer(Protocol):
    def chat(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None) -> list[int]:
        """A chat call's prompt, rendered by the model's chat template (with the generation prompt) and encoded."""
        ...

    def text(self, prompt: str) -> list[int]:
        """A completions call's prompt, encoded as the engine encodes it (special tokens added)."""
        ...
