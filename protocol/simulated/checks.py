"""What the simulated OpenAI-compatible backend refuses, as a real server would: a 400 naming the param.

The simulator reads a few fields of each body (the last message's text
parts for a prefill, ``stream_options``, ``n``, ``logprobs`` and
``top_logprobs``, the Responses ``reasoning`` and ``include``, the
embeddings ``dimensions`` and ``input``); a value of the wrong type or size
there is the client's mistake, answered with OpenAI's error shape, never a
crash of the simulator. ``dimensions`` and the number of inputs are bounded
as OpenAI bounds them, so one call cannot make the demo build an answer of
hundreds of megabytes.
"""

from __future__ import annotations

from typing import Any

import httpx

from switchyard.protocol.simulated.choices import MAX_CHOICES, MAX_TOP_LOGPROBS

MAX_DIMENSIONS = 3072   # text-embedding-3-large, OpenAI's largest
MAX_INPUTS = 2048       # items in one embeddings input (or completions prompt) array
ENCODING_FORMATS = ("float", "base64")

Problem = tuple[str, str, str]   # (param, message, code)


def refusal(path: str, body: Any) -> httpx.Response | None:
    """The 400 a real server would answer ``body`` on ``path`` with, or None when the simulator can serve it."""
    problem = problem_in(path, body)
    if problem is None:
        return None
    param, message, code = problem
    return httpx.Response(400, json={"error": {"message": message, "type": "invalid_request_error",
                                               "param": param, "code": code}})


def problem_in(path: str, body: Any) -> Problem | None:
    if not isinstance(body, dict):
        return "", "The request body must be a JSON object.", "invalid_type"
    found = _type(body, "model", str, "a string") or _type(body, "stream_options", dict, "an object")
    if found is None and isinstance(body.get("stream_options"), dict):
        found = _type(body["stream_options"], "include_usage", bool, "a boolean", "stream_options.")
    if found is not None:
        return found
    if path.endswith("/chat/completions"):
        return _messages(body.get("messages")) or _sampling(body)
    if path.endswith("/embeddings"):
        return _embeddings(body)
    if path.endswith("/responses"):
        return (_type(body, "reasoning", dict, "an object") or _type(body, "text", dict, "an object")
                or _type(body, "metadata", dict, "an object") or _type(body, "include", list, "an array")
                or _top_logprobs(body))
    return _inputs(body.get("prompt"), "prompt")   # text completions


def _type(obj: dict[str, Any], key: str, kind: type, wanted: str, prefix: str = "") -> Problem | None:
    value = obj.get(key)
    if value is None or type(value) is kind:
        return None
    return _invalid_type(prefix + key, wanted, value)


def _invalid_type(param: str, wanted: str, value: Any) -> Problem:
    return param, f"Invalid type for '{param}': expected {wanted}, but got {_kind(value)} instead.", "invalid_type"


def _kind(value: Any) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a decimal", list: "an array",
            dict: "an object"}.get(type(value), "null")


def _messages(messages: Any) -> Problem | None:
    if not isinstance(messages, list):
        return _invalid_type("messages", "an array", messages)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            return _invalid_type(f"messages[{i}]", "an object", msg)
        content = msg.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            return _invalid_type(f"messages[{i}].content", "a string or an array", content)
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                return _invalid_type(f"messages[{i}].content[{j}]", "an object", part)
            if part.get("type") == "text" and not isinstance(part.get("text"), str):
                return _invalid_type(f"messages[{i}].content[{j}].text", "a string", part.get("text"))
    return None


def _sampling(body: dict[str, Any]) -> Problem | None:
    """``n``, ``logprobs`` and ``top_logprobs`` as OpenAI bounds them."""
    found = _type(body, "n", int, "an integer") or _type(body, "logprobs", bool, "a boolean")
    if found is not None:
        return found
    n = body.get("n")
    if n is not None and not 1 <= n <= MAX_CHOICES:
        return "n", f"Invalid value for 'n': {n}. It must be from 1 to {MAX_CHOICES}.", "invalid_value"
    found = _top_logprobs(body)
    if found is None and body.get("top_logprobs") is not None and body.get("logprobs") is not True:
        return "top_logprobs", "'top_logprobs' is only allowed when 'logprobs' is true.", "invalid_value"
    return found


def _top_logprobs(body: dict[str, Any]) -> Problem | None:
    top = body.get("top_logprobs")
    if top is None:
        return None
    if type(top) is not int:
        return _invalid_type("top_logprobs", "an integer", top)
    if not 0 <= top <= MAX_TOP_LOGPROBS:
        return ("top_logprobs", f"Invalid value for 'top_logprobs': {top}. It must be from 0 to "
                                f"{MAX_TOP_LOGPROBS}.", "invalid_value")
    return None


def _embeddings(body: dict[str, Any]) -> Problem | None:
    dimensions = body.get("dimensions")
    if dimensions is not None:
        if not isinstance(dimensions, int) or isinstance(dimensions, bool):
            return _invalid_type("dimensions", "an integer", dimensions)
        if not 1 <= dimensions <= MAX_DIMENSIONS:
            return ("dimensions", f"Invalid value for 'dimensions': {dimensions}. It must be from 1 to "
                                  f"{MAX_DIMENSIONS}.", "invalid_value")
    fmt = body.get("encoding_format")
    if fmt is not None and fmt not in ENCODING_FORMATS:
        return ("encoding_format", f"Invalid value for 'encoding_format': it must be one of "
                                   f"{', '.join(ENCODING_FORMATS)}.", "invalid_value")
    return _inputs(body.get("input"), "input")


def _inputs(value: Any, param: str) -> Problem | None:
    if isinstance(value, list) and len(value) > MAX_INPUTS and value and isinstance(value[0], (str, list)):
        return (param, f"Invalid '{param}': an array of at most {MAX_INPUTS} items is accepted, got "
                       f"{len(value)}.", "invalid_value")
    return None
