"""A batch input file's line rules (``actors/batches/jsonl.py``): one test per rule, each error naming the line
and the field in OpenAI's error shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchyard.actors.batches.jsonl import parse
from switchyard.actors.errors import InvalidRequest


def line(custom_id: str = "req-1", url: str = "/v1/chat/completions", **body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url,
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], **body}}


def jsonl(*lines: Any) -> bytes:
    return b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines)


def refusal(content: bytes, max_lines: int = 100) -> dict[str, Any]:
    with pytest.raises(InvalidRequest) as caught:
        parse(content, max_lines)
    err = caught.value
    assert err.status == 400 and err.type == "invalid_request_error"
    assert err.message.startswith(f"{err.param}: ")   # the message names the line and field, as param does
    return err.envelope()["error"]


def test_good_lines_become_requests_in_order():
    parsed = parse(jsonl(line("a"), line("b", temperature=0.2)) + b"\n\n", 10)   # empty lines may end the file
    assert [(r.number, r.custom_id) for r in parsed.requests] == [(1, "a"), (2, "b")]
    assert json.loads(parsed.requests[1].body)["temperature"] == 0.2
    assert (parsed.url, parsed.model) == ("/v1/chat/completions", "gpt-4o-mini")


def test_lines_of_several_models_have_no_one_model():
    other = line("b")
    other["body"]["model"] = "llama"
    assert parse(jsonl(line("a"), other), 10).model is None


def test_crlf_line_ends_are_read():
    assert len(parse(jsonl(line("a"), line("b")).replace(b"\n", b"\r\n"), 10).requests) == 2


def test_an_empty_file_is_refused():
    error = refusal(b"\n \n")
    assert (error["param"], error["code"]) == ("file", "empty_file")


def test_bytes_that_are_not_utf8_name_their_line():
    error = refusal(jsonl(line("a")) + b'{"custom_id": "\xff"}\n')
    assert (error["param"], error["code"]) == ("line 2", "invalid_json_line")
    assert "not UTF-8" in error["message"]


def test_an_empty_line_in_the_middle_is_refused():
    error = refusal(jsonl(line("a")) + b"\n" + jsonl(line("b")))
    assert error["param"] == "line 2" and "only the end of the file" in error["message"]


def test_a_line_that_is_not_json_is_named():
    error = refusal(jsonl(line("a"), b'{"custom_id": "b",'))
    assert (error["param"], error["code"]) == ("line 2", "invalid_json_line")


def test_json_that_is_not_an_object_is_refused():
    error = refusal(jsonl(line("a"), [1, 2]))
    assert error["message"] == "line 2: must be a JSON object, got an array"


@pytest.mark.parametrize("field", ["custom_id", "method", "url", "body"])
def test_each_field_of_a_line_is_required(field):
    broken = line()
    del broken[field]
    assert refusal(jsonl(broken))["message"] == f"line 1: {field}: is required"


def test_an_unknown_field_of_a_line_is_named():
    assert refusal(jsonl({**line(), "priority": 1}))["param"] == "line 1: priority"


@pytest.mark.parametrize("custom_id", ["", 7, None])
def test_custom_id_is_a_non_empty_string(custom_id):
    assert refusal(jsonl(line(custom_id)))["param"] == "line 1: custom_id"


def test_method_is_post():
    error = refusal(jsonl({**line(), "method": "GET"}))
    assert error["message"] == 'line 1: method: must be "POST", got "GET"'


def test_url_is_a_batchable_endpoint():
    error = refusal(jsonl(line(url="/v1/images/generations")))
    assert (error["param"], error["code"]) == ("line 1: url", "invalid_url")
    assert "/v1/embeddings" in error["message"]


def test_body_is_an_object():
    assert refusal(jsonl({**line(), "body": "hi"}))["message"] == "line 1: body: must be a JSON object, got a string"


def test_body_model_is_required():
    broken = line()
    del broken["body"]["model"]
    error = refusal(jsonl(line("a"), line("b"), broken))
    assert (error["param"], error["message"]) == ("line 3: body.model", "line 3: body.model: is required")


def test_body_model_is_a_string():
    assert refusal(jsonl(line(model=4)))["param"] == "line 1: body.model"


def test_a_streamed_line_is_refused():
    assert refusal(jsonl(line(stream=True)))["param"] == "line 1: body.stream"


def test_a_duplicate_custom_id_names_both_lines():
    error = refusal(jsonl(line("a"), line("b"), line("a")))
    assert (error["param"], error["code"]) == ("line 3: custom_id", "duplicate_custom_id")
    assert "line 1" in error["message"]


def test_every_line_calls_the_same_url():
    error = refusal(jsonl(line("a"), line("b", url="/v1/completions")))
    assert (error["param"], error["code"]) == ("line 2: url", "mismatched_url")


def test_more_lines_than_max_lines_are_refused():
    error = refusal(jsonl(*(line(f"r{i}") for i in range(4))), max_lines=3)
    assert (error["param"], error["code"]) == ("line 4", "too_many_tasks")
    assert "batches.max_lines" in error["message"]


def test_a_lone_surrogate_in_a_body_is_kept_as_its_escape():
    raw = b'{"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {"model": "e", "input": "\\ud800"}}'
    [request] = parse(raw, 10).requests
    assert request.body.encode() and json.loads(request.body)["input"] == "\ud800"


def test_a_nul_in_a_custom_id_or_a_model_is_refused_at_upload():
    # PostgreSQL's text takes no NUL: kept, such a line made POST /v1/batches a 503 (the store "away")
    assert refusal(jsonl(line("a\u0000b")))["param"] == "line 1: custom_id"
    assert refusal(jsonl(line(model="gpt\u0000")))["param"] == "line 1: body.model"
