"""The Anthropic doors: ``POST /anthropic/v1/messages``, ``.../messages/count_tokens``, ``GET .../models``.

A Messages call is translated into a chat call once (``to_chat``) and served
by ``App.serve_chat`` like any chat call: keys, presets, the parameter
policy, selection, budgets, retries, fallback chains and dedup apply
unchanged, and a native Anthropic backend gets the client's
``anthropic-version`` and ``anthropic-beta`` and the client's own validated
body through ``Call.ingress`` (the passthrough: docs/anthropic-backend.md). The
answer comes back through ``AnthropicSink``, which speaks Messages.

Every answer of these routes, errors included, is in Anthropic's shape and
carries ``request-id``. The client's ``provider`` object is not a Messages
field: with ``proxy.client_provider_preferences`` on it is refused by name
(this door applies no client routing preferences, and nothing is silently
dropped); with it off it is an unknown field, refused as the Messages API
refuses unknown fields.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qsl

import attrs
import trio

from switchyard.actors.errors import GatewayError, InvalidRequest, ModelNotFound, PermissionDenied
from switchyard.actors.messages import Call
from switchyard.actors.routing.listing import ListedModel
from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.protocol.doors.anthropic_format import Translated, to_chat
from switchyard.protocol.doors.anthropic_sink import JSON_TYPE, AnthropicSink, answer_headers, respond_error
from switchyard.protocol.doors.openai import parse_json_object
from switchyard.protocol.http.asgi import Receive, Scope, Send, respond
from switchyard.protocol.http.client_json import utf8

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity

EPOCH = "1970-01-01T00:00:00Z"   # the Models API's "release date unknown"
PAGE_DEFAULT, PAGE_MAX = 20, 1000
FORWARDED_HEADERS = (b"anthropic-version", b"anthropic-beta")


async def messages(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                   send: Send, raw: bytes) -> None:
    request_id = who.request_id
    sinks: list[AnthropicSink] = []
    try:
        translated = _translate(runtime, raw, count_only=False)
        ingress = _ingress(scope["headers"], translated, raw)
        model = translated.payload["model"]   # the answer names the model as the client asked for it

        def sink_for(call: Call) -> AnthropicSink:
            sink = AnthropicSink(send, call.stream, model=model, request_id=request_id,
                                 stop_sequences=translated.stop_sequences, show_thinking=translated.show_thinking)
            sinks.append(sink)
            return sink

        await app.serve_chat(runtime, who, scope, receive, translated.payload,
                             json.dumps(translated.payload).encode(), sink_for,
                             shape=lambda call: attrs.evolve(call, ingress=ingress))
    except GatewayError as err:
        if not sinks or any(s.started or s.finished for s in sinks):
            # Refused before the call had an actor (the App records the refusal and answers it in this
            # door's shape, as it does for every door), or the answer is under way (the sink had its say).
            raise
        await respond_error(send, err, request_id)


async def count_tokens(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                       send: Send, raw: bytes) -> None:
    """An estimate (``actors/routing/token_estimate.py``) of the translated request, not a tokenizer's count."""
    request_id = who.request_id
    try:
        translated = _translate(runtime, raw, count_only=True)
        key = who.key_now(runtime.snapshot)   # a reload while the body came: judged by the new keys
        model = translated.payload["model"]
        if key is not None and not key.allows_model(model):
            raise PermissionDenied(f"The API key '{key.id}' may not use the model '{model}'", param="model",
                                   code="model_not_allowed")
        body = json.dumps({"input_tokens": estimate_tokens(translated.payload)}).encode()
        await respond(send, 200, body, answer_headers([], JSON_TYPE, request_id))
    except GatewayError as err:
        await respond_error(send, err, request_id)


async def models(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                 send: Send) -> None:
    """The model list as the key may see it (the /v1/models rows and rate limit), in the Models API's pages."""
    def page(rows: list[ListedModel]) -> Any:
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        return model_page(rows, query)
    await _listing(app, runtime, who, send, page)


async def model(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                send: Send) -> None:
    """``GET /anthropic/v1/models/{id}``: one row of that list, or a 404 in Anthropic's shape."""
    def one(rows: list[ListedModel]) -> Any:
        wanted = scope["path"][len(MODEL_PATH):]   # ASGI paths arrive decoded
        row = next((r for r in rows if r.id == wanted), None)
        if row is None:
            raise ModelNotFound(f"model: {wanted}", param="model")
        return model_row(row)
    await _listing(app, runtime, who, send, one)


