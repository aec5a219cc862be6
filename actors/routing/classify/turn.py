"""What of a chat request the rule classifier reads.

It scores the current turn only, as the LLM classifier reads it: the system
and developer messages before the last user message, and that message.
Earlier turns and whatever follows the last user message (an assistant
prefill, tool results) add nothing, so a short follow-up ("now do the same
for the whole file") is judged on its own words. Without a user message the
system and developer messages are the turn.

Two things look wider. Capabilities look at the whole request: an image in
an earlier turn still needs a vision backend, and ``tools`` / ``functions``
are request fields. The language comes from the last user message, and only
when that has no letters at all from the earlier user turns.

Odd input is skipped, never raised on: a message that is not a mapping, a
role that is not a string, content that is neither a string nor a list of
parts, parts without a string ``text``, a part whose ``type`` is not a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import frozen

IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})
INSTRUCTION_ROLES = frozenset({"system", "developer"})


@frozen
class Turn:
    instructions: tuple[str, ...]     # system and developer texts in scope (non-blank)
    last_user: str                    # "" without a user message
    earlier_users: tuple[str, ...]
    vision: bool
    tools: bool

    @property
    def scored(self) -> str:
        """Everything scored, one message after another (a line break between closes a sentence)."""
        return "\n".join((*self.instructions, self.last_user))


def _parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, Mapping):
        return [content]
    if isinstance(content, (list, tuple)):
        return list(content)
    return []


def _text(parts: list[Any]) -> str:
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts)


def _has_image(parts: list[Any]) -> bool:
    return any(isinstance(p, Mapping) and isinstance(p.get("type"), str) and p["type"] in IMAGE_PARTS
               for p in parts)


def turn_of(payload: Mapping[str, Any]) -> Turn:
    messages = payload.get("messages")
    if not isinstance(messages, (list, tuple)):
        messages = ()
    vision = False
    read: list[tuple[str, str]] = []           # (role, text) of every well-formed message
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        parts = _parts(message.get("content"))
        vision = vision or _has_image(parts)
        role = message.get("role")
        read.append((role if isinstance(role, str) else "", _text(parts)))
    last = max((i for i, (role, _) in enumerate(read) if role == "user"), default=len(read))
    return Turn(
        instructions=tuple(text for role, text in read[:last] if role in INSTRUCTION_ROLES and text.strip()),
        last_user=read[last][1] if last < len(read) else "",
        earlier_users=tuple(text for role, text in read[:last] if role == "user"),
        vision=vision,
        tools=bool(payload.get("tools") or payload.get("functions")),
    )
