"""A simulated backend as a serving engine (``simulation.engine_kv``): prefix-cached prefill, then decode.

What makes routing by KV-cache overlap pay off, and nothing more: a chat or
completions prompt (the simulated tokenizer's ids, as the gateway computes
them) is prefilled after the blocks its engine's cache already holds
(``kv_cache.py``), one prefill at a time at ``prefill_tokens_per_second``
(a GPU's compute, taken in arrival order); the answer's first chunk comes
with the first token, at the end of the prefill, and each later chunk after
its tokens at ``decode_tokens_per_second``. The answer's full blocks are
cached too, so a conversation's next turn finds them. The queue in front of
it all is the backend's ``max_concurrency`` (``slots.py``). Other endpoints
are paced at the decode rate without a prefill.

With ``events``, every change of the cache is published, as vLLM's
publisher would, to in-process listeners: an ``EventBatch`` per step (a
prefill's evictions and stores, an answer's stores, a cleared cache),
numbered from 0; ``kv_wire.py`` encodes them as vLLM's msgpack. Virtual time
only: everything waits on trio's clock.
"""

from __future__ import annotations

from typing import Any, AsyncGenerator, Callable, Sequence

import trio

from switchyard.actors.kv.events import AllBlocksCleared, Event, EventBatch
from switchyard.actors.kv.sim_tokens import SimulatedTokenizer, encode
from switchyard.config.simulation import EngineKv
from switchyard.protocol.simulated.kv_cache import BlockCache

Listener = Callable[[EventBatch], None]
_TOKENIZER = SimulatedTokenizer()


def prompt_tokens(body: Any) -> list[int] | None:
    """A chat or completions body's prompt as the engine reads it; None for any other body."""
    if not isinstance(body, dict):
        return None
    messages = body.get("messages")
    if isinstance(messages, list):
        return _TOKENIZER.chat([m for m in messages if isinstance(m, dict)])
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return _TOKENIZER.text(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)   # token ids, used as they are
    return None


class KvEngine:
    def __init__(self, name: str) -> None:
        self.name = name
        self.cache: BlockCache | None = None
        self.listeners: list[Listener] = []
        self.seq = 0                  # the next batch's number
        self.restarts = 0
        self.queries = 0              # prompt tokens looked up (vllm:prefix_cache_queries)
        self.hits = 0                 # of those, found in the cache (vllm:prefix_cache_hits)
        self.queued = 0               # requests waiting for the prefill (vLLM's waiting queue)
        self._prefill = trio.Lock()   # fair: prefills run one at a time, in arrival order

    def configure(self, config: EngineKv) -> BlockCache:
        """The cache for ``config``: a new size or block size empties it (an ``AllBlocksCleared``)."""
        cache = self.cache
        if cache is None or (cache.capacity, cache.block_size) != (config.blocks, config.block_size):
            self.cache = BlockCache(config.blocks, config.block_size, f"{self.name}#{self.restarts}")
            if cache is not None:
                self.publish(config, [AllBlocksCleared()])
        assert self.cache is not None
        return self.cache

    def restart(self) -> None:
        """The engine process restarts: its cache is empty, new hashes, batches numbered from 0 again, and, as
        vLLM's, it publishes no ``AllBlocksCleared``."""
        self.restarts += 1
        self.cache = None
        self.seq = 0

    def publish(self, config: EngineKv, events: Sequence[Event]) -> None:
        if not (config.events and events):
            return
        batch = EventBatch(seq=self.seq, ts=trio.current_time(), events=tuple(events), data_parallel_rank=0)
        self.seq += 1
        for listener in list(self.listeners):
            listener(batch)

    async def prefill(self, config: EngineKv, tokens: Sequence[int]) -> Lease:
        """``tokens`` prefilled after its cached blocks, in turn; the blocks it uses, until ``Lease.release``."""
        self.queued += 1
        try:
            await self._prefill.acquire()
        finally:
            self.queued -= 1
        try:
            cache = self.configure(config)
            hit, held, events = cache.admit(tokens)
            self.queries += len(tokens)
            self.hits += hit * cache.block_size
            self.publish(config, events)
            lease = Lease(self, config, cache, tokens, held)
            try:
                await trio.sleep((len(tokens) - hit * cache.block_size) / config.prefill_tokens_per_second)
            except BaseException:
                lease.release()
                raise
            return lease
        finally:
            self._prefill.release()

    async def serve(self, config: EngineKv, pieces: Sequence[str],
                    body: Any) -> AsyncGenerator[tuple[int, str], None]:
        """The answer's pieces (numbered from 1) at the engine's pace, after the prompt's prefill."""
        prompt = prompt_tokens(body)
        lease = await self.prefill(config, prompt) if prompt is not None else None
        output: list[int] = []
        try:
            for k, piece in enumerate(pieces, start=1):
                ids = encode(piece)
                if k > 1 and ids:
                    await trio.sleep(len(ids) / config.decode_tokens_per_second)
                output.extend(ids)
                yield k, piece
            if lease is not None:
                lease.finish(output)
        finally:
            if lease is not None:
                lease.release()

    def usage(self) -> float:
        """vLLM's KV-cache usage: the share of blocks running requests use."""
        cache = self.cache
        return cache.used / cache.capacity if cache is not None else 0.0


class Lease:
    """The cache blocks one running request uses."""

    def __init__(self, engine: KvEngine, config: EngineKv, cache: BlockCache, prompt: Sequence[int],
                 held: list[int]) -> None:
        self.engine, self.config, self.cache = engine, config, cache
        self.prompt = prompt
        self.held: list[int] | None = held

    def finish(self, output: Sequence[int]) -> None:
        """The answer is whole: the full blocks of prompt and answer not cached yet are stored."""
        if self.held is None or self.engine.cache is not self.cache:   # the cache was emptied meanwhile
            return
        tokens = [*self.prompt, *output]
        keys = self.cache.keys(tokens)
        start = len(self.prompt) // self.cache.block_size
        self.engine.publish(self.config, self.cache.store(keys, tokens, start, self.held))

    def release(self) -> None:
        if self.held is not None:
            self.cache.release(self.held)
            self.held = None
