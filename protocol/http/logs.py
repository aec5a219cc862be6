"""Log lines: one JSON object per record, or plain text; request fields from a contextvar.

``App.http`` binds the request's identifiers (``request_id``, the API key's
``key_id`` (never the key), and with
tracing on ``trace_id``, ``x_request_id``, ``client_ref``) in a contextvar
for the length of the request; each attempt adds ``backend`` and ``model``.
Trio copies the context into tasks started from the request, so every line
logged on behalf of a request carries them without being passed along. A
value given with ``extra=`` wins over the bound one.

A warning or error repeated many times a second is logged once, then
counted (``log_repeats.py``).

The gateway never logs request or response bodies, headers or credentials.
As a last guard both formatters mask whatever follows ``Bearer `` in a line,
so a credential quoted by a library error message does not reach the log.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

from switchyard.actors.log_fields import FIELDS, bound
from switchyard.protocol.http.log_repeats import FIELDS_ATTR, RepeatFilter

FORMATS = ("json", "text")

_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",]+")


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The request fields of ``record``: its own (``extra=``) first, then the bound ones."""
    fixed = getattr(record, FIELDS_ATTR, None)
    if fixed is not None:
        return dict(fixed)
    ctx = bound()
    out: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(record, name, None)
        if value is None:
            value = ctx.get(name)
        if value is not None:
            out[name] = value
    return out


def redact(text: str) -> str:
    return _BEARER.sub(r"\1[redacted]", text)


def printable(text: str) -> str:
    """``text`` with any lone surrogate (a client's ``"\\ud800"``) as its escape: a stream that
    writes strict UTF-8 would fail on the line otherwise."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def rfc3339(created: float) -> str:
    moment = datetime.fromtimestamp(created, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp, level, logger, message, then the request fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "timestamp": rfc3339(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(fields_of(record))
        line["pid"] = record.process
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return printable(redact(json.dumps(line, ensure_ascii=False, default=str)))


class TextFormatter(logging.Formatter):
    """The classic line, with the request fields appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = fields_of(record)
        if fields:
            head, sep, tail = text.partition("\n")   # keep a traceback below the line
            text = head + " " + " ".join(f"{k}={v}" for k, v in fields.items()) + sep + tail
        return printable(redact(text))


def formatter(fmt: str) -> logging.Formatter:
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


class Handler(logging.StreamHandler[TextIO]):
    """Ours: repeats counted (``log_repeats``), and what is still counted logged when it closes."""

    switchyard = True

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.repeats = RepeatFilter(self.handle, fields_of)
        self.addFilter(self.repeats)

    def close(self) -> None:
        self.repeats.report_all()
        super().close()


def install(level: str, fmt: str, stream: TextIO | None = None) -> logging.Handler:
    """Point the root logger at one handler of ours (replacing an earlier one of ours) at ``level``."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "switchyard", False):
            root.removeHandler(handler)
            handler.close()
    handler = Handler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(fmt))
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per upstream request is noise
    return handler
