"""Merging a global prompt into a chat body: pure (no trio, no I/O, no clock).

``inject`` returns a new payload and never mutates the one it is given: the
caller's body is shared by every attempt of a call (retries, other backends,
fallback models), and each attempt may get a different prompt. Messages it
does not change are shared with the input, not copied.
"""

from __future__ import annotations

from typing import Any, Mapping

from switchyard.config.prompts import MergeStrategy

SYSTEM_ROLES = frozenset({"system", "developer"})


def inject(payload: Mapping[str, Any], text: str, strategy: MergeStrategy | str,
           separator: str) -> dict[str, Any]:
    """``payload`` with ``text`` merged into its messages by ``strategy``.

    prepend: into the first message if it is system/developer (``text + separator + content``),
    else a new system message first. append: into the first system/developer message
    anywhere (``content + separator + text``), else a new system message first. replace:
    every system/developer message removed, one system message with ``text`` first.
    Content given as parts gets a text part at the start or end, with the separator
    inside that part. No ``messages`` list, or an empty text: an unchanged copy.
    """
    out = dict(payload)
    messages = payload.get("messages")
    if not isinstance(messages, list) or not text:
        return out
    strategy = MergeStrategy(strategy)
    system = {"role": "system", "content": text}
    if strategy is MergeStrategy.REPLACE:
        out["messages"] = [system, *(m for m in messages if not _is_system(m))]
        return out
    if strategy is MergeStrategy.PREPEND:
        index = 0 if messages and _is_system(messages[0]) else None
    else:
        index = next((i for i, m in enumerate(messages) if _is_system(m)), None)
    if index is not None:
        merged = _merge(messages[index].get("content"), text, strategy, separator)
        if merged is not None:
            new = list(messages)
            new[index] = {**messages[index], "content": merged}
            out["messages"] = new
            return out
    out["messages"] = [system, *messages]
    return out


def _is_system(message: Any) -> bool:
    role = message.get("role") if isinstance(message, dict) else None
    return isinstance(role, str) and role in SYSTEM_ROLES


def _merge(content: Any, text: str, strategy: MergeStrategy, separator: str) -> str | list[Any] | None:
    """The merged content; None when ``content`` has a shape we do not know how to extend."""
    if content is None or content == "":
        return text                          # nothing to separate from
    if isinstance(content, str):
        return text + separator + content if strategy is MergeStrategy.PREPEND else content + separator + text
    if isinstance(content, list):
        if not content:
            return [{"type": "text", "text": text}]
        if strategy is MergeStrategy.PREPEND:
            return [{"type": "text", "text": text + separator}, *content]
        return [*content, {"type": "text", "text": separator + text}]
    return None
