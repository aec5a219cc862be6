"""Judging a whole answer against what its request asked for: ``fallback.quality_check``'s checks.

Pure: no I/O, no clock. ``rules_for`` reads the request once (the response
format's schema, each function tool's ``parameters``) and compiles the
schemas; a schema the client sent that is itself invalid is the client's
error (``BadSchema``), raised before any backend is asked. ``judge`` then
reads one answer, chat-shaped (``choices[]``, what the Messages door's calls
get too) or Responses-shaped (``output[]``), and says which check it fails
first, in the order ``empty``, ``refusal``, ``tool_arguments``,
``json_schema``, or None when it passes.

A reason is short and never quotes the answer: which rule, where, and for
a tool call the tool's name as the request spelt it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

from attrs import frozen
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from switchyard.config.quality_check import EMPTY, JSON_SCHEMA, REFUSAL, TOOL_ARGUMENTS, QualityCheck

REASON_MAX = 200           # characters of a reason
JSON_OBJECT = "json_object"   # the response format asks for any JSON object
_NOT_JSON = object()


@frozen
class Verdict:
    check: str     # the check that failed
    reason: str    # why, in a few words; never the answer's text


class BadSchema(ValueError):
    """A schema in the request that is no valid JSON Schema: the client's 400, at ``param``."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


@frozen
class QualityRules:
    """What one call's answers are judged by."""

    checks: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]
    answer_format: Validator | str | None     # the text's schema, JSON_OBJECT, or None (free text)
    tools: Mapping[str, Validator | None]     # each function tool's parameters (None: any JSON)


@frozen
class _Choice:
    """One answer's parts, whatever its API's shape."""

    texts: tuple[str, ...]
    refusal: bool                             # the model's own refusal field or part was set
    refusal_texts: tuple[str, ...]
    calls: tuple[tuple[str, Any], ...]        # (function name, arguments as sent)
    cut: bool                                 # cut by the client's own token limit


# --- the request ----------------------------------------------------------------

def rules_for(payload: Mapping[str, Any], config: QualityCheck, *, responses: bool = False,
              messages: bool = False) -> QualityRules:
    """The rules of a call whose body is ``payload`` (Responses-shaped with ``responses``; translated from
    Anthropic Messages with ``messages``, which names its tools' schemas ``input_schema``)."""
    checks = config.checks
    answer_format = _answer_format(payload, responses) if JSON_SCHEMA in checks else None
    tools = _tools(payload, responses, messages) if TOOL_ARGUMENTS in checks else {}
    return QualityRules(checks, config.compiled, answer_format, tools)


def _answer_format(payload: Mapping[str, Any], responses: bool) -> Validator | str | None:
    if responses:
        text = payload.get("text")
        fmt = text.get("format") if isinstance(text, dict) else None
        schema, param = (fmt.get("schema") if isinstance(fmt, dict) else None), "text.format.schema"
    else:
        fmt = payload.get("response_format")
        inner = fmt.get("json_schema") if isinstance(fmt, dict) else None
        schema, param = (inner.get("schema") if isinstance(inner, dict) else None), "response_format.json_schema.schema"
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == JSON_OBJECT:
        return JSON_OBJECT
    if kind != "json_schema":
        return None
    return _validator(schema, param) if schema is not None else JSON_OBJECT


def _tools(payload: Mapping[str, Any], responses: bool, messages: bool) -> dict[str, Validator | None]:
    out: dict[str, Validator | None] = {}
    tools = payload.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else ()):
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            continue
        fn = tool if responses else tool.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        param = f"tools[{i}].input_schema" if messages else \
            f"tools[{i}].parameters" if responses else f"tools[{i}].function.parameters"
        schema = fn.get("parameters")
        out[fn["name"]] = _validator(schema, param) if schema is not None else None
    return out


NO_RETRIEVAL: Registry[Any] = Registry()


def _validator(schema: Any, param: str) -> Validator:
    if not isinstance(schema, (dict, bool)):
        raise BadSchema(param, f"must be a JSON Schema (an object), got {type(schema).__name__}")
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise BadSchema(param, f"is not a valid JSON Schema: {_short(exc.message)}") from None
    # An empty registry that retrieves nothing: a client's ``$ref`` to a URL (or a file) is never fetched;
    # without it jsonschema would GET any http(s) or file URI, blocking, with no timeout
    return cls(without_regexes(schema), registry=NO_RETRIEVAL)


# Keywords whose values are schemas, lists of schemas, or maps of names to schemas: where the walk goes on.
_SCHEMA = ("additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames",
           "unevaluatedProperties", "unevaluatedItems", "additionalItems")
