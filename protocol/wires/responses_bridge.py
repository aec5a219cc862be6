"""The Responses API bridge, request side: a Chat Completions body as a ``/v1/responses`` body.

A model only the Responses API serves (``responses_only``), or a request the
model's Chat Completions endpoint refuses (function tools with a reasoning
effort, ``chat_completions_tools_require_none_reasoning``), still answers a
chat client: its body is translated here, the answer back in
``protocol/wires/responses_answers.py``. The bridge carries every field it can
express and refuses the rest (``UnsupportedRequestParameter`` naming the
field path): a value that changes the answer is never silently dropped.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
VERBOSITIES = ("low", "medium", "high")
SUMMARIES = ("auto", "concise", "detailed")
RETENTIONS = ("in_memory", "24h")
TOOL_CHOICES = ("none", "auto", "required")
LEADING_ROLES = ("system", "developer")   # leading messages of these roles become ``instructions``

# Chat fields taken as they are (after a type check): same name, same meaning on both APIs.
_SAME: dict[str, str] = {
    "temperature": "number", "top_p": "number", "parallel_tool_calls": "boolean", "store": "boolean",
    "user": "string", "safety_identifier": "string", "prompt_cache_key": "string", "service_tier": "string",
    "prompt_cache_options": "object",
}
# Chat fields with no Responses counterpart, and the values that ask for nothing (so still allowed).
_NO_OP: dict[str, tuple[Any, ...]] = {
    "n": (None, 1), "stop": (None, []), "presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}), "seed": (None,), "logprobs": (None, False), "top_logprobs": (None, 0),
    "modalities": (None, ["text"]), "audio": (None,), "prediction": (None,), "web_search_options": (None,),
    "functions": (None,), "function_call": (None,),
}
# A function tool's fields besides ``name``, and a JSON schema format's: the same on both APIs.
FUNCTION_FIELDS = {"description": "string", "parameters": "object", "strict": "boolean"}
SCHEMA_FIELDS = {"schema": "object", "strict": "boolean", "description": "string"}
_TEXT_PART_KEYS = frozenset({"type", "text", "prompt_cache_breakpoint"})


def type_of(value: Any) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def same_value(value: Any, harmless: Any) -> bool:
    """``value`` is ``harmless`` (True is not 1, False is not 0)."""
    if isinstance(value, bool) or isinstance(harmless, bool) or value is None or harmless is None:
        return value is harmless
    return type(value) in (int, float) and type(harmless) in (int, float) and value == harmless \
        or type(value) is type(harmless) and value == harmless


def _is(value: Any, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return type_of(value) == kind


def expect(value: Any, kind: str, path: str) -> Any:
    if not _is(value, kind):
        article = "an" if kind[0] in "aeio" else "a"
        raise InvalidRequest(f"'{path}' must be {article} {kind}, got {type_of(value)}", param=path,
                             code="invalid_type")
    return value


def one_of(value: Any, allowed: tuple[str, ...], path: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidRequest(f"'{path}' must be one of {', '.join(allowed)}, got {value!r}", param=path,
                             code="invalid_value")
    return value


def _cannot(path: str, model: str, why: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(
        f"'{path}' cannot be carried to the Responses API, which serves the model '{model}' here: {why}",
        param=path)


class ChatToResponses:
    """One chat body translated; ``include_usage`` says whether the chat stream asked for a usage chunk."""

    def __init__(self, payload: Mapping[str, Any], model: str) -> None:
        self.model = model          # the client's name for the model, for messages
        self.include_usage = False
        self.body = self._translate(payload)

    def _translate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        reasoning: dict[str, Any] = {}
        text: dict[str, Any] = {}
        for key, value in payload.items():
            if key in ("model", "messages"):
                continue
            if key in _SAME:
                if value is not None:
                    out[key] = expect(value, _SAME[key], key)
            elif key in _NO_OP:
                if not any(same_value(value, harmless) for harmless in _NO_OP[key]):
                    raise _cannot(key, self.model, "the Responses API has no such parameter")
            elif key == "stream":
                if value is not None:
                    out["stream"] = expect(value, "boolean", key)
            elif key == "stream_options":
                self._stream_options(value, out)
            elif key in ("max_tokens", "max_completion_tokens"):
                self._max_tokens(payload, key, value, out)
            elif key == "metadata":
                if value is not None:
                    out["metadata"] = string_map(value)
            elif key == "prompt_cache_retention":
                if value is not None:
                    out[key] = one_of(value, RETENTIONS, key)
            elif key == "reasoning_effort":
                if value is not None:
                    effort = one_of(value, EFFORTS, key)
                    if reasoning.setdefault("effort", effort) != effort:
                        raise InvalidRequest("'reasoning_effort' and 'reasoning.effort' disagree", param=key)
            elif key == "reasoning":
                self._reasoning(value, reasoning)
            elif key == "verbosity":
                if value is not None:
                    text["verbosity"] = one_of(value, VERBOSITIES, key)
            elif key == "response_format":
                if value is not None:
                    text["format"] = _response_format(value)
            elif key == "tools":
                if value is not None:
                    out["tools"] = [self._tool(t, f"tools[{i}]") for i, t in enumerate(expect(value, "array", key))]
            elif key == "tool_choice":
                if value is not None:
                    out["tool_choice"] = self._tool_choice(value)
            else:
                raise _cannot(key, self.model, "the bridge knows no Responses counterpart for it")
        if reasoning:
            out["reasoning"] = reasoning
        if text:
            out["text"] = text
        instructions, items = self._messages(payload.get("messages"))
        body: dict[str, Any] = {"model": payload.get("model")}
        if instructions is not None:
            body["instructions"] = instructions
        body["input"] = items
        # Chat Completions stores nothing unless asked; the Responses API stores by default. A chat or
        # Messages client did not opt in, so the bridge does not either (its own `store` wins).
        body["store"] = False
        body.update(out)
        return body

    # --- top-level fields ---------------------------------------------------------------

    def _stream_options(self, value: Any, out: dict[str, Any]) -> None:
        if value is None:
            return
        for key, option in expect(value, "object", "stream_options").items():
            path = f"stream_options.{key}"
            if key == "include_usage":
                # Responses streams always end with their usage; the chat chunk is made from it.
                self.include_usage = expect(option, "boolean", path) if option is not None else False
            elif key == "include_obfuscation":
                if option is not None:
                    out["stream_options"] = {"include_obfuscation": expect(option, "boolean", path)}
            else:
                raise _cannot(path, self.model, "the bridge knows no Responses counterpart for it")

    def _max_tokens(self, payload: Mapping[str, Any], key: str, value: Any, out: dict[str, Any]) -> None:
        if value is None:
            return
        if not _is(value, "integer") or value < 1:
            raise InvalidRequest(f"'{key}' must be a positive integer, got {value!r}", param=key, code="invalid_value")
        other = "max_completion_tokens" if key == "max_tokens" else "max_tokens"
        if payload.get(other) is not None and payload.get(other) != value:
            raise InvalidRequest("'max_tokens' and 'max_completion_tokens' disagree; the Responses API has one "
                                 "limit (max_output_tokens)", param=key, code="invalid_value")
        out["max_output_tokens"] = value

    def _reasoning(self, value: Any, reasoning: dict[str, Any]) -> None:
        if value is None:
            return
        for key, item in expect(value, "object", "reasoning").items():
            path = f"reasoning.{key}"
            if item is None:
                continue
            if key == "effort":
                effort = one_of(item, EFFORTS, path)
                if reasoning.setdefault("effort", effort) != effort:
                    raise InvalidRequest("'reasoning_effort' and 'reasoning.effort' disagree", param=path)
            elif key in ("summary", "generate_summary"):
                reasoning[key] = one_of(item, SUMMARIES, path)
            else:
                raise _cannot(path, self.model, "the bridge knows no Responses counterpart for it")

    def _tool(self, tool: Any, path: str) -> dict[str, Any]:
        expect(tool, "object", path)
        if tool.get("type") != "function":
            raise _cannot(f"{path}.type", self.model, f"only function tools are bridged, got {tool.get('type')!r}")
        unknown = set(tool) - {"type", "function"}
        if unknown:
            raise _cannot(f"{path}.{sorted(unknown)[0]}", self.model, "not a field of a function tool")
        fn = expect(tool.get("function"), "object", f"{path}.function")
        out: dict[str, Any] = {"type": "function", **function_fields(
            fn, f"{path}.function", lambda where: _cannot(where, self.model, "not a field of a function tool"))}
        if out.get("strict") is None:
            # Responses treats an unset `strict` as true; chat as false. Say what the chat client meant.
            out["strict"] = False
        return out

    def _tool_choice(self, value: Any) -> Any:
        if isinstance(value, str):
            return one_of(value, TOOL_CHOICES, "tool_choice")
        expect(value, "object", "tool_choice")
        kind = value.get("type")
        if kind == "function":
            fn = expect(value.get("function"), "object", "tool_choice.function")
            return {"type": "function", "name": expect(fn.get("name"), "string", "tool_choice.function.name")}
        if kind == "allowed_tools":
            allowed = expect(value.get("allowed_tools"), "object", "tool_choice.allowed_tools")
            mode = one_of(allowed.get("mode"), ("auto", "required"), "tool_choice.allowed_tools.mode")
            tools = []
            for i, tool in enumerate(expect(allowed.get("tools"), "array", "tool_choice.allowed_tools.tools")):
                path = f"tool_choice.allowed_tools.tools[{i}]"
                if not isinstance(tool, dict) or tool.get("type") != "function":
                    raise _cannot(path, self.model, "only function tools are bridged")
                fn = expect(tool.get("function"), "object", f"{path}.function")
                tools.append({"type": "function", "name": expect(fn.get("name"), "string", f"{path}.function.name")})
            return {"type": "allowed_tools", "mode": mode, "tools": tools}
        raise _cannot("tool_choice.type", self.model, f"only function tool choices are bridged, got {kind!r}")

    # --- messages ---------------------------------------------------------------------

    def _messages(self, messages: Any) -> tuple[str | None, list[dict[str, Any]]]:
        """Leading system/developer messages as ``instructions``, the rest as input items."""
        messages = expect(messages, "array", "messages")
        lead: list[str] = []
        i = 0
        while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") in LEADING_ROLES:
            self._plain_fields(messages[i], f"messages[{i}]", ("role", "content"))
            lead.append(_text_of(messages[i].get("content"), f"messages[{i}].content"))
            i += 1
        items: list[dict[str, Any]] = []
        for j in range(i, len(messages)):
            items.extend(self._message(messages[j], f"messages[{j}]"))
        return ("\n\n".join(lead) if lead else None), items

    def _plain_fields(self, msg: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
        for key, value in msg.items():
            if key not in allowed and value is not None:
                raise _cannot(f"{path}.{key}", self.model, "the Responses API message has no such field")

    def _message(self, msg: Any, path: str) -> list[dict[str, Any]]:
        expect(msg, "object", path)
        role = msg.get("role")
        if role in LEADING_ROLES or role == "user":
            self._plain_fields(msg, path, ("role", "content"))
            return [{"type": "message", "role": role, "content": self._content(msg.get("content"), f"{path}.content")}]
        if role == "assistant":
            # reasoning_content is the model's own earlier output (the bridge's answers carry it); the
            # Responses API takes reasoning back only as the opaque items chat clients never see.
            self._plain_fields(msg, path, ("role", "content", "refusal", "tool_calls", "reasoning_content"))
            return self._assistant(msg, path)
        if role == "tool":
            self._plain_fields(msg, path, ("role", "content", "tool_call_id"))
            call_id = expect(msg.get("tool_call_id"), "string", f"{path}.tool_call_id")
            return [{"type": "function_call_output", "call_id": call_id,
                     "output": _text_of(msg.get("content"), f"{path}.content")}]
        raise _cannot(f"{path}.role", self.model, f"messages of role {role!r} are not bridged")

    def _assistant(self, msg: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        content, refusal = msg.get("content"), msg.get("refusal")
        parts: list[dict[str, Any]] = []
        if isinstance(content, list):
            for k, part in enumerate(content):
                where = f"{path}.content[{k}]"
                expect(part, "object", where)
                if part.get("type") == "text":
                    parts.append({"type": "output_text", "text": expect(part.get("text"), "string", f"{where}.text")})
                elif part.get("type") == "refusal":
                    parts.append({"type": "refusal",
                                  "refusal": expect(part.get("refusal"), "string", f"{where}.refusal")})
                else:
                    raise _cannot(f"{where}.type", self.model, f"assistant content part {part.get('type')!r}")
        elif content is not None:
            text = expect(content, "string", f"{path}.content")
            if text:
                parts.append({"type": "output_text", "text": text})
        if refusal is not None:
            parts.append({"type": "refusal", "refusal": expect(refusal, "string", f"{path}.refusal")})
        if len(parts) == 1 and parts[0]["type"] == "output_text":
            out.append({"type": "message", "role": "assistant", "content": parts[0]["text"]})
        elif parts:
            out.append({"type": "message", "role": "assistant", "content": parts})
        calls = msg.get("tool_calls")
        for k, call in enumerate(expect(calls, "array", f"{path}.tool_calls") if calls is not None else ()):
            where = f"{path}.tool_calls[{k}]"
            expect(call, "object", where)
            if call.get("type", "function") != "function":
                raise _cannot(f"{where}.type", self.model, "only function tool calls are bridged")
            fn = expect(call.get("function"), "object", f"{where}.function")
            out.append({"type": "function_call", "call_id": expect(call.get("id"), "string", f"{where}.id"),
                        "name": expect(fn.get("name"), "string", f"{where}.function.name"),
                        "arguments": expect(fn.get("arguments"), "string", f"{where}.function.arguments")})
        return out

    def _content(self, content: Any, path: str) -> Any:
        if isinstance(content, str):
            return content
        parts = []
        for k, part in enumerate(expect(content, "array", path)):
            parts.append(self._part(part, f"{path}[{k}]"))
        return parts

    def _part(self, part: Any, path: str) -> dict[str, Any]:
        expect(part, "object", path)
        kind = part.get("type")
        if kind == "text":
            self._part_keys(part, path, _TEXT_PART_KEYS)
            out = {"type": "input_text", "text": expect(part.get("text"), "string", f"{path}.text")}
        elif kind == "image_url":
            self._part_keys(part, path, frozenset({"type", "image_url", "prompt_cache_breakpoint"}))
            image = expect(part.get("image_url"), "object", f"{path}.image_url")
            self._part_keys(image, f"{path}.image_url", frozenset({"url", "detail"}))
            out = {"type": "input_image", "image_url": expect(image.get("url"), "string", f"{path}.image_url.url"),
                   "detail": one_of(image.get("detail", "auto"), ("auto", "low", "high", "original"),
                                     f"{path}.image_url.detail")}
        elif kind == "file":
            self._part_keys(part, path, frozenset({"type", "file"}))
            file = expect(part.get("file"), "object", f"{path}.file")
            self._part_keys(file, f"{path}.file", frozenset({"file_id", "file_data", "filename"}))
            out = {"type": "input_file", **{k: expect(v, "string", f"{path}.file.{k}") for k, v in file.items()
                                            if v is not None}}
        else:
            raise _cannot(f"{path}.type", self.model, f"content part {kind!r} is not bridged")
        if part.get("prompt_cache_breakpoint") is not None:
            out["prompt_cache_breakpoint"] = expect(part["prompt_cache_breakpoint"], "object",
                                                     f"{path}.prompt_cache_breakpoint")
        return out

    def _part_keys(self, part: Mapping[str, Any], path: str, allowed: frozenset[str]) -> None:
        for key, value in part.items():
            if key not in allowed and value is not None:
                raise _cannot(f"{path}.{key}", self.model, "the Responses API content part has no such field")


def _text_of(content: Any, path: str) -> str:
    """A system, developer or tool message's content as one text (text parts only)."""
    if isinstance(content, str):
        return content
    texts = []
    for k, part in enumerate(expect(content, "array", path)):
        if not isinstance(part, dict) or part.get("type") != "text" or set(part) - {"type", "text"}:
            raise UnsupportedRequestParameter(f"'{path}[{k}]' must be a text part to be bridged to the "
                                              f"Responses API", param=f"{path}[{k}]")
        texts.append(expect(part.get("text"), "string", f"{path}[{k}].text"))
    return "".join(texts)


