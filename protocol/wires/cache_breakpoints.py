"""Where the gateway puts prompt-caching breakpoints in an outgoing body (pure: a body in, a body out).

A provider caches a prompt's prefix only up to a marked block: Anthropic's
Messages API a block carrying ``cache_control: {type: ephemeral}``, Bedrock's
Converse a ``{"cachePoint": {"type": "default"}}`` block. Both render tools,
then the system prompt, then the messages, and both take at most 4 marks a
request (Anthropic refuses a fifth with a 400). With
``prefix_routing.anthropic_cache_control_injection`` on, the wires add up to
three, in this order of worth while marks are left:

1. the system prompt's last block: the prefix every call of an application
   shares (the tools before it are cached with it);
2. the conversation's longest stable prefix: the last markable block of the
   message right before the final user turn, which the next turn repeats;
3. the last tool: for calls whose system prompt varies but tools do not.

A client's own marks are never moved or removed and count toward the 4; a
place the client already marked (the system, the tools, or a message at or
after the prefix's block) gets no second mark. Anthropic requires a 1-hour
mark to come before any 5-minute one, so no mark (all ours are 5-minute)
is put before a client's ``ttl: 1h`` mark. Thinking blocks and empty text
cannot carry a mark; a string system prompt or message becomes one text
block so it can. A prefix shorter than the model's minimum (1,024 to 4,096
tokens on Anthropic, by model) is simply not cached by the provider, so no
length is checked here.

Bedrock takes cache points only on some models (``converse_caching``): the
Claude models it lists for prompt caching (3.5 Haiku, 3.7 Sonnet, the 4
family and later) on system, messages and tools, and Amazon Nova (Micro,
Lite, Pro, Premier) on system and messages only.
"""

from __future__ import annotations

import enum
import re
from typing import Any

LIMIT = 4                                   # marks a request may carry, the client's included
EPHEMERAL = {"type": "ephemeral"}
CACHE_POINT = {"cachePoint": {"type": "default"}}
UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
LONG_TTL = "1h"

Position = tuple[int, ...]   # render order: (0, tool), (1, system block), (2, message, block), (3,) the top level
TOOLS, SYSTEM, MESSAGES, TOP = 0, 1, 2, 3


# --- Anthropic Messages ---------------------------------------------------------------------------------

def _mark_of(block: Any) -> dict[str, Any] | None:
    mark = block.get("cache_control") if isinstance(block, dict) else None
    return mark if isinstance(mark, dict) else None


def client_marks(body: dict[str, Any]) -> list[tuple[Position, bool]]:
    """Every ``cache_control`` the body already carries: (its position, whether its TTL is 1 hour). The
    top-level one (Anthropic's automatic caching) takes a mark too, at the end."""
    found: list[tuple[Position, Any]] = []
    top = _mark_of(body)
    if top is not None:
        found.append(((TOP,), top))
    for i, tool in enumerate(_list(body.get("tools"))):
        if _mark_of(tool) is not None:
            found.append(((TOOLS, i), _mark_of(tool)))
    for i, block in enumerate(_list(body.get("system"))):
        if _mark_of(block) is not None:
            found.append(((SYSTEM, i), _mark_of(block)))
    for m, message in enumerate(_list(body.get("messages"))):
        content = message.get("content") if isinstance(message, dict) else None
        for b, block in enumerate(_list(content)):
            if _mark_of(block) is not None:
                found.append(((MESSAGES, m, b), _mark_of(block)))
            nested = block.get("content") if isinstance(block, dict) and block.get("type") == "tool_result" else None
            found.extend(((MESSAGES, m, b), _mark_of(n)) for n in _list(nested) if _mark_of(n) is not None)
    return [(at, isinstance(mark, dict) and mark.get("ttl") == LONG_TTL) for at, mark in found]


