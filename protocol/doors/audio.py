"""``POST /v1/audio/transcriptions``, ``/v1/audio/translations`` and ``/v1/audio/speech``: the audio API.

Each is a call like any other (``App.serve_chat``): API keys, presets,
selection, alias dispatch, limits, budgets, retries and fallback before the
first byte. Transcriptions and translations are multipart uploads read under
``server.max_upload_bytes`` and parsed once (``protocol/http/multipart.py``),
exactly as images' edits are: text fields become the payload, the ``file``
travels beside it (``actors/uploads.py``) and every attempt writes its own
form. Speech is JSON. The answers are relayed by ``actors/audio_relay.py``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from switchyard.actors.errors import GatewayError, InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.uploads import Upload, Uploads
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import Snapshot
from switchyard.protocol.doors import audio_rules
from switchyard.protocol.doors.images import serve_form
from switchyard.protocol.doors.openai import build_call, check_model, parse_json_object
from switchyard.protocol.http.asgi import AsgiSink, Receive, Scope, Send

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity


def _form_call(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
               request_id: str, files: tuple[Upload, ...], translation: bool) -> Call:
    model = check_model(payload)
    audio = [f for f in files if f.field == "file"]
    if not audio:
        raise InvalidRequest("Missing required file: 'file' (a form part with a filename)", param="file",
                             code="missing_required_parameter")
    if len(audio) > 1:
        raise InvalidRequest(f"'file' is one audio file, got {len(audio)}", param="file", code="invalid_value")
    unknown = [f.field for f in files if f.field != "file"]
    if unknown:
        raise InvalidRequest(f"The form has a file in '{unknown[0]}'; it takes a file only in 'file'",
                             param=unknown[0], code="invalid_value")
    audio_rules.check_transcription(payload, translation)
    stream = audio_rules.form_stream(payload, streams=not translation)
    return attrs.evolve(build_call(model, stream, payload, body, snapshot, headers, request_id),
                        uploads=Uploads.of(files))


async def _form(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive, send: Send,
                body: bytes, translation: bool) -> None:
    await serve_form(app, runtime, who, scope, receive, send, body,
                     functools.partial(_form_call, translation=translation),
                     Endpoint.AUDIO_TRANSLATIONS if translation else Endpoint.AUDIO_TRANSCRIPTIONS)


async def transcriptions(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                         send: Send, body: bytes) -> None:
    await _form(app, runtime, who, scope, receive, send, body, translation=False)


async def translations(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                       send: Send, body: bytes) -> None:
    await _form(app, runtime, who, scope, receive, send, body, translation=True)


class SpeechSink(AsgiSink):
    """Speech's sink: its body is audio, relayed as it arrives. A failure before the first chunk is an error
    answer like any other; after it, nothing is written into the audio: the body is left unfinished and the
    server closes the connection, which the client's HTTP library reports as an incomplete body."""

    __slots__ = ()

    async def fail(self, error: GatewayError) -> None:
        if not self.started:
            await super().fail(error)
            return
        self.finished = True   # no closing chunk: returning from the ASGI call with the body open aborts it


def parse_speech(payload: dict[str, Any], body: bytes, snapshot: Snapshot, headers: Mapping[bytes, bytes],
                 request_id: str = "") -> Call:
    model = check_model(payload)
    audio_rules.check_speech(payload)
    return build_call(model, False, payload, body, snapshot, headers, request_id)


async def speech(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                 send: Send, body: bytes) -> None:
    payload = parse_json_object(body)
    # the audio goes out chunk by chunk as it arrives: a streaming sink, whatever the call's stream flag
    await app.serve_chat(runtime, who, scope, receive, payload, body, lambda call: SpeechSink(send, True),
                         endpoint=Endpoint.AUDIO_SPEECH, parse=parse_speech)
