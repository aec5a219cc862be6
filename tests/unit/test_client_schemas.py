"""Client JSON Schemas (tool parameters, structured-output formats) through everything that reads a body by shape.

Rule: what the gateway only inspects (the token estimate, capability checks,
the classifiers) takes any schema and never raises; what translates a body
(the doors, the Anthropic, Gemini and Bedrock wires, the Responses bridges in
both directions) carries the schema unchanged, or refuses the request with a
400 naming the field (Bedrock has no structured output). Schemas come from
``tests/json_schemas.py``: the recorded clients' own and generated ones with
type lists, properties named ``type``, ``anyOf``, ``$ref`` and the rest.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from switchyard.actors.errors import UnsupportedRequestParameter
from switchyard.actors.messages import Call
from switchyard.actors.routing.capabilities import IMAGE_TOKENS, needs_of
from switchyard.actors.routing.classifier_prompt import classifier_request
from switchyard.actors.routing.classify import RuleClassifier
from switchyard.actors.routing.limits import reserved_tokens
from switchyard.actors.routing.token_estimate import IMAGE_PARTS, REQUEST_FRAMING, estimate_tokens
from switchyard.config.load import load_text
from switchyard.protocol.doors.anthropic_format import to_chat
from switchyard.protocol.doors.openai import parse_chat_payload
from switchyard.protocol.doors.responses import parse_responses_payload
from switchyard.protocol.wires.anthropic import messages_request
from switchyard.protocol.wires.bedrock_converse import converse_request
from switchyard.protocol.wires.chat_bridge import responses_to_chat
from switchyard.protocol.wires.gemini_request import generate_request
from switchyard.protocol.wires.responses_bridge import chat_to_responses
from tests.json_schemas import chat_body, client_schemas, messages_body, responses_body

SNAPSHOT = load_text("""
backends:
  - {name: claude, type: anthropic, url: https://api.anthropic.com, models: [m]}
smart_routing: {enabled: true, model_profiles: [{model: m, tier: 1}]}
""").snapshot
CLAUDE = SNAPSHOT.backend("claude")
RULE = RuleClassifier()
PROPERTY = settings(max_examples=40, derandomize=True, database=None, deadline=None)


def has_image_part(value: Any) -> bool:
    """Whether ``value`` holds an object whose ``type`` is the string of an image part."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("type"), str) and node["type"] in IMAGE_PARTS:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def call_of(payload: dict[str, Any]) -> Call:
    return Call(model="m", stream=False, body=json.dumps(payload).encode(), payload=payload, snapshot=SNAPSHOT)


# --- what only inspects a body ------------------------------------------------------------

@PROPERTY
@given(client_schemas(), client_schemas())
def test_the_estimate_and_the_capability_check_take_any_schema_and_count_it_as_text(tool, output):
    payload = chat_body("m", tool, output, stream=False)
    estimate = estimate_tokens(payload)
    assert estimate > REQUEST_FRAMING
    if not has_image_part(payload):   # a schema is text: the image allowance changes nothing
        assert estimate_tokens(payload, image_tokens=IMAGE_TOKENS) == estimate
    needs = needs_of(payload)
    assert needs.tools and not needs.vision
    assert sum(reserved_tokens(payload, None)) >= needs.tokens


@PROPERTY
@given(client_schemas(), client_schemas())
def test_the_classifiers_take_any_schema(tool, output):
    payload = chat_body("auto", tool, output, stream=False)
    assert RULE.classify(payload).required_capabilities == {"tools"}
    asked = classifier_request(payload, SNAPSHOT.smart_routing.classifier, "json_schema")
    assert asked["messages"][-1]["content"].count("hi") >= 1


# --- what reads a body to admit or translate it ---------------------------------------------

@PROPERTY
@given(client_schemas(), client_schemas())
def test_the_doors_take_any_schema_and_the_messages_door_carries_it_into_chat(tool, output):
    chat = chat_body("m", tool, output, stream=True)
    assert parse_chat_payload(chat, b"", SNAPSHOT, {}).payload is chat
    responses = responses_body("m", tool, output, stream=True)
    assert parse_responses_payload(responses, b"", SNAPSHOT, {}).payload is responses
    translated = to_chat(messages_body("m", tool, output, stream=True)).payload
    assert translated["tools"][0]["function"]["parameters"] == tool
    assert translated["response_format"]["json_schema"]["schema"] == output


@PROPERTY
@given(client_schemas(), client_schemas())
def test_the_anthropic_wire_carries_any_schema_unchanged(tool, output):
    payload = chat_body("m", tool, output, stream=False)
    out = messages_request(payload, CLAUDE, call_of(payload))
    assert out["tools"][0]["input_schema"] == tool
    assert out["output_config"]["format"] == {"type": "json_schema", "schema": output}


@PROPERTY
@given(client_schemas(), client_schemas())
def test_the_gemini_wire_carries_any_schema_unchanged(tool, output):
    out = generate_request(chat_body("m", tool, output, stream=False))
    [declaration] = out["tools"][0]["functionDeclarations"]
    sent = declaration.get("parameters", declaration.get("parametersJsonSchema"))
    assert sent == (tool if tool.get("properties") or tool.get("type") != "object" else None)
    config = out["generationConfig"]
    assert config.get("responseSchema", config.get("responseJsonSchema")) == output


@PROPERTY
@given(client_schemas())
def test_the_bedrock_wire_carries_any_tool_schema_and_refuses_a_response_format_by_name(tool):
    payload = chat_body("m", tool, tool, stream=False)
    with pytest.raises(UnsupportedRequestParameter) as caught:
        converse_request(payload)
    assert caught.value.param == "response_format"
    del payload["response_format"]
    assert converse_request(payload)["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": tool}


@PROPERTY
@given(client_schemas(), client_schemas())
def test_the_responses_bridges_carry_any_schema_unchanged_both_ways(tool, output):
    forward = chat_to_responses(chat_body("m", tool, output, stream=True), "m").body
    assert forward["tools"][0]["parameters"] == tool and forward["text"]["format"]["schema"] == output
    back = responses_to_chat(responses_body("m", tool, output, stream=True), "local", "vllm")
    assert back["tools"][0]["function"]["parameters"] == tool
    assert back["response_format"]["json_schema"]["schema"] == output
