"""A simulated engine's KV cache: prompt blocks under a chain hash, prefix hits, least-recently-used eviction.

Modelled on vLLM's prefix caching (its v1 block pool): only full blocks of
``block_size`` tokens are cached, each keyed by a hash of its parent's key
and its tokens, so holding a block means holding every block before it. A
prompt's hits are its LEADING cached blocks, never covering its last token
(the engine computes that one again for its logits). A block a running
request uses is never evicted; free blocks go least recently used first,
and a finished request's blocks are freed tail first (vLLM frees them in
reverse), so a shared prefix outlives the continuations built on it. When
every block is in use, the blocks that do not fit are computed but not kept.

The keys are the engine's own: a hash seeded per engine (vLLM's root hash is
random per process), deliberately not the gateway's key function, so the
gateway can only learn them from the events. Every change is returned as
the event values of ``actors/kv/events.py``, in the order vLLM publishes
them: evictions (one ``BlockRemoved`` per block), then one ``BlockStored``
per run of new blocks. Pure: no trio, no clock.
"""

from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict
from typing import Sequence

from switchyard.actors.kv.events import BlockRemoved, BlockStored, Event

GPU = "GPU"


class BlockCache:
    def __init__(self, blocks: int, block_size: int, seed: str) -> None:
        self.capacity = blocks
        self.block_size = block_size
        self._seed = hashlib.blake2b(seed.encode(), digest_size=32).digest()
        self._root = int.from_bytes(hashlib.blake2b(b"root", key=self._seed, digest_size=8).digest(), "big")
        self._refs: dict[int, int] = {}   # cached block -> running requests using it
        self._free: OrderedDict[int, None] = OrderedDict()   # cached blocks no request uses, oldest first

    def keys(self, tokens: Sequence[int]) -> list[int]:
        """The engine's key of each full block of ``tokens``, chained from the engine's root."""
        out: list[int] = []
        size = self.block_size
        parent = self._root
        for start in range(0, len(tokens) - size + 1, size):
            data = struct.pack(f">Q{size}I", parent, *tokens[start:start + size])
            parent = int.from_bytes(hashlib.blake2b(data, key=self._seed, digest_size=8).digest(), "big")
            out.append(parent)
        return out

    def hits(self, keys: Sequence[int], tokens: int) -> int:
        """How many leading blocks of a ``tokens``-long prompt with ``keys`` are cached (never its last token)."""
        limit = min(len(keys), (tokens - 1) // self.block_size) if tokens else 0
        n = 0
        while n < limit and keys[n] in self._refs:
            n += 1
        return n

    def admit(self, tokens: Sequence[int]) -> tuple[int, list[int], list[Event]]:
        """A request starts its prefill: (hit blocks, the blocks it now uses, the events).

        Its hits are used as they are; its other full blocks are stored as computed."""
        keys = self.keys(tokens)
        hit = self.hits(keys, len(tokens))
        held: list[int] = []
        for key in keys[:hit]:
            self._use(key, held)
        return hit, held, self.store(keys, tokens, hit, held)

    def store(self, keys: Sequence[int], tokens: Sequence[int], start: int, held: list[int]) -> list[Event]:
        """Blocks ``start`` onwards of ``tokens`` (with ``keys``), computed by a request that uses them (``held``)."""
        removed: list[Event] = []
        stored: list[Event] = []
        run: list[int] = []   # indexes of a run of new blocks: one BlockStored

        def close() -> None:
            if run:
                first, size = run[0], self.block_size
                stored.append(BlockStored(block_hashes=tuple(keys[i] for i in run),
                                          parent_block_hash=keys[first - 1] if first else None,
                                          token_ids=tuple(tokens[first * size:(run[-1] + 1) * size]),
                                          block_size=size, medium=GPU))
                run.clear()

        for i in range(start, len(keys)):
            key = keys[i]
            if key in self._refs:   # computed again, cached already
                close()
                self._use(key, held)
                continue
            if len(self._refs) >= self.capacity:
                if not self._free:   # every block in use: the rest are not kept
                    break
                victim, _ = self._free.popitem(last=False)
                del self._refs[victim]
                removed.append(BlockRemoved(block_hashes=(victim,), medium=GPU))
            self._refs[key] = 1
            held.append(key)
            run.append(i)
        close()
        return removed + stored

    def release(self, held: Sequence[int]) -> None:
        """A request ended: its blocks are free once no other request uses them, its tail the first to go."""
        for key in reversed(held):
            count = self._refs.get(key)
            if count is None:   # cleared meanwhile
                continue
            self._refs[key] = count - 1
            if count == 1:
                self._free[key] = None
                self._free.move_to_end(key)

    def _use(self, key: int, held: list[int]) -> None:
        count = self._refs[key]
        if count == 0:
            del self._free[key]
        self._refs[key] = count + 1
        held.append(key)

    @property
    def cached(self) -> int:
        """Blocks held, used or free."""
        return len(self._refs)

    @property
    def used(self) -> int:
        """Blocks running requests use: what vLLM's KV-cache usage counts (free cached blocks are reusable)."""
        return len(self._refs) - len(self._free)

    def holds(self, key: int) -> bool:
        return key in self._refs
