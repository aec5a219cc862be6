"""Merging a global prompt into a chat body: pure (no trio, no I/O, no clock).

``inject`` returns a new payload and never mutates the one it is given: the
caller's body is shared by every attempt of a call (retries, other backends,
fallback models), and each attempt may get a different prompt. Messages it
does not change are shared with the input, not copied.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from switchyard.config.prompts import MergeStrategy

SYSTEM_ROLES = frozenset({"system", "developer"})
_MESSAGE_PATH = re.compile(r"\bmessages\[(\d+)\]")


Moved = tuple[int | None, ...]   # per message of the merged body, its index among the client's (None: ours)


def inject(payload: Mapping[str, Any], text: str, strategy: MergeStrategy | str,
           separator: str) -> dict[str, Any]:
    """``payload`` with ``text`` merged into its messages by ``strategy`` (see ``injected``)."""
    return injected(payload, text, strategy, separator)[0]


def client_indices(payload: Mapping[str, Any], text: str, strategy: MergeStrategy | str,
                   separator: str) -> Moved | None:
    """Where each message of the merged body was among the client's (None: the prompt's own message),
    or None when the merge moved no message: an error about the body speaks in the client's indices."""
    return injected(payload, text, strategy, separator)[1]


def injected(payload: Mapping[str, Any], text: str, strategy: MergeStrategy | str,
             separator: str) -> tuple[dict[str, Any], Moved | None]:
    """``payload`` with ``text`` merged into its messages by ``strategy``, and how its messages moved.

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
        return out, None
    strategy = MergeStrategy(strategy)
    system = {"role": "system", "content": text}
    if strategy is MergeStrategy.REPLACE:
        kept = [i for i, m in enumerate(messages) if not _is_system(m)]
        out["messages"] = [system, *(messages[i] for i in kept)]
        return out, (None, *kept)
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
            return out, None
    out["messages"] = [system, *messages]
    return out, (None, *range(len(messages)))


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


def renumber(text: str, moved: Moved) -> str:
    """``text`` with each ``messages[N]`` of the merged body written as the client's ``messages[M]``; the
    prompt's own message (and an index past the body) stays as it is."""
    def client(found: re.Match[str]) -> str:
        n = int(found.group(1))
        m = moved[n] if n < len(moved) else None
        return f"messages[{m}]" if m is not None else found.group(0)
    return _MESSAGE_PATH.sub(client, text)
