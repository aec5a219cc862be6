"""Chat messages as Gemini ``contents`` and ``systemInstruction``, for a native gemini backend.

System and developer messages become the ``systemInstruction``; user turns
stay ``user``, assistant turns become ``model``; tool messages become
``functionResponse`` parts of a user turn, named after the call they answer;
consecutive turns of one role merge (Gemini wants them alternating). Images,
audio and files in ``data:`` URLs go inline (``inlineData``), other URLs as
``fileData``. What Gemini has no place for is a 400 naming its path, never
dropped. An assistant's earlier ``reasoning_content`` is not sent back: Gemini
takes no thoughts as input, only their signatures, which travel inside the
tool call id (``signed_id``/``split_id``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter

_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mp3", "aiff": "audio/aiff", "aac": "audio/aac",
               "ogg": "audio/ogg", "flac": "audio/flac"}
SIGNATURE_MARK = "__ts_"   # a tool call id carrying the thought signature of its functionCall part


def unsupported(field: str, why: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(f"'{field}' cannot be sent to a gemini backend: {why}", param=field)


def invalid(field: str, rule: str) -> InvalidRequest:
    return InvalidRequest(f"'{field}' {rule}", param=field, code="invalid_value")


def signed_id(base: str, signature: str | None) -> str:
    """A tool call id that carries Gemini's thought signature (URL-safe, so any client can echo it back)."""
    if not signature:
        return base
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return base
    return f"{base}{SIGNATURE_MARK}{base64.urlsafe_b64encode(raw).decode().rstrip('=')}"


def split_id(tool_id: str) -> tuple[str, str | None]:
    """(the id, the thought signature it carries or None) of a tool call id made by ``signed_id``."""
    base, mark, sig = tool_id.partition(SIGNATURE_MARK)
    if not mark or not sig:
        return tool_id, None
    try:
        raw = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    except (binascii.Error, ValueError):
        return tool_id, None
    return base, base64.b64encode(raw).decode()


def translate(messages: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(systemInstruction or None, contents) for chat ``messages``."""
    if not isinstance(messages, list):
        raise invalid("messages", "must be an array")
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}   # tool call id -> function name, for the tool messages answering it
    for i, msg in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise invalid(path, "must be an object")
        role = msg.get("role")
        if role in ("system", "developer"):
            system.extend(_parts(msg.get("content"), path, text_only=True))
            continue
        if role == "user":
            role, parts = "user", _parts(msg.get("content"), path)
        elif role == "assistant":
            role, parts = "model", _assistant(msg, path, names)
        elif role == "tool":
            role, parts = "user", [_tool_result(msg, path, names)]
        else:
            raise unsupported(f"{path}.role", f"role {role!r} has no Gemini counterpart; use tools and tool messages")
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    instruction = {"parts": system} if system else None
    return instruction, contents


def _parts(content: Any, path: str, text_only: bool = False) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, list):
        raise invalid(f"{path}.content", "must be a string, an array of content parts or null")
    out: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        where = f"{path}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise invalid(f"{where}.text", "must be a string")
            out.append({"text": part["text"]})
        elif text_only:
            raise unsupported(f"{where}.type", f"a system instruction holds text only, got {kind!r}")
        elif kind == "image_url":
            url = part.get("image_url", {}).get("url") if isinstance(part.get("image_url"), dict) else None
            if not isinstance(url, str):
                raise invalid(f"{where}.image_url.url", "is required and must be a string")
            out.append(_media(url, f"{where}.image_url.url"))
        elif kind == "input_audio":
            audio = part.get("input_audio") if isinstance(part.get("input_audio"), dict) else {}
            fmt, data = audio.get("format"), audio.get("data")
            if not isinstance(fmt, str) or fmt not in AUDIO_TYPES or not isinstance(data, str):
                raise invalid(f"{where}.input_audio", f"needs data (base64) and a format among "
                                                      f"{', '.join(AUDIO_TYPES)}")
            out.append({"inlineData": {"mimeType": AUDIO_TYPES[fmt], "data": data}})
        elif kind == "file":
            data = part.get("file", {}).get("file_data") if isinstance(part.get("file"), dict) else None
            if not isinstance(data, str):
                raise unsupported(f"{where}.file", "Gemini takes a file inline only: send file.file_data as a "
                                                   "data: URL (a file_id names a file of another provider)")
            out.append(_media(data, f"{where}.file.file_data"))
        else:
            raise unsupported(f"{where}.type", f"content part {kind!r} has no Gemini counterpart")
    return out


def _media(url: str, where: str) -> dict[str, Any]:
    """A data: URL inline; an http(s) or gs:// URL by reference (Gemini fetches only what it supports)."""
    match = _DATA_URL.fullmatch(url)
    if match:
        return {"inlineData": {"mimeType": match.group(1), "data": match.group(2)}}
    if url.startswith(("https://", "http://", "gs://")):
        return {"fileData": {"fileUri": url}}
    raise invalid(where, "must be a base64 data: URL, or an https:// or gs:// URL")


def _assistant(msg: dict[str, Any], path: str, names: dict[str, str]) -> list[dict[str, Any]]:
    parts = _parts(msg.get("content"), path)
    if msg.get("refusal"):
        parts.append({"text": str(msg["refusal"])})
    calls = msg.get("tool_calls")
    if calls is None:
        return parts
    if not isinstance(calls, list):
        raise invalid(f"{path}.tool_calls", "must be an array")
    for k, call in enumerate(calls):
        where = f"{path}.tool_calls[{k}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise invalid(f"{where}.function.name", "is required and must be a string")
        raw = fn.get("arguments") or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except (ValueError, RecursionError):   # not JSON, or nested past what the parser takes
            raise invalid(f"{where}.function.arguments", "must be a JSON object in a string") from None
        if not isinstance(args, dict):
            raise invalid(f"{where}.function.arguments", "must be a JSON object (Gemini's args are an object)")
        part: dict[str, Any] = {"functionCall": {"name": fn["name"], "args": args}}
        tool_id = call.get("id")
        if isinstance(tool_id, str):
            names[tool_id] = fn["name"]
            _, signature = split_id(tool_id)
            if signature:
                part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def _tool_result(msg: dict[str, Any], path: str, names: dict[str, str]) -> dict[str, Any]:
    tool_id = msg.get("tool_call_id")
    if not isinstance(tool_id, str):
        raise invalid(f"{path}.tool_call_id", "is required and must be a string")
    name = names.get(tool_id) or msg.get("name")
    if not isinstance(name, str):
        raise invalid(f"{path}.tool_call_id", f"names no tool call of an earlier assistant message ({tool_id!r}); "
                                              f"Gemini answers a call by its function's name")
    content = msg.get("content")
    if isinstance(content, list):   # text parts only: a function's response is one value
        given = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        texts = [t for t in given if isinstance(t, str)]
        if len(texts) != len(content):
            raise unsupported(f"{path}.content", "a tool result holds text only on a gemini backend")
        content = "".join(texts)
    if content is not None and not isinstance(content, str):
        raise invalid(f"{path}.content", "must be a string or an array of text parts")
    response: Any
    try:
        response = json.loads(content) if content else None
    except (ValueError, RecursionError):   # not JSON, or nested past what the parser takes
        response = None
    if not isinstance(response, dict):   # Gemini's response is an object: other text goes as its output
        response = {"output": content or ""}
    return {"functionResponse": {"name": name, "response": response}}
