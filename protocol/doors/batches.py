"""The Batch API: ``POST``/``GET /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.

A batch is made of one of the key's input files (``/v1/files``) whose lines
all call ``endpoint``; ``actors/batches/service.py`` relays it to an OpenAI
or Azure backend or keeps it for the gateway's runners. The body is checked
here field by field (a 400 naming the field); another key's batch id
answers exactly as an unknown one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.response_owners import owner_of
from switchyard.protocol.doors import batch_queries as q
from switchyard.protocol.doors.openai import parse_json_object
from switchyard.protocol.http.asgi import Receive, Scope, Send

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity

PATH = "/v1/batches"
PREFIX = "/v1/batches/"
_ITEM = re.compile(rf"/v1/batches/{q.ID}(/cancel)?")
ACTIONS = {("GET", ""): "retrieve", ("POST", "/cancel"): "cancel"}
FIELDS = ("input_file_id", "endpoint", "completion_window", "metadata")
MAX_LIST = 100
DEFAULT_LIST = 20
# metadata: OpenAI's bounds
MAX_PAIRS, MAX_KEY, MAX_VALUE = 16, 64, 512


async def create(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive, send: Send,
                 body: bytes) -> None:
    """``POST /v1/batches``: the openai SDK's ``Batch``."""
    q.served(runtime.snapshot, scope)
    q.query(scope, ())
    payload = parse_json_object(body)
    for name in payload:
        if name not in FIELDS:
            detail = "; output files are kept for batches.file_retention" if name == "output_expires_after" else ""
            raise InvalidRequest(f"{name}: unknown parameter (a batch takes {', '.join(FIELDS)}){detail}", param=name,
                                 code="unknown_parameter")
    input_file_id, endpoint, window = (_text(payload, name) for name in FIELDS[:3])
    if re.fullmatch(q.ID, input_file_id) is None:   # the store takes no NUL; no id of ours has other characters
        raise InvalidRequest(f"input_file_id: must be the id of a file uploaded to /v1/files, got "
                             f"{input_file_id[:200]!r}", param="input_file_id", code="invalid_value")
    key = who.key_now(runtime.snapshot)
    batch = await runtime.batches.create(owner_of(key), input_file_id, endpoint, window,
                                         _metadata(payload.get("metadata")), key)
    await q.answer(send, batch.body())


async def listing(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                  send: Send) -> None:
    """``GET /v1/batches``: the key's batches, newest first, a page of ``limit`` past ``after``."""
    q.served(runtime.snapshot, scope)
    params = q.query(scope, ("limit", "after"))
    limit = q.whole(params, "limit", 1, MAX_LIST, DEFAULT_LIST)
    page = await runtime.batches.batches(q.owner(runtime, who), q.after(params), limit)
    await q.answer(send, q.list_body(page))


async def item(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
               send: Send) -> None:
    """``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel``."""
    q.served(runtime.snapshot, scope)
    batch_id, action = q.path_id(_ITEM, scope, ACTIONS)
    q.query(scope, ())
    owner = q.owner(runtime, who)
    if action == "retrieve":
        batch = await runtime.batches.batch(owner, batch_id)
    else:
        batch = await runtime.batches.cancel(owner, batch_id)
    await q.answer(send, batch.body())


def _text(payload: dict[str, Any], name: str) -> str:
    value = payload.get(name)
    if value is None:
        raise InvalidRequest(f"{name}: is required", param=name, code="missing_required_parameter")
    if not isinstance(value, str):
        raise InvalidRequest(f"{name}: must be a string, got {type(value).__name__}", param=name,
                             code="invalid_type")
    return value


def _metadata(value: Any) -> dict[str, str]:
    """Up to 16 pairs of strings, keys up to 64 characters, values up to 512; null: none."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest(f"metadata: must be an object of strings, got {type(value).__name__}",
                             param="metadata", code="invalid_type")
    if len(value) > MAX_PAIRS:
        raise InvalidRequest(f"metadata: at most {MAX_PAIRS} pairs, got {len(value)}", param="metadata",
                             code="invalid_value")
    for key, text in value.items():
        if len(key) > MAX_KEY:
            raise InvalidRequest(f"metadata: the key {key[:MAX_KEY]!r}... has {len(key)} characters; at most "
                                 f"{MAX_KEY}", param="metadata", code="invalid_value")
        if not isinstance(text, str) or len(text) > MAX_VALUE:
            raise InvalidRequest(f"metadata.{key}: must be a string of at most {MAX_VALUE} characters",
                                 param=f"metadata.{key}", code="invalid_value")
    return dict(value)
