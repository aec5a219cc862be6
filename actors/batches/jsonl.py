"""A batch input file's lines, checked: each a request the gateway can run, or a 400 naming the line and field.

The file is read whole at upload, so a client learns of a bad line at once,
not hours later in an error file. Each line is a JSON object of
``custom_id`` (a non-empty string, unique in the file), ``method``
(``POST``), ``url`` (one batchable endpoint, the same on every line) and
``body`` (an object naming its ``model``, not streamed). Empty lines may
end the file, nowhere else. The error's ``param`` says where, as
``line 3: body.model``, and its code is the one OpenAI's batch validation
uses for the same fault where it has one. Pure: no I/O, callers run it in a
worker thread (a large file takes a while).
"""

from __future__ import annotations

import json
from typing import Any

from attrs import frozen

from switchyard.actors import json_read, safe_text
from switchyard.actors.errors import InvalidRequest

# the endpoints a batch line may call, in the order the errors list them
ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/moderations")
FIELDS = ("custom_id", "method", "url", "body")
SHOWN = 60   # characters of a client's value an error quotes


@frozen
class Request:
    """One line of the file: its number (from 1), the client's ``custom_id``, and what it asks."""

    number: int
    custom_id: str
    url: str
    body: str          # the request's body as JSON text
    model: str


@frozen
class Parsed:
    requests: tuple[Request, ...]

    @property
    def url(self) -> str:
        return self.requests[0].url

    @property
    def model(self) -> str | None:
        """The model every line names, when they all name one."""
        models = {r.model for r in self.requests}
        return models.pop() if len(models) == 1 else None


def bad_line(number: int, path: str, rule: str, code: str = "invalid_batch_line") -> InvalidRequest:
    where = f"line {number}" + (f": {path}" if path else "")
    return InvalidRequest(f"{where}: {rule}", param=where, code=code)


def bad_file(rule: str, code: str) -> InvalidRequest:
    return InvalidRequest(f"file: {rule}", param="file", code=code)


def shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def parse(content: bytes, max_lines: int) -> Parsed:
    """The file's requests, or the InvalidRequest for the first line (or the file) that breaks a rule."""
    rows = content.split(b"\n")
    while rows and not rows[-1].strip():   # empty lines may end the file
        rows.pop()
    if not rows:
        raise bad_file("the file is empty; a batch input file holds one JSON request per line (JSONL)", "empty_file")
    if len(rows) > max_lines:
        raise bad_line(max_lines + 1, "", f"the file holds {len(rows)} requests; a batch takes at most {max_lines} "
                                          f"(batches.max_lines)", "too_many_tasks")
    seen: dict[str, int] = {}
    requests: list[Request] = []
    for number, raw in enumerate(rows, 1):
        request = _request(number, raw)
        if request.custom_id in seen:
            raise bad_line(number, "custom_id", f"{shown(request.custom_id)} is also the custom_id of line "
                                                f"{seen[request.custom_id]}; each must be unique in the file",
                           "duplicate_custom_id")
        seen[request.custom_id] = number
        if requests and request.url != requests[0].url:
            raise bad_line(number, "url", f"{request.url} differs from line 1's {requests[0].url}; every line of "
                                          f"a batch calls the same endpoint", "mismatched_url")
        requests.append(request)
    return Parsed(tuple(requests))


def _request(number: int, raw: bytes) -> Request:
    if not raw.strip():
        raise bad_line(number, "", "is empty; only the end of the file may hold empty lines", "invalid_json_line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_line(number, "", f"is not UTF-8 text (byte {exc.start + 1} of the line)",
                       "invalid_json_line") from None
    try:
        line = json_read.loads(text)
    except ValueError as exc:
        raise bad_line(number, "", f"is not valid JSON: {exc}", "invalid_json_line") from None
    except RecursionError:
        raise bad_line(number, "", "nests JSON too deep", "invalid_json_line") from None
    if not isinstance(line, dict):
        raise bad_line(number, "", f"must be a JSON object, got {_kind(line)}", "invalid_json_line")
    unknown = [name for name in line if name not in FIELDS]
    if unknown:
        raise bad_line(number, str(unknown[0]), f"unknown field; a line holds {', '.join(FIELDS)}")
    custom_id = _required(number, line, "custom_id")
    if not isinstance(custom_id, str) or not custom_id or safe_text.problem(custom_id) is not None:
        raise bad_line(number, "custom_id", f"must be a non-empty string of text (no NUL, no lone surrogate), "
                                            f"got {shown(custom_id)}")
    method = _required(number, line, "method")
    if method != "POST":
        raise bad_line(number, "method", f"must be \"POST\", got {shown(method)}")
    url = _required(number, line, "url")
    if url not in ENDPOINTS:
        raise bad_line(number, "url", f"must be one of {', '.join(ENDPOINTS)}, got {shown(url)}", "invalid_url")
    body = _required(number, line, "body")
    if not isinstance(body, dict):
        raise bad_line(number, "body", f"must be a JSON object, got {_kind(body)}")
    if "model" not in body:
        raise bad_line(number, "body.model", "is required")
    model = body["model"]
    if not isinstance(model, str) or not model or safe_text.problem(model) is not None:
        raise bad_line(number, "body.model", f"must be a non-empty string of text (no NUL, no lone surrogate), "
                                             f"got {shown(model)}")
    if body.get("stream") not in (None, False):
        raise bad_line(number, "body.stream", "a batch line is answered whole; leave stream out or false")
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        if not _unicode(text):   # a lone surrogate is kept as its escape: the store takes UTF-8
            text = json.dumps(body, separators=(",", ":"))
    except RecursionError:
        raise bad_line(number, "body", "nests JSON too deep") from None
    return Request(number, custom_id, url, text, model)


def _unicode(text: str) -> bool:
    """``text`` has no lone surrogate (a JSON escape of half a pair makes one; UTF-8 cannot hold it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _required(number: int, line: dict[str, Any], name: str) -> Any:
    if name not in line:
        raise bad_line(number, name, "is required")
    return line[name]


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)
