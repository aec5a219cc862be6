"""What counts as a backend refusing stream_options, and the body sent again without it (actors/stream_usage.py)."""

import json

import pytest

from switchyard.actors.stream_usage import names_the_option, with_option, without_option

OPENAI_PARAM = b'{"error": {"message": "Unrecognized request argument", "param": "stream_options", "code": null}}'
IN_MESSAGE = b'{"error": {"message": "stream_options is not supported", "type": "BadRequestError"}}'
VALIDATION = b'{"detail": [{"type": "extra_forbidden", "loc": ["body", "stream_options"], "msg": "Extra inputs"}]}'
PLAIN_TEXT = b"unknown field `stream_options`"
OTHER = b'{"error": {"message": "messages: at least one message is required", "param": "messages"}}'


@pytest.mark.parametrize("status, body, refused", [
    (400, OPENAI_PARAM, True),
    (400, IN_MESSAGE, True),
    (422, VALIDATION, True),
    (400, PLAIN_TEXT, True),
    (400, OTHER, False),          # another refusal: the call's answer
    (500, OPENAI_PARAM, False),   # a server error is the backend's failure, whatever it says
    (404, OPENAI_PARAM, False),
])
def test_a_refusal_is_a_400_or_422_naming_stream_options(status, body, refused):
    assert names_the_option(status, body) is refused


def test_the_body_sent_again_loses_include_usage_and_an_emptied_stream_options_only():
    assert json.loads(without_option(b'{"model": "m", "stream_options": {"include_usage": true}}')) == {"model": "m"}
    kept = without_option(b'{"stream_options": {"include_usage": true, "continuous_usage_stats": true}}')
    assert json.loads(kept) == {"stream_options": {"continuous_usage_stats": True}}
    assert without_option(b'{"model": "m"}') == b'{"model": "m"}'


@pytest.mark.parametrize("body", [
    b'{"model":"m","stream":true}',
    b' {\n  "model": "m", "messages": [{"role": "user", "content": "h\\u00e9 \xc3\xa9"}], "stream": true\n}\r\n',
])
def test_the_usage_option_joins_the_clients_bytes_as_the_same_object_re_serialized_would(body):
    spliced = with_option(body)
    assert spliced is not None and spliced.startswith(body.rstrip()[:-1])   # the client's members, untouched
    assert json.loads(spliced) == {**json.loads(body), "stream_options": {"include_usage": True}}
    assert without_option(spliced) == json.dumps(json.loads(body)).encode()


@pytest.mark.parametrize("body", [
    b"{}", b"{ \n }", b"[1]", b'\xef\xbb\xbf{"model":"m"}',
    '{"model":"m"}'.encode("utf-16-le"), '{"model":"m"}'.encode("utf-16-be"), '{"model":"m"}'.encode("utf-32-le"),
])
def test_a_body_the_option_cannot_join_byte_for_byte_is_left_to_re_serializing(body):
    assert with_option(body) is None
