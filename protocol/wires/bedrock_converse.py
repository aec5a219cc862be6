"""A chat body as a Bedrock Converse request (``POST /model/{modelId}/converse[-stream]``).

System and developer messages become ``system`` text blocks; user and
assistant turns ``messages`` whose consecutive turns of one role merge (tool
messages become ``toolResult`` blocks of a user turn); images given as
``data:`` URLs become ``image`` blocks with their bytes (base64, as the JSON
API takes them); assistant tool calls ``toolUse`` blocks; function tools a
``toolConfig``; ``max_tokens``, ``temperature``, ``top_p`` and ``stop`` the
``inferenceConfig``. Bedrock's own request fields (``guardrailConfig``,
``additionalModelRequestFields``, ...) pass as given. Anything else chat
says that Converse cannot carry is a 400 naming its path, never dropped;
an image by http URL is refused (Bedrock takes bytes, and the gateway does
not fetch URLs a client names).
"""

from __future__ import annotations

import json
import re
from typing import Any

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.protocol.wires.anthropic import NEUTRAL, UNCARRIED

FORMATS = {"image/jpeg": "jpeg", "image/jpg": "jpeg", "image/png": "png", "image/gif": "gif", "image/webp": "webp"}
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
# Converse's own request fields: a client (or request_extensions) may set them, they pass as they are.
OWN = ("guardrailConfig", "additionalModelRequestFields", "additionalModelResponseFieldPaths",
       "performanceConfig", "promptVariables", "requestMetadata")
# OpenAI's hints that change no answer (a prefix-cache routing key, an end user's id for abuse monitoring):
# Converse has neither, so they are left out.
HINTS = ("prompt_cache_key", "safety_identifier")
CONSUMED = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                      "temperature", "top_p", "top_k", "stop", "tools", "tool_choice", "parallel_tool_calls", "user",
                      "metadata", "response_format", *OWN, *HINTS})


