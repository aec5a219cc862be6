"""The quality checks as pure functions (``actors/routing/quality.py``): one row per rule."""

import urllib.request

import pytest

from switchyard.actors.routing.quality import BadSchema, Verdict, judge, rules_for
from switchyard.config.quality_check import QualityCheck

CONFIG = QualityCheck(models=("m",), refusal_patterns=("(?i)^i can't",))
SCHEMA = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_REQUEST = {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
                "tools": [{"type": "function", "function": {"name": "w", "parameters": CITY}}]}


def chat(content=None, calls=(), finish="stop", refusal=None):
    message = {"role": "assistant", "content": content, "refusal": refusal}
    if calls:
        message["tool_calls"] = [{"id": str(i), "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, (n, a) in enumerate(calls)]
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}


@pytest.mark.parametrize("answer, verdict", [
    (chat('{"age": 3}'), None),
    (chat('{"age": "3"}'), Verdict("json_schema", "the answer's JSON breaks the schema: 'type' fails at $.age")),
    (chat("```json\n{}\n```"), Verdict("json_schema", "the answer's text is not JSON")),
    (chat(""), Verdict("empty", "neither text nor tool calls")),
    (chat("  \n"), Verdict("empty", "neither text nor tool calls")),
    (chat("", finish="length"), None),                                  # cut by the client's max_tokens
    (chat('{"age": ', finish="length"), None),                          # ... its JSON is not judged either
    (chat("I can't do that."), Verdict("refusal", "refusal_patterns[0] matched")),
    (chat(None, refusal="No."), Verdict("refusal", "the model refused (its refusal field)")),
    (chat(None, calls=[("w", '{"city": "Oslo"}')]), None),              # tool calls: no text to judge
    (chat(None, calls=[("w", '{"town": "Oslo"}')]),
     Verdict("tool_arguments", "tool 'w': arguments break its parameters schema: 'required' fails at $")),
    (chat(None, calls=[("w", '{"city": ')]), Verdict("tool_arguments", "tool 'w': arguments are not JSON")),
    (chat(None, calls=[("x", "{}")]),
     Verdict("tool_arguments", "a tool call names a function the request did not offer")),
    ({"choices": []}, Verdict("empty", "neither text nor tool calls")),
])
def test_a_chat_answer(answer, verdict):
    assert judge(rules_for(CHAT_REQUEST, CONFIG), answer) == verdict


def test_json_object_asks_for_an_object():
    rules = rules_for({"response_format": {"type": "json_object"}}, CONFIG)
    assert judge(rules, chat("[1]")) == Verdict("json_schema", "the answer's JSON is not an object")
    assert judge(rules, chat('{"a": [1]}')) is None


def test_only_the_configured_checks_run():
    rules = rules_for(CHAT_REQUEST, QualityCheck(models=("m",), checks=frozenset({"empty"})))
    assert judge(rules, chat("not json")) is None and judge(rules, chat("")) is not None


def test_a_responses_answer_is_read_from_its_output_items():
    request = {"text": {"format": {"type": "json_schema", "name": "p", "schema": SCHEMA}},
               "tools": [{"type": "function", "name": "w", "parameters": CITY}]}
    rules = rules_for(request, CONFIG, responses=True)

    def message(text):
        return {"output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]}
    assert judge(rules, message('{"age": 1}'), responses=True) is None
    assert judge(rules, message('{}'), responses=True).check == "json_schema"
    assert judge(rules, {"output": [{"type": "function_call", "name": "w", "arguments": "{}"}]},
                 responses=True).check == "tool_arguments"
    cut = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []}
    assert judge(rules, cut, responses=True) is None


@pytest.mark.parametrize("request_body, responses, messages, param", [
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "bogus"}}}}, False, False,
     "response_format.json_schema.schema"),
    ({"tools": [{"type": "function", "function": {"name": "w", "parameters": {"required": "city"}}}]}, False, False,
     "tools[0].function.parameters"),
    ({"tools": [{"type": "function", "function": {"name": "w", "parameters": {"required": "city"}}}]}, False, True,
     "tools[0].input_schema"),
    ({"text": {"format": {"type": "json_schema", "schema": []}}}, True, False, "text.format.schema"),
])
def test_a_schema_that_is_no_json_schema_is_the_clients_error(request_body, responses, messages, param):
    with pytest.raises(BadSchema) as info:
        rules_for(request_body, CONFIG, responses=responses, messages=messages)
    assert info.value.param == param


def test_a_schema_whose_ref_cannot_be_resolved_judges_nothing_and_fetches_nothing(monkeypatch):
    fetched = []

    def urlopen(*args, **kwargs):   # what jsonschema would fetch a remote $ref with, blocking, with no timeout
        fetched.append(args)
        raise OSError("no network in this test")
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    for ref in ("http://127.0.0.1:9/person.json", "file:///etc/passwd"):
        rules = rules_for({"response_format": {"type": "json_schema", "json_schema": {
            "schema": {"$ref": ref}}}}, CONFIG)
        assert judge(rules, chat('{"age": "x"}')) is None
    assert fetched == []


def test_a_clients_regular_expressions_are_not_judged_so_none_can_run_away():
    name = {"type": "object", "properties": {"pattern": {"type": "string", "pattern": "^(a|a)*$"}},
            "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    rules = rules_for({"response_format": {"type": "json_schema", "json_schema": {"schema": name}}}, CONFIG)
    # 40 characters: that pattern would backtrack for days; a property named "pattern" is still a property
    assert judge(rules, chat('{"pattern": "' + "a" * 40 + 'b", "x-1": "not an integer"}')) is None
    assert judge(rules, chat('{"pattern": 7}')) == Verdict(
        "json_schema", "the answer's JSON breaks the schema: 'type' fails at $.pattern")
