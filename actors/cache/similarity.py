"""The semantic cache's pure decisions: whether a call may be answered by a similar one, and what is compared.

No I/O and no clock. ``ineligible`` says why a call is left to the exact
cache alone (a reason, counted); ``split`` cuts the request into the text
that is embedded and the rest, which must match exactly (it goes into the
entry's namespace with the exact cache's key): with ``last_user_turn`` the
last user message is embedded and every other message must be the same;
with ``conversation`` every user and assistant message is embedded. System
messages are matched exactly unless ``include_system``.
"""

from __future__ import annotations

from typing import Any

from switchyard.config.response_cache import SemanticCache, SemanticScope

REASONS = ("tools", "temperature", "content", "too_long", "no_text")


def ineligible(sem: SemanticCache, payload: dict[str, Any]) -> str | None:
    """Why this call may not be answered by a *similar* one (its exact match is still looked up), or None."""
    if payload.get("tools") or payload.get("functions"):
        return "tools"   # a similar prompt may call the tools with other arguments: only an exact match may answer
    temperature = payload.get("temperature")
    if not sem.allow_nonzero_temperature and isinstance(temperature, (int, float)) \
            and not isinstance(temperature, bool) and temperature > 0:
        return "temperature"
    return None


def split(sem: SemanticCache, payload: dict[str, Any]) -> tuple[str, dict[str, Any]] | str:
    """(the embedded text, the payload without it) or why the call cannot be compared (a reason)."""
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no_text"
    embedded: list[int] = []
    if sem.scope is SemanticScope.LAST_USER_TURN:
        last = next((i for i in range(len(messages) - 1, -1, -1) if _role(messages[i]) == "user"), None)
        if last is None:
            return "no_text"
        embedded = [last]
        if sem.include_system:
            embedded = [i for i, m in enumerate(messages) if _role(m) in ("system", "developer")] + embedded
    else:
        roles = ("user", "assistant", *(("system", "developer") if sem.include_system else ()))
        embedded = [i for i, m in enumerate(messages) if _role(m) in roles]
    parts: list[str] = []
    for i in embedded:
        text = _text(messages[i])
        if text is None:
            return "content"   # an image, audio, a tool call: not text we can compare
        parts.append(f"{_role(messages[i])}: {text}")
    text = "\n".join(parts)
    if not text.strip():
        return "no_text"
    if len(text) > sem.max_text_chars:
        return "too_long"
    kept = set(embedded)
    rest = {**payload, "messages": [m if i not in kept else {"role": _role(m)} for i, m in enumerate(messages)]}
    return text, rest


def cosine(a: Any, b: Any) -> float:
    """Cosine similarity of two equal-length vectors (plain sequences; the index uses its own matrix)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(y * y for y in b) ** 0.5
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, dict) else None


def _text(message: dict[str, Any]) -> str | None:
    if message.get("tool_calls") or message.get("function_call"):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                return None
            texts.append(part["text"])
        return "\n".join(texts)
    return None
