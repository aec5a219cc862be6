"""What the simulated backend answers on ``/v1/images/generations``, ``/edits`` and ``/variations``.

OpenAI's images answer: ``created`` and one ``data`` item per image asked
(``n``), each a real PNG, small and valid (a 2x2 image in a colour derived
from the model and the prompt, so a test can tell answers apart), as
``b64_json`` or as a ``data:`` URL for ``response_format: url`` (gpt-image
models always answer ``b64_json``). The gpt-image models also report their
token ``usage`` and the ``size``/``quality`` they used, as OpenAI's do.
Edits and variations come as multipart forms (``protocol/http/multipart.py``);
a form without its ``image`` file is the 400 OpenAI answers.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import time
import zlib
from typing import Any

import httpx

from switchyard.actors.errors import InvalidRequest
from switchyard.config.simulation import Simulation
from switchyard.protocol.http.multipart import parse_form
from switchyard.protocol.simulated.parts import Simulator

IMAGE_PATHS = ("/images/generations", "/images/edits", "/images/variations")


def png(rgb: tuple[int, int, int], side: int = 2) -> bytes:
    """A valid ``side`` x ``side`` PNG in one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes(rgb) * side for _ in range(side))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def image_for(model: str, prompt: str, index: int) -> bytes:
    """The simulated image ``index`` of an answer: its colour derived from the model and prompt."""
    digest = hashlib.sha256(f"{model}\n{prompt}\n{index}".encode()).digest()
    return png((digest[0], digest[1], digest[2]))


def _count(value: Any) -> int:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def answer(owner: Simulator, sim: Simulation, path: str, body: dict[str, Any],
           files: tuple[Any, ...] = ()) -> httpx.Response:
    """The answer to an images request (``body``: its JSON, or a form's text fields; ``files``: a form's files)."""
    model = str(body.get("model") or "dall-e-2")
    if not path.endswith("/generations") and not any(f.field in ("image", "image[]") for f in files):
        owner.record("invalid")
        return httpx.Response(400, json={"error": {"message": "Missing required file: image", "param": "image",
                                                   "type": "invalid_request_error", "code": None}})
    prompt = str(body.get("prompt") or "")
    n = _count(body.get("n"))
    gpt_image = model.startswith("gpt-image")
    as_url = body.get("response_format") == "url" and not gpt_image
    data = []
    for i in range(n):
        encoded = base64.b64encode(image_for(model, prompt, i)).decode("ascii")
        item: dict[str, Any] = {"url": "data:image/png;base64," + encoded} if as_url else {"b64_json": encoded}
        if model.startswith("dall-e-3"):
            item["revised_prompt"] = prompt
        data.append(item)
    reply: dict[str, Any] = {"created": int(time.time()), "data": data}
    if gpt_image:
        text_tokens = max(1, len(prompt) // 4)
        image_tokens = 65 * len(files)
        reply.update(size=body.get("size") or "1024x1024", quality=body.get("quality") or "high",
                     output_format="png", background="opaque",
                     usage={"input_tokens": text_tokens + image_tokens, "output_tokens": 272 * n,
                            "total_tokens": text_tokens + image_tokens + 272 * n,
                            "input_tokens_details": {"text_tokens": text_tokens, "image_tokens": image_tokens}})
    owner.record("completed")
    return httpx.Response(200, headers={**sim.response_headers, "content-type": "application/json"}, json=reply)


def form_of(request: httpx.Request) -> tuple[dict[str, Any], tuple[Any, ...]] | None:
    """A multipart request's (text fields, files), None when it is not a form; a malformed one is ({}, ())."""
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        return None
    try:
        fields, files = parse_form(request.content, ctype)
    except InvalidRequest:
        return {}, ()
    return dict(fields), files
