"""``POST /v1/responses``: the Responses API, routed like chat and relayed unchanged.

The body is validated where the router reads it (``model``, ``input``,
``stream``, ``user``, ``instructions``, ``tools``, ``tool_choice``,
``metadata``: each mistake names its path) and judged by the
``responses_tools`` policy, then runs the chat pipeline
(``App.serve_chat``): keys, presets, provider preferences, admission,
selection, budgets, retries and fallback chains. A backend with the
Responses API (``actors/wire.py``: ``RESPONSES_API_TYPES``) answers as it
sends, JSON or its event stream (``actors/responses_relay.py``); any other
backend is spoken to as chat, its answer translated into the Responses
shapes (``protocol/wires/responses_on_chat.py``). Compaction has no chat
form: only the Responses API's types are candidates for it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Mapping

from switchyard.actors.errors import GatewayError, InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.wire import RESPONSES_API_TYPES
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import Snapshot
from switchyard.protocol.doors import mcp_tools
from switchyard.protocol.doors.openai import build_call, check_model, check_stream, parse_json_object, type_name
from switchyard.protocol.doors.responses_tools import enforce
from switchyard.protocol.http.asgi import AsgiSink, Receive, Scope, Send

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity

_SEQUENCE = re.compile(rb'"sequence_number":\s*(\d+)')
ROLES = ("user", "assistant", "system", "developer")


async def responses(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                    send: Send, body: bytes) -> None:
    payload = parse_json_object(body)
    await app.serve_chat(runtime, who, scope, receive, payload, body,
                         lambda call: ResponsesSink(send, call.stream), endpoint=Endpoint.RESPONSES,
                         parse=parse_responses_payload)


async def compact(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                  send: Send, body: bytes) -> None:
    """``POST /v1/responses/compact``: routed like ``/v1/responses`` (aliases, keys, selection, failover),
    answered with the backend's ``response.compaction`` object; it has no stream."""
    payload = parse_json_object(body)
    await app.serve_chat(runtime, who, scope, receive, payload, body, lambda call: ResponsesSink(send, False),
                         endpoint=Endpoint.COMPACT, parse=parse_compact_payload)


def _check(payload: Mapping[str, Any], key: str, *kinds: str) -> Any:
    """``payload[key]`` when absent, null or one of ``kinds``; else the 400 naming it."""
    value = payload.get(key)
    if value is not None and type_name(value) not in kinds:
        wanted = " or ".join(f"an {k}" if k[0] in "aeio" else f"a {k}" for k in kinds)
        raise InvalidRequest(f"'{key}' must be {wanted}, got {type_name(value)}", param=key, code="invalid_type")
    return value


def parse_responses_payload(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                            request_id: str = "") -> Call:
    """The Call for a Responses body; the serve_chat ``parse`` of the ``responses`` endpoint."""
    model = check_model(payload)
    items = _check(payload, "input", "string", "array")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        _check_item(item, f"input[{i}]")
    stream = check_stream(payload)
    _check(payload, "user", "string")   # checked again by build_call; here so its 400 comes before the tools'
    _check(payload, "instructions", "string")
    _check(payload, "tools", "array")
    _check(payload, "tool_choice", "string", "object")
    _check(payload, "reasoning", "object")   # read by the gateway's bridge and every backend
    metadata = _check(payload, "metadata", "object")
    for key, value in (metadata or {}).items():
        if not isinstance(value, str):
            raise InvalidRequest(f"'metadata.{key}' must be a string, got {type_name(value)}", param=f"metadata.{key}",
                                 code="invalid_type")
    enforce(payload, snapshot.responses_tools)
    call = build_call(model, stream, payload, body, snapshot, headers, request_id)
    return mcp_tools.checked(call, headers, chat=False)


def parse_compact_payload(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                          request_id: str = "") -> Call:
    """The Call for a compaction body (``model``; ``input``, ``instructions``, ``previous_response_id``)."""
    model = check_model(payload)
    items = _check(payload, "input", "string", "array")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        _check_item(item, f"input[{i}]")
    _check(payload, "instructions", "string")
    _check(payload, "previous_response_id", "string")
    if payload.get("stream") is not None:
        raise InvalidRequest("'stream' is not a parameter of /v1/responses/compact; a compaction is answered whole",
                             param="stream", code="unknown_parameter")
    enforce(payload, snapshot.responses_tools)
    call = build_call(model, False, payload, body, snapshot, headers, request_id)
    _check_pin(call.pin, snapshot)
    return call


def _check_item(item: Any, path: str) -> None:
    if isinstance(item, str):   # not an item at all
        raise InvalidRequest(f"'{path}' must be an object (an input item), got string", param=path,
                             code="invalid_type")
    if not isinstance(item, dict):
        raise InvalidRequest(f"'{path}' must be an object (an input item), got {type_name(item)}", param=path,
                             code="invalid_type")
    kind = item.get("type")
    if kind is not None and not isinstance(kind, str):
        raise InvalidRequest(f"'{path}.type' must be a string, got {type_name(kind)}", param=f"{path}.type",
                             code="invalid_type")
    if kind in (None, "message"):
        role = item.get("role")
        if role is None:
            raise InvalidRequest(f"Missing required parameter: '{path}.role'", param=f"{path}.role",
                                 code="missing_required_parameter")
        if role not in ROLES:
            raise InvalidRequest(f"'{path}.role' must be one of {', '.join(ROLES)}, got {role!r}",
                                 param=f"{path}.role", code="invalid_value")
        content = item.get("content")
        if not isinstance(content, (str, list)):
            raise InvalidRequest(f"'{path}.content' must be a string or an array of content parts, got "
                                 f"{type_name(content)}", param=f"{path}.content", code="invalid_type")


def _check_pin(name: str | None, snapshot: Snapshot) -> None:
    """A compaction's ``x-backend`` pin is refused at once when it names a backend without the Responses API."""
    backend = snapshot.backend(name) if name is not None else None
    if backend is not None and backend.type not in RESPONSES_API_TYPES:
        raise InvalidRequest(f"The backend '{name}' named by x-backend is of type {backend.type.value}, which has "
                             f"no /v1/responses", param="x-backend", code="unsupported_backend_type")


class ResponsesSink(AsgiSink):
    """The client's sink for a Responses call: a failure after the stream began is a Responses ``error`` event.

    It carries the next ``sequence_number`` after the last event relayed, so
    the stream stays well-formed to a client that checks them.
    """

    __slots__ = ("_next_sequence",)

    def __init__(self, send: Send, streaming: bool) -> None:
        super().__init__(send, streaming)
        self._next_sequence = 0

    async def send(self, chunk: bytes) -> None:
        if self.streaming:
            found = _SEQUENCE.findall(chunk)
            if found:
                self._next_sequence = int(found[-1]) + 1
        await super().send(chunk)

    async def fail(self, error: GatewayError) -> None:
        if not (self.started and self.streaming):
            await super().fail(error)
            return
        event = {"type": "error", "code": error.code, "message": error.message, "param": error.param,
                 "sequence_number": self._next_sequence}
        await super().send(b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n")
        await self.finish()
