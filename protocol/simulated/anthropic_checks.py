"""What the simulated Anthropic backend refuses, in the real API's words, and the betas that widen it.

Like the real Messages API it refuses unknown top-level fields, roles other
than user/assistant, a ``tool_result`` with no ``tool_use`` before it, a
thinking tool loop whose final assistant turn lost its signed thinking block,
and (from anthropic-version 2026-10-21) ``temperature``/``top_p``/``top_k``.

Two request features exist only under their beta (``anthropic-beta``), as
Claude Code sends them:

- ``context_management`` (``context-management-2025-06-27``): its ``edits``
  are ``clear_thinking_20251015`` and ``clear_tool_uses_20250919``. Without
  the beta the field is unknown: ``context_management: Extra inputs are not
  permitted``.
- a mid-conversation ``system`` message (``mid-conversation-system-2026-04-07``):
  a ``{"role": "system"}`` turn that is not first, right after a user turn,
  and followed by nothing or an assistant turn, its content text. Without the
  beta it is the real API's ``Unexpected role "system"`` refusal.
"""

from __future__ import annotations

from typing import Any

SAMPLING_REJECTED_FROM = "2026-10-21"
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-2026-04-07"
CONTEXT_EDITS = ("clear_thinking_20251015", "clear_tool_uses_20250919")
FIELDS = frozenset({"model", "max_tokens", "messages", "system", "stop_sequences", "stream", "temperature", "top_p",
                    "top_k", "metadata", "tools", "tool_choice", "thinking", "service_tier", "output_config",
                    "container", "mcp_servers", "inference_geo", "speed", "cache_control"})
BLOCKS = frozenset({"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"})
SYSTEM_ROLE = ('messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, '
               'not "system" as an input message role.')


def betas_of(header: str | None) -> frozenset[str]:
    """The beta names of an ``anthropic-beta`` header (comma-separated)."""
    return frozenset(n.strip() for n in (header or "").split(",") if n.strip())


def problem_in(body: Any, version: str, betas: frozenset[str] = frozenset()) -> str | None:
    """What the real API would refuse in ``body`` (its message), or None."""
    if not isinstance(body, dict):
        return "body: Input should be an object"
    for key in body:
        if key not in FIELDS and not (key == "context_management" and CONTEXT_MANAGEMENT_BETA in betas):
            return f"{key}: Extra inputs are not permitted"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    if not isinstance(body["max_tokens"], int) or isinstance(body["max_tokens"], bool) or body["max_tokens"] < 1:
        return "max_tokens: Input should be a positive integer"
    for key, kind, wanted in (("thinking", dict, "an object"), ("stop_sequences", list, "a list"),
                              ("system", (str, list), "a string or a list of blocks")):
        if key in body and body[key] is not None and not isinstance(body[key], kind):
            return f"{key}: Input should be {wanted}"
    for i, stop in enumerate(body.get("stop_sequences") or ()):
        if not isinstance(stop, str):
            return f"stop_sequences.{i}: Input should be a valid string"
    if version >= SAMPLING_REJECTED_FROM:
        for key in ("temperature", "top_p", "top_k"):
            if key in body:
                return f"{key}: is not supported with anthropic-version {version}"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    return (_context_management(body.get("context_management")) or _messages(messages, betas)
            or _thinking_problem(body, messages))


def _context_management(value: Any) -> str | None:
    if value is None:
        return None
    edits = value.get("edits") if isinstance(value, dict) else None
    if not isinstance(edits, list):
        return "context_management.edits: Input should be a valid list"
    for i, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in CONTEXT_EDITS:
            return (f"context_management.edits.{i}: Input tag {kind!r} found using 'type' does not match any of "
                    f"the expected tags: {', '.join(map(repr, CONTEXT_EDITS))}")
    return None


def _messages(messages: list[Any], betas: frozenset[str]) -> str | None:
    previous_tool_uses: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role == "system":
            problem = _system_turn(messages, i, betas)
            if problem is not None:
                return problem
            continue
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if not isinstance(content, (str, list)):
            return f"messages.{i}.content: Input should be a string or a list of blocks"
        tool_uses = set()
        for j, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in BLOCKS:
                return f"messages.{i}.content.{j}.type: Input tag {kind!r} does not match any expected tag"
            if kind == "text" and not isinstance(block.get("text"), str):
                return f"messages.{i}.content.{j}.text: Input should be a valid string"
            if kind == "tool_use":
                tool_uses.add(block.get("id"))
            if kind == "tool_result" and block.get("tool_use_id") not in previous_tool_uses:
                return (f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                        f"`tool_use` block in the previous message.")
        previous_tool_uses = tool_uses
    return None


def _system_turn(messages: list[Any], i: int, betas: frozenset[str]) -> str | None:
    """A ``system`` turn: refused without its beta; with it, placed and made of text as the API requires."""
    if MID_CONVERSATION_SYSTEM_BETA not in betas:
        return SYSTEM_ROLE
    before = messages[i - 1] if i else None
    if not isinstance(before, dict) or before.get("role") != "user":
        return (f"messages.{i}: a `system` message must immediately follow a `user` message; use the top-level "
                f"`system` parameter for instructions that apply from the start")
    after = messages[i + 1] if i + 1 < len(messages) else None
    if after is not None and (not isinstance(after, dict) or after.get("role") != "assistant"):
        return f"messages.{i}: a `system` message must be the last message or be followed by an `assistant` message"
    content = messages[i].get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list) or not blocks:
        return f"messages.{i}.content: Input should be a string or a non-empty list of text blocks"
    for j, block in enumerate(blocks):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            return f"messages.{i}.content.{j}: a `system` message takes only `text` blocks"
    return None


def _thinking_problem(body: dict[str, Any], messages: list[Any]) -> str | None:
    """Anthropic's rule: with thinking on, the final assistant turn, when it calls tools, starts with
    its thinking block, signature and all (redacted thinking counts too)."""
    if (body.get("thinking") or {}).get("type") not in ("enabled", "adaptive"):
        return None
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), None)
    content = messages[last]["content"] if last is not None else None
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
        return None
    first = content[0] if isinstance(content[0], dict) else {}
    if first.get("type") == "redacted_thinking" or \
            (first.get("type") == "thinking" and isinstance(first.get("signature"), str) and first["signature"]):
        return None
    return (f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must start with a "
            f"thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks).")
