"""A chat body as a Gemini ``GenerateContentRequest`` (``protocol/wires/gemini.py`` sends it).

The chat fields Gemini has a place for are translated (``generationConfig``,
``tools``, ``toolConfig``, thinking); one it cannot carry is refused (400
``unsupported_request_parameter`` naming it) unless its value asks for
nothing (``n: 1``, ``logprobs: false``, ...). Fields that change no answer
(``user``, ``metadata``, ``store``, ``service_tier``) are not sent: Gemini has
no such fields. Gemini's own top-level fields (``safetySettings``,
``cachedContent``, ``labels``) pass as they are, and a ``generationConfig``
(a client's or the backend's ``request_extensions``) is merged under the
translated one, a disagreement refused. Any other unknown field is left
out, as the spec's strict cloud paths do (a strict API would refuse the
whole call for it).
"""

from __future__ import annotations

import json
from typing import Any

from switchyard.protocol.wires.gemini_contents import invalid, translate, unsupported

# Chat fields with no Gemini counterpart, with the one value that asks for nothing.
NEUTRAL: dict[str, Any] = {"n": 1, "logit_bias": {}, "min_p": 0, "modalities": ["text"], "top_logprobs": 0,
                           "logprobs": False, "parallel_tool_calls": True}
UNCARRIED = ("audio", "prediction", "functions", "function_call", "web_search_options")
NOT_SENT = frozenset({"user", "metadata", "store", "service_tier", "stream", "stream_options", "model",
                      "prompt_cache_key", "safety_identifier"})
NATIVE = frozenset({"safetySettings", "cachedContent", "labels"})
# reasoning_effort as a thinking budget, as Google's own OpenAI-compatible endpoint maps it
BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
# The OpenAPI subset Gemini's `responseSchema` and a declaration's `parameters` take; a schema using more
# (additionalProperties, $ref, const, ...) goes as JSON Schema (`responseJsonSchema`, `parametersJsonSchema`).
OPENAPI_KEYS = frozenset({"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
                          "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
                          "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum",
                          "maximum"})


def generate_request(payload: dict[str, Any]) -> dict[str, Any]:
    """The GenerateContentRequest for a chat ``payload`` (the model goes in the URL, not the body)."""
    for field, neutral in NEUTRAL.items():
        if payload.get(field) is not None and payload[field] != neutral:
            raise unsupported(field, f"Gemini has no such parameter here (only {json.dumps(neutral)}, which asks "
                                     f"for nothing, is accepted)")
    for field in UNCARRIED:
        if payload.get(field) is not None:
            raise unsupported(field, "Gemini has no such parameter")
    system, contents = translate(payload.get("messages"))
    if not contents:
        raise invalid("messages", "must hold at least one user, assistant or tool message for Gemini "
                                  "(a system instruction alone is no conversation)")
    out: dict[str, Any] = {"contents": contents}
    if system is not None:
        out["systemInstruction"] = system
    config = _generation_config(payload)
    tools = payload.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise invalid("tools", "must be an array")
    if tools:
        out["tools"] = [{"functionDeclarations": [_declaration(t, f"tools[{i}]") for i, t in enumerate(tools)]}]
    choice = _tool_config(payload.get("tool_choice"))
    if choice is not None:
        out["toolConfig"] = choice
    for key in NATIVE & payload.keys():
        out[key] = payload[key]
    if config:
        out["generationConfig"] = config
    return out


