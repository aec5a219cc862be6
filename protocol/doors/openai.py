"""OpenAI shapes: validate a chat-completions body into a Call; build the model-list bodies.

Validation is deliberately shallow: the fields the router itself reads
(``model``, ``messages``, ``stream``, ``user``) must be right, and each
mistake names its path (``messages[2].role``). Everything else goes to the
backend untouched; it is the authority on its own parameters.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from switchyard.actors import safe_text
from switchyard.actors.errors import InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.routing.listing import ListedModel
from switchyard.config.metadata import ModelMetadata
from switchyard.config.names import MAX_NAME_LENGTH
from switchyard.config.schema import Snapshot
from switchyard.protocol.doors import mcp_tools
from switchyard.protocol.http import client_json

_BACKEND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
# The longest ``model`` a door takes (the spec's limit, in characters): name resolution stops
# working on longer names anyway, and nothing a backend serves is that long.
MAX_MODEL_LENGTH = MAX_NAME_LENGTH


def type_name(value: Any) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def parse_json_object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        raise InvalidRequest("Request body is empty; expected a JSON object", code="invalid_json")
    try:
        payload = client_json.loads(body)   # nesting past client_json.MAX_DEPTH is a 400 of its own
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"Request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(payload, dict):
        raise InvalidRequest(f"Request body must be a JSON object, got {type_name(payload)}", code="invalid_json")
    return payload


def parse_chat(body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes], request_id: str = "") -> Call:
    return parse_chat_payload(parse_json_object(body), body, snapshot, headers, request_id)


def parse_chat_payload(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                       request_id: str = "") -> Call:
    """The Call for ``payload`` (already parsed; ``body`` is its serialized form, sent as is when nothing changes)."""
    model = check_model(payload)
    messages = payload.get("messages")
    if messages is None:
        raise InvalidRequest("Missing required parameter: 'messages'", param="messages",
                             code="missing_required_parameter")
    if not isinstance(messages, list):
        raise InvalidRequest(f"'messages' must be an array, got {type_name(messages)}", param="messages",
                             code="invalid_type")
    if not messages:
        raise InvalidRequest("'messages' must contain at least one message", param="messages",
                             code="invalid_value")
    for i, msg in enumerate(messages):
        _check_message(msg, f"messages[{i}]")
    call = build_call(model, check_stream(payload), payload, body, snapshot, headers, request_id)
    return mcp_tools.checked(call, headers, chat=True)


def check_model(payload: Mapping[str, Any]) -> str:
    """``payload["model"]``, a non-empty string of at most ``MAX_MODEL_LENGTH`` characters; else the 400
    naming it. Every OpenAI-shaped door (and the Messages door's translated call) reads its model here."""
    model = payload.get("model")
    if model is None:
        raise InvalidRequest("Missing required parameter: 'model'", param="model", code="missing_required_parameter")
    if not isinstance(model, str) or not model:
        raise InvalidRequest(f"'model' must be a non-empty string, got {type_name(model)}", param="model",
                             code="invalid_type")
    check_model_name(model)
    return model


def check_model_name(model: str) -> None:
    """A ``model`` longer than ``MAX_MODEL_LENGTH`` characters, or that is not valid text (a lone surrogate,
    a NUL: nothing a backend serves, and nothing a store or a metric label can encode), is a 400 naming it
    (the realtime door's query too)."""
    if len(model) > MAX_MODEL_LENGTH:
        raise InvalidRequest(f"'model' must be at most {MAX_MODEL_LENGTH} characters, got {len(model)}",
                             param="model", code="invalid_value")
    problem = safe_text.problem(model)
    if problem is not None:
        raise InvalidRequest(f"'model' must be valid text; it {problem}", param="model", code="invalid_value")


def check_stream(payload: Mapping[str, Any]) -> bool:
    """``payload["stream"]``: a boolean, absent or null meaning False; else the 400 naming it."""
    stream = payload.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise InvalidRequest(f"'stream' must be a boolean, got {type_name(stream)}", param="stream",
                             code="invalid_type")
    return stream


def pin_of(headers: Mapping[bytes, bytes]) -> str | None:
    """The backend an ``x-backend`` header pins the call to (None without one); a malformed name is a 400."""
    pin = headers.get(b"x-backend")
    if pin is None:
        return None
    name = pin.decode("latin-1").strip()
    if not _BACKEND_NAME.fullmatch(name):
        raise InvalidRequest("The 'x-backend' header must name a backend: 1-64 letters, digits, '.', '_' "
                             "or '-'", param="x-backend", code="invalid_value")
    return name


def build_call(model: str, stream: bool, payload: dict[str, Any], body: bytes, snapshot: Snapshot,
               headers: Mapping[bytes, bytes], request_id: str) -> Call:
    """The Call once the endpoint's own fields are checked: ``user``, ``stream_options``, the hash key and
    the ``x-backend`` pin."""
    user = payload.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidRequest(f"'user' must be a string, got {type_name(user)}", param="user", code="invalid_type")
    options = payload.get("stream_options")   # read by the gateway (usage metering, translated streams)
    if options is not None and not isinstance(options, dict):
        raise InvalidRequest(f"'stream_options' must be an object, got {type_name(options)}",
                             param="stream_options", code="invalid_type")
    header = headers.get(snapshot.consistent_hash.key_header.encode())
    hash_key = header.decode("latin-1") if header else user
    return Call(model=model, stream=stream, body=body, payload=payload, snapshot=snapshot, hash_key=hash_key,
                request_id=request_id, pin=pin_of(headers))


def _check_message(msg: Any, path: str) -> None:
    if not isinstance(msg, dict):
        raise InvalidRequest(f"'{path}' must be an object, got {type_name(msg)}", param=path, code="invalid_type")
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
                             f"got {type_name(content)}", param=f"{path}.content", code="invalid_type")


