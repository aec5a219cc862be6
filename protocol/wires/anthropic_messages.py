"""Chat messages as Messages content, for a native anthropic backend (``protocol/wires/anthropic.py``).

System messages become ``system``; consecutive same-role turns merge; images
(data: URLs as base64 sources, http URLs as url sources) and files become
blocks; assistant tool calls become ``tool_use`` blocks and tool messages
``tool_result`` blocks of one user turn. What Messages cannot hold is a 400
naming its path, never dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter

# Messages API fields that exist but that no chat backend can be asked for: refused by name, here and by the
# chat -> anthropic wire (protocol/wires/anthropic.py), so no client turns them on with the operator's key.
NOT_CARRIED = frozenset({"container", "diagnostics", "inference_geo", "speed", "user_profile_id", "workspace_id",
                         "mcp_servers"})

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def unsupported(field: str, why: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(f"'{field}' cannot be sent to an anthropic backend: {why}", param=field)


def invalid(field: str, rule: str) -> InvalidRequest:
    return InvalidRequest(f"'{field}' {rule}", param=field, code="invalid_value")


def translate_messages(messages: list[Any]) -> tuple[Any, list[dict[str, Any]]]:
    """(system, turns): system and developer messages hoisted, in order, into ``system``; tool
    messages as user ``tool_result`` blocks; consecutive turns of one role merged into one."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        path = f"messages[{i}]"
        role = msg.get("role")
        if role in ("system", "developer"):
            system.extend(_blocks(msg.get("content"), path, kinds=("text",)))
            continue
        if role == "user":
            blocks = _blocks(msg.get("content"), path)
        elif role == "assistant":
            blocks = _assistant(msg, path)
        elif role == "tool":
            role, blocks = "user", [_tool_result(msg, path)]
        else:
            raise unsupported(f"{path}.role", f"role {role!r} has no Messages counterpart; use tools and "
                                               f"tool messages")
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        turn["content"] = _plain(turn["content"])
    return _plain(system) if system else None, turns


def _plain(blocks: list[dict[str, Any]]) -> Any:
    """One plain text block as the string shorthand; anything else as the blocks."""
    if not blocks:
        return ""
    if len(blocks) == 1 and blocks[0].keys() == {"type", "text"}:
        return blocks[0]["text"]
    return blocks


def _blocks(content: Any, path: str, kinds: tuple[str, ...] = ("text", "image_url", "file")) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for j, part in enumerate(content):
        where = f"{path}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in kinds:
            raise unsupported(f"{where}.type", f"content parts of type {kind!r} have no Messages counterpart "
                                                f"here (accepted: {', '.join(kinds)})")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise invalid(f"{where}.text", "is required and must be a string")
            block: dict[str, Any] = {"type": "text", "text": part["text"]}
        elif kind == "refusal":   # an assistant's earlier refusal is what it said
            if not isinstance(part.get("refusal"), str):
                raise invalid(f"{where}.refusal", "is required and must be a string")
            block = {"type": "text", "text": part["refusal"]}
        elif kind == "image_url":
            block = _image(part.get("image_url"), f"{where}.image_url")
        else:
            block = _document(part.get("file"), f"{where}.file")
        if part.get("cache_control") is not None:   # Anthropic prompt caching, as some clients send it
            block["cache_control"] = part["cache_control"]
        out.append(block)
    return out


def _image(image: Any, path: str) -> dict[str, Any]:
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise invalid(f"{path}.url", "is required and must be a string")
    data = _DATA_URL.fullmatch(url)
    if data is not None:
        if data.group(1) not in IMAGE_TYPES:
            raise unsupported(f"{path}.url", f"Anthropic takes images as {', '.join(sorted(IMAGE_TYPES))}, "
                                              f"got {data.group(1)!r}")
        return {"type": "image", "source": {"type": "base64", "media_type": data.group(1), "data": data.group(2)}}
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise invalid(f"{path}.url", "must be an http(s) URL or a data: URL with base64 data")


def _document(file: Any, path: str) -> dict[str, Any]:
    data = _DATA_URL.fullmatch(file.get("file_data") or "") if isinstance(file, dict) else None
    if data is None or data.group(1) != "application/pdf":
        raise unsupported(path, "only a PDF given inline as file_data (a data:application/pdf;base64 URL) has a "
                                 "Messages counterpart; file ids mean nothing to Anthropic")
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                           "data": data.group(2)}}


def _assistant(msg: dict[str, Any], path: str) -> list[dict[str, Any]]:
    # Empty text is left out: Messages refuses empty text blocks, and a tool-calling turn often has "".
    blocks = [b for b in _blocks(msg.get("content"), path, kinds=("text", "refusal")) if b.get("text", True)]
    calls = msg.get("tool_calls") or []
    if not isinstance(calls, list):
        raise invalid(f"{path}.tool_calls", "must be an array")
    for j, call in enumerate(calls):
        where = f"{path}.tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(call.get("id"), str):
            raise invalid(where, "needs an id and a function with a name")
        arguments = fn.get("arguments") or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except (ValueError, RecursionError):   # not JSON, or nested past what the parser takes
            parsed = None
        if not isinstance(parsed, dict):
            raise invalid(f"{where}.function.arguments", "must be a JSON object (an anthropic backend takes a tool "
                                                          "call's input as an object)")
        blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"], "input": parsed})
    return blocks


def _tool_result(msg: dict[str, Any], path: str) -> dict[str, Any]:
    if not isinstance(msg.get("tool_call_id"), str):
        raise invalid(f"{path}.tool_call_id", "is required on a tool message and must be a string")
    content = msg.get("content")
    result = content if isinstance(content, str) else _blocks(content, path, kinds=("text", "image_url"))
    return {"type": "tool_result", "tool_use_id": msg["tool_call_id"], "content": result}
