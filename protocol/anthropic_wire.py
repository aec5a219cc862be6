"""Chat Completions spoken to a native Anthropic backend (``type: anthropic``).

Everything behind the RequestActor thinks in chat completions; this wire
turns an attempt's chat body into a Messages request (``POST /v1/messages``
with ``x-api-key`` and ``anthropic-version``) and the Messages answer back
into chat (``protocol/anthropic_answer.py``), so failover, the relay and the
metrics work unchanged.

A chat field the Messages API cannot carry is refused (400
``unsupported_request_parameter`` naming it) unless its value asks for
nothing (``n: 1``, ``presence_penalty: 0``, ...); fields chat does not know
(Anthropic's own ``thinking``, ``service_tier``, ...) pass as they are, and
Anthropic judges them. The one value ever removed is the spec's: from
anthropic-version 2026-10-21 Anthropic rejects ``temperature``, ``top_p``
and ``top_k`` for every model, so a client's values are left out on such a
hop; a value the request_params policy wrote is refused instead. What chat
says that Messages has no place for and that changes no answer (a
message's ``name``, an image's ``detail``, earlier ``reasoning_content``)
is listed in docs/anthropic-backend.md.
"""

from __future__ import annotations

import json
import re
from typing import Any

from actors.messages import Call
from actors.wire import JSON, TRANSLATED, Wire
from config.schema import BackendConfig, BackendType
from protocol.anthropic_answer import chat_answer
from protocol.errors import InvalidRequest, UnsupportedRequestParameter

DEFAULT_MAX_TOKENS = 4096            # Messages requires max_tokens; chat does not
SAMPLING_REJECTED_FROM = "2026-10-21"
SAMPLING = ("temperature", "top_p", "top_k")
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# Chat fields with no Messages counterpart, with the one value that asks for nothing.
NEUTRAL: dict[str, Any] = {"n": 1, "logprobs": False, "top_logprobs": 0, "presence_penalty": 0,
                           "frequency_penalty": 0, "logit_bias": {}, "store": False, "min_p": 0,
                           "modalities": ["text"]}
UNCARRIED = ("seed", "audio", "prediction", "functions", "function_call", "web_search_options")
# Read (and translated) here; any other field passes into the Messages body as it is.
CONSUMED = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                      "stop", "user", "metadata", "tools", "tool_choice", "parallel_tool_calls",
                      "response_format", "reasoning_effort", "output_config", *SAMPLING, *NEUTRAL, *UNCARRIED})
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def _ingress(call: Call, name: str) -> str | None:
    """A header the Messages ingress carried for this wire (str or bytes; a list of values joined)."""
    value = call.ingress.get(name)
    if isinstance(value, (list, tuple)):
        value = ",".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in value)
    return (value.decode("latin-1") if isinstance(value, bytes) else value) or None


def anthropic_version(backend: BackendConfig, call: Call) -> str:
    """A Messages client's own anthropic-version; for every other ingress the backend's."""
    return _ingress(call, "anthropic-version") or backend.anthropic_version


def takes_sampling(version: str) -> bool:
    """Whether this anthropic-version still accepts temperature, top_p and top_k."""
    return version < SAMPLING_REJECTED_FROM


def headers(backend: BackendConfig, call: Call) -> list[tuple[str, str]]:
    out = [JSON, ("anthropic-version", anthropic_version(backend, call))]
    if backend.api_key:
        out.append(("x-api-key", backend.api_key))
    beta = _ingress(call, "anthropic-beta")
    if beta:
        out.append(("anthropic-beta", beta))
    return out


def body(raw: bytes, backend: BackendConfig, call: Call) -> bytes:
    return json.dumps(messages_request(json.loads(raw), backend, call)).encode()