def string_map(value: Any) -> dict[str, str]:
    expect(value, "object", "metadata")
    for key, item in value.items():
        if not isinstance(item, str):
            raise InvalidRequest(f"'metadata.{key}' must be a string, got {type_of(item)}", param=f"metadata.{key}",
                                 code="invalid_type")
    return dict(value)


def function_fields(fn: Mapping[str, Any], path: str, unknown: Callable[[str], Exception]) -> dict[str, Any]:
    """A function tool's ``name`` and ``FUNCTION_FIELDS``, checked (the same on both APIs; chat nests them
    under ``function``); ``unknown(path)`` is the error for any other field."""
    out: dict[str, Any] = {"name": expect(fn.get("name"), "string", f"{path}.name")}
    for key, item in fn.items():
        if key == "name" or item is None:
            continue
        if key not in FUNCTION_FIELDS:
            raise unknown(f"{path}.{key}")
        out[key] = expect(item, FUNCTION_FIELDS[key], f"{path}.{key}")
    return out


def text_format(value: Any, path: str, nested: bool) -> tuple[str, dict[str, Any] | None]:
    """(type, the JSON schema's ``name`` and ``SCHEMA_FIELDS``) of chat's ``response_format`` (``nested``:
    the schema under ``json_schema``) or of Responses' ``text.format`` (flat), checked the same way."""
    expect(value, "object", path)
    kind = one_of(value.get("type"), ("text", "json_object", "json_schema"), f"{path}.type")
    if kind != "json_schema":
        if set(value) - {"type"}:
            raise InvalidRequest(f"'{path}' of type {kind} takes no other field", param=path, code="invalid_value")
        return kind, None
    where = f"{path}.json_schema" if nested else path
    spec = expect(value.get("json_schema"), "object", where) if nested else value
    out: dict[str, Any] = {"name": expect(spec.get("name"), "string", f"{where}.name")}
    for key, item in spec.items():
        if key == "name" or item is None or (key == "type" and not nested):
            continue
        if key not in SCHEMA_FIELDS:
            raise InvalidRequest(f"'{where}.{key}' is not a field of a JSON schema format", param=f"{where}.{key}",
                                 code="invalid_value")
        out[key] = expect(item, SCHEMA_FIELDS[key], f"{where}.{key}")
    return kind, out


def _response_format(value: Any) -> dict[str, Any]:
    kind, spec = text_format(value, "response_format", nested=True)
    return {"type": kind, **(spec or {})}


def chat_to_responses(payload: Mapping[str, Any], model: str) -> ChatToResponses:
    """The translation of one chat body (raises InvalidRequest / UnsupportedRequestParameter)."""
    return ChatToResponses(payload, model)

