"""What a request needs from a route, and what a route is known to lack.

Used to keep fallback from degrading an answer: a fallback target whose
metadata says it lacks tools, vision, or a context window large enough for
the request is skipped; with none left the call fails closed with
``route_capability_unavailable``. A target without metadata is assumed able:
only what is known can rule a route out. The prompt size is smart routing's
estimate (``token_estimate``), so size-based routing and this check agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import frozen

from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.config.metadata import ModelMetadata

TOOL_NAMES = frozenset({"tool", "tools", "function_calling"})
IMAGE_TOKENS = 1_000   # an image part, for the context-window check (about a high-detail 1024x1024 image)


@frozen
class Needs:
    tools: bool = False
    vision: bool = False
    tokens: int = 0          # prompt estimate plus the requested completion budget


def needs_of(payload: Mapping[str, Any]) -> Needs:
    tools = bool(payload.get("tools") or payload.get("functions"))
    vision = False
    messages = payload.get("messages")   # any JSON value: only chat's door checks that it is a list
    for msg in messages if isinstance(messages, (list, tuple)) else ():
        if not isinstance(msg, Mapping):
            continue
        content = msg.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") in ("image_url", "input_image", "image"):
                    vision = True
    completion = payload.get("max_completion_tokens") or payload.get("max_tokens") or 0
    if not isinstance(completion, int) or isinstance(completion, bool):
        completion = 0
    return Needs(tools=tools, vision=vision, tokens=estimate_tokens(payload, IMAGE_TOKENS) + completion)


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
