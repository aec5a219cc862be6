"""OpenAI embeddings spoken to a native gemini backend: ``:embedContent`` for one text,
``:batchEmbedContents`` for a list, and the answer back in OpenAI's list shape.

``dimensions`` becomes ``outputDimensionality``; ``encoding_format: base64``
(what the OpenAI SDK asks for by default) packs each vector as little-endian
float32, as OpenAI does. Token-id input has no Gemini counterpart and is
refused by name. Gemini reports no token counts for embeddings, so the
answer carries no ``usage`` and the ledger estimates the call's tokens.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any, Callable

import httpx

from switchyard.actors.messages import Call
from switchyard.protocol.wires.gemini_contents import invalid, unsupported
from switchyard.protocol.wires.gemini_errors import openai_error
from switchyard.protocol.wires.translated import WholeBody, translated

PASSED = frozenset({"model", "input", "dimensions", "encoding_format", "user"})


def texts(payload: dict[str, Any]) -> list[str] | str:
    """The input: one string, or a list of strings (token ids are refused)."""
    given = payload.get("input")
    if isinstance(given, str):
        return given
    if isinstance(given, list) and given and all(isinstance(t, str) for t in given):
        return given
    if isinstance(given, list) and given and all(isinstance(t, (int, list)) for t in given):
        raise unsupported("input", "Gemini embeds text, not token ids")
    raise invalid("input", "must be a string or a non-empty array of strings")


def method(payload: dict[str, Any]) -> str:
    return "embedContent" if isinstance(texts(payload), str) else "batchEmbedContents"


def embed_request(payload: dict[str, Any], model: str) -> dict[str, Any]:
    """The embedContent (one text) or batchEmbedContents (a list) body."""
    for key in sorted(payload.keys() - PASSED):
        raise unsupported(key, "Gemini's embedding methods have no such parameter")
    fmt = payload.get("encoding_format")
    if fmt not in (None, "float", "base64"):
        raise invalid("encoding_format", f"must be float or base64, got {fmt!r}")
    dims = payload.get("dimensions")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims < 1):
        raise invalid("dimensions", "must be a positive integer")
    extra = {"outputDimensionality": dims} if dims is not None else {}
    given = texts(payload)
    if isinstance(given, str):
        return {"content": {"parts": [{"text": given}]}, **extra}
    return {"requests": [{"model": f"models/{model}", "content": {"parts": [{"text": t}]}, **extra}
                         for t in given]}


def _vector(values: Any, base64_out: bool) -> Any:
    if not isinstance(values, list):
        raise ValueError("an embedding without values")
    if not base64_out:
        return values
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


class EmbeddingsTranslator(WholeBody):
    """The whole body, then OpenAI's embeddings list; anything else goes as it came."""

    def __init__(self, model: str, base64_out: bool) -> None:
        super().__init__()
        self.model, self.base64_out = model, base64_out

    def translate(self, obj: Any, raw: bytes) -> list[bytes]:
        try:
            if isinstance(obj.get("embedding"), dict):
                found = [obj["embedding"]]
            elif isinstance(obj.get("embeddings"), list):
                found = obj["embeddings"]
            else:
                return [raw]
            data = [{"object": "embedding", "index": i,
                     "embedding": _vector(e.get("values") if isinstance(e, dict) else None, self.base64_out)}
                    for i, e in enumerate(found)]
        except (ValueError, AttributeError, TypeError, struct.error):
            return [raw]    # not the shape asked for: the relay judges it as it came
        return [json.dumps({"object": "list", "data": data, "model": self.model}).encode()]


def embeddings_answer(model: str) -> Callable[[httpx.Response, Call], httpx.Response]:
    def answer(response: httpx.Response, call: Call) -> httpx.Response:
        if response.status_code >= 300:
            return openai_error(response)
        translator = EmbeddingsTranslator(model, call.payload.get("encoding_format") == "base64")
        return translated(response, translator, "application/json")
    return answer
