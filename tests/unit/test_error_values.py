"""Errors are values: what an error says is given to its constructor, and a changed error is a new one."""

from __future__ import annotations

import json

import pytest

from switchyard.actors.errors import (
    BudgetExceeded,
    InvalidRequest,
    LimitExceeded,
    MethodNotAllowed,
    UpstreamConnectError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from switchyard.actors.signals import EnginesSaturated

BACKEND_BODY = b'{"error": {"message": "messages[1]: bad role", "param": "messages[1].role"}}'


@pytest.mark.parametrize("err", [
    InvalidRequest("bad", param="model", code="model_missing", details={"a": 1}, extra_headers=[(b"x", b"1")]),
    MethodNotAllowed("no", allowed=("GET",)),
    LimitExceeded("slow", kind="tokens", retry_after=3, extra_headers=[(b"x-ratelimit", b"1")]),
    BudgetExceeded("spent", retry_after=60),
    UpstreamTimeout("late", details={"timeout": "total"}, backend="a", unreached=True),
    UpstreamStatusError("a", 503, b"busy", b"text/plain", "7", extra_headers=[(b"request-id", b"r")]),
    EnginesSaturated("full"),
])
def test_evolve_builds_a_new_error_of_the_same_class_saying_the_same(err):
    copy = err.evolve()
    assert copy is not err and type(copy) is type(err)
    assert (copy.status, copy.type, copy.code, copy.message, copy.param, copy.details) == \
        (err.status, err.type, err.code, err.message, err.param, err.details)
    assert (copy.body(), copy.headers()) == (err.body(), err.headers())


def test_added_headers_go_on_a_copy():
    err = InvalidRequest("bad", extra_headers=[(b"a", b"1")])
    more = err.with_headers([(b"b", b"2")])
    assert more.headers()[-2:] == [(b"a", b"1"), (b"b", b"2")]
    assert err.extra_headers == ((b"a", b"1"),)
    assert err.with_headers([]) is err


def test_an_upstream_error_is_said_of_a_backend_once():
    err = UpstreamConnectError("refused", unreached=True)
    named = err.of_backend("a")
    assert (named.backend, named.unreached, err.backend) == ("a", True, None)
    assert named.of_backend("b") is named


def test_rewriting_a_backends_error_text_leaves_the_original():
    err = UpstreamStatusError("a", 400, BACKEND_BODY, b"application/json")
    moved = err.rewrite_text(lambda text: text.replace("messages[1]", "messages[0]"))
    assert json.loads(moved.body())["error"] == {"message": "messages[0]: bad role", "param": "messages[0].role"}
    assert err.raw_body == BACKEND_BODY
    assert err.rewrite_text(lambda text: text) is err


def test_rendering_a_non_json_error_page_changes_nothing_on_the_error():
    err = UpstreamStatusError("a", 502, b"<html>bad gateway</html>", b"text/html")
    rendered = json.loads(err.body())
    assert rendered["error"]["message"] == "Backend 'a' answered HTTP 502: <html>bad gateway</html>"
    assert err.message == "Backend 'a' answered HTTP 502"
