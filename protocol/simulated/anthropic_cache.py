"""Anthropic's prompt cache, simulated: what a request's ``cache_control`` marks read and write.

The real API renders tools, then the system prompt, then the messages, and
caches the prefix up to each marked block; a later request whose prefix up
to one of its block boundaries (at or before its last mark) was cached
reads it, and writes from there up to its last mark. Here a block's tokens
are its JSON length / 4 (at least 1), a prefix is known by a running hash
of its blocks (their marks left out), and there is no minimum length, no
TTL and no 20-block lookback limit: the bound is ``max_entries`` prefixes,
the oldest dropped first. A request without marks is not counted here
(``None``: the simulator's plain estimate stands).

``problem`` refuses marks the way the real API does: more than 4, a mark on
a thinking or empty text block (not the TTL order rule: 1-hour marks first).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any, Iterator

LIMIT = 4


def _blocks(body: dict[str, Any]) -> Iterator[Any]:
    """Every block in render order (a string system prompt or message is one text block)."""
    yield from body.get("tools") or ()
    system = body.get("system")
    yield from ([{"type": "text", "text": system}] if isinstance(system, str) else system or ())
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        yield from [{"type": "text", "text": content}] if isinstance(content, str) else content or ()


def _marks(body: dict[str, Any]) -> list[dict[str, Any]]:
    found = [b["cache_control"] for b in _blocks(body) if isinstance(b, dict) and b.get("cache_control")]
    for block in _blocks(body):
        if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            found += [n["cache_control"] for n in block["content"] if isinstance(n, dict) and n.get("cache_control")]
    return found + ([body["cache_control"]] if body.get("cache_control") else [])


def problem(body: dict[str, Any]) -> str | None:
    """What the real API would refuse in the request's marks (its message), or None."""
    marks = _marks(body)
    if len(marks) > LIMIT:
        return f"A maximum of {LIMIT} blocks with cache_control may be provided. Found {len(marks)}."
    for block in _blocks(body):
        if isinstance(block, dict) and block.get("cache_control"):
            if block.get("type") in ("thinking", "redacted_thinking"):
                return f"{block['type']}: cache_control cannot be set on thinking blocks"
            if block.get("type") == "text" and not block.get("text"):
                return "cache_control cannot be set for empty text blocks"
    return None


class PromptCache:
    def __init__(self, max_entries: int = 1000) -> None:
        self.max_entries = max_entries
        self.kept: OrderedDict[str, None] = OrderedDict()

    def account(self, body: dict[str, Any]) -> tuple[int, int, int] | None:
        """(uncached input, cache reads, cache writes) in tokens for ``body``; None without marks."""
        blocks = list(_blocks(body))
        marked = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
        if body.get("cache_control") and blocks:
            marked.append(len(blocks) - 1)   # automatic caching: the last block
        if not marked:
            return None
        digest, total, prefixes = hashlib.sha256(), 0, []
        for block in blocks:
            plain = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
            digest.update(json.dumps(plain, sort_keys=True).encode())
            total += max(1, len(json.dumps(plain)) // 4)
            prefixes.append((digest.copy().hexdigest(), total))
        last = max(marked)
        read = max((tokens for key, tokens in prefixes[:last + 1] if key in self.kept), default=0)
        write = prefixes[last][1] - read
        for i in marked:
            self.kept[prefixes[i][0]] = None
            self.kept.move_to_end(prefixes[i][0])
        while len(self.kept) > self.max_entries:
            self.kept.popitem(last=False)
        return total - read - write, read, write