def unsupported(field: str, why: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(f"'{field}' cannot be sent to a bedrock backend: {why}", param=field)


def invalid(field: str, rule: str) -> InvalidRequest:
    return InvalidRequest(f"'{field}' {rule}", param=field, code="invalid_value")


def converse_request(payload: dict[str, Any]) -> dict[str, Any]:
    """The Converse body for a chat ``payload`` (the model id goes in the path, not here)."""
    for field, neutral in NEUTRAL.items():
        if payload.get(field) is not None and payload[field] != neutral:
            raise unsupported(field, f"Converse has no such parameter (only {json.dumps(neutral)}, which asks "
                                     f"for nothing, is accepted)")
    for field in UNCARRIED:
        if payload.get(field) is not None:
            raise unsupported(field, "Converse has no such parameter")
    for field in payload:
        if field not in CONSUMED and field not in NEUTRAL:
            raise unsupported(field, "Converse has no such parameter (Bedrock's own fields are "
                                     f"{', '.join(OWN)})")
    if payload.get("parallel_tool_calls") is False:
        raise unsupported("parallel_tool_calls", "Converse cannot turn parallel tool calls off (only true)")
    fmt = payload.get("response_format")
    if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") != "text"):
        raise unsupported("response_format", "Converse takes no response format (only {\"type\": \"text\"})")
    messages = payload.get("messages")
    if not isinstance(messages, list):
        raise invalid("messages", "must be an array")
    system, turns = translate(messages)
    out: dict[str, Any] = {"messages": turns}
    if system:
        out["system"] = system
    config = inference_config(payload)
    if config:
        out["inferenceConfig"] = config
    tools = tool_config(payload, uses_tools=any("toolUse" in b or "toolResult" in b
                                                for t in turns for b in t["content"]))
    if tools is not None:
        out["toolConfig"] = tools
    metadata = request_metadata(payload)
    if metadata:
        out["requestMetadata"] = metadata
    for field in OWN:
        if field != "requestMetadata" and payload.get(field) is not None:
            out[field] = payload[field]
    if payload.get("top_k") is not None:   # no Converse field: the model's own (Anthropic's, Mistral's, ...)
        extra = out.get("additionalModelRequestFields")
        if extra is not None and not isinstance(extra, dict):
            raise invalid("additionalModelRequestFields", "must be an object")
        out["additionalModelRequestFields"] = {**(extra or {}), "top_k": payload["top_k"]}
    return out


def inference_config(payload: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    newer, older = payload.get("max_completion_tokens"), payload.get("max_tokens")
    if newer is not None and older is not None and newer != older:
        raise invalid("max_completion_tokens", f"({newer}) and 'max_tokens' ({older}) disagree; send one")
    if newer is not None or older is not None:
        out["maxTokens"] = newer if newer is not None else older
    if payload.get("temperature") is not None:
        out["temperature"] = payload["temperature"]
    if payload.get("top_p") is not None:
        out["topP"] = payload["top_p"]
    stop = payload.get("stop")
    if isinstance(stop, str):
        out["stopSequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if stop:
            out["stopSequences"] = stop
    elif stop is not None:
        raise invalid("stop", "must be a string or an array of strings")
    return out


def request_metadata(payload: dict[str, Any]) -> dict[str, str]:
    """chat's ``metadata`` (string pairs) and ``user`` as Converse's ``requestMetadata`` (logged by Bedrock)."""
    out: dict[str, str] = {}
    for source in (payload.get("requestMetadata"), payload.get("metadata")):
        if source is None:
            continue
        if not isinstance(source, dict) or not all(isinstance(v, str) for v in source.values()):
            raise invalid("metadata", "must be an object of strings")
        out.update(source)
    user = payload.get("user")
    if user is not None:
        if not isinstance(user, str):
            raise invalid("user", "must be a string")
        out.setdefault("user", user)
    return out


def tool_config(payload: dict[str, Any], uses_tools: bool) -> dict[str, Any] | None:
    tools = payload.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise invalid("tools", "must be an array")
    choice = payload.get("tool_choice")
    if choice == "none":
        if uses_tools:
            raise unsupported("tool_choice", "Converse cannot forbid tool use in a conversation that holds tool "
                                             "calls (send tool_choice auto, or leave the tools out)")
        return None   # no tools offered: none can be called
    specs = [_tool(t, f"tools[{i}]") for i, t in enumerate(tools or [])]
    if not specs:
        if choice not in (None, "auto"):
            raise invalid("tool_choice", "needs tools")
        return None
    out: dict[str, Any] = {"tools": specs}
    if choice == "required":
        out["toolChoice"] = {"any": {}}
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict) \
            and isinstance(choice["function"].get("name"), str):
        out["toolChoice"] = {"tool": {"name": choice["function"]["name"]}}
    elif choice == "auto":
        out["toolChoice"] = {"auto": {}}
    elif choice is not None:
        raise invalid("tool_choice", "must be auto, required, none or {type: function, function: {name}}")
    return out


def _tool(tool: Any, path: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise unsupported(f"{path}.type", f"only function tools have a Converse counterpart, got {kind!r}")
    fn = tool.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise invalid(f"{path}.function.name", "is required and must be a string")
    spec: dict[str, Any] = {"name": fn["name"],
                            "inputSchema": {"json": fn.get("parameters") or {"type": "object", "properties": {}}}}
    if fn.get("description"):
        spec["description"] = fn["description"]
    return {"toolSpec": spec}


def translate(messages: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, turns): consecutive turns of one role merged; tool results first in their turn."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise invalid(path, "must be an object")
        role = msg.get("role")
        if role in ("system", "developer"):
            system.extend(_content(msg.get("content"), path, images=False))
            continue
        if role == "user":
            blocks = _content(msg.get("content"), path, images=True)
        elif role == "assistant":
            blocks = _assistant(msg, path)
        elif role == "tool":
            role, blocks = "user", [_tool_result(msg, path)]
        else:
            raise unsupported(f"{path}.role", f"role {role!r} has no Converse counterpart")
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:   # Converse wants a turn's tool results before its other content
        turn["content"].sort(key=lambda b: "toolResult" not in b)
    return system, [t for t in turns if t["content"]]


def _content(content: Any, path: str, images: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, list):
        raise invalid(f"{path}.content", "must be a string or an array of content parts")
    out: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        where = f"{path}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            if part["text"]:
                out.append({"text": part["text"]})
        elif kind == "image_url" and images:
            out.append(_image(part.get("image_url"), where))
        else:
            raise unsupported(f"{where}.type", f"a {kind!r} part has no Converse counterpart here")
    return out


def _image(image: Any, path: str) -> dict[str, Any]:
    url = image.get("url") if isinstance(image, dict) else image if isinstance(image, str) else None
    if not isinstance(url, str):
        raise invalid(f"{path}.image_url.url", "is required and must be a string")
    found = _DATA_URL.fullmatch(url)
    if found is None:
        raise unsupported(f"{path}.image_url.url", "Bedrock takes an image's bytes: send it as a data: URL "
                                                   "(data:image/png;base64,...)")
    media = found.group(1).lower()
    if media not in FORMATS:
        raise unsupported(f"{path}.image_url.url", f"Converse takes jpeg, png, gif or webp images, got {media}")
    return {"image": {"format": FORMATS[media], "source": {"bytes": found.group(2).strip()}}}


def _assistant(msg: dict[str, Any], path: str) -> list[dict[str, Any]]:
    blocks = _content(msg.get("content"), path, images=False) if msg.get("content") is not None else []
    calls = msg.get("tool_calls")
    if calls is not None and not isinstance(calls, list):   # never dropped: the call's turns would change
        raise invalid(f"{path}.tool_calls", "must be an array")
    for k, call in enumerate(calls or ()):
        where = f"{path}.tool_calls[{k}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(call.get("id"), str):
            raise invalid(where, "must have an id and a function with a name")
        try:
            arguments = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError, RecursionError):   # not JSON text, or nested past what the parser takes
            raise invalid(f"{where}.function.arguments", "must be a JSON object") from None
        if not isinstance(arguments, dict):
            raise invalid(f"{where}.function.arguments", "must be a JSON object")
        blocks.append({"toolUse": {"toolUseId": call["id"], "name": fn["name"], "input": arguments}})
    return blocks


def _tool_result(msg: dict[str, Any], path: str) -> dict[str, Any]:
    if not isinstance(msg.get("tool_call_id"), str):
        raise invalid(f"{path}.tool_call_id", "is required and must be a string")
    content = _content(msg.get("content"), path, images=True) or [{"text": ""}]
    return {"toolResult": {"toolUseId": msg["tool_call_id"], "content": content}}
