"""What a request needs from a route, and what a route is known to lack.

Used to keep fallback from degrading an answer: a fallback target whose
metadata says it lacks tools, vision, or a context window large enough for
the request is skipped; with none left the call fails closed with
``route_capability_unavailable``. A target without metadata is assumed able:
only what is known can rule a route out.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from attrs import frozen

from config.metadata import ModelMetadata

TOOL_NAMES = frozenset({"tool", "tools", "function_calling"})
# A rough, conservative estimate (about four characters a token, rounded up)
# that needs no tokenizer; it only has to rule out clear misfits.
CHARS_PER_TOKEN = 4


@frozen
class Needs:
    tools: bool = False
    vision: bool = False
    tokens: int = 0          # prompt estimate plus the requested completion budget


def needs_of(payload: Mapping[str, Any]) -> Needs:
    tools = bool(payload.get("tools") or payload.get("functions"))
    vision = False
    chars = 0
    for msg in payload.get("messages") or ():
        if not isinstance(msg, Mapping):
            continue
        content = msg.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") in ("image_url", "input_image", "image"):
                    vision = True
                text = part.get("text")
                if isinstance(text, str):
                    chars += len(text)
        if msg.get("tool_calls"):
            chars += len(json.dumps(msg["tool_calls"]))
    completion = payload.get("max_completion_tokens") or payload.get("max_tokens") or 0
    if not isinstance(completion, int) or isinstance(completion, bool):
        completion = 0
    return Needs(tools=tools, vision=vision, tokens=-(-chars // CHARS_PER_TOKEN) + completion)


def missing(needs: Needs, meta: ModelMetadata | None) -> list[str]:
    """The needs this route is known not to meet (empty: go ahead)."""
    if meta is None:
        return []
    out = []
    if meta.capabilities is not None:
        caps = frozenset(meta.capabilities)
        if needs.tools and not (TOOL_NAMES & caps):
            out.append("tools")
        if needs.vision and "vision" not in caps:
            out.append("vision")
    window = meta.limits.context_window if meta.limits is not None else None
    if window is not None and 0 < window < needs.tokens:  # 0: not applicable
        out.append("context_window")
    return out
