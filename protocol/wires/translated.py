"""What the answer side of every translating wire (anthropic, gemini, bedrock) shares.

A ``Translator`` is fed the backend's body chunk by chunk and returns what the client gets, so a
stream stays a stream. ``TranslatedStream`` is an ``httpx.AsyncByteStream`` that is its own iterator
(no generator left suspended), can be abandoned at any await (a cancelled read leaves no half-made
output; the caller then closes the response), and closes the backend's response when it is closed.
``WholeBody`` translates a body that only means something whole (a buffered answer, an error body);
``EventFeed`` feeds a backend's SSE stream to a translator event by event; ``ChunkWriter`` writes a
translated stream's ``chat.completion.chunk`` events, and ``EventTranslator`` is both.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Protocol

import httpx

from switchyard.actors.bodies import body_chunks
from switchyard.actors.sse import Event, SSEDecoder, SSEEventTooLarge, encode_data
from switchyard.protocol.http.client_json import utf8

DONE = b"data: [DONE]\n\n"
# what a translated body cannot keep from the backend's headers: its length, encoding and type change
HOP_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding", "content-type"})


class Translator(Protocol):
    def feed(self, chunk: bytes) -> list[bytes]: ...
    def close(self) -> list[bytes]: ...


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a field of the wrong type says nothing)."""
    return value if isinstance(value, dict) else {}


def data(payload: dict[str, Any]) -> bytes:
    """One SSE ``data:`` event."""
    return b"data: " + utf8(payload, separators=(",", ":")) + b"\n\n"


class WholeBody:
    """A translator that reads the whole body, then ``translate(parsed, raw)``: ``parsed`` is the JSON
    value, or None when the body is not JSON (most then pass it on for the relay to judge)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        self.parts.append(chunk)
        return []

    def close(self) -> list[bytes]:
        raw = b"".join(self.parts)
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        return self.translate(parsed, raw)

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        raise NotImplementedError


class ChunkWriter:
    """A translated stream's chunk events: the first carries the assistant role; an in-band error
    (``fail``) ends the stream, and the relay fails the attempt on it. ``backend`` names the API in
    that error's message."""

    backend = "backend"

    def __init__(self, model: str, created: int, call_id: str = "") -> None:
        self.id = call_id
        self.model = model
        self.created = created
        self.role_sent = False
        self.over = False   # [DONE] or an error went out: nothing follows

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if not self.role_sent:
            self.role_sent = True
            delta = {"role": "assistant", **delta}
        return data({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    def usage_chunk(self, usage: dict[str, Any]) -> bytes:
        """The last chunk of a client that asked for ``stream_options.include_usage``."""
        return data({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                     "choices": [], "usage": usage})

    def fail(self, what: str, code: str) -> list[bytes]:
        self.over = True
        return [data({"error": {"message": f"the {self.backend} stream carried {what}", "type": "upstream_error",
                                "code": code}})]


class EventFeed:
    """A backend's SSE stream translated event by event (``event``, which subclasses write); what an event
    too large to decode becomes is ``too_large``'s to say. Fed as a ``Translator``."""

    def __init__(self) -> None:
        self.decoder = SSEDecoder()

    def feed(self, chunk: bytes) -> list[bytes]:
        try:
            events = self.decoder.feed(chunk)
        except SSEEventTooLarge as exc:
            return self.too_large(exc)
        out: list[bytes] = []
        for event in events:
            out.extend(self.event(event))
        return out

    def close(self) -> list[bytes]:
        return self.tail()

    def tail(self) -> list[bytes]:
        """What the stream's last event, complete but unterminated at its end, translates to."""
        last = self.decoder.close()
        return self.event(last) if last is not None and last.complete else []

    def too_large(self, exc: SSEEventTooLarge) -> list[bytes]:
        raise NotImplementedError

    def event(self, event: Event) -> list[bytes]:
        raise NotImplementedError


class JsonEvents(EventFeed):
    """A bridge's stream: each JSON event handed to ``json_event``, until ``translator.done``. Comments
    pass (keep-alives); an event that is not JSON passes as a ``data:`` event, so the relay counts it
    malformed; an event too large to decode ends the stream with one such event; ``[DONE]`` is
    ``done_event``'s to translate. A stream that ends without its terminal event ends here without one
    too: the relay calls it truncated."""

    def __init__(self, translator: Any) -> None:
        super().__init__()
        self.translator = translator
        self.cut = False   # an event was too large: nothing follows

    def too_large(self, exc: SSEEventTooLarge) -> list[bytes]:
        if self.cut:
            return []
        self.cut = True
        return [b"data: {\n\n"]   # malformed for the relay: the event is lost, the attempt fails

    def event(self, event: Event) -> list[bytes]:
        if self.cut or self.translator.done:
            return []
        if not event.has_data:
            return [event.raw]
        if event.is_done:
            return self.done_event()
        try:
            parsed: Any = json.loads(event.data)
        except ValueError:
            return [b"data: " + event.data.replace(b"\n", b" ") + b"\n\n"]
        return self.json_event(parsed)

    def done_event(self) -> list[bytes]:
        return []

    def json_event(self, parsed: Any) -> list[bytes]:
        raise NotImplementedError


class EventTranslator(EventFeed, ChunkWriter):
    """An ``EventFeed`` writing chat chunks; an event too large to decode ends the stream in-band."""

    def __init__(self, model: str, created: int, call_id: str = "") -> None:
        ChunkWriter.__init__(self, model, created, call_id)
        EventFeed.__init__(self)

    def too_large(self, exc: SSEEventTooLarge) -> list[bytes]:
        return self.fail(f"an event too large to handle: {exc}", "upstream_event_too_large")

    def event(self, event: Event) -> list[bytes]:
        if self.over:
            return []
        if not event.has_data:
            return [event.raw]      # comments: keep-alives once committed
        try:
            parsed = json.loads(event.data)
        except ValueError:
            return [encode_data(event.data)]   # the relay counts it malformed and fails the attempt
        if not isinstance(parsed, dict):
            return self.fail("an event that is not a JSON object", "upstream_malformed_event")
        return self.object_event(parsed, event)

    def object_event(self, obj: dict[str, Any], event: Event) -> list[bytes]:
        """One event that is a JSON object, in the backend's shape (``event`` for its SSE fields)."""
        raise NotImplementedError


class TranslatedStream(httpx.AsyncByteStream):
    """The backend's body, translated chunk by chunk; closing it closes the backend's response."""

    def __init__(self, upstream: httpx.Response, translator: Translator) -> None:
        self.upstream = upstream
        self.translator = translator
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended = False

    def __aiter__(self) -> "TranslatedStream":
        return self

    async def __anext__(self) -> bytes:
        if self._chunks is None:
            self._chunks = body_chunks(self.upstream).__aiter__()
        while not self._ended:
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._ended = True
                out = self.translator.close()
            else:
                out = self.translator.feed(chunk)
            if out:
                return b"".join(out)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._ended = True
        await self.upstream.aclose()


def translated(response: httpx.Response, translator: Translator, content_type: str,
               status: int | None = None, headers: list[tuple[str, str]] | None = None) -> httpx.Response:
    """``response`` with its body translated as it is read: the backend's headers but those the
    translation changes (or ``headers``), and ``content_type``."""
    kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in HOP_HEADERS] \
        if headers is None else headers
    return httpx.Response(response.status_code if status is None else status,
                          headers=[*kept, ("content-type", content_type)],
                          stream=TranslatedStream(response, translator))