def _unsupported(field: str, why: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(f"'{field}' cannot be sent to an anthropic backend: {why}", param=field)


def _invalid(field: str, rule: str) -> InvalidRequest:
    return InvalidRequest(f"'{field}' {rule}", param=field, code="invalid_value")


def messages_request(payload: dict[str, Any], backend: BackendConfig, call: Call) -> dict[str, Any]:
    """The Messages body for a chat ``payload`` on ``backend``."""
    for field, neutral in NEUTRAL.items():
        if payload.get(field) is not None and payload[field] != neutral:
            raise _unsupported(field, f"the Messages API has no such parameter (only {json.dumps(neutral)}, "
                                      f"which asks for nothing, is accepted)")
    for field in UNCARRIED:
        if payload.get(field) is not None:
            raise _unsupported(field, "the Messages API has no such parameter")
    system, messages = translate_messages(payload["messages"])
    out: dict[str, Any] = {"model": payload["model"], "max_tokens": _max_tokens(payload, backend),
                           "messages": messages}
    if system:
        out["system"] = system
    stop = payload.get("stop")
    if isinstance(stop, str):
        out["stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if stop:
            out["stop_sequences"] = stop
    elif stop is not None:
        raise _invalid("stop", "must be a string or an array of strings")
    version = anthropic_version(backend, call)
    for field in SAMPLING:
        if payload.get(field) is None:
            continue
        if takes_sampling(version):
            out[field] = payload[field]
        elif field in call.managed_params:
            raise _unsupported(field, f"the request parameter policy set it, and Anthropic rejects it for every "
                                      f"model from anthropic-version {SAMPLING_REJECTED_FROM} (this hop sends "
                                      f"{version})")
        # else: a client's value, which Anthropic refuses at this version: left out (the spec's rule)
    metadata = _metadata(payload)
    if metadata:
        out["metadata"] = metadata
    tools = payload.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _invalid("tools", "must be an array")
    if tools:
        out["tools"] = [_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    choice = _tool_choice(payload.get("tool_choice"), payload.get("parallel_tool_calls"), bool(tools))
    if choice is not None:
        out["tool_choice"] = choice
    # A Messages client's own thinking config travels beside the chat payload, whose reasoning_effort
    # was only made up from it (Call.ingress "thinking" and "derived"): this backend takes the original.
    derived = call.ingress.get("derived") or ()
    config = _output_config(payload, skip_effort="reasoning_effort" in derived)
    if config:
        out["output_config"] = config
    if call.ingress.get("thinking") is not None and "thinking" not in payload:
        out["thinking"] = call.ingress["thinking"]
    if payload.get("stream") is True:
        out["stream"] = True
    for key, value in payload.items():   # Anthropic's own fields (thinking, service_tier, ...)
        if key not in CONSUMED:
            out[key] = value
    return out


def _max_tokens(payload: dict[str, Any], backend: BackendConfig) -> Any:
    newer, older = payload.get("max_completion_tokens"), payload.get("max_tokens")
    if newer is not None and older is not None and newer != older:
        raise _invalid("max_completion_tokens", f"({newer}) and 'max_tokens' ({older}) disagree; send one")
    if newer is not None or older is not None:
        return newer if newer is not None else older
    wire = payload["model"]
    public = next((m for m, w in backend.upstream_ids.items() if w == wire), wire)
    known = backend.model_configs.get(public)
    cap = known.max_output if known is not None else None
    return min(DEFAULT_MAX_TOKENS, cap) if cap else DEFAULT_MAX_TOKENS


def _metadata(payload: dict[str, Any]) -> dict[str, Any]:
    metadata = payload.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict) or set(metadata) - {"user_id"}):
        raise _unsupported("metadata", "Anthropic's metadata takes only user_id (send the end user as 'user')")
    out = dict(metadata or {})
    user = payload.get("user")
    if user is not None:
        if out.get("user_id") not in (None, user):
            raise _invalid("user", "and 'metadata.user_id' disagree; send one")
        out["user_id"] = user
    return out


def _tool(tool: Any, path: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise _unsupported(f"{path}.type", f"only function tools have a Messages counterpart, got {kind!r}")
    fn = tool.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise _invalid(f"{path}.function.name", "is required and must be a string")
    out: dict[str, Any] = {"name": fn["name"]}
    if fn.get("description"):
        out["description"] = fn["description"]
    out["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
    if fn.get("strict"):
        out["strict"] = True
    return out


def _tool_choice(choice: Any, parallel: Any, has_tools: bool) -> dict[str, Any] | None:
    if choice is None:
        out = None
    elif choice in ("auto", "none"):
        out = {"type": choice}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and choice.get("type") == "function" \
            and isinstance((choice.get("function") or {}).get("name"), str):
        out = {"type": "tool", "name": choice["function"]["name"]}
    else:
        raise _invalid("tool_choice", "must be auto, required, none or {type: function, function: {name}}")
    if parallel is False and has_tools:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _output_config(payload: dict[str, Any], skip_effort: bool) -> dict[str, Any]:
    given = payload.get("output_config")
    if given is not None and not isinstance(given, dict):
        raise _invalid("output_config", "must be an object")
    config = dict(given or {})
    fmt = payload.get("response_format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_schema":
            given_schema = fmt.get("json_schema")
            if not isinstance(given_schema, dict):
                raise _invalid("response_format.json_schema", "is required and must be an object")
            schema = given_schema.get("schema")
            if not isinstance(schema, dict):
                raise _invalid("response_format.json_schema.schema", "is required and must be an object")
            _set(config, "format", {"type": "json_schema", "schema": schema}, "response_format")
        elif kind != "text":
            raise _unsupported("response_format", f"Anthropic's structured output takes a JSON schema "
                                                  f"(json_schema) only, got {kind!r}")
    effort = payload.get("reasoning_effort")
    if effort is not None and not skip_effort:
        if effort not in EFFORTS:
            raise _unsupported("reasoning_effort", f"Anthropic's effort is one of {', '.join(EFFORTS)}, got {effort!r}")
        _set(config, "effort", effort, "reasoning_effort")
    return config


def _set(config: dict[str, Any], key: str, value: Any, field: str) -> None:
    if key in config and config[key] != value:
        raise _invalid(field, f"and 'output_config.{key}' disagree; send one")
    config[key] = value


# --- messages -----------------------------------------------------------------------------

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
            raise _unsupported(f"{path}.role", f"role {role!r} has no Messages counterpart; use tools and "
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
            raise _unsupported(f"{where}.type", f"content parts of type {kind!r} have no Messages counterpart "
                                                f"here (accepted: {', '.join(kinds)})")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise _invalid(f"{where}.text", "is required and must be a string")
            block: dict[str, Any] = {"type": "text", "text": part["text"]}
        elif kind == "refusal":   # an assistant's earlier refusal is what it said
            if not isinstance(part.get("refusal"), str):
                raise _invalid(f"{where}.refusal", "is required and must be a string")
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
        raise _invalid(f"{path}.url", "is required and must be a string")
    data = _DATA_URL.fullmatch(url)
    if data is not None:
        if data.group(1) not in IMAGE_TYPES:
            raise _unsupported(f"{path}.url", f"Anthropic takes images as {', '.join(sorted(IMAGE_TYPES))}, "
                                              f"got {data.group(1)!r}")
        return {"type": "image", "source": {"type": "base64", "media_type": data.group(1), "data": data.group(2)}}
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise _invalid(f"{path}.url", "must be an http(s) URL or a data: URL with base64 data")


def _document(file: Any, path: str) -> dict[str, Any]:
    data = _DATA_URL.fullmatch(file.get("file_data") or "") if isinstance(file, dict) else None
    if data is None or data.group(1) != "application/pdf":
        raise _unsupported(path, "only a PDF given inline as file_data (a data:application/pdf;base64 URL) has a "
                                 "Messages counterpart; file ids mean nothing to Anthropic")
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                           "data": data.group(2)}}


def _assistant(msg: dict[str, Any], path: str) -> list[dict[str, Any]]:
    # Empty text is left out: Messages refuses empty text blocks, and a tool-calling turn often has "".
    blocks = [b for b in _blocks(msg.get("content"), path, kinds=("text", "refusal")) if b.get("text", True)]
    calls = msg.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _invalid(f"{path}.tool_calls", "must be an array")
    for j, call in enumerate(calls):
        where = f"{path}.tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(call.get("id"), str):
            raise _invalid(where, "needs an id and a function with a name")
        arguments = fn.get("arguments") or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise _invalid(f"{where}.function.arguments", "must be a JSON object (an anthropic backend takes a tool "
                                                          "call's input as an object)")
        blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"], "input": parsed})
    return blocks


def _tool_result(msg: dict[str, Any], path: str) -> dict[str, Any]:
    if not isinstance(msg.get("tool_call_id"), str):
        raise _invalid(f"{path}.tool_call_id", "is required on a tool message and must be a string")
    content = msg.get("content")
    result = content if isinstance(content, str) else _blocks(content, path, kinds=("text", "image_url"))
    return {"type": "tool_result", "tool_use_id": msg["tool_call_id"], "content": result}


TRANSLATED[("chat", BackendType.ANTHROPIC)] = Wire("/v1/messages", headers=headers, body=body, answer=chat_answer)
