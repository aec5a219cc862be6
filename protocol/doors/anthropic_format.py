"""An Anthropic Messages request as a Chat Completions payload, as a pure function.

The Messages ingress translates the client's body into a chat payload once
(``to_chat``), so everything behind it (keys, presets, policies, selection,
failover, the bridges and the native backends) sees one format. The answer
goes the other way in ``protocol/doors/anthropic_sink.py``.

Validation walks the body once, in Anthropic's own terms: each mistake is a
400 naming its dotted path (``messages.0.content.1.source.type``), as the
Messages API names them. A field the translation cannot carry is refused,
never dropped; an unknown field is refused like the Messages API refuses it
("Extra inputs are not permitted"). What is tolerated without effect on a
chat backend (``cache_control`` hints, earlier turns' thinking blocks,
``service_tier``) is listed in docs/anthropic.md; a native Anthropic backend
gets the client's own body (``protocol/wires/anthropic.py``), so it keeps them.
What chat cannot hold at all (``document`` blocks, images in a
``tool_result``, a ``context_management`` edit other than a thinking one) is
accepted and listed in ``Translated.uncarried``: only a native backend
carries it, and every chat translation refuses it, naming it.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from attrs import frozen

from switchyard.actors import safe_text
from switchyard.actors.errors import InvalidRequest
from switchyard.protocol.doors.openai import MAX_MODEL_LENGTH
from switchyard.protocol.wires.anthropic_messages import NOT_CARRIED

MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
TOP_LEVEL = frozenset({"model", "max_tokens", "messages", "system", "stop_sequences", "temperature", "top_p",
                       "top_k", "metadata", "stream", "tools", "tool_choice", "thinking", "output_config",
                       "cache_control", "service_tier", "context_management"})
COUNT_TOKENS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config",
                          "cache_control", "context_management"})
# context_management edits a chat backend honours as they are: it never gets earlier turns' thinking (the
# translation leaves thinking blocks out), so whatever a thinking edit keeps or clears holds there.
THINKING_EDITS = frozenset({"clear_thinking_20251015"})


@frozen
class Translated:
    """A Messages body as a chat payload, with what the answer's translation needs to know."""

    payload: dict[str, Any]
    stop_sequences: tuple[str, ...] = ()
    show_thinking: bool = True          # thinking.display "omitted": reasoning is not shown
    thinking: dict[str, Any] | None = None   # the client's own thinking config, for native backends
    # Chat fields made up from `thinking` (a budget as reasoning_effort): a native backend takes the original.
    derived: tuple[str, ...] = ()
    # (path, what) of content the chat payload leaves out: only the native passthrough may carry the call.
    uncarried: tuple[tuple[str, str], ...] = ()
    # The client's context_management, for native backends (a chat translation honours only thinking edits).
    context_management: dict[str, Any] | None = None


def _fail(path: str, rule: str) -> NoReturn:
    raise InvalidRequest(f"{path}: {rule}", param=path)


def _kind(value: Any) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(path, f"must be an object, got {_kind(value)}")
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        _fail(path, f"must be a string, got {_kind(value)}")
    return value


