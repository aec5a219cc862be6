"""A fake OpenAI-compatible audio server for tests: ``POST .../audio/transcriptions`` answered as OpenAI
documents it, on 127.0.0.1.

Whole: ``{"text": ..., "usage": {"type": "duration", "seconds": ...}}``. With the form field ``stream=true``:
``transcript.text.delta`` events, then ``transcript.text.done`` with token usage (gpt-4o-transcribe's),
each event paced ``gap`` seconds apart. Every request is kept (method, path, headers, raw body) so a test
can read what the gateway sent; any GET (health, model list) is a 200 listing ``models``.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import attrs
import trio

from tests.servers import lifespan, request_body, serving

TEXT = "The quick brown fox."
USAGE = {"type": "tokens", "input_tokens": 20, "output_tokens": 6, "total_tokens": 26,
         "input_token_details": {"text_tokens": 0, "audio_tokens": 20}}


@attrs.define
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeAudio:
    def __init__(self, models: list[str], gap: float = 0.01) -> None:
        self.models = models
        self.gap = gap
        self.seen: list[Seen] = []
        self.url = ""

    @property
    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await request_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append(Seen(scope["method"], scope["path"], headers, body))
        if scope["method"] == "GET":
            await self._json(send, 200, {"object": "list", "data": [{"id": m, "object": "model"}
                                                                    for m in self.models]})
        elif not scope["path"].endswith("/audio/transcriptions"):
            await self._json(send, 404, {"error": {"message": "not found", "type": "invalid_request_error",
                                                   "param": None, "code": None}})
        elif b'name="stream"\r\n\r\ntrue\r\n' in body:
            await self._events(send)
        else:
            await self._json(send, 200, {"text": TEXT, "usage": {"type": "duration", "seconds": 2}})

    async def _json(self, send: Any, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    async def _events(self, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        words = TEXT.split(" ")
        events: list[dict[str, Any]] = [{"type": "transcript.text.delta", "delta": w if i == 0 else " " + w,
                                         "logprobs": None} for i, w in enumerate(words)]
        events.append({"type": "transcript.text.done", "text": TEXT, "logprobs": None, "usage": USAGE})
        for event in events:
            await trio.sleep(self.gap)
            await send({"type": "http.response.body", "body": b"data: " + json.dumps(event).encode() + b"\n\n",
                        "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@asynccontextmanager
async def running(fake: FakeAudio) -> AsyncIterator[FakeAudio]:
    """``fake`` served on a free port of 127.0.0.1 until the block ends."""
    async with serving(fake) as url:
        fake.url = url
        yield fake
