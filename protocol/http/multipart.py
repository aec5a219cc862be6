"""Reading a multipart/form-data body (the OpenAI API's image uploads) into text fields and files.

The body was already read whole under its size limit (``server.max_upload_bytes``);
python-multipart (the parser Starlette and FastAPI use) splits it. What is
not a well-formed form is a 400 that says what is wrong: no boundary, a part
without a name, a text field sent twice (but a ``name[]`` field, an array the
OpenAI SDK sends one part per item, becomes a list), a field that is not UTF-8, a body
that ends before its closing boundary.
"""

from __future__ import annotations

from typing import Any

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from switchyard.actors.errors import BodyTooLarge, InvalidRequest
from switchyard.actors.uploads import Upload
from switchyard.config.schema import ServerConfig
from switchyard.protocol.http.asgi import Receive, Scope, read_body

OCTET_STREAM = "application/octet-stream"
MAX_PARTS = 64     # fields and files in one form: an edit has a dozen at most


def _bad(message: str, param: str | None = None) -> InvalidRequest:
    return InvalidRequest(message, param=param, code="invalid_multipart")


def boundary_of(content_type: str) -> bytes:
    """The boundary a ``multipart/form-data`` content type names; else the 400 saying what it is instead."""
    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data":
        raise InvalidRequest(f"This endpoint takes multipart/form-data (the OpenAI SDK's upload form), "
                             f"got content-type {content_type or '(none)'!r}", param="content-type",
                             code="invalid_content_type")
    boundary = options.get(b"boundary")
    if not boundary or len(boundary) > 200:
        raise _bad("The multipart/form-data content-type names no boundary (or one over 200 bytes)",
                   "content-type")
    return boundary


class _Form:
    """The parser's callbacks, collecting each part's headers and bytes."""

    def __init__(self) -> None:
        self.parts: list[tuple[dict[bytes, bytes], bytes]] = []
        self.headers: dict[bytes, bytes] = {}
        self.field = b""
        self.value = b""
        self.data: list[bytes] = []
        self.ended = False

    def callbacks(self) -> Any:
        def on_part_begin() -> None:
            if len(self.parts) >= MAX_PARTS:
                raise _bad(f"The form has more than {MAX_PARTS} parts")
            self.headers, self.data = {}, []

        def on_header_field(data: bytes, start: int, end: int) -> None:
            self.field += data[start:end]

        def on_header_value(data: bytes, start: int, end: int) -> None:
            self.value += data[start:end]

        def on_header_end() -> None:
            self.headers[self.field.lower()] = self.value
            self.field, self.value = b"", b""

        def on_part_data(data: bytes, start: int, end: int) -> None:
            self.data.append(data[start:end])

        def on_part_end() -> None:
            self.parts.append((self.headers, b"".join(self.data)))

        def on_end() -> None:
            self.ended = True
        return {"on_part_begin": on_part_begin, "on_header_field": on_header_field,
                "on_header_value": on_header_value, "on_header_end": on_header_end,
                "on_part_data": on_part_data, "on_part_end": on_part_end, "on_end": on_end}


def _header_text(value: bytes, what: str) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(f"A part's {what} is not UTF-8") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise _bad(f"A part's {what} holds a control character")
    return text


def parse_form(body: bytes, content_type: str) -> tuple[dict[str, str | list[str]], tuple[Upload, ...]]:
    """``body`` as (text fields by name, files in the order sent); a malformed form is a 400."""
    form = _Form()
    parser = MultipartParser(boundary_of(content_type), form.callbacks())
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError as exc:
        raise _bad(f"The multipart/form-data body is malformed: {exc}") from None
    if not form.ended:
        raise _bad("The multipart/form-data body ends before its closing boundary")
    fields: dict[str, str | list[str]] = {}
    files: list[Upload] = []
    for headers, data in form.parts:
        kind, options = parse_options_header(headers.get(b"content-disposition", b""))
        name = options.get(b"name")
        if kind != b"form-data" or not name:
            raise _bad("Every part of the form needs a Content-Disposition: form-data header with a name")
        field = _header_text(name, "name")
        filename = options.get(b"filename")
        if filename is not None:
            ctype = headers.get(b"content-type")
            files.append(Upload(field, _header_text(filename, "filename") or field,
                                _header_text(ctype, "content-type") if ctype else OCTET_STREAM, data))
            continue
        if field in fields and not field.endswith("[]"):
            raise _bad(f"The form field '{field}' is sent twice", field)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(f"The form field '{field}' is not UTF-8 text", field) from None
        if field.endswith("[]"):
            items = fields.setdefault(field, [])
            assert isinstance(items, list)
            items.append(text)
        else:
            fields[field] = text
    return fields, tuple(files)


async def read_upload(scope: Scope, receive: Receive, server: ServerConfig) -> bytes:
    """A file upload's whole body, bounded by ``server.max_upload_bytes`` (not ``max_body_bytes``:
    images and audio are larger than any JSON call); over it, the 413 names the setting."""
    try:
        return await read_body(scope, receive, server.max_upload_bytes, server)
    except BodyTooLarge as err:
        raise BodyTooLarge(f"{err.message} for a file upload (server.max_upload_bytes)") from None
