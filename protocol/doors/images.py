"""``POST /v1/images/generations``, ``/v1/images/edits`` and ``/v1/images/variations``: the images API.

Each is a call like any other (``App.serve_chat``): API keys, presets,
selection, alias dispatch, budgets, retries and fallback before the first
byte apply unchanged; the backend's answer is relayed whole
(``actors/images_relay.py``) and priced by the model's ``per_image`` rates.
Generations is JSON. Edits and variations are multipart/form-data uploads,
read under ``server.max_upload_bytes`` and parsed once
(``protocol/http/multipart.py``): their text fields become the call's
payload, their files travel beside it (``actors/uploads.py``) and every
attempt writes its own form. Edits and variations check the client's model
name against their fixed lists before any alias is rewritten
(``image_rules.py``). Images are answered whole: ``stream`` is refused.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Mapping

import attrs

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.uploads import Upload, Uploads
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import Snapshot
from switchyard.protocol.doors import image_rules
from switchyard.protocol.doors.openai import build_call, check_model, parse_json_object
from switchyard.protocol.http.asgi import AsgiSink, Receive, Scope, Send
from switchyard.protocol.http.multipart import parse_form

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity

EDITS, VARIATIONS = "/v1/images/edits", "/v1/images/variations"
MAX_EDIT_IMAGES = 16    # gpt-image-1 takes up to 16 input images


def parse_generation(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                     request_id: str = "") -> Call:
    model = check_model(payload)
    image_rules.check_request(payload, model, prompt=True, form=False)
    return build_call(model, False, payload, body, snapshot, headers, request_id)


def _files(files: tuple[Upload, ...], field: str) -> list[Upload]:
    return [f for f in files if f.field in (field, f"{field}[]")]


def _form_call(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
               request_id: str, files: tuple[Upload, ...], edit: bool) -> Call:
    model = check_model(payload)
    image_rules.check_allowed(model, image_rules.EDIT_MODELS if edit else image_rules.VARIATION_MODELS,
                              EDITS if edit else VARIATIONS)
    images = _files(files, "image")
    if not images:
        raise InvalidRequest("Missing required file: 'image' (a form part with a filename)", param="image",
                             code="missing_required_parameter")
    most = (MAX_EDIT_IMAGES if model.startswith("gpt-image-") else 1) if edit else 1
    if len(images) > most:
        raise InvalidRequest(f"'{model}' takes at most {most} 'image' file(s) here, got {len(images)}",
                             param="image", code="invalid_value")
    masks = _files(files, "mask")
    if masks and not edit or len(masks) > 1:
        raise InvalidRequest("'mask' is one file, and only an edit takes it", param="mask", code="invalid_value")
    known = {id(f) for f in (*images, *masks)}
    unknown = [f.field for f in files if id(f) not in known]
    if unknown:
        raise InvalidRequest(f"The form has a file in '{unknown[0]}'; it takes files only in 'image'"
                             f"{' and mask' if edit else ''}", param=unknown[0], code="invalid_value")
    image_rules.check_request(payload, model, prompt=edit, form=True)
    return attrs.evolve(build_call(model, False, payload, body, snapshot, headers, request_id),
                        uploads=Uploads.of(files))


def content_type(scope: Scope) -> str:
    """The request's content-type header (an upload door's form boundary is in it)."""
    headers: list[tuple[bytes, bytes]] = scope["headers"]   # ASGI's
    for name, value in headers:
        if name == b"content-type":
            return value.decode("latin-1")
    return ""


async def generations(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                      send: Send, body: bytes) -> None:
    payload = parse_json_object(body)
    await app.serve_chat(runtime, who, scope, receive, payload, body, lambda call: AsgiSink(send, False),
                         endpoint=Endpoint.IMAGES_GENERATIONS, parse=parse_generation)


async def edits(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive, send: Send,
                body: bytes) -> None:
    await _form(app, runtime, who, scope, receive, send, body, edit=True)


async def variations(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                     send: Send, body: bytes) -> None:
    await _form(app, runtime, who, scope, receive, send, body, edit=False)


async def _form(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive, send: Send,
                body: bytes, edit: bool) -> None:
    await serve_form(app, runtime, who, scope, receive, send, body,
                     functools.partial(_form_call, edit=edit),
                     Endpoint.IMAGES_EDITS if edit else Endpoint.IMAGES_VARIATIONS)


FormCall = Callable[..., Call]   # (payload, body, snapshot, headers, request_id, files) -> the Call


async def serve_form(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                     send: Send, body: bytes, form_call: FormCall, endpoint: Endpoint) -> None:
    """A multipart call (image edits and variations, audio transcriptions and translations): the form parsed
    once, its fields the payload the gate judges, its files handed to ``form_call`` with the shaped payload."""
    fields, files = parse_form(body, content_type(scope))
    payload: dict[str, Any] = dict(fields)

    def parse(shaped: dict[str, Any], raw: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
              request_id: str = "") -> Call:
        return form_call(shaped, raw, snapshot, headers, request_id, files)
    parse_call: Callable[..., Call] = parse
    await app.serve_chat(runtime, who, scope, receive, payload, body, lambda call: AsgiSink(send, call.stream),
                         endpoint=endpoint, parse=parse_call)
