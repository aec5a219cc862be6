"""Client JSON: nesting past MAX_DEPTH is a 400 naming where; lone surrogates always render."""

import json

import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.protocol.http.client_json import MAX_DEPTH, loads, utf8


def nested(depth: int) -> str:
    return '{"metadata": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_json_nested_past_the_depth_limit_is_refused_naming_the_path():
    with pytest.raises(InvalidRequest) as info:
        loads(nested(MAX_DEPTH + 1).encode())
    err = info.value
    assert (err.status, err.code) == (400, "json_too_deep")
    assert err.param == "metadata" + "[0]" * (MAX_DEPTH - 1)   # the array at level MAX_DEPTH + 1
    assert f"deeper than {MAX_DEPTH} levels" in err.message


def test_json_nested_to_the_depth_limit_is_accepted():
    assert loads(nested(MAX_DEPTH).encode())["metadata"] != {}


def test_json_nested_past_the_recursion_limit_is_a_400_not_a_recursion_error():
    with pytest.raises(InvalidRequest) as info:
        loads(b'{"a": {"b": [1, ' + b"[" * 100_000 + b"]" * 100_000 + b"]}}")
    assert info.value.code == "json_too_deep"
    assert info.value.param.startswith("a.b[1][0][0]")


def test_brackets_inside_strings_do_not_count_toward_the_depth():
    text = json.dumps({"content": "[{" * 1000, "list": [["]]]]"] * 200]})
    assert loads(text.encode())["content"] == "[{" * 1000


def test_a_long_path_is_shortened_in_the_error():
    key = "k" * 1000
    with pytest.raises(InvalidRequest) as info:
        loads(('{"' + key + '": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}").encode())
    assert info.value.param.startswith("kkk") and info.value.param.endswith("...")
    assert len(info.value.param) <= 515


def test_invalid_json_still_raises_value_error_for_the_caller_to_word():
    with pytest.raises(ValueError):
        loads(b"[" * 500)


def test_a_lone_surrogate_is_written_as_its_escape():
    out = utf8({"model": "\ud800", "text": "héllo"})
    assert json.loads(out) == {"model": "\ud800", "text": "héllo"}
    assert b"\\ud800" in out and "héllo".encode() in out
