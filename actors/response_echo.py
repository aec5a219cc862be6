"""What a Response object repeats of its request: the fields that say what was asked, as OpenAI gives them.

A Response object carries every field OpenAI's schema and Open Responses'
``ResponseResource`` require (``presence_penalty``, ``frequency_penalty``,
``top_logprobs``, ``background``, ``service_tier``, ``max_tool_calls``,
``safety_identifier``, ``prompt_cache_key``, ...). Those that mean "what was
asked" hold the request's value, or the API's default when the request left
it out: sampling parameters, ``truncation``, ``store``, the tools (a function
tool with its ``strict``, true unless the request said otherwise, its
``description`` and ``parameters``), ``text`` with its verbosity.
``service_tier`` is the tier that served it (``auto`` is served as
``default``). ``user`` appears only when the request sent one (the schema
types it as a string). The simulated Responses API and the bridge that
answers Responses calls from chat backends (``protocol/wires/chat_answers.py``)
both build their objects with it.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

from typing import Any, Mapping

DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
            "top_logprobs": 0}


def _number(body: Mapping[str, Any], key: str) -> Any:
    value = body.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else DEFAULTS[key]


def _tool(tool: Any) -> Any:
    """A function tool as the API answers it: ``strict`` (default true), ``description`` and ``parameters``."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return tool
    return {"description": None, "parameters": None, **tool,
            "strict": tool["strict"] if isinstance(tool.get("strict"), bool) else True}


def _service_tier(body: Mapping[str, Any]) -> str:
    tier = body.get("service_tier")
    return tier if isinstance(tier, str) and tier != "auto" else "default"


def _text(body: Mapping[str, Any]) -> dict[str, Any]:
    text = body.get("text")
    if not isinstance(text, dict):
        text = {}
    return {"format": {"type": "text"}, "verbosity": "medium", **text}


def response_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """Every field of the Response object that comes from the request (or the API's default for it)."""
    reasoning = body.get("reasoning")
    if not isinstance(reasoning, dict):
        reasoning = {}
    tools = body.get("tools")
    fields: dict[str, Any] = {
        "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"), "model": body.get("model", ""),
        "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": body.get("store") is not False, "background": body.get("background") is True,
        "text": _text(body), "tool_choice": body.get("tool_choice", "auto"),
        "tools": [_tool(t) for t in tools] if isinstance(tools, list) else [],
        "truncation": body.get("truncation") if body.get("truncation") in ("auto", "disabled") else "disabled",
        "service_tier": _service_tier(body), "metadata": body.get("metadata") or {},
        "safety_identifier": body.get("safety_identifier"), "prompt_cache_key": body.get("prompt_cache_key"),
        **{key: _number(body, key) for key in DEFAULTS},
    }
    if isinstance(body.get("user"), str):
        fields["user"] = body["user"]
    return fields
