"""The reverse Responses bridge, request side: a ``/v1/responses`` body as a Chat Completions body.

A ``/v1/responses`` call whose chosen backend speaks only Chat Completions
(vllm, sglang, ollama, generic, anthropic, gemini, bedrock) is sent as a
chat call (``protocol/wires/responses_on_chat.py``); this module writes its
body. It is the forward bridge (``responses_bridge.py``) read backwards, with
its checks and value tables. What a chat backend cannot carry is refused by
name (``UnsupportedRequestParameter``): hosted tools, ``background``,
``previous_response_id`` and ``conversation`` (a chat backend keeps no
server state), what ``include`` asks that a chat answer cannot hold, prompt
templates. Some things are left out on purpose, each with its reason in
docs/responses.md: reasoning input items (the model's own opaque earlier
reasoning: chat has no place for them), ``include: ["reasoning.encrypted_content"]``
(a chat backend has no encrypted reasoning to give; its reasoning comes back
as text), ``client_metadata`` (the client's own labels, which change no
answer), and a web search tool merely offered (a chat backend cannot run it;
the model answers without it; one the tool choice names is refused).
``namespace`` tools are flattened (``tool_namespaces.py``).

Pure but for that log line: no I/O, no clock, no trio.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.protocol.wires.responses_bridge import (
    EFFORTS,
    SUMMARIES,
    TOOL_CHOICES,
    VERBOSITIES,
    expect,
    function_fields,
    one_of,
    same_value,
    string_map,
    text_format,
)
from switchyard.protocol.wires.tool_namespaces import chat_name, names_of

log = logging.getLogger("switchyard.route")

# Responses fields taken as they are (after a type check): same name, same meaning in chat.
SAME: dict[str, str] = {"temperature": "number", "top_p": "number", "parallel_tool_calls": "boolean",
                        "user": "string", "safety_identifier": "string", "prompt_cache_key": "string",
                        "service_tier": "string"}
# Responses fields with nothing to say to a chat backend, and the values that ask for nothing.
NO_OP: dict[str, tuple[Any, ...]] = {"background": (None, False), "previous_response_id": (None,),
                                     "conversation": (None,), "prompt": (None,),
                                     "truncation": (None, "disabled"), "max_tool_calls": (None,),
                                     "top_logprobs": (None, 0), "prompt_cache_retention": (None,)}
# `include` values a chat answer honours as it is: a chat backend has no encrypted reasoning (its reasoning
# comes back as text), so a Response without it is all there is to give.
INCLUDE_HONOURED = frozenset({"reasoning.encrypted_content"})
# Hosted tools a client may offer on a chat backend (left out: the model answers without them), unless the
# tool choice names one. Codex CLI offers web search on every call.
OFFERED_HOSTED = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26",
                            "web_search_preview_2025_03_11"})
WHY = {"background": "a chat backend answers while the call is open; it runs nothing in the background",
       "previous_response_id": "a chat backend keeps no responses to continue; send the whole conversation in "
                               "'input'",
       "conversation": "a chat backend keeps no conversations; send the whole conversation in 'input'"}
# Not sent: `store` (nothing is kept: such a response is not retrievable), `stream_options` (the chat
# stream is asked for its usage instead).
NOT_SENT = frozenset({"model", "input", "instructions", "store", "stream_options"})
IMAGE_DETAILS = ("auto", "low", "high")
HOSTED_CHOICES = frozenset({"file_search", "web_search", "web_search_preview", "computer_use_preview",
                            "code_interpreter", "image_generation", "mcp", "custom", "apply_patch", "shell"})


class ResponsesToChat:
    """One Responses body translated for ``backend`` (its name and type, for messages).

    ``own`` are the fields the backend's ``request_extensions.body`` writes:
    fields of its chat API, sent as they are when the Responses API has no
    field of that name.
    """

    def __init__(self, payload: Mapping[str, Any], backend: str, kind: str, own: frozenset[str] = frozenset()
                 ) -> None:
        self.backend, self.kind, self.own = backend, kind, own
        self.namespaced = names_of(payload)   # a namespace's functions, offered flattened
        tools = payload.get("tools")
        self.plain = {t.get("name") for t in tools if isinstance(t, dict) and t.get("type") == "function"} \
            if isinstance(tools, list) else set()
        self.body = self._translate(payload)

    def cannot(self, path: str, why: str) -> UnsupportedRequestParameter:
        return UnsupportedRequestParameter(
            f"'{path}' cannot be carried to backend '{self.backend}' (type {self.kind}), which speaks only Chat "
            f"Completions: {why}", param=path)

    def _translate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"model": payload.get("model")}
        for key, value in payload.items():
            if key in NOT_SENT or value is None:
                if key == "store" and value is not None:
                    expect(value, "boolean", key)
                continue
            if key in SAME:
                out[key] = expect(value, SAME[key], key)
            elif key in NO_OP:
                if not any(same_value(value, harmless) for harmless in NO_OP[key]):
                    raise self.cannot(key, WHY.get(key, "Chat Completions has no such parameter"))
            elif key == "stream":
                out["stream"] = expect(value, "boolean", key)
                if value:
                    out["stream_options"] = {"include_usage": True}   # the terminal event carries usage
            elif key == "max_output_tokens":
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise InvalidRequest(f"'{key}' must be a positive integer, got {value!r}", param=key,
                                         code="invalid_value")
                out["max_tokens"] = value
            elif key == "metadata":
                out["metadata"] = string_map(value)
            elif key == "reasoning":
                self._reasoning(value, out)
            elif key == "text":
                self._text(value, out)
            elif key == "tools":
                tools = self._tools(expect(value, "array", key), payload.get("tool_choice"))
                if tools:
                    out["tools"] = tools
            elif key == "tool_choice":
                out["tool_choice"] = self._tool_choice(value)
            elif key == "include":
                self._include(expect(value, "array", key))
            elif key == "client_metadata":
                expect(value, "object", key)   # the client's own labels: they change no answer (not sent)
            elif key in self.own:
                out[key] = value
            else:
                raise self.cannot(key, "the bridge knows no Chat Completions counterpart for it")
        if payload.get("tools") and "tools" not in out:
            self._no_tools_left(out)
        out["messages"] = self._messages(payload.get("instructions"), payload.get("input"))
        return out

    def _no_tools_left(self, out: dict[str, Any]) -> None:
        """Every tool offered was a web search, left out: a choice among none asks for nothing (``auto``,
        ``none``, ``parallel_tool_calls`` are not sent, as a chat API refuses them without tools); a choice
        that requires a call cannot be met."""
        out.pop("parallel_tool_calls", None)
        choice = out.pop("tool_choice", None)
        if choice is not None and choice not in ("auto", "none"):
            raise self.cannot("tool_choice", "the only tools offered are web searches, which a chat backend "
                                             "cannot run, so no tool is left to call")

    # --- top-level fields ---------------------------------------------------------------

    def _reasoning(self, value: Any, out: dict[str, Any]) -> None:
        for key, item in expect(value, "object", "reasoning").items():
            path = f"reasoning.{key}"
            if item is None:
                continue
            if key == "effort":
                out["reasoning_effort"] = one_of(item, EFFORTS, path)
            elif key in ("summary", "generate_summary"):
                one_of(item, SUMMARIES, path)   # the backend's reasoning comes back whole, as reasoning text
            else:
                raise self.cannot(path, "the bridge knows no Chat Completions counterpart for it")

    def _text(self, value: Any, out: dict[str, Any]) -> None:
        for key, item in expect(value, "object", "text").items():
            if item is None:
                continue
            if key == "verbosity":
                out["verbosity"] = one_of(item, VERBOSITIES, "text.verbosity")
            elif key == "format":
                out["response_format"] = _response_format(item)
            else:
                raise self.cannot(f"text.{key}", "the bridge knows no Chat Completions counterpart for it")

    def _include(self, values: list[Any]) -> None:
        for i, value in enumerate(values):
            if expect(value, "string", f"include[{i}]") not in INCLUDE_HONOURED:
                raise self.cannot(f"include[{i}]", f"a chat answer holds no {value!r}")

    def _tools(self, tools: list[Any], choice: Any) -> list[dict[str, Any]]:
        """Function tools as chat's; a namespace's functions flattened; an offered web search left out."""
        named = choice.get("type") if isinstance(choice, dict) else None
        out: list[dict[str, Any]] = []
        for i, tool in enumerate(tools):
            path = f"tools[{i}]"
            kind = expect(tool, "object", path).get("type")
            if isinstance(kind, str) and kind in OFFERED_HOSTED and named != kind:
                log.debug("a %r tool offered on %s is not sent to backend %r, which cannot run it", kind, path,
                          self.backend)
            elif kind == "namespace":
                out += self._namespace(tool, path)
            else:
                out.append(self._tool(tool, path))
        names = [t["function"]["name"] for t in out]
        for name in names:
            if names.count(name) > 1:
                raise InvalidRequest(f"'tools' name the function {name!r} twice (a namespace's functions are "
                                     f"offered to a chat model as <namespace>__<name>)", param="tools",
                                     code="invalid_value")
        return out

    def _namespace(self, tool: dict[str, Any], path: str) -> list[dict[str, Any]]:
        """Its functions, each named ``<namespace>__<name>``; the namespace's description leads each one's."""
        self._keys(tool, path, ("type", "name", "description", "tools"))
        name = expect(tool.get("name"), "string", f"{path}.name")
        about = tool.get("description")
        about = expect(about, "string", f"{path}.description") if about is not None else None
        out = []
        for k, inner in enumerate(expect(tool.get("tools"), "array", f"{path}.tools")):
            fn = self._tool(inner, f"{path}.tools[{k}]")
            fn["function"]["name"] = chat_name(name, fn["function"]["name"])
            if about:
                own = fn["function"].get("description")
                fn["function"]["description"] = f"{about}\n\n{own}" if own else about
            out.append(fn)
        return out

    def _function(self, choice: dict[str, Any], path: str) -> str:
        """The chat name of the function a tool choice names: flattened when it lives in a namespace (its
        ``namespace`` given, or its name found in just one namespace and not among the plain functions)."""
        name = expect(choice.get("name"), "string", f"{path}.name")
        namespace = choice.get("namespace")
        if namespace is not None:
            return chat_name(expect(namespace, "string", f"{path}.namespace"), name)
        inside = [flat for flat, (_, inner) in self.namespaced.items() if inner == name]
        return inside[0] if len(inside) == 1 and name not in self.plain else name

    def _tool(self, tool: Any, path: str) -> dict[str, Any]:
        expect(tool, "object", path)
        kind = tool.get("type")
        if kind != "function":
            raise self.cannot(f"{path}.type", f"a {kind!r} tool is run by the Responses API itself; only "
                                              f"function tools reach a chat model")
        fn = function_fields({k: v for k, v in tool.items() if k != "type"}, path,
                             lambda where: self.cannot(where, "not a field of a chat function tool"))
        # Responses treats an unset `strict` as true, chat as false: say what the Responses client meant.
        fn.setdefault("strict", True)
        return {"type": "function", "function": fn}

    def _tool_choice(self, value: Any) -> Any:
        if isinstance(value, str):
            return one_of(value, TOOL_CHOICES, "tool_choice")
        expect(value, "object", "tool_choice")
        kind = value.get("type")
        if kind == "function":
            return {"type": "function", "function": {"name": self._function(value, "tool_choice")}}
        if kind == "allowed_tools":
            mode = one_of(value.get("mode"), ("auto", "required"), "tool_choice.mode")
            tools = []
            for i, tool in enumerate(expect(value.get("tools"), "array", "tool_choice.tools")):
                path = f"tool_choice.tools[{i}]"
                if not isinstance(tool, dict) or tool.get("type") != "function":
                    raise self.cannot(path, "only function tools reach a chat model")
                tools.append({"type": "function", "function": {"name": self._function(tool, path)}})
            return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}
        hosted = isinstance(kind, str) and kind in HOSTED_CHOICES   # a client's type may be any JSON value
        why = "a hosted tool runs only on the Responses API" if hosted else \
            f"only function tool choices are bridged, got {kind!r}"
        raise self.cannot("tool_choice.type", why)

    # --- input --------------------------------------------------------------------------

    def _messages(self, instructions: Any, items: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if instructions is not None:
            out.append({"role": "system", "content": expect(instructions, "string", "instructions")})
        if items is None:
            raise InvalidRequest("Missing required parameter: 'input'", param="input",
                                 code="missing_required_parameter")
        if isinstance(items, str):
            return [*out, {"role": "user", "content": items}]
        for i, item in enumerate(expect(items, "array", "input")):
            self._item(item, f"input[{i}]", out)
        return out

    def _item(self, item: Any, path: str, out: list[dict[str, Any]]) -> None:
        expect(item, "object", path)
        kind = item.get("type", "message")
        if kind == "message":
            self._keys(item, path, ("type", "role", "content", "id", "status", "phase"))
            role = one_of(item.get("role"), ("user", "assistant", "system", "developer"), f"{path}.role")
            if role == "assistant":
                self._assistant_text(item.get("content"), path, out)
            else:   # developer is chat's system for the models that know it: system reaches every backend
                out.append({"role": "system" if role == "developer" else role,
                            "content": self._content(item.get("content"), f"{path}.content")})
        elif kind == "function_call":
            self._keys(item, path, ("type", "call_id", "name", "arguments", "id", "status", "namespace"))
            name = expect(item.get("name"), "string", f"{path}.name")
            if item.get("namespace") is not None:   # offered to the chat model under its flattened name
                name = chat_name(expect(item["namespace"], "string", f"{path}.namespace"), name)
            call = {"id": expect(item.get("call_id"), "string", f"{path}.call_id"), "type": "function",
                    "function": {"name": name,
                                 "arguments": expect(item.get("arguments"), "string", f"{path}.arguments")}}
            last = out[-1] if out else None
            if last is None or last["role"] != "assistant":   # parallel calls share one assistant message
                last = {"role": "assistant", "content": None}
                out.append(last)
            last.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            self._keys(item, path, ("type", "call_id", "output", "id", "status"))
            out.append({"role": "tool", "tool_call_id": expect(item.get("call_id"), "string", f"{path}.call_id"),
                        "content": self._tool_output(item.get("output"), f"{path}.output")})
        elif kind == "reasoning":
            # The model's own earlier reasoning (opaque, or summaries of it): a chat model has no input for it.
            log.info("a reasoning input item (%s) is not sent to backend %r, which speaks only Chat Completions",
                     path, self.backend, extra={"backend": self.backend})
        else:
            raise self.cannot(f"{path}.type", f"input items of type {kind!r} have no Chat Completions form")

    def _assistant_text(self, content: Any, path: str, out: list[dict[str, Any]]) -> None:
        """An assistant message (earlier output) as chat's assistant content and refusal."""
        if isinstance(content, str):
            out.append({"role": "assistant", "content": content})
            return
        texts, refusals = [], []
        for k, part in enumerate(expect(content, "array", f"{path}.content")):
            where = f"{path}.content[{k}]"
            expect(part, "object", where)
            if part.get("type") in ("output_text", "input_text"):
                texts.append(expect(part.get("text"), "string", f"{where}.text"))
            elif part.get("type") == "refusal":
                refusals.append(expect(part.get("refusal"), "string", f"{where}.refusal"))
            else:
                raise self.cannot(f"{where}.type", f"assistant content part {part.get('type')!r}")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
        if refusals:
            message["refusal"] = "".join(refusals)
        out.append(message)

    def _content(self, content: Any, path: str) -> Any:
        if isinstance(content, str):
            return content
        return [self._part(part, f"{path}[{k}]") for k, part in enumerate(expect(content, "array", path))]

    def _part(self, part: Any, path: str) -> dict[str, Any]:
        expect(part, "object", path)
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            self._keys(part, path, ("type", "text", "annotations", "logprobs"))
            return {"type": "text", "text": expect(part.get("text"), "string", f"{path}.text")}
        if kind == "input_image":
            self._keys(part, path, ("type", "image_url", "detail"))
            if part.get("image_url") is None:
                raise self.cannot(f"{path}.file_id" if part.get("file_id") is not None else f"{path}.image_url",
                                  "a chat model takes an image by its URL or data URL only")
            image = {"url": expect(part.get("image_url"), "string", f"{path}.image_url")}
            detail = part.get("detail")
            if detail is not None and detail != "auto":
                image["detail"] = one_of(detail, IMAGE_DETAILS, f"{path}.detail")
            return {"type": "image_url", "image_url": image}
        if kind == "input_file":
            if part.get("file_url") is not None:
                raise self.cannot(f"{path}.file_url", "a chat model takes a file by file_id or file_data only")
            self._keys(part, path, ("type", "file_id", "file_data", "filename"))
            file = {k: expect(part[k], "string", f"{path}.{k}") for k in ("file_id", "file_data", "filename")
                    if part.get(k) is not None}
            return {"type": "file", "file": file}
        raise self.cannot(f"{path}.type", f"content part {kind!r} has no Chat Completions form")

    def _tool_output(self, output: Any, path: str) -> Any:
        """A function's output: a string, or its parts (text, images, files) as chat content parts."""
        if isinstance(output, str):
            return output
        return [self._part(part, f"{path}[{k}]") for k, part in enumerate(expect(output, "array", path))]

    def _keys(self, obj: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
        for key, value in obj.items():
            if key not in allowed and value is not None:
                raise self.cannot(f"{path}.{key}", "the chat message has no such field")


def _response_format(value: Any) -> dict[str, Any]:
    """``text.format`` as chat's ``response_format`` (the forward bridge's check, the other shape)."""
    kind, spec = text_format(value, "text.format", nested=False)
    return {"type": kind} if spec is None else {"type": kind, "json_schema": spec}


def responses_to_chat(payload: Mapping[str, Any], backend: str, kind: str, own: frozenset[str] = frozenset()
                      ) -> dict[str, Any]:
    """The chat body for one Responses body (raises InvalidRequest / UnsupportedRequestParameter)."""
    return ResponsesToChat(payload, backend, kind, own).body
