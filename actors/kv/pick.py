"""The KV index in one pool pick: the prompt's block keys, the scorer's verdict, and once the backend is
chosen, the decision counted, the hit noted and the gateway's own record kept.

Read synchronously on the request path: the index is the KvIndexActor's,
never awaited. Consulted only with ``kv_cache_index.enabled`` and
``prefix_routing.enabled``, for a call whose prompt the index reads (chat,
completions, responses); the scorer runs when more than one healthy
candidate is left, but every such pick is recorded (``KvIndex.record``:
approximate backends only) and counts towards the chosen backend's hit
ratio.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Mapping, Sequence

from attrs import frozen

from switchyard.actors.kv.tokenizer_files import Tokenizers
from switchyard.actors.kv.tokenizers import tokenizer_for
from switchyard.actors.messages import Call
from switchyard.actors.routing import kv_scorer
from switchyard.actors.routing.engine_metrics import EngineSnapshot
from switchyard.actors.routing.kv_blocks import KeyCache, byte_chain, canonical_chat, chain
from switchyard.actors.routing.kv_index import KvIndex
from switchyard.actors.signals import engine_window
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig, Snapshot

log = logging.getLogger("switchyard.kv")

CHATS = frozenset({Endpoint.CHAT, Endpoint.RESPONSES, Endpoint.COMPACT})


@frozen
class KvRoute:
    """What the call's ``kv_route`` event says of a consulted pick: the backend chosen, the reason (None:
    one candidate, nothing to score), the prompt's full blocks and what each candidate held of them."""

    backend: str
    reason: str | None
    total_blocks: int
    held: Mapping[str, float | None]


@frozen
class Consulted:
    """The index's part of a pick in progress: the prompt's keys and, over several candidates, the verdict."""

    keys: Sequence[int]
    decision: kv_scorer.KvDecision | None


# Bytes of a call's body past which its prompt is not keyed (about 128,000 tokens of text): tokenizing and
# hashing cost about 0.2 ms per 2,000 tokens, all on the event loop.
MAX_SCORED_BODY = 512 * 1024


class KvPick:
    def __init__(self, index: KvIndex) -> None:
        self.index = index
        self.tokenizers: Tokenizers | None = None   # the operator's tokenizer files, loaded (the Runtime sets it)
        self.decisions: defaultdict[tuple[str, str], int] = defaultdict(int)   # routing_kv_decisions_total

    def consult(self, call: Call, model: str, candidates: Sequence[BackendConfig],
                engines: Mapping[str, EngineSnapshot], in_flight: Mapping[str, int], now: float) -> Consulted | None:
        """The prompt's keys and, over several candidates, the scorer's verdict; None: not consulted."""
        snap = call.snapshot
        cfg = snap.kv_cache_index
        if not cfg.enabled or not snap.prefix_routing.enabled:
            return None
        keys = prompt_keys(call, model, candidates, cfg.block_size, self.index.cache, self.tokenizers)
        if keys is None:
            return None
        if len(candidates) < 2:
            return Consulted(keys, None)
        names = [b.name for b in candidates]
        held = {name: self.index.held(name, keys, now) for name in names}
        load = snap.routing.engine_load
        engine = kv_scorer.engine_terms(names, engines, now, window=engine_window(snap),
                                        weight=load.engine_load_weight) if load.enabled else {}
        return Consulted(keys, kv_scorer.decide(names, held, len(keys), in_flight, weights(snap), engine))

    def settle(self, consulted: Consulted, snapshot: Snapshot, backend: str, now: float) -> KvRoute:
        """``backend`` was chosen: count the decision, note the hit, record the prompt there."""
        keys, decision = consulted.keys, consulted.decision
        held = decision.held if decision is not None else {backend: self.index.held(backend, keys, now)}
        if decision is not None:
            self.decisions[(backend, decision.reason)] += 1
        self.index.picked(backend, held.get(backend))
        self.index.record(backend, keys, now, snapshot.kv_cache_index.entry_ttl_seconds)
        return KvRoute(backend, decision.reason if decision is not None else None, len(keys), held)


def weights(snapshot: Snapshot) -> kv_scorer.Weights:
    scoring = snapshot.kv_cache_index.scoring
    return kv_scorer.Weights(scoring.overlap_weight, scoring.load_weight, scoring.min_overlap,
                             snapshot.prefix_routing.load_factor_epsilon)


def prompt_keys(call: Call, model: str, candidates: Sequence[BackendConfig], block_size: int,
                cache: KeyCache | None = None, loaded: Tokenizers | None = None) -> list[int] | None:
    """The keys of the call's prompt as ``model``'s engines on ``candidates`` see it; None: a call the
    index does not read (not a chat, completions or responses call, no prompt in it, or a body past
    ``MAX_SCORED_BODY``: tokenizing and keying it would hold the event loop for a long time)."""
    if len(call.body) > MAX_SCORED_BODY:
        return None
    kinds = {b.type for b in candidates}
    tokenizer = tokenizer_for(call.snapshot, model, kinds.pop() if len(kinds) == 1 else None, loaded)
    payload = call.payload
    if call.endpoint in CHATS:
        messages = payload.get("messages") if call.endpoint is Endpoint.CHAT else responses_turns(payload)
        if not isinstance(messages, list):
            return None
        tools = payload.get("tools")
        if tokenizer is not None:
            try:
                return chain(tokenizer.chat(messages, tools if isinstance(tools, list) else None), block_size,
                             cache=cache)
            except Exception:   # a template that cannot render this call: its text, as bytes
                log.debug("kv index: the tokenizer of %s refused a chat prompt; keyed as bytes", model,
                          exc_info=True)
        return byte_chain(_utf8(canonical_chat(messages, tools)), block_size, cache=cache)
    if call.endpoint is Endpoint.COMPLETIONS:
        prompt = payload.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                       for t in prompt):
            return chain(prompt, block_size, cache=cache)   # token ids, as the engine takes them
        if not isinstance(prompt, str):
            return None
        if tokenizer is not None:
            try:
                return chain(tokenizer.text(prompt), block_size, cache=cache)
            except Exception:
                log.debug("kv index: the tokenizer of %s refused a prompt; keyed as bytes", model, exc_info=True)
        return byte_chain(_utf8(prompt), block_size, cache=cache)
    return None


def responses_turns(payload: Mapping[str, Any]) -> list[Any] | None:
    """A Responses call's ``instructions`` (as the system turn) and ``input`` (a string: one user turn)."""
    turns: list[Any] = []
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        turns.append({"role": "system", "content": instructions})
    given = payload.get("input")
    if isinstance(given, str):
        turns.append({"role": "user", "content": given})
    elif isinstance(given, list):
        turns.extend(given)
    return turns or None


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
