"""OpenAI shapes: validate a chat-completions body into a Call; build the model-list bodies.

Validation is deliberately shallow: the fields the router itself reads
(``model``, ``messages``, ``stream``, ``user``) must be right, and each
mistake names its path (``messages[2].role``). Everything else goes to the
backend untouched; it is the authority on its own parameters.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping, Sequence

from actors.messages import Call
from actors.routing.listing import ListedModel
from config.metadata import ModelMetadata
from config.schema import Snapshot
from protocol.errors import InvalidRequest

_BACKEND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def _type(value: Any) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def parse_json_object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        raise InvalidRequest("Request body is empty; expected a JSON object", code="invalid_json")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"Request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(payload, dict):
        raise InvalidRequest(f"Request body must be a JSON object, got {_type(payload)}", code="invalid_json")
    return payload


def parse_chat(body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes], request_id: str = "") -> Call:
    return parse_chat_payload(parse_json_object(body), body, snapshot, headers, request_id)


def parse_chat_payload(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                       request_id: str = "") -> Call:
    """The Call for ``payload`` (already parsed; ``body`` is its serialized form, sent as is when nothing changes)."""
    model = payload.get("model")
    if model is None:
        raise InvalidRequest("Missing required parameter: 'model'", param="model", code="missing_required_parameter")
    if not isinstance(model, str) or not model:
        raise InvalidRequest(f"'model' must be a non-empty string, got {_type(model)}", param="model",
                             code="invalid_type")
    messages = payload.get("messages")
    if messages is None:
        raise InvalidRequest("Missing required parameter: 'messages'", param="messages",
                             code="missing_required_parameter")
    if not isinstance(messages, list):
        raise InvalidRequest(f"'messages' must be an array, got {_type(messages)}", param="messages",
                             code="invalid_type")
    if not messages:
        raise InvalidRequest("'messages' must contain at least one message", param="messages",
                             code="invalid_value")
    for i, msg in enumerate(messages):
        _check_message(msg, f"messages[{i}]")
    stream = payload.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise InvalidRequest(f"'stream' must be a boolean, got {_type(stream)}", param="stream", code="invalid_type")
    user = payload.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidRequest(f"'user' must be a string, got {_type(user)}", param="user", code="invalid_type")
    header = headers.get(snapshot.consistent_hash.key_header.encode())
    hash_key = header.decode("latin-1") if header else user
    pin = headers.get(b"x-backend")
    if pin is not None:
        pin_text = pin.decode("latin-1").strip()
        if not _BACKEND_NAME.fullmatch(pin_text):
            raise InvalidRequest("The 'x-backend' header must name a backend: 1-64 letters, digits, '.', '_' "
                                 "or '-'", param="x-backend", code="invalid_value")
    return Call(model=model, stream=stream, body=body, payload=payload, snapshot=snapshot, hash_key=hash_key,
                request_id=request_id, pin=pin_text if pin is not None else None)


def _check_message(msg: Any, path: str) -> None:
    if not isinstance(msg, dict):
        raise InvalidRequest(f"'{path}' must be an object, got {_type(msg)}", param=path, code="invalid_type")
    role = msg.get("role")
    if role is None:
        raise InvalidRequest(f"Missing required parameter: '{path}.role'", param=f"{path}.role",
                             code="missing_required_parameter")
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidRequest(f"'{path}.role' must be one of {', '.join(sorted(ROLES))}, got {role!r}",
                             param=f"{path}.role", code="invalid_value")
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise InvalidRequest(f"'{path}.content' must be a string, an array of content parts or null, "
                             f"got {_type(content)}", param=f"{path}.content", code="invalid_type")


# --- the model list ---------------------------------------------------------------------
#
# Three shapes over the same rows (``actors/routing/listing.py``):
#
# - ``GET /v1/models``: OpenAI's ``id``, ``object``, ``created``, ``owned_by``, our
#   ``backends``, and ``metadata`` in the spec's short form (below) when the id resolved
#   to a catalogue entry that sets any of those fields;
# - ``GET /v1/models/extended`` and ``GET /v1/models/{model}``: the same keys, ``metadata``
#   in full (every field that is set), ``resolution`` (which entry, by which stage, and
#   whose ``model_configs`` layer is merged in) and ``backend_status`` (each serving
#   backend's health state and its circuit for this model).

# The spec's /v1/models response names exactly these metadata fields; the rest
# (image pricing, long_context, image limits, thinking, ...) is /v1/models/extended's.
SHORT_METADATA = ("display_name", "summary", "capabilities", "knowledge_cutoff")
SHORT_PRICING = ("input_tokens", "output_tokens")
SHORT_LIMITS = ("context_window", "max_output")

BackendStatus = Callable[[str, str], Mapping[str, Any]]   # (backend, model) -> status object


def short_metadata(metadata: ModelMetadata) -> dict[str, Any]:
    """The spec's /v1/models ``metadata``: the fields it names that are set; {} when none is."""
    full = metadata.to_dict()
    out = {k: full[k] for k in SHORT_METADATA if k in full}
    pricing = {k: v for k, v in full.get("pricing", {}).items() if k in SHORT_PRICING}
    if pricing:
        out["pricing"] = pricing
    limits = {k: v for k, v in full.get("limits", {}).items() if k in SHORT_LIMITS}
    if limits:
        out["limits"] = limits
    return out


def model_object(m: ListedModel) -> dict[str, Any]:
    """One ``GET /v1/models`` row: OpenAI's Model object plus ``backends`` and, when known, ``metadata``."""
    obj: dict[str, Any] = {"id": m.id, "object": "model", "created": 0, "owned_by": m.backends[0],
                           "backends": list(m.backends)}
    if m.entry is not None:
        short = short_metadata(m.entry.metadata)
        if short:
            obj["metadata"] = short
    return obj


def model_object_extended(m: ListedModel, status: BackendStatus) -> dict[str, Any]:
    """One ``/v1/models/extended`` row (also ``/v1/models/{model}``'s body)."""
    obj: dict[str, Any] = {"id": m.id, "object": "model", "created": 0, "owned_by": m.backends[0],
                           "backends": list(m.backends)}
    if m.entry is not None and m.resolution is not None:
        obj["metadata"] = m.entry.metadata.to_dict()
        obj["resolution"] = {"entry_id": m.resolution.entry_id, "stage": m.resolution.stage.name,
                             "matched": m.resolution.matched, "backend_layer": m.backend_layer}
        if m.alias_of is not None:
            obj["resolution"]["alias_of"] = m.alias_of
    else:
        obj["metadata"] = None
        obj["resolution"] = None
    obj["backend_status"] = [{"name": name, **status(name, m.id)} for name in m.backends]
    return obj


def model_list(listing: Sequence[ListedModel]) -> dict[str, Any]:
    return {"object": "list", "data": [model_object(m) for m in listing]}


def model_list_extended(listing: Sequence[ListedModel], status: BackendStatus) -> dict[str, Any]:
    return {"object": "list", "data": [model_object_extended(m, status) for m in listing]}
