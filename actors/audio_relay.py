"""An audio API answer relayed, and what it heard or spoke for the ledger.

A transcription or translation answered whole is read under
``server.max_upstream_response_bytes`` before the status goes out: JSON
(``json``, ``verbose_json``) or text (``text``, ``srt``, ``vtt``) as the
backend wrote it. Asked with ``stream: true``, a backend that streams
(gpt-4o-transcribe) answers server-sent events; they are relayed as they come,
committed on the first, and whole only once ``transcript.text.done`` came.
Speech is audio bytes, relayed chunk by chunk as they arrive, never held
whole: its first chunk commits the answer. Each is priced on what the
metadata names: the seconds heard (``actors/audio_length.py``), the characters
spoken, or the tokens the backend reported.
"""

from __future__ import annotations

from typing import Any

import httpx

from switchyard.actors.audio_length import guessed_seconds, reported_seconds, wav_seconds
from switchyard.actors.bodies import body_chunks
from switchyard.actors.budgets import AttemptBudget
from switchyard.actors.errors import UpstreamProtocolError, UpstreamStatusError
from switchyard.actors.json_read import loads
from switchyard.actors.ledger.meter import AudioUse
from switchyard.actors.messages import Call
from switchyard.actors.relay import AttemptFailed, Relay, feed_events, read_answer
from switchyard.actors.routing.failover import Failure, Kind
from switchyard.actors.sse import SSEDecoder

DONE = "transcript.text.done"


def heard(call: Call, payload: Any) -> AudioUse:
    """The seconds of audio a transcription heard: the WAV header's, else the backend's, else a guess."""
    files = [f for f in call.uploads.files if f.field == "file"] if call.uploads is not None else []
    data = files[0].data if files else b""
    exact = wav_seconds(data)
    if exact is not None:
        return AudioUse(seconds=exact)
    said = reported_seconds(payload)
    if said is not None:
        return AudioUse(seconds=said)
    return AudioUse(seconds=guessed_seconds(len(data)), estimated=True)


def _failed(backend: str, body: bytes) -> AttemptFailed:
    """An error object with a success status: the backend's error, with a status that says so."""
    return AttemptFailed(Failure(Kind.PROTOCOL), UpstreamStatusError(backend, 502, body, b"application/json"))


async def relay_transcription(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                              headers: list[tuple[bytes, bytes]], call: Call) -> None:
    """A 200 transcription or translation to the client: whole, or its events as they come."""
    if "text/event-stream" in response.headers.get("content-type", ""):
        await _events(relay, backend, response, attempt, headers, call)
        return
    attempt.got_data()
    body = await read_answer(backend, response, relay.answer_limit)
    payload: Any = None
    if "json" in response.headers.get("content-type", ""):
        try:
            payload = loads(body)
        except ValueError:
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
                f"Backend '{backend}' answered 200 with a body that is not JSON")) from None
        if isinstance(payload, dict) and payload.get("error") is not None:
            raise _failed(backend, body)
    usage = payload.get("usage") if isinstance(payload, dict) else None
    relay.usage = usage if isinstance(usage, dict) else None
    relay.output_seen = 0
    relay.audio = heard(call, payload)
    await relay.sink.start(200, relay.cost_headers(headers))
    await relay.sink.send(body)
    await relay.sink.finish()


async def _events(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                  headers: list[tuple[bytes, bytes]], call: Call) -> None:
    decoder = SSEDecoder()
    done = False
    relay.output_seen = 0
    async for chunk in body_chunks(response):
        out: list[bytes] = []
        for event in feed_events(decoder, chunk, backend):
            if not event.has_data or done:
                continue
            attempt.got_data()
            try:
                obj = loads(event.data)
            except ValueError:
                relay.malformed_events += 1   # dropped and counted, never forwarded
                continue
            kind = obj.get("type") if isinstance(obj, dict) else None
            if kind == "error":
                raise _failed(backend, event.data)
            if kind == DONE:
                done = True
                usage = obj.get("usage")
                relay.usage = usage if isinstance(usage, dict) else None
                relay.audio = heard(call, obj)
            out.append(event.raw)
        if out:
            if not relay.sink.started:
                await relay.sink.start(200, headers)
            await relay.sink.send(b"".join(out))
    if not done:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' ended the transcription stream before '{DONE}'",
            code="upstream_stream_truncated"))
    if not relay.sink.started:
        await relay.sink.start(200, headers)
    await relay.sink.finish()


async def relay_speech(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                       headers: list[tuple[bytes, bytes]], call: Call) -> None:
    """A 200 speech answer to the client chunk by chunk as it arrives; priced on the input's characters."""
    text = call.payload.get("input")
    relay.audio = AudioUse(characters=len(text) if isinstance(text, str) else 0)
    relay.output_seen = 0
    async for chunk in body_chunks(response):
        if not chunk:
            continue
        attempt.got_data()   # from now on only silence between chunks is limited
        if not relay.sink.started:
            await relay.sink.start(200, relay.cost_headers(headers))
        await relay.sink.send(chunk)
    if not relay.sink.started:
        raise AttemptFailed(Failure(Kind.EMPTY_REPLY), UpstreamProtocolError(
            f"Backend '{backend}' answered a speech call with no audio", code="empty_reply"))
    await relay.sink.finish()