def _generation_config(payload: dict[str, Any]) -> dict[str, Any]:
    given = payload.get("generationConfig")
    if given is not None and not isinstance(given, dict):
        raise invalid("generationConfig", "must be an object")
    config = dict(given or {})
    newer, older = payload.get("max_completion_tokens"), payload.get("max_tokens")
    if newer is not None and older is not None and newer != older:
        raise invalid("max_completion_tokens", f"({newer}) and 'max_tokens' ({older}) disagree; send one")
    simple = {"maxOutputTokens": newer if newer is not None else older, "temperature": payload.get("temperature"),
              "topP": payload.get("top_p"), "topK": payload.get("top_k"), "seed": payload.get("seed"),
              "presencePenalty": payload.get("presence_penalty"),
              "frequencyPenalty": payload.get("frequency_penalty")}
    for key, value in simple.items():
        if value is not None:
            _set(config, key, value, key)
    stop = payload.get("stop")
    if isinstance(stop, str):
        _set(config, "stopSequences", [stop], "stop")
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if stop:
            _set(config, "stopSequences", stop, "stop")
    elif stop is not None:
        raise invalid("stop", "must be a string or an array of strings")
    _response_format(payload.get("response_format"), config)
    effort = payload.get("reasoning_effort")
    if effort is not None:
        if not isinstance(effort, str):
            raise invalid("reasoning_effort", f"must be a string (one of {', '.join(BUDGETS)})")
        if effort not in BUDGETS:
            raise unsupported("reasoning_effort", f"one of {', '.join(BUDGETS)} maps to a thinking budget, "
                                                  f"got {effort!r}")
        thinking = {"thinkingBudget": BUDGETS[effort]}
        if effort != "none":
            thinking["includeThoughts"] = True   # the thoughts come back as reasoning_content
        _set(config, "thinkingConfig", thinking, "reasoning_effort")
    return config


def _response_format(fmt: Any, config: dict[str, Any]) -> None:
    if fmt is None:
        return
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return
    if kind == "json_object":
        _set(config, "responseMimeType", "application/json", "response_format")
        return
    if kind != "json_schema":
        raise unsupported("response_format", f"Gemini takes text, json_object or json_schema, got {kind!r}")
    given = fmt.get("json_schema")
    if not isinstance(given, dict):
        raise invalid("response_format.json_schema", "is required and must be an object")
    schema = given.get("schema")
    if not isinstance(schema, dict):
        raise invalid("response_format.json_schema.schema", "is required and must be an object")
    _set(config, "responseMimeType", "application/json", "response_format")
    key = "responseSchema" if openapi_subset(schema) else "responseJsonSchema"
    _set(config, key, schema, "response_format")


def openapi_subset(schema: Any) -> bool:
    """Whether ``schema`` uses only what Gemini's OpenAPI-subset ``Schema`` object takes, at every level."""
    if isinstance(schema, list):
        return all(openapi_subset(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if set(schema) - OPENAPI_KEYS:
        return False
    props = schema.get("properties")
    if props is not None and not (isinstance(props, dict) and all(openapi_subset(v) for v in props.values())):
        return False
    return openapi_subset(schema.get("items")) and openapi_subset(schema.get("anyOf"))


def _declaration(tool: Any, path: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise unsupported(f"{path}.type", f"only function tools have a Gemini counterpart, got {kind!r}")
    fn = tool.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise invalid(f"{path}.function.name", "is required and must be a string")
    out: dict[str, Any] = {"name": fn["name"]}
    if fn.get("description"):
        out["description"] = fn["description"]
    params = fn.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise invalid(f"{path}.function.parameters", "must be an object")
    if params and (params.get("properties") or params.get("type") != "object"):
        out["parameters" if openapi_subset(params) else "parametersJsonSchema"] = params
    return out


def _tool_config(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"functionCallingConfig": {"mode": choice.upper()}}
    if choice == "required":
        return {"functionCallingConfig": {"mode": "ANY"}}
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict) \
            and isinstance(choice["function"].get("name"), str):
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice["function"]["name"]]}}
    raise invalid("tool_choice", "must be auto, required, none or {type: function, function: {name}}")


def _set(config: dict[str, Any], key: str, value: Any, field: str) -> None:
    if key in config and config[key] != value:
        raise invalid(field, f"and 'generationConfig.{key}' disagree; send one")
    config[key] = value