def _int(value: Any, path: str, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        _fail(path, f"must be an integer, got {_kind(value)}")
    if value < least:
        _fail(path, f"must be at least {least}, got {value}")
    return value


def _unit(value: Any, path: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        _fail(path, f"must be a number, got {_kind(value)}")
    if not 0 <= value <= 1:
        _fail(path, f"must be between 0 and 1, got {value}")
    return value


def _only(obj: dict[str, Any], allowed: frozenset[str] | set[str], path: str) -> None:
    for name in obj:
        if name not in allowed:
            _fail(f"{path}.{name}" if path else name, "Extra inputs are not permitted")


def _type(block: dict[str, Any], path: str) -> str:
    return _str(block.get("type"), f"{path}.type")


# --- the request ------------------------------------------------------------------------

def to_chat(body: dict[str, Any], *, count_only: bool = False) -> Translated:
    """The chat payload for a Messages body (``count_only``: a count_tokens body, no max_tokens)."""
    allowed = COUNT_TOKENS if count_only else TOP_LEVEL
    for name in body:
        if name in NOT_CARRIED:
            _fail(name, "not supported by Switchyard's Messages ingress; no backend behind it can be asked for it")
        if name not in allowed:
            _fail(name, "Extra inputs are not permitted")
    for name in ("model", "messages") if count_only else ("model", "max_tokens", "messages"):
        if name not in body:
            _fail(name, "Field required")
    model = _str(body["model"], "model")
    if not model:
        _fail("model", "must not be empty")
    if len(model) > MAX_MODEL_LENGTH:
        _fail("model", f"must be at most {MAX_MODEL_LENGTH} characters, got {len(model)}")
    if (problem := safe_text.problem(model)) is not None:
        _fail("model", f"must be valid text; it {problem}")
    out: dict[str, Any] = {"model": model}
    if not count_only:
        out["max_tokens"] = _int(body["max_tokens"], "max_tokens", 1)
    messages: list[dict[str, Any]] = []
    if body.get("system") is not None:
        messages.append({"role": "system", "content": _text_of(body["system"], "system")})
    raw = body["messages"]
    if not isinstance(raw, list):
        _fail("messages", f"must be an array, got {_kind(raw)}")
    if not raw:
        _fail("messages", "must contain at least one message")
    uncarried: list[tuple[str, str]] = []
    for i, message in enumerate(raw):
        messages.extend(_message(message, f"messages.{i}", uncarried))
    out["messages"] = messages
    stops: tuple[str, ...] = ()
    if body.get("stop_sequences") is not None:
        seq = body["stop_sequences"]
        if not isinstance(seq, list):
            _fail("stop_sequences", f"must be an array of strings, got {_kind(seq)}")
        stops = tuple(_str(s, f"stop_sequences.{i}") for i, s in enumerate(seq))
        if stops:
            out["stop"] = list(stops)
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            out[name] = _unit(body[name], name)
    if body.get("top_k") is not None:
        out["top_k"] = _int(body["top_k"], "top_k", 0)
    if body.get("metadata") is not None:
        meta = _obj(body["metadata"], "metadata")
        _only(meta, {"user_id"}, "metadata")
        if meta.get("user_id") is not None:
            out["user"] = _str(meta["user_id"], "metadata.user_id")
    if body.get("stream") is not None:
        if not isinstance(body["stream"], bool):
            _fail("stream", f"must be a boolean, got {_kind(body['stream'])}")
        if body["stream"]:
            out["stream"] = True
            out["stream_options"] = {"include_usage": True}
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
    if body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"], {t["function"]["name"] for t in tools}, out)
    if body.get("service_tier") is not None and body["service_tier"] not in ("auto", "standard_only"):
        _fail("service_tier", f"must be 'auto' or 'standard_only', got {body['service_tier']!r}")
    if body.get("cache_control") is not None:
        _obj(body["cache_control"], "cache_control")
    show, thinking = _thinking(body.get("thinking"), out)
    _output_config(body.get("output_config"), out)
    own_effort = isinstance(body.get("output_config"), dict) and body["output_config"].get("effort") is not None
    derived = ("reasoning_effort",) if "reasoning_effort" in out and not own_effort else ()
    context = _context_management(body.get("context_management"), uncarried)
    return Translated(out, stops, show, thinking, derived, tuple(uncarried), context)


def _context_management(value: Any, uncarried: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The client's ``context_management`` (Anthropic's context editing), checked for its shape: a native
    backend gets it as sent. A thinking edit asks a chat backend for nothing it does not already do; any other
    edit (clearing old tool results) only Anthropic's API performs, so it is listed as uncarried."""
    if value is None:
        return None
    config = _obj(value, "context_management")
    _only(config, {"edits"}, "context_management")
    edits = config.get("edits", [])
    if not isinstance(edits, list):
        _fail("context_management.edits", f"must be an array, got {_kind(edits)}")
    for i, edit in enumerate(edits):
        at = f"context_management.edits.{i}"
        kind = _type(_obj(edit, at), at)
        if kind not in THINKING_EDITS:
            uncarried.append((at, f"a '{kind}' context edit (performed by Anthropic's API on the conversation)"))
    return dict(config)


def _text_of(value: Any, path: str) -> str:
    """A string, or text blocks joined with newlines (system prompts, tool results)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        _fail(path, f"must be a string or an array of text blocks, got {_kind(value)}")
    texts = []
    for i, block in enumerate(value):
        block = _obj(block, f"{path}.{i}")
        if _type(block, f"{path}.{i}") != "text":
            _fail(f"{path}.{i}.type", f"must be 'text', got {block['type']!r}")
        texts.append(_text_block(block, f"{path}.{i}"))
    return "\n".join(texts)


def _text_block(block: dict[str, Any], path: str) -> str:
    _only(block, {"type", "text", "cache_control", "citations"}, path)
    if block.get("citations"):
        _fail(f"{path}.citations", "citations cannot be carried to a Chat Completions backend")
    return _str(block.get("text"), f"{path}.text")


def _message(message: Any, path: str, uncarried: list[tuple[str, str]]) -> list[dict[str, Any]]:
    message = _obj(message, path)
    _only(message, {"role", "content"}, path)
    role = message.get("role")
    if role not in ("user", "assistant", "system"):
        _fail(f"{path}.role", f"must be 'user', 'assistant' or 'system', got {role!r}")
    if "content" not in message:
        _fail(f"{path}.content", "Field required")
    content = message["content"]
    if role == "system":
        return [{"role": "system", "content": _text_of(content, f"{path}.content")}]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        _fail(f"{path}.content", f"must be a string or an array of content blocks, got {_kind(content)}")
    if not content:
        _fail(f"{path}.content", "must contain at least one content block")
    if role == "user":
        return _user(content, f"{path}.content", uncarried)
    return [_assistant(content, f"{path}.content")]


def _user(blocks: list[Any], path: str, uncarried: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A user turn: its tool results first (one tool message each), then the rest as one user message."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        at = f"{path}.{i}"
        kind = _type(_obj(block, at), at)
        if kind == "tool_result":
            if parts:
                _fail(at, "tool_result blocks must come before any other content in a user message")
            out.append(_tool_result(block, at, uncarried))
        elif kind == "text":
            parts.append({"type": "text", "text": _text_block(block, at)})
        elif kind == "image":
            parts.append(_image(block, at))
        elif kind == "document":
            _document(block, at)
            uncarried.append((at, "a 'document' block"))
        else:
            _unsupported(kind, at, "user")
    if parts or not out:   # a turn of documents alone stays a (never sent) empty user turn
        if all(p["type"] == "text" for p in parts):
            out.append({"role": "user", "content": "\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _assistant(blocks: list[Any], path: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        at = f"{path}.{i}"
        kind = _type(_obj(block, at), at)
        if kind == "text":
            texts.append(_text_block(block, at))
        elif kind == "tool_use":
            _only(block, {"type", "id", "name", "input", "cache_control"}, at)
            call_id = _str(block.get("id"), f"{at}.id")
            name = _str(block.get("name"), f"{at}.name")
            args = _obj(block.get("input"), f"{at}.input")
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
        elif kind in ("thinking", "redacted_thinking"):
            # Earlier turns' thinking: the Messages API leaves it out of the context too.
            continue
        else:
            _unsupported(kind, at, "assistant")
    out: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""
    return out


def _unsupported(kind: str, path: str, role: str) -> NoReturn:
    if kind in ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"):
        _fail(f"{path}.type", f"a '{kind}' block cannot appear in a {role} message")
    _fail(f"{path}.type", f"'{kind}' blocks are not supported by Switchyard's Messages ingress; supported: text, "
                          "image, document, tool_use, tool_result, thinking, redacted_thinking")


# A document's source types, with the fields each requires besides ``type``.
DOCUMENT_SOURCES = {"base64": ("media_type", "data"), "text": ("media_type", "data"), "url": ("url",),
                    "content": ("content",), "file": ("file_id",)}


def _document(block: dict[str, Any], path: str) -> None:
    """A ``document`` block, checked in shape; Anthropic judges its contents (a native backend only)."""
    _only(block, {"type", "source", "title", "context", "citations", "cache_control"}, path)
    source = _obj(block.get("source"), f"{path}.source")
    kind = _type(source, f"{path}.source")
    if kind not in DOCUMENT_SOURCES:
        _fail(f"{path}.source.type", f"must be one of {', '.join(DOCUMENT_SOURCES)}, got {kind!r}")
    for name in DOCUMENT_SOURCES[kind]:
        if name not in source:
            _fail(f"{path}.source.{name}", "Field required")
    for name in ("title", "context"):
        if block.get(name) is not None:
            _str(block[name], f"{path}.{name}")


def _image(block: dict[str, Any], path: str) -> dict[str, Any]:
    _only(block, {"type", "source", "cache_control"}, path)
    source = _obj(block.get("source"), f"{path}.source")
    kind = _type(source, f"{path}.source")
    if kind == "base64":
        _only(source, {"type", "media_type", "data"}, f"{path}.source")
        media = source.get("media_type")
        if media not in MEDIA_TYPES:
            _fail(f"{path}.source.media_type", f"must be one of {', '.join(MEDIA_TYPES)}, got {media!r}")
        url = f"data:{media};base64,{_str(source.get('data'), f'{path}.source.data')}"
    elif kind == "url":
        _only(source, {"type", "url"}, f"{path}.source")
        url = _str(source.get("url"), f"{path}.source.url")
    else:
        _fail(f"{path}.source.type", f"must be 'base64' or 'url', got {kind!r}")
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_result(block: dict[str, Any], path: str, uncarried: list[tuple[str, str]]) -> dict[str, Any]:
    """One tool message: its text blocks (a Chat Completions tool message holds text); its images and
    documents are checked and listed as uncarried (only the native passthrough takes them)."""
    _only(block, {"type", "tool_use_id", "content", "is_error", "cache_control"}, path)
    call_id = _str(block.get("tool_use_id"), f"{path}.tool_use_id")
    content = block.get("content", "")
    if isinstance(content, list):
        texts = []
        for i, inner in enumerate(content):
            at = f"{path}.content.{i}"
            kind = _type(_obj(inner, at), at)
            if kind == "text":
                texts.append(inner)
            elif kind in ("image", "document"):
                if kind == "image":
                    _image(inner, at)
                else:
                    _document(inner, at)
                uncarried.append((at, f"an {kind!r} block in a tool_result"))
            else:
                _fail(f"{at}.type", f"must be 'text', 'image' or 'document', got {kind!r}")
        content = texts
    text = _text_of(content, f"{path}.content")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        _fail(f"{path}.is_error", f"must be a boolean, got {_kind(is_error)}")
    if is_error:
        text = "Error: " + text
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        _fail("tools", f"must be an array, got {_kind(tools)}")
    out = []
    for i, tool in enumerate(tools):
        at = f"tools.{i}"
        tool = _obj(tool, at)
        if tool.get("type") not in (None, "custom"):
            _fail(f"{at}.type", f"server tools ({tool['type']!r}) are not supported by Switchyard's Messages "
                                "ingress; only client tools (name, description, input_schema)")
        _only(tool, {"type", "name", "description", "input_schema", "cache_control", "strict",
                     "eager_input_streaming"}, at)
        name = _str(tool.get("name"), f"{at}.name")
        if not name:
            _fail(f"{at}.name", "must not be empty")
        function: dict[str, Any] = {"name": name, "parameters": _obj(tool.get("input_schema"), f"{at}.input_schema")}
        if tool.get("description") is not None:
            function["description"] = _str(tool["description"], f"{at}.description")
        if tool.get("strict") is not None:
            if not isinstance(tool["strict"], bool):
                _fail(f"{at}.strict", f"must be a boolean, got {_kind(tool['strict'])}")
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any, names: set[str], out: dict[str, Any]) -> None:
    choice = _obj(choice, "tool_choice")
    kind = _type(choice, "tool_choice")
    if kind == "auto":
        out["tool_choice"] = "auto"
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "none":
        out["tool_choice"] = "none"
    elif kind == "tool":
        name = _str(choice.get("name"), "tool_choice.name")
        if name not in names:
            _fail("tool_choice.name", f"no tool named {name!r} in tools")
        out["tool_choice"] = {"type": "function", "function": {"name": name}}
    else:
        _fail("tool_choice.type", f"must be one of 'auto', 'any', 'tool', 'none', got {kind!r}")
    _only(choice, {"type"} if kind == "none" else {"type", "name", "disable_parallel_tool_use"} if kind == "tool"
          else {"type", "disable_parallel_tool_use"}, "tool_choice")
    off = choice.get("disable_parallel_tool_use")
    if off is not None and not isinstance(off, bool):
        _fail("tool_choice.disable_parallel_tool_use", f"must be a boolean, got {_kind(off)}")
    if off:
        out["parallel_tool_calls"] = False


def effort_for_budget(budget: int) -> str:
    """A thinking budget as a chat reasoning effort (the table is in docs/anthropic.md)."""
    return "low" if budget < 4096 else "medium" if budget < 16384 else "high"


def _thinking(thinking: Any, out: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    if thinking is None:
        return True, None
    thinking = _obj(thinking, "thinking")
    kind = _type(thinking, "thinking")
    if kind == "disabled":
        _only(thinking, {"type"}, "thinking")
    elif kind == "enabled":
        _only(thinking, {"type", "budget_tokens", "display"}, "thinking")
        if "budget_tokens" not in thinking:
            _fail("thinking.budget_tokens", "Field required")
        out["reasoning_effort"] = effort_for_budget(_int(thinking["budget_tokens"], "thinking.budget_tokens", 1024))
    elif kind == "adaptive":
        _only(thinking, {"type", "display"}, "thinking")
    else:
        _fail("thinking.type", f"must be 'enabled', 'adaptive' or 'disabled', got {kind!r}")
    display = thinking.get("display")
    if display not in (None, "summarized", "omitted"):
        _fail("thinking.display", f"must be 'summarized' or 'omitted', got {display!r}")
    return display != "omitted", dict(thinking)


def _output_config(config: Any, out: dict[str, Any]) -> None:
    if config is None:
        return
    config = _obj(config, "output_config")
    _only(config, {"effort", "format"}, "output_config")
    effort = config.get("effort")
    if effort is not None:
        if effort not in ("low", "medium", "high", "xhigh", "max"):
            _fail("output_config.effort", f"must be one of 'low', 'medium', 'high', 'xhigh', 'max', got {effort!r}")
        out["reasoning_effort"] = effort
    fmt = config.get("format")
    if fmt is not None:
        fmt = _obj(fmt, "output_config.format")
        _only(fmt, {"type", "schema"}, "output_config.format")
        if fmt.get("type") != "json_schema":
            _fail("output_config.format.type", f"must be 'json_schema', got {fmt.get('type')!r}")
        schema = _obj(fmt.get("schema"), "output_config.format.schema")
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
