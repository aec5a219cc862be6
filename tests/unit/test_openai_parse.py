"""Client body validation: every mistake names its field path."""

import json

import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.config.load import load_text
from switchyard.protocol.doors.openai import parse_chat

SNAP = load_text("backends:\n  - {name: a, url: 'http://x', models: [m]}\n", env={}).snapshot


def error(body):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(InvalidRequest) as info:
        parse_chat(raw, SNAP, {})
    return info.value


def test_malformed_json_is_invalid_json():
    e = error(b"{nope")
    assert e.code == "invalid_json" and e.status == 400


def test_empty_body_is_invalid_json():
    assert error(b"").code == "invalid_json"


def test_body_must_be_object():
    assert error([1, 2]).message == "Request body must be a JSON object, got array"


def test_model_required():
    e = error({"messages": [{"role": "user", "content": "x"}]})
    assert (e.param, e.code) == ("model", "missing_required_parameter")


def test_model_must_be_string():
    e = error({"model": 5, "messages": [{"role": "user", "content": "x"}]})
    assert (e.param, e.code) == ("model", "invalid_type")


def test_messages_required_and_array():
    assert error({"model": "m"}).param == "messages"
    assert error({"model": "m", "messages": "hi"}).code == "invalid_type"
    assert error({"model": "m", "messages": []}).code == "invalid_value"


def test_message_role_path():
    e = error({"model": "m", "messages": [{"role": "user", "content": "x"}, {"content": "y"}]})
    assert e.param == "messages[1].role"
    e = error({"model": "m", "messages": [{"role": "robot", "content": "x"}]})
    assert (e.param, e.code) == ("messages[0].role", "invalid_value")


def test_message_content_type_path():
    e = error({"model": "m", "messages": [{"role": "user", "content": 3}]})
    assert e.param == "messages[0].content"


def test_stream_must_be_boolean():
    e = error({"model": "m", "stream": "yes", "messages": [{"role": "user", "content": "x"}]})
    assert e.param == "stream"


def test_body_forwarded_untouched_and_hash_key_from_header_then_user():
    raw = json.dumps({"model": "m", "user": "u1", "messages": [{"role": "user", "content": "x"}],
                      "temperature": 0.2}).encode()
    call = parse_chat(raw, SNAP, {})
    assert call.body is raw and call.hash_key == "u1" and call.stream is False
    call = parse_chat(raw, SNAP, {b"x-session-id": b"s9"})
    assert call.hash_key == "s9"


def test_error_envelope_shape():
    e = error({"model": "m"})
    assert e.envelope() == {"error": {"message": "Missing required parameter: 'messages'",
                                      "type": "invalid_request_error", "param": "messages",
                                      "code": "missing_required_parameter"}}