_SCHEMAS = ("allOf", "anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "$defs", "definitions", "dependentSchemas")


def without_regexes(schema: Any) -> Any:
    """``schema`` without its regular expressions (``pattern``, and ``patternProperties`` with the
    ``additionalProperties`` beside it, which reads them): Python's ``re`` has no timeout and holds the GIL,
    so a client's backtracking pattern would stall the worker however the judgment is run. Those rules are
    not judged (docs/quality-checks.md); every other one is."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k != "pattern"}
    if "patternProperties" in out:
        out.pop("patternProperties")
        out.pop("additionalProperties", None)
    for key in _SCHEMA:
        if key in out:
            out[key] = [without_regexes(v) for v in out[key]] if isinstance(out[key], list) \
                else without_regexes(out[key])
    for key in _SCHEMAS:
        if isinstance(out.get(key), list):
            out[key] = [without_regexes(v) for v in out[key]]
    for key in _NAMED:
        if isinstance(out.get(key), dict):
            out[key] = {name: without_regexes(v) for name, v in out[key].items()}
    return out


# --- the answer -----------------------------------------------------------------

def judge(rules: QualityRules, answer: Any, *, responses: bool = False) -> Verdict | None:
    """The first check ``answer`` fails, or None. An answer of neither shape is judged empty."""
    choices = _responses_choice(answer) if responses else _chat_choices(answer)
    for choice in choices or (_Choice((), False, (), (), False),):
        verdict = _judge_one(rules, choice)
        if verdict is not None:
            return verdict
    return None


def _judge_one(rules: QualityRules, c: _Choice) -> Verdict | None:
    checks = rules.checks
    text = "".join(c.texts)
    if EMPTY in checks and not c.cut and not text.strip() and not c.calls and not c.refusal:
        return Verdict(EMPTY, "neither text nor tool calls")
    if REFUSAL in checks:
        if c.refusal:
            return Verdict(REFUSAL, "the model refused (its refusal field)")
        for i, pattern in enumerate(rules.patterns):
            if pattern.search(text) or any(pattern.search(t) for t in c.refusal_texts):
                return Verdict(REFUSAL, f"refusal_patterns[{i}] matched")
    if TOOL_ARGUMENTS in checks:
        for name, arguments in c.calls:
            verdict = _tool_call(rules, name, arguments)
            if verdict is not None:
                return verdict
    if JSON_SCHEMA in checks and rules.answer_format is not None and not c.cut and (text or not c.calls):
        return _json_text(rules.answer_format, text)
    return None


def _tool_call(rules: QualityRules, name: str, arguments: Any) -> Verdict | None:
    if name not in rules.tools:
        return Verdict(TOOL_ARGUMENTS, "a tool call names a function the request did not offer")
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else _NOT_JSON
    except ValueError:
        value = _NOT_JSON
    if value is _NOT_JSON:
        return Verdict(TOOL_ARGUMENTS, f"tool {name!r}: arguments are not JSON")
    failed = _mismatch(rules.tools[name], value)
    return Verdict(TOOL_ARGUMENTS, f"tool {name!r}: arguments break its parameters schema: {failed}") \
        if failed else None


def _json_text(answer_format: Validator | str, text: str) -> Verdict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return Verdict(JSON_SCHEMA, "the answer's text is not JSON")
    if answer_format == JSON_OBJECT:
        return None if isinstance(value, dict) else Verdict(JSON_SCHEMA, "the answer's JSON is not an object")
    assert not isinstance(answer_format, str)
    failed = _mismatch(answer_format, value)
    return Verdict(JSON_SCHEMA, f"the answer's JSON breaks the schema: {failed}") if failed else None


def _mismatch(validator: Validator | None, value: Any) -> str | None:
    """How ``value`` breaks the schema, by rule and place (never by value), or None when it fits. A schema
    whose ``$ref`` cannot be resolved judges nothing: the request's fault, not the answer's."""
    if validator is None:
        return None
    try:
        error = best_match(validator.iter_errors(value))
    except Unresolvable:
        return None
    if error is None:
        return None
    return _short(f"{error.validator!r} fails at {error.json_path}")


def _short(text: str) -> str:
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 3] + "..."


def _chat_choices(answer: Any) -> list[_Choice]:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    out = []
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        message = message if isinstance(message, dict) else {}
        refusal = message.get("refusal")
        calls = tuple(_chat_call(call) for call in _list(message.get("tool_calls")) if isinstance(call, dict))
        out.append(_Choice(tuple(_texts(message.get("content"))), isinstance(refusal, str) and bool(refusal),
                           (refusal,) if isinstance(refusal, str) else (),
                           tuple(c for c in calls if c is not None), choice.get("finish_reason") == "length"))
    return out


def _chat_call(call: Mapping[str, Any]) -> tuple[str, Any] | None:
    if call.get("type", "function") != "function":
        return None   # a custom tool's free-form input: nothing to parse
    fn = call.get("function")
    fn = fn if isinstance(fn, dict) else {}
    return str(fn.get("name")), fn.get("arguments")


def _responses_choice(answer: Any) -> list[_Choice]:
    if not isinstance(answer, dict):
        return []
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[tuple[str, Any]] = []
    for item in _list(answer.get("output")):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.append((str(item.get("name")), item.get("arguments")))
        elif item.get("type") == "message":
            for part in _list(item.get("content")):
                if isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    refusals.append(part["refusal"])
                elif isinstance(part, dict) and part.get("type") == "output_text":
                    texts.extend(_texts(part.get("text")))
    details = answer.get("incomplete_details")
    cut = answer.get("status") == "incomplete" and isinstance(details, dict) \
        and details.get("reason") == "max_output_tokens"
    return [_Choice(tuple(texts), bool(refusals), tuple(refusals), tuple(calls), cut)]


def _texts(content: Any) -> Iterable[str]:
    """A message's text: a string, or the text parts of a list."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