async def _listing(app: "DoorHost", runtime: "Runtime", who: "Identity", send: Send,
                   shape: Callable[[list[ListedModel]], Any]) -> None:
    """The rows the key may see, under the /v1/models rate limit, shaped and answered in Anthropic's way."""
    request_id = who.request_id
    try:
        now = trio.current_time()
        routes = app.model_routes
        routes.check_limit(who, runtime, now)
        rows = routes.visible(routes.listing(runtime, now).rows, who.key)
        body = utf8(shape(list(rows)))   # a discovered id may hold a lone surrogate
        await respond(send, 200, body, answer_headers([], JSON_TYPE, request_id))
    except GatewayError as err:
        await respond_error(send, err, request_id)


MODEL_PATH = "/anthropic/v1/models/"


def _translate(runtime: "Runtime", body: bytes, count_only: bool) -> Translated:
    payload = parse_json_object(body)
    if "provider" in payload and runtime.snapshot.proxy.client_provider_preferences:
        raise InvalidRequest("provider: the Messages ingress applies no client routing preferences; send them "
                             "to /v1/chat/completions, or leave 'provider' out", param="provider",
                             code="unsupported_parameter")
    return to_chat(payload, count_only=count_only)


def _ingress(headers: list[tuple[bytes, bytes]], translated: Translated, raw: bytes) -> dict[str, Any]:
    """What a native Anthropic backend needs that the chat payload cannot carry: the client's headers,
    its validated body (``messages_body``: the passthrough, protocol/wires/anthropic.py), the chat payload
    as translated (``chat_payload``: what the wire compares an attempt's chat body to, to see whether
    the chat side changed anything the passthrough would lose) and what chat cannot hold (``uncarried``).
    Both bodies are fresh parses of the client's bytes, shared with nothing that could edit them."""
    out: dict[str, Any] = {"api": "anthropic", "messages_body": parse_json_object(raw),
                           "chat_payload": json.loads(json.dumps(translated.payload))}
    if translated.uncarried:
        out["uncarried"] = translated.uncarried
    for name in FORWARDED_HEADERS:
        values = [v.decode("latin-1").strip() for k, v in headers if k.lower() == name]
        if values:
            out[name.decode()] = ",".join(values)
    if translated.thinking is not None:
        out["thinking"] = translated.thinking
    if translated.derived:
        out["derived"] = translated.derived
    if translated.context_management is not None:
        out["context_management"] = translated.context_management
    return out


def model_row(row: ListedModel) -> dict[str, Any]:
    name = row.entry.metadata.display_name if row.entry is not None else None
    # Every model listed is one the router routes to now: "active" (the SDK requires the field).
    return {"type": "model", "id": row.id, "display_name": name or row.id, "created_at": EPOCH, "lifecycle": "active"}


def model_page(rows: tuple[ListedModel, ...] | list[ListedModel], query: dict[str, str]) -> dict[str, Any]:
    """One page of the list: ``limit`` rows (default 20) after ``after_id`` or before ``before_id``."""
    raw = query.get("limit", str(PAGE_DEFAULT))
    if not raw.isdigit() or not 1 <= int(raw) <= PAGE_MAX:
        raise InvalidRequest(f"limit: must be an integer from 1 to {PAGE_MAX}, got {raw!r}", param="limit")
    limit = int(raw)
    after, before = query.get("after_id"), query.get("before_id")
    if after is not None and before is not None:
        raise InvalidRequest("after_id, before_id: give at most one of them", param="after_id")
    ids = [r.id for r in rows]
    for name, value in (("after_id", after), ("before_id", before)):
        if value is not None and value not in ids:
            raise InvalidRequest(f"{name}: no model {value!r} in the list", param=name)
    if after is not None:
        start = ids.index(after) + 1
        chosen = list(rows[start:start + limit])
        more = start + limit < len(rows)
    elif before is not None:
        end = ids.index(before)
        chosen = list(rows[max(0, end - limit):end])
        more = end - limit > 0
    else:
        chosen = list(rows[:limit])
        more = limit < len(rows)
    data = [model_row(r) for r in chosen]
    return {"data": data, "has_more": more, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None}
