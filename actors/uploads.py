"""The files a multipart/form-data call uploads, and the form an attempt sends a backend.

``/v1/images/edits``, ``/variations``, ``/v1/audio/transcriptions`` and
``/translations`` take the OpenAI API's multipart form: text fields
(``model``, ``prompt``, ``n`` ...) and files (``image``, ``mask``, ``file``).
The door parses it once (``protocol/http/multipart.py``):
the text fields become the Call's ``payload``, like any JSON call's, so
selection, alias dispatch, ``upstream_id`` and a fallback hop's trimming
work on them unchanged; the files travel beside them, untouched. Every
attempt's form is built anew from the attempt's fields and the same files,
so a backend always receives the model name meant for it.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Mapping

from attrs import frozen


@frozen
class Upload:
    """One file part of the client's form, as it came."""

    field: str                 # the form field's name: image, image[], mask
    filename: str
    content_type: str          # as the client labelled it (application/octet-stream when it did not)
    data: bytes


@frozen
class Uploads:
    """A call's files, and the boundary its forms are written with (never found inside any file)."""

    files: tuple[Upload, ...]
    boundary: str

    @classmethod
    def of(cls, files: tuple[Upload, ...]) -> "Uploads":
        while True:
            boundary = "switchyard-" + secrets.token_hex(16)
            marker = boundary.encode()
            if not any(marker in f.data for f in files):
                return cls(files, boundary)

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    @property
    def size(self) -> int:
        return sum(len(f.data) for f in self.files)


def _text(value: Any) -> str:
    """A field's value as form text: strings as they are, numbers and booleans as JSON writes them."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _quoted(value: str) -> str:
    """A name or filename inside a quoted Content-Disposition parameter (the HTML form encoding)."""
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def encode_form(fields: Mapping[str, Any], uploads: Uploads) -> bytes:
    """``fields`` (text) and ``uploads``' files as one multipart/form-data body with its boundary."""
    dash = b"--" + uploads.boundary.encode()
    out: list[bytes] = []
    for name, value in fields.items():
        if value is None:
            continue
        for item in value if isinstance(value, list) and name.endswith("[]") else (value,):   # one part per item
            out += [dash, b"\r\n", f'Content-Disposition: form-data; name="{_quoted(name)}"\r\n\r\n'.encode(),
                    _text(item).encode(), b"\r\n"]
    for f in uploads.files:
        head = (f'Content-Disposition: form-data; name="{_quoted(f.field)}"; filename="{_quoted(f.filename)}"\r\n'
                f"Content-Type: {f.content_type}\r\n\r\n")
        out += [dash, b"\r\n", head.encode(), f.data, b"\r\n"]
    out += [dash, b"--\r\n"]
    return b"".join(out)

