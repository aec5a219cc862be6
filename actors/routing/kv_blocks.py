"""The KV index's block keys: our own chain hash over a prompt's token ids, full blocks only.

An engine keys each block of its prefix cache by a hash chained over the
blocks before it; vLLM's is seeded per process and changes with its version
and settings, so the gateway never reproduces it. It keys blocks by its own
chain instead (as llm-d does), computed the same way from an engine event's
``token_ids`` and from a call's prompt: ``key(parent, tokens)`` is BLAKE2b
with an 8-byte digest (read big-endian) over the parent key as 8 bytes
big-endian followed by each token id as 4 bytes big-endian; the first
block's parent is ``ROOT``. BLAKE2b is hashlib's C code: a 2,000-token
prompt's 125 keys cost tens of microseconds, where a hash in Python cost
almost a millisecond. Only full
blocks of ``block_size`` tokens are keyed, as the engine caches only those.

Without the model's tokenizer the prompt's canonical text is read as
UTF-8 bytes, one "token" per byte and one byte each in the encoding, in
blocks of ``block_size * BYTES_PER_TOKEN`` bytes (about as much text as a
block of real tokens). Such keys never match an engine's events; they key
the gateway's own approximate record consistently.

Pure: no I/O, no clock. ``KeyCache`` is state the caller owns.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections import OrderedDict
from typing import Any, Mapping, Sequence

BYTES_PER_TOKEN = 4        # a token is about this many bytes of text: the bytes fallback's block is this much wider
TOKEN_MASK = 0xFFFFFFFF    # a token id as 4 bytes


def digest64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


ROOT = digest64(b"switchyard-kv")


def block_key(parent: int, tokens: Sequence[int]) -> int:
    """One block's key: the 64-bit digest of the parent key (8 bytes) and each token id (4 bytes), big-endian."""
    return digest64(parent.to_bytes(8, "big") + b"".join((t & TOKEN_MASK).to_bytes(4, "big") for t in tokens))


class KeyCache:
    """Keys already computed, by the block's encoded bytes (parent included): a conversation re-sends its
    earlier turns, whose blocks then cost a dictionary lookup instead of the hash. First in, first out past
    ``size`` keys or ``max_bytes`` of blocks (a large ``block_size`` makes each block's bytes large).
    An ``OrderedDict``: a plain dict's oldest key, once many were deleted before it, costs a scan."""

    def __init__(self, size: int = 32_768, max_bytes: int = 4 * 1024 * 1024) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._keys: OrderedDict[bytes, int] = OrderedDict()

    def key(self, data: bytes) -> int:
        found = self._keys.get(data)
        if found is None:
            found = self._keys[data] = digest64(data)
            self.bytes += len(data)
            while len(self._keys) > self.size or self.bytes > self.max_bytes:
                self.bytes -= len(self._keys.popitem(last=False)[0])
        return found

    def __len__(self) -> int:
        return len(self._keys)


def chain(tokens: Sequence[int], block_size: int, parent: int = ROOT, cache: KeyCache | None = None) -> list[int]:
    """The keys of the full blocks of ``tokens``, chained from ``parent``; a partial last block has none."""
    full = len(tokens) // block_size
    if full == 0:
        return []
    count = full * block_size
    try:
        packed = struct.pack(f">{count}I", *tokens[:count])
    except struct.error:   # an id outside 0..2**32-1 (a negative one, say): its low 32 bits
        packed = struct.pack(f">{count}I", *(t & TOKEN_MASK for t in tokens[:count]))
    return _chain(packed, block_size * 4, full, parent, cache)


def byte_chain(data: bytes, block_size: int, parent: int = ROOT, cache: KeyCache | None = None) -> list[int]:
    """The bytes fallback: the keys of ``data``'s full blocks of ``block_size * BYTES_PER_TOKEN`` bytes."""
    width = block_size * BYTES_PER_TOKEN
    return _chain(data, width, len(data) // width, parent, cache)


def _chain(packed: bytes, width: int, blocks: int, parent: int, cache: KeyCache | None) -> list[int]:
    out: list[int] = []
    for i in range(blocks):
        data = parent.to_bytes(8, "big") + packed[i * width:(i + 1) * width]
        parent = cache.key(data) if cache is not None else digest64(data)
        out.append(parent)
    return out


# --- the canonical text of a prompt (the bytes fallback) -----------------------------

def canonical_chat(messages: Sequence[Any], tools: Any = None) -> str:
    """A chat prompt as one text, the way chat templates lay it out: the tools (if any), then each message
    as ``<|role|>`` and its text, then the assistant's turn. A conversation's next turn starts with the
    whole of its previous one, so their blocks chain the same."""
    out = [f"<|tools|>\n{_json(tools)}\n"] if tools else []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        out.append(f"<|{message.get('role', 'user')}|>\n{_text(message.get('content'))}")
        for extra in ("tool_calls", "tool_call_id"):   # an agent's tool turns are part of its prefix too
            if message.get(extra) is not None:
                out.append(f"\n{_json(message[extra])}")
        out.append("\n")
    out.append("<|assistant|>\n")
    return "".join(out)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):   # content parts: their text, in order (an image is no text)
        return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _json(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return ""
