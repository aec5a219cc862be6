"""Log formatters: the JSON line's shape, bound request fields, the text form, the Bearer guard."""

import io
import json
import logging
import re

import pytest

from switchyard.actors import log_fields
from switchyard.protocol.http import logs

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def record(msg="hello %s", args=("world",), level=logging.INFO, exc_info=None, **extra):
    rec = logging.LogRecord("switchyard.test", level, __file__, 1, msg, args, exc_info)
    for k, v in extra.items():
        setattr(rec, k, v)
    return rec


def test_json_line_has_the_standard_fields():
    line = json.loads(logs.JsonFormatter().format(record(level=logging.WARNING)))
    assert RFC3339_UTC.fullmatch(line["timestamp"])
    assert (line["level"], line["logger"], line["message"]) == ("warning", "switchyard.test", "hello world")
    assert "trace_id" not in line and "\n" not in logs.JsonFormatter().format(record())


def test_json_line_carries_bound_fields_and_extra_wins():
    token = log_fields.bind(request_id="req_1", trace_id="t" * 32, x_request_id=None)
    try:
        log_fields.bind(backend="a", model="m")
        line = json.loads(logs.JsonFormatter().format(record(model="override")))
    finally:
        log_fields.unbind(token)
    assert (line["request_id"], line["trace_id"], line["backend"], line["model"]) == \
        ("req_1", "t" * 32, "a", "override")
    assert "x_request_id" not in line                   # None values are not bound
    assert log_fields.bound() == {}                           # the one token undoes every later bind


def test_json_line_keeps_a_traceback_on_the_same_line():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        text = logs.JsonFormatter().format(record(exc_info=sys.exc_info()))
    assert "\n" not in text and "ValueError: boom" in json.loads(text)["exception"]


def test_text_line_appends_fields():
    text = logs.TextFormatter().format(record(trace_id="abc", request_id="req_1"))
    assert text.endswith("switchyard.test: hello world trace_id=abc request_id=req_1")


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_bearer_credentials_are_masked(fmt):
    text = logs.formatter(fmt).format(record("upstream said %s", ("Illegal header value b'Bearer sk-live-123\\n'",)))
    assert "sk-live-123" not in text and "Bearer [redacted]" in text


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_lone_surrogate_never_breaks_a_log_line(fmt):
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    root = logging.getLogger()
    level = root.level
    handler = logs.install("INFO", fmt, stream)
    errors: list[str] = []
    handler.handleError = lambda rec: errors.append(rec.getMessage())   # type: ignore[method-assign]
    try:
        logging.getLogger("switchyard.test").warning("refused: %s", "model \ud800 é")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    written = stream.buffer.getvalue().decode("utf-8")
    assert errors == [] and "\\ud800" in written and "é" in written


def test_install_replaces_its_own_handler_and_sets_the_level():
    root = logging.getLogger()
    level, before = root.level, list(root.handlers)
    out = io.StringIO()
    try:
        logs.install("debug", "text")
        handler = logs.install("warning", "json", stream=out)
        ours = [h for h in root.handlers if getattr(h, "switchyard", False)]
        assert ours == [handler] and root.level == logging.WARNING
        logging.getLogger("switchyard.test").warning("one %d", 1)
        assert json.loads(out.getvalue())["message"] == "one 1"
    finally:
        for h in root.handlers[:]:
            if h not in before:
                root.removeHandler(h)
        root.setLevel(level)


def test_unknown_format_is_refused():
    with pytest.raises(ValueError):
        logs.formatter("xml")
