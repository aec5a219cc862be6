"""``POST /v1/rerank`` (and ``/rerank``) and ``POST /v1/moderations``: calls that score their input.

Each is a call like any other (``App.serve_chat``): API keys and their
model allowlists, presets, limits, selection among the backends whose kind
speaks the endpoint (``config/kinds``), budgets, retries and fallback before
the first byte. The answer is relayed whole (``actors/scores_relay.py``).

Rerank takes the shape Cohere, Jina and vLLM share: ``model``, ``query``,
``documents`` (strings, or objects with a string ``text``), ``top_n``,
``return_documents``; ``max_chunks_per_doc`` and ``max_tokens_per_doc`` go
to the backend untouched. Moderations take OpenAI's: ``input`` as a string,
an array of strings or an array of text and image parts, and ``model``,
which OpenAI makes optional: a body without one is routed as
``DEFAULT_MODERATION_MODEL``, written into the body the backend gets.
Every mistake is a 400 naming its field path.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.messages import Call
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import Snapshot
from switchyard.protocol.doors.openai import build_call, check_model, parse_json_object, type_name
from switchyard.protocol.http.asgi import AsgiSink, Receive, Scope, Send

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity

MAX_DOCUMENTS = 1000   # Cohere's own cap per rerank request; more is a 400 naming it
MAX_MODERATION_INPUTS = 2048   # items in one moderations 'input' array
DEFAULT_MODERATION_MODEL = "omni-moderation-latest"   # OpenAI's default when 'model' is left out
PART_TYPES = ("text", "image_url")


def _missing(field: str) -> InvalidRequest:
    return InvalidRequest(f"Missing required parameter: '{field}'", param=field, code="missing_required_parameter")


def _wrong(path: str, want: str, value: Any) -> InvalidRequest:
    return InvalidRequest(f"'{path}' must be {want}, got {type_name(value)}", param=path, code="invalid_type")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _no_stream(payload: Mapping[str, Any], endpoint: str) -> None:
    if payload.get("stream") not in (None, False):
        raise InvalidRequest(f"'stream' is not a parameter of {endpoint}: it is answered whole", param="stream",
                             code="invalid_value")


def _document(item: Any, path: str) -> None:
    if isinstance(item, str):
        return
    if not isinstance(item, dict):
        raise _wrong(path, "a string or an object with a string 'text'", item)
    text = item.get("text")
    if text is None:
        raise _missing(f"{path}.text")
    if not isinstance(text, str):
        raise _wrong(f"{path}.text", "a string", text)


def _positive(payload: Mapping[str, Any], field: str, most: int | None = None) -> None:
    value = payload.get(field)
    if value is None:
        return
    if not _is_int(value):
        raise _wrong(field, "a positive integer", value)
    if value < 1 or most is not None and value > most:
        bound = f" at most {most}" if most is not None else ""
        raise InvalidRequest(f"'{field}' must be a positive integer{bound}, got {value}", param=field,
                             code="invalid_value")


def parse_rerank(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                 request_id: str = "") -> Call:
    """The Call for a rerank body: ``model``, ``query``, ``documents`` and the options the gateway reads."""
    model = check_model(payload)
    query = payload.get("query")
    if query is None:
        raise _missing("query")
    if not isinstance(query, str):
        raise _wrong("query", "a string", query)
    if not query.strip():
        raise InvalidRequest("'query' must not be empty", param="query", code="invalid_value")
    documents = payload.get("documents")
    if documents is None:
        raise _missing("documents")
    if not isinstance(documents, list):
        raise _wrong("documents", "an array of strings or of objects with a string 'text'", documents)
    if not documents:
        raise InvalidRequest("'documents' must not be an empty array", param="documents", code="invalid_value")
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidRequest(f"'documents' holds at most {MAX_DOCUMENTS} documents here, got {len(documents)}",
                             param="documents", code="invalid_value")
    for i, item in enumerate(documents):
        _document(item, f"documents[{i}]")
    _positive(payload, "top_n", MAX_DOCUMENTS)
    _positive(payload, "max_chunks_per_doc")
    _positive(payload, "max_tokens_per_doc")
    flag = payload.get("return_documents")
    if flag is not None and not isinstance(flag, bool):
        raise _wrong("return_documents", "a boolean", flag)
    _no_stream(payload, "rerank")
    return build_call(model, False, payload, body, snapshot, headers, request_id)


def _moderation_part(item: Any, path: str) -> None:
    if not isinstance(item, dict):
        raise _wrong(path, "an object (a text or image_url part)", item)
    kind = item.get("type")
    if kind not in PART_TYPES:
        raise InvalidRequest(f"'{path}.type' must be one of {', '.join(PART_TYPES)}, got {kind!r}",
                             param=f"{path}.type", code="invalid_value")
    if kind == "text":
        if not isinstance(item.get("text"), str):
            raise _wrong(f"{path}.text", "a string", item.get("text"))
        return
    image = item.get("image_url")
    if not isinstance(image, dict):
        raise _wrong(f"{path}.image_url", "an object with a string 'url'", image)
    if not isinstance(image.get("url"), str):
        raise _wrong(f"{path}.image_url.url", "a string", image.get("url"))


def parse_moderation(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                     request_id: str = "") -> Call:
    """The Call for a moderations body: ``input`` checked; ``model`` defaulted as OpenAI does."""
    if payload.get("model") is None:
        payload = {**payload, "model": DEFAULT_MODERATION_MODEL}
        body = json.dumps(payload).encode()
    model = check_model(payload)
    value = payload.get("input")
    if value is None:
        raise _missing("input")
    if isinstance(value, list):
        if not value:
            raise InvalidRequest("'input' must not be an empty array", param="input", code="invalid_value")
        if len(value) > MAX_MODERATION_INPUTS:
            raise InvalidRequest(f"'input' holds at most {MAX_MODERATION_INPUTS} items, got {len(value)}",
                                 param="input", code="invalid_value")
        for i, item in enumerate(value):
            if isinstance(value[0], str):
                if not isinstance(item, str):
                    raise _wrong(f"input[{i}]", "a string like every item of 'input'", item)
            else:
                _moderation_part(item, f"input[{i}]")
    elif not isinstance(value, str):
        raise _wrong("input", "a string, an array of strings or an array of text and image_url parts", value)
    _no_stream(payload, "moderations")
    return build_call(model, False, payload, body, snapshot, headers, request_id)


async def rerank(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive, send: Send,
                 body: bytes) -> None:
    payload = parse_json_object(body)
    await app.serve_chat(runtime, who, scope, receive, payload, body, lambda call: AsgiSink(send, False),
                         endpoint=Endpoint.RERANK, parse=parse_rerank)


async def moderations(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                      send: Send, body: bytes) -> None:
    payload = parse_json_object(body)
    await app.serve_chat(runtime, who, scope, receive, payload, body, lambda call: AsgiSink(send, False),
                         endpoint=Endpoint.MODERATIONS, parse=parse_moderation)