def messages_breakpoints(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the gateway's marks added (a new dict; ``body`` itself is left as it is)."""
    marks = client_marks(body)
    room = LIMIT - len(marks)
    if room <= 0:
        return body
    last_long = max((at for at, long in marks if long), default=None)
    out = dict(body)
    for target in (_system_target, _prefix_target, _tools_target):
        if room == 0:
            break
        found = target(out, marks)
        if found is None or (last_long is not None and found[0] < last_long):
            continue
        found[1]()
        room -= 1
    return out


Target = tuple[Position, Any] | None


def _system_target(out: dict[str, Any], marks: list[tuple[Position, bool]]) -> Target:
    system = out.get("system")
    if any(at[0] == SYSTEM for at, _ in marks):
        return None
    if isinstance(system, str):
        if not system:
            return None
        return (SYSTEM, 0), lambda: out.__setitem__("system", [{"type": "text", "text": system, "cache_control":
                                                                 dict(EPHEMERAL)}])
    blocks = _list(system)
    index = _markable(blocks)
    if index is None:
        return None

    def apply() -> None:
        out["system"] = _marked(blocks, index)
    return (SYSTEM, index), apply


def _prefix_target(out: dict[str, Any], marks: list[tuple[Position, bool]]) -> Target:
    messages = out.get("messages")
    if not isinstance(messages, list):
        return None
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    if not users or users[-1] == 0:
        return None
    at = users[-1] - 1
    message = messages[at]
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) and content else _list(content)
    index = _markable(blocks)
    if index is None or any(m >= (MESSAGES, at, index) for m, _ in marks):
        return None

    def apply() -> None:
        out["messages"] = [*messages[:at], {**message, "content": _marked(blocks, index)}, *messages[at + 1:]]
    return (MESSAGES, at, index), apply


def _tools_target(out: dict[str, Any], marks: list[tuple[Position, bool]]) -> Target:
    tools = out.get("tools")
    if not isinstance(tools, list) or not tools or not isinstance(tools[-1], dict) \
            or any(at[0] == TOOLS for at, _ in marks):
        return None

    def apply() -> None:
        out["tools"] = _marked(tools, len(tools) - 1)
    return (TOOLS, len(tools) - 1), apply


def _markable(blocks: Any) -> int | None:
    """The last block of ``blocks`` that may carry a mark (not thinking, not empty text)."""
    for i in range(len(blocks) - 1, -1, -1) if isinstance(blocks, list) else ():
        block = blocks[i]
        if isinstance(block, dict) and block.get("type") not in UNMARKABLE \
                and not (block.get("type") == "text" and not block.get("text")):
            return i
    return None


def _marked(blocks: list[Any], index: int) -> list[Any]:
    return [*blocks[:index], {**blocks[index], "cache_control": dict(EPHEMERAL)}, *blocks[index + 1:]]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- Bedrock Converse -----------------------------------------------------------------------------------

class Caching(enum.Enum):
    FULL = "system, messages, tools"      # Claude on Bedrock
    NO_TOOLS = "system, messages"         # Amazon Nova: no cache point among the tools


_CLAUDE = re.compile(r"anthropic\.claude-(?:3-5-haiku|3-7-sonnet|(?:opus|sonnet|haiku)-[4-9])")
_NOVA = re.compile(r"amazon\.nova-(?:micro|lite|pro|premier)")


def converse_caching(model_id: str) -> Caching | None:
    """Whether a Bedrock model (its id, an inference profile's ``us.``/``eu.``... id or its ARN) takes cache
    points, and where: the models Bedrock's prompt-caching page lists."""
    if _CLAUDE.search(model_id):
        return Caching.FULL
    if _NOVA.search(model_id):
        return Caching.NO_TOOLS
    return None


def _points(blocks: Any) -> int:
    return sum(1 for b in _list(blocks) if isinstance(b, dict) and "cachePoint" in b)


def converse_breakpoints(body: dict[str, Any], caching: Caching) -> dict[str, Any]:
    """A Converse ``body`` with cache points after the system prompt, the message before the final user turn
    and (``Caching.FULL``) the tools, in that order while fewer than 4 are there; a new dict."""
    tools = (body.get("toolConfig") or {}).get("tools") if isinstance(body.get("toolConfig"), dict) else None
    room = LIMIT - _points(body.get("system")) - _points(tools) \
        - sum(_points(m.get("content")) for m in _list(body.get("messages")) if isinstance(m, dict))
    out = dict(body)
    system = out.get("system")
    if room > 0 and isinstance(system, list) and system and not _points(system):
        out["system"] = [*system, dict(CACHE_POINT)]
        room -= 1
    messages = _list(out.get("messages"))
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    if room > 0 and users and users[-1] > 0:
        at = users[-1] - 1
        message = messages[at]
        content = _list(message.get("content"))
        if content and not any(_points(m.get("content")) for m in messages[at:] if isinstance(m, dict)):
            out["messages"] = [*messages[:at], {**message, "content": [*content, dict(CACHE_POINT)]},
                               *messages[at + 1:]]
            room -= 1
    if room > 0 and caching is Caching.FULL and tools and not _points(tools):
        out["toolConfig"] = {**out["toolConfig"], "tools": [*tools, dict(CACHE_POINT)]}
    return out
