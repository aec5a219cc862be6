"""Which tokenizer turns a call's prompt into the token ids the KV index keys blocks by.

In order: the tokenizer the operator configured for the model
(``kv_cache_index.tokenizers``), else the simulated engines' own when every
candidate is a simulated backend, else none: the prompt's canonical text is
read as bytes (``actors/routing/kv_blocks.py``), which keys the gateway's
own record consistently but never matches an engine's events.
"""

from __future__ import annotations

from switchyard.actors.kv.prompt_tokens import PromptTokenizer
from switchyard.actors.kv.sim_tokens import SimulatedTokenizer
from switchyard.actors.kv.tokenizer_files import Tokenizers
from switchyard.config.schema import BackendType, Snapshot

SIMULATED = SimulatedTokenizer()


def configured(snapshot: Snapshot, model: str, loaded: Tokenizers | None) -> PromptTokenizer | None:
    """The loaded tokenizer of ``model``'s ``kv_cache_index.tokenizers`` entry (its files:
    ``snapshot.kv_cache_index.tokenizer_files(model)``; loaded by the Runtime at start and on reload)."""
    if loaded is None or snapshot.kv_cache_index.tokenizer_files(model) is None:
        return None
    return loaded.for_model(model)


def tokenizer_for(snapshot: Snapshot, model: str, backend_kind: BackendType | None,
                  loaded: Tokenizers | None = None) -> PromptTokenizer | None:
    """``model``'s tokenizer on candidates of ``backend_kind`` (None: of several kinds); None: the bytes
    fallback."""
    found = configured(snapshot, model, loaded)
    if found is not None:
        return found
    if backend_kind is BackendType.SIMULATED:
        return SIMULATED
    return None