# --- text completions and embeddings ------------------------------------------------------
#
# Both take their input as text or as token ids: a string, an array of strings, one array of
# token ids, or an array of token-id arrays. The router reads only ``model``, ``stream`` and
# ``user``; the input is checked for its shape alone, since a wrong one is the client's mistake
# whatever backend answers it.

TEXT_OR_TOKENS = "a string, an array of strings, an array of token ids or an array of token-id arrays"
ENCODING_FORMATS = ("float", "base64")


def parse_completions_payload(payload: dict[str, Any], body: bytes, snapshot: Snapshot,
                              headers: Mapping[bytes, bytes], request_id: str = "") -> Call:
    """The Call for a ``POST /v1/completions`` body: ``model``, ``prompt`` and ``stream`` checked."""
    model = check_model(payload)
    _check_text_or_tokens(payload, "prompt", empty_text=True)
    _refuse_messages(payload, "text completions", "prompt")
    return build_call(model, check_stream(payload), payload, body, snapshot, headers, request_id)


def parse_embeddings_payload(payload: dict[str, Any], body: bytes, snapshot: Snapshot,
                             headers: Mapping[bytes, bytes], request_id: str = "") -> Call:
    """The Call for a ``POST /v1/embeddings`` body: always answered whole, never streamed."""
    model = check_model(payload)
    _check_text_or_tokens(payload, "input", empty_text=False)
    _refuse_messages(payload, "embeddings", "input")
    if payload.get("stream") not in (None, False):
        raise InvalidRequest("'stream' is not a parameter of embeddings: they are answered whole",
                             param="stream", code="invalid_value")
    fmt = payload.get("encoding_format")
    if fmt is not None and not isinstance(fmt, str):
        raise InvalidRequest(f"'encoding_format' must be a string, got {type_name(fmt)}", param="encoding_format",
                             code="invalid_type")
    if fmt is not None and fmt not in ENCODING_FORMATS:
        raise InvalidRequest(f"'encoding_format' must be one of {', '.join(ENCODING_FORMATS)}, got {fmt!r}",
                             param="encoding_format", code="invalid_value")
    dimensions = payload.get("dimensions")
    if dimensions is not None and not _is_int(dimensions):
        raise InvalidRequest(f"'dimensions' must be a positive integer, got {type_name(dimensions)}",
                             param="dimensions", code="invalid_type")
    if dimensions is not None and dimensions < 1:
        raise InvalidRequest(f"'dimensions' must be a positive integer, got {dimensions}", param="dimensions",
                             code="invalid_value")
    return build_call(model, False, payload, body, snapshot, headers, request_id)


def _refuse_messages(payload: Mapping[str, Any], endpoint: str, field: str) -> None:
    """Chat ``messages`` sent to another endpoint: refused by name, since whatever of ours reads a body by
    shape (the token estimate, the guardrails, the classifiers) would read them as a chat's."""
    if "messages" in payload:
        raise InvalidRequest(f"'messages' is not a parameter of {endpoint} (they take '{field}'); send chat "
                             f"messages to /v1/chat/completions", param="messages", code="invalid_value")


def _check_text_or_tokens(payload: dict[str, Any], field: str, empty_text: bool) -> None:
    """``payload[field]`` is text or token ids; the first mistake is named by its path (``input[2][0]``).

    An array takes the kind of its first item, and every item must be of that kind."""
    value = payload.get(field)
    if value is None:
        raise InvalidRequest(f"Missing required parameter: '{field}'", param=field, code="missing_required_parameter")
    if isinstance(value, str):
        _check_text(value, field, empty_text)
        return
    if not isinstance(value, list):
        raise InvalidRequest(f"'{field}' must be {TEXT_OR_TOKENS}, got {type_name(value)}", param=field,
                             code="invalid_type")
    if not value:
        raise InvalidRequest(f"'{field}' must not be an empty array", param=field, code="invalid_value")
    first = value[0]
    for i, item in enumerate(value):
        path = f"{field}[{i}]"
        if isinstance(first, str):
            if not isinstance(item, str):
                raise InvalidRequest(f"'{path}' must be a string like every item of '{field}', got {type_name(item)}",
                                     param=path, code="invalid_type")
            _check_text(item, path, empty_text)
        elif isinstance(first, list):
            if not isinstance(item, list):
                raise InvalidRequest(f"'{path}' must be an array of token ids like every item of '{field}', "
                                     f"got {type_name(item)}", param=path, code="invalid_type")
            if not item:
                raise InvalidRequest(f"'{path}' must not be an empty array", param=path, code="invalid_value")
            for j, token in enumerate(item):
                _check_token(token, f"{path}[{j}]")
        elif _is_int(first):
            _check_token(item, path)
        else:
            raise InvalidRequest(f"'{path}' must be a string, a token id or an array of token ids, got "
                                 f"{type_name(item)}", param=path, code="invalid_type")


def _check_text(text: str, path: str, empty_ok: bool) -> None:
    if not text and not empty_ok:
        raise InvalidRequest(f"'{path}' must not be an empty string", param=path, code="invalid_value")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_token(value: Any, path: str) -> None:
    if not _is_int(value):
        raise InvalidRequest(f"'{path}' must be a token id (a non-negative integer), got {type_name(value)}",
                             param=path, code="invalid_type")
    if value < 0:
        raise InvalidRequest(f"'{path}' must be a token id (a non-negative integer), got {value}", param=path,
                             code="invalid_value")


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
