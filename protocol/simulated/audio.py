"""What the simulated backend answers on ``/v1/audio/transcriptions``, ``/translations`` and ``/speech``.

A transcription is deterministic: a few words derived from the upload's bytes
and its length (a WAV file's header gives the seconds; any other file counts
one second per 16 kB), in every ``response_format`` OpenAI's API writes
(``json``, ``text``, ``srt``, ``vtt``, ``verbose_json`` with its duration,
segments and, when asked, words). ``stream=true`` answers the
``transcript.text.delta`` / ``transcript.text.done`` events gpt-4o-transcribe
sends, with its token usage. Speech is a WAV of a quiet 440 Hz tone (24 kHz,
16-bit mono; raw samples for ``pcm``) whose length follows the input, 50 ms a
character, sent in chunks so a client sees it arrive piece by piece (a
``failure.reset_after_chunk`` or ``stall_after_chunk`` k breaks it after chunk k); the
simulator answers WAV whatever compressed format was asked.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import Any, AsyncIterator

import httpx
import trio

from switchyard.actors.audio_length import guessed_seconds, wav_seconds
from switchyard.config.simulation import SimulatedFailure, Simulation
from switchyard.protocol.simulated.parts import Simulator

AUDIO_PATHS = ("/audio/transcriptions", "/audio/translations", "/audio/speech")
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
RATE = 24_000
SECONDS_PER_CHARACTER = 0.05
CHUNK = 4800   # bytes of speech per body chunk (0.1 s)


def transcript(data: bytes) -> tuple[str, float]:
    """The simulated transcript of ``data`` and the seconds it lasts."""
    seconds = wav_seconds(data)
    seconds = guessed_seconds(len(data)) if seconds is None else seconds
    digest = hashlib.sha256(data).digest()
    words = [WORDS[b % len(WORDS)] for b in digest[:4]]
    return f"Simulated transcript: {' '.join(words)}.", seconds


def _stamp(seconds: float, comma: bool) -> str:
    ms = int(round(seconds * 1000))
    sep = "," if comma else "."
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


def _render(fmt: str, text: str, seconds: float, body: dict[str, Any], translation: bool) -> httpx.Response:
    if fmt == "text":
        return httpx.Response(200, headers={"content-type": "text/plain; charset=utf-8"}, text=text + "\n")
    if fmt == "srt":
        srt = f"1\n{_stamp(0, True)} --> {_stamp(seconds, True)}\n{text}\n\n"
        return httpx.Response(200, headers={"content-type": "text/plain; charset=utf-8"}, text=srt)
    if fmt == "vtt":
        vtt = f"WEBVTT\n\n{_stamp(0, False)} --> {_stamp(seconds, False)}\n{text}\n\n"
        return httpx.Response(200, headers={"content-type": "text/plain; charset=utf-8"}, text=vtt)
    if fmt == "verbose_json":
        reply: dict[str, Any] = {
            "task": "translate" if translation else "transcribe", "language": "english" if translation
            else str(body.get("language") or "english"), "duration": round(seconds, 3), "text": text,
            "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": round(seconds, 3), "text": text, "tokens": [],
                          "temperature": 0.0, "avg_logprob": -0.1, "compression_ratio": 1.0,
                          "no_speech_prob": 0.0}],
            "usage": {"type": "duration", "seconds": math.ceil(seconds)}}
        if "word" in (body.get("timestamp_granularities[]") or ()):
            words = text.rstrip(".").split()
            step = seconds / max(len(words), 1)
            reply["words"] = [{"word": w, "start": round(i * step, 3), "end": round((i + 1) * step, 3)}
                              for i, w in enumerate(words)]
        return httpx.Response(200, json=reply)
    return httpx.Response(200, json={"text": text, "usage": {"type": "duration", "seconds": math.ceil(seconds)}})


async def _events(text: str, seconds: float) -> AsyncIterator[bytes]:
    pieces = text.split(" ")
    for i, piece in enumerate(pieces):
        delta = piece if i == 0 else " " + piece
        yield b"data: " + json.dumps({"type": "transcript.text.delta", "delta": delta}).encode() + b"\n\n"
    audio_tokens = max(1, int(seconds * 10))
    output = len(pieces) + 1
    usage = {"type": "tokens", "input_tokens": audio_tokens, "output_tokens": output,
             "total_tokens": audio_tokens + output,
             "input_token_details": {"text_tokens": 0, "audio_tokens": audio_tokens}}
    yield b"data: " + json.dumps({"type": "transcript.text.done", "text": text, "usage": usage}).encode() + b"\n\n"


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            yield chunk


def tone(seconds: float) -> bytes:
    """``seconds`` of a quiet 440 Hz tone: 16-bit little-endian mono samples at ``RATE``."""
    n = int(RATE * seconds)
    return b"".join(struct.pack("<h", int(2000 * math.sin(2 * math.pi * 440 * i / RATE))) for i in range(n))


def wav(samples: bytes) -> bytes:
    """``samples`` (16-bit mono at ``RATE``) in a RIFF/WAVE file."""
    fmt = struct.pack("<HHIIHH", 1, 1, RATE, RATE * 2, 2, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + struct.pack("<I", len(samples)) + samples)


async def _chunks(owner: Simulator, data: bytes, fail: SimulatedFailure) -> AsyncIterator[bytes]:
    """``data`` in 0.1 s chunks; ``failure.reset_after_chunk`` or ``stall_after_chunk`` k breaks it after chunk k."""
    for k, at in enumerate(range(0, len(data), CHUNK), start=1):
        yield data[at:at + CHUNK]
        if fail.stall_after_chunk == k:
            owner.record(f"stall_after:{k}")
            await trio.sleep_forever()
        if fail.reset_after_chunk == k:
            owner.record(f"reset_after:{k}")
            raise httpx.ReadError("simulated connection reset by peer")


def answer(owner: Simulator, sim: Simulation, path: str, body: dict[str, Any],
           files: tuple[Any, ...] = ()) -> httpx.Response:
    """The answer to an audio request (``body``: speech's JSON, or a form's text fields; ``files``: its files)."""
    if path.endswith("/speech"):
        samples = tone(len(str(body.get("input") or "")) * SECONDS_PER_CHARACTER)
        pcm = body.get("response_format") == "pcm"
        owner.record("completed")
        chunks = _chunks(owner, samples if pcm else wav(samples), sim.failure)
        return httpx.Response(200, headers={**sim.response_headers, "content-type": "audio/pcm" if pcm else
                                            "audio/wav"}, stream=_Body(chunks))
    audio = [f for f in files if f.field == "file"]
    if not audio:
        owner.record("invalid")
        return httpx.Response(400, json={"error": {"message": "Missing required file: file", "param": "file",
                                                   "type": "invalid_request_error", "code": None}})
    text, seconds = transcript(audio[0].data)
    owner.record("completed")
    if body.get("stream") == "true" and path.endswith("/transcriptions"):
        return httpx.Response(200, headers={**sim.response_headers, "content-type": "text/event-stream"},
                              stream=_Body(_events(text, seconds)))
    rendered = _render(str(body.get("response_format") or "json"), text, seconds, body,
                       path.endswith("/translations"))
    rendered.headers.update(sim.response_headers)
    return rendered
