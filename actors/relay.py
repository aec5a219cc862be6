"""Relaying one successful answer to the client, and judging whether it really is one.

A buffered answer is read whole and must be JSON before its status goes
out. A stream is decoded event by event: it is committed to the client on
its first data event; keep-alive comments pass once committed. A malformed
event (dropped and counted, never forwarded), an in-band error event, or an
end without ``finish_reason`` or ``[DONE]`` is a failed attempt, never a
complete answer. The client always gets a closing ``[DONE]`` of ours.

When a broken stream may be continued elsewhere, the relay keeps what the
client has been sent in a ``StreamAccumulator``; a ``transform`` (the
restart filter) may rewrite or hold back events of a continuation.

A model with a thinking pattern sets ``thinking`` (``actors/thinking.py``):
each chunk's text is split into ``reasoning_content`` and ``content``
before the transform sees it. In buffered mode the first text is held and a
small task in the call's nursery wakes at first text + ``reasoning_timeout``
to decide even if the backend is silent; only then do writes take a lock,
since two tasks may send. Streams of other models pay one ``is None`` check.

What differs from one attempt to the next (the rename, the thinking
splitter, the transform, the hidden usage chunk) is one frozen
``AttemptRelaySettings`` handed to ``Relay.begin`` before each attempt;
nothing else sets them.

An attempt sent a backend's ``upstream_id`` instead of the public model id
sets ``rename``; the relay then gives the client the public id back in the
top-level ``model`` of the buffered body and of every stream chunk. A model
variant (``base:nitro``) uses the same mechanism to put the requested name,
suffix and all, in that ``model`` whatever the backend wrote there.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Protocol

import httpx
import trio
from attrs import frozen

from switchyard.actors.bodies import ResponseTooLarge, body_chunks, whole_body
from switchyard.actors.budgets import AttemptBudget
from switchyard.actors.errors import GatewayError, UpstreamProtocolError, UpstreamStatusError
from switchyard.actors.json_read import loads, loads_utf8
from switchyard.actors.ledger.meter import AudioUse, CallMeter, answer_tokens
from switchyard.actors.ledger.pricing import decimal_text
from switchyard.actors.rename import Rename
from switchyard.actors.routing.failover import POLICY_CODES, Failure, Kind
from switchyard.actors.routing.stream_state import StreamAccumulator
from switchyard.actors.sse import Event, SSEDecoder, SSEEventTooLarge
from switchyard.actors.thinking import ThinkingStream
from switchyard.actors.usage import total_tokens

DONE_EVENT = b"data: [DONE]\n\n"
# The call's cost so far (USD) on a buffered answer, and a mark when tokens were estimated (no usage came).
COST_HEADER = b"x-continuum-cost"
COST_ESTIMATED_HEADER = b"x-continuum-cost-estimated"
DRAIN_GRACE = 1.0  # seconds to let a finished stream's body end, for connection reuse

Transform = Callable[[dict[str, Any], bytes], list[tuple[bytes, dict[str, Any]]]]
# Judges a whole buffered answer before it goes out (fallback.quality_check: actors/call/quality_gate.py): the
# headers to send it with, or it raises AttemptFailed.
AnswerCheck = Callable[..., Awaitable[list[tuple[bytes, bytes]]]]


class ResponseSink(Protocol):
    """Where the response goes; the protocol layer implements it per ingress."""

    @property
    def started(self) -> bool: ...
    @property
    def finished(self) -> bool: ...     # the whole response went out

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None: ...
    async def send(self, chunk: bytes) -> None: ...
    async def finish(self) -> None: ...
    async def fail(self, error: GatewayError) -> None: ...


async def read_answer(backend: str, response: httpx.Response, limit: int) -> bytes:
    """A backend's whole answer body; past ``limit`` bytes (``server.max_upstream_response_bytes``)
    the attempt fails instead of the gateway holding it all in memory."""
    try:
        return await whole_body(response, limit)
    except ResponseTooLarge:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' answered with more than {limit} bytes (server.max_upstream_response_bytes)",
            code="upstream_response_too_large", details={"limit_bytes": limit})) from None


async def read_json_answer(backend: str, response: httpx.Response, attempt: AttemptBudget,
                           limit: int) -> tuple[bytes, Any]:
    """A buffered 200 answer read whole, and its JSON; a body that is not JSON fails the attempt."""
    attempt.got_data()  # the headers are the first byte; now only the attempt's total limits the body
    # Read it all before the status goes out: a body that breaks half-way
    # must become an error, not a 200 with half a JSON.
    body = await read_answer(backend, response, limit)
    try:
        return body, loads(body)
    except ValueError:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' answered 200 with a body that is not JSON")) from None


def feed_events(decoder: SSEDecoder, chunk: bytes, backend: str) -> list[Event]:
    """The whole events ``chunk`` completes; an event over the decoder's limit fails the attempt."""
    try:
        return decoder.feed(chunk)
    except SSEEventTooLarge as exc:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' sent an event too large to handle: {exc}",
            code="upstream_event_too_large")) from None


class AttemptFailed(Exception):
    """One attempt's end: what kind of failure, and the error the client would see."""

    def __init__(self, failure: Failure, error: GatewayError, upstream: bool = True) -> None:
        super().__init__(error.message)
        self.failure = failure
        self.error = error
        self.upstream = upstream   # False: our own verdict (no dial permit), not the backend's answer


@frozen
class AttemptRelaySettings:
    """How one attempt's answer is relayed beyond judging it; a new value for every attempt."""

    rename: Rename | None = None                 # this attempt sent an upstream id (or the call names a variant)
    thinking: ThinkingStream | None = None       # this attempt's model has a thinking pattern that rewrites
    transform: Transform | None = None           # a restarted continuation's filter
    hide_usage: bool = False                     # the usage-only chunk was asked for by us, not the client
    nursery: trio.Nursery | None = None          # the call's, where a buffered-thinking decision timer runs


NO_SETTINGS = AttemptRelaySettings()


class Relay:
    def __init__(self, sink: ResponseSink, acc: StreamAccumulator | None, empty_reply_is_failure: bool,
                 answer_limit: int) -> None:
        self.sink = sink
        self.answer_limit = answer_limit                # bytes of a buffered answer
                                                        # (server.max_upstream_response_bytes)
        self.acc = acc
        self.empty_reply_is_failure = empty_reply_is_failure
        self.begin(NO_SETTINGS)
        self._timer: trio.CancelScope | None = None
        self._send_lock: trio.Lock | None = None       # only while a timer task may also send
        self.malformed_events = 0
        self.ending = False   # the answer is whole and its end is going out (finish_if_complete)
        self.state = _StreamState()
        self._headers: list[tuple[bytes, bytes]] = []
        # Events bound for the client, sent once per upstream chunk: one write
        # for a chunk holding twenty events instead of twenty.
        self._pending: list[bytes] = []
        self.meter: CallMeter | None = None             # the call's spend: the client's cost header and chunk
        self.check: AnswerCheck | None = None            # the call's quality check, on buffered answers

    def begin(self, settings: AttemptRelaySettings) -> None:
        """Relay the next attempt by ``settings``; what the last attempt reported of its usage is forgotten."""
        self.settings = settings
        # Read on every event, so kept as plain attributes; only this method sets them.
        self.rename = settings.rename
        self.thinking = settings.thinking
        self.transform = settings.transform
        self.hide_usage = settings.hide_usage
        self.nursery = settings.nursery
        self.usage_tokens: int | None = None          # this attempt's reported usage.total_tokens
        self.usage: Any = None                        # this attempt's usage object, as the backend sent it
        self.output_seen: int | None = None           # this attempt's answer tokens as seen (None: no answer)
        self.images: tuple[tuple[str | None, str | None, int], ...] = ()   # an images answer's (size, quality, n)
        self.search_units = 0                         # a rerank answer's search units (actors/scores_relay.py)
        self.audio: AudioUse | None = None            # an audio answer's seconds heard or characters spoken

    async def buffered(self, backend: str, response: httpx.Response, attempt: AttemptBudget,
                       headers: list[tuple[bytes, bytes]]) -> None:
        body, payload = await read_json_answer(backend, response, attempt, self.answer_limit)
        if isinstance(payload, dict) and payload.get("error") is not None:
            refused_by_policy(backend, payload, body)
            # An error with a success status: the backend's error object, with a status that says so.
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamStatusError(
                backend, 502, body, b"application/json"))
        self.usage_tokens = total_tokens(payload)
        usage = self.usage = payload.get("usage") if isinstance(payload, dict) else None
        self.output_seen = 0 if isinstance(usage, dict) else answer_tokens(payload)
        if self.empty_reply_is_failure and _empty_reply(payload):
            raise AttemptFailed(Failure(Kind.EMPTY_REPLY), UpstreamProtocolError(
                f"Backend '{backend}' answered with neither text nor tool calls", code="empty_reply"))
        if self.check is not None:
            headers = await self.check(backend, body, payload, headers, self.rename)
        await self.send_whole(body, payload, self.cost_headers(headers))

    def cost_headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """``headers`` with the call's cost so far (``x-continuum-cost``), once this attempt's answer is
        read; unchanged when no priced model was involved."""
        if self.meter is None:
            return headers
        cost = self.meter.total_with(self.usage, self.output_seen, self.images, self.search_units, self.audio)
        if cost is None:
            return headers
        headers = [*headers, (COST_HEADER, decimal_text(cost).encode())]
        guessed = self.audio.estimated if self.audio is not None else not isinstance(self.usage, dict) \
            and not self.images and not self.search_units   # images and search units: counted
        if self.meter.estimated or guessed:
            headers.append((COST_ESTIMATED_HEADER, b"true"))
        return headers

    async def send_whole(self, body: bytes, payload: Any, headers: list[tuple[bytes, bytes]]) -> None:
        """A buffered answer to the client in one piece, with the public model id put back."""
        if self.rename is not None:
            body = self.rename.payload(payload, body)
        await self.sink.start(200, headers)
        await self.sink.send(body)
        await self.sink.finish()

    async def stream(self, backend: str, response: httpx.Response, attempt: AttemptBudget,
                     headers: list[tuple[bytes, bytes]]) -> None:
        try:
            await self._stream(backend, response, attempt, headers)
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    async def _stream(self, backend: str, response: httpx.Response, attempt: AttemptBudget,
                      headers: list[tuple[bytes, bytes]]) -> None:
        decoder = SSEDecoder()
        state = self.state = _StreamState()
        self._headers = headers
        self._send_lock = None
        # Decoded, not raw: a backend that compresses its stream is decoded
        # here, since the client never sees its content-encoding.
        async for chunk in body_chunks(response):
            state.timed = False   # the first data event of each chunk moves the attempt's deadline
            try:
                for event in feed_events(decoder, chunk, backend):
                    await self._event(backend, event, attempt, headers, state)
            except AttemptFailed:
                await self._flush()   # what came before the failure is the client's already
                raise
            await self._flush()
        tail = decoder.close()
        if tail is not None:
            if tail.complete:   # ended by a lone CR at the very end: a whole event
                state.timed = False
                await self._event(backend, tail, attempt, headers, state)
            elif tail.has_data and not state.done:
                self.malformed_events += 1   # cut off mid-event: not trusted
        if not await self.finish_if_complete():
            await self._flush()
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
                f"Backend '{backend}' ended the stream before the answer was complete",
                code="upstream_stream_truncated"))

    async def finish_if_complete(self) -> bool:
        """Close the client's stream if the answer is whole ([DONE] or a finish_reason seen).

        Also asked when a limit fired: a backend that said ``finish_reason``
        and then held the connection open has still answered in full.
        """
        if self.sink.finished:
            return True
        if not (self.state.done or self.state.finished):
            return False
        # From here the client is sent the end ([DONE] first): a client that leaves as soon as it reads it,
        # as the openai SDK does, before the body's end, had its whole answer (RequestActor._client_left).
        self.ending = True
        if not self.sink.started:  # a stream with no data at all: still a well-formed empty answer
            await self.sink.start(200, self._headers)
        if self.thinking is not None:
            for raw, obj in self.thinking.close():   # text still held goes out before [DONE]
                self._emit(obj, raw)
        self._pending.append(DONE_EVENT)
        await self._flush()
        await self.sink.finish()
        return True

    async def _flush(self) -> None:
        if self._send_lock is None:
            await self._send_pending()
            return
        async with self._send_lock:   # the thinking timer may send too: one write at a time, in order
            await self._send_pending()

    async def _send_pending(self) -> None:
        if self._pending:
            out = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            await self.sink.send(out)

    async def _event(self, backend: str, event: Event, attempt: AttemptBudget,
                     headers: list[tuple[bytes, bytes]], state: "_StreamState") -> None:
        if state.done:
            return  # nothing counts after [DONE]; reading on lets the connection be reused
        if not event.has_data:
            if self.sink.started:
                self._pending.append(event.raw)  # keep-alive comments pass once committed
            return
        if event.is_done:
            # The answer is whole: the client gets it now. The rest of the
            # body is drained briefly so the connection can be kept alive, but
            # a backend that holds it open gets no more than DRAIN_GRACE.
            state.done = True
            await self.finish_if_complete()
            attempt.scope.deadline = min(attempt.scope.deadline, trio.current_time() + DRAIN_GRACE)
            return
        obj = self.event_json(backend, event)
        if isinstance(obj, dict) and "error" in obj:
            if not self.sink.started:
                refused_by_policy(backend, obj, event.data)
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
                f"Backend '{backend}' sent an error event: {_error_message(obj)}",
                code="upstream_stream_error"))
        usage_chunk = False
        if isinstance(obj, dict) and obj.get("usage"):   # the last chunk, with stream_options.include_usage
            self.usage_tokens = total_tokens(obj)
            self.usage = obj["usage"]
            if self.hide_usage and not obj.get("choices"):
                return   # asked for by the router, for metering: not part of the client's stream
            usage_chunk = self.meter is not None and isinstance(self.usage, dict)
        else:
            self.output_seen = (self.output_seen or 0) + 1   # about a token a chunk, should no usage come
        if not state.timed:
            # Events that arrived together share one instant: moving a cancel scope's
            # deadline once per chunk, not once per event, saves ~2 µs an event.
            attempt.got_data()
            state.timed = True
        if not self.sink.started:
            await self.sink.start(200, headers)
        if _finish_reason(obj):
            state.finished = True
        raw = event.raw
        if usage_chunk:
            raw = self._with_cost(obj, raw)
        if self.rename is not None:
            raw = self.rename.event(obj, raw)
        if self.thinking is None:
            self._emit(obj, raw)
            return
        for out, split in self.thinking.feed(obj, raw):
            self._emit(split, out)
        if self.thinking.wants_timer:
            self._start_timer(self.thinking)
        elif self._timer is not None and not self.thinking.undecided:
            self._timer.cancel()   # decided by the marker, the size or the end
            self._timer = None

    def _with_cost(self, obj: dict[str, Any], raw: bytes) -> bytes:
        """The usage chunk the client asked for, with ``usage.cost`` (USD, the call's so far) in it."""
        assert self.meter is not None
        cost = self.meter.total_with(obj["usage"])
        if cost is None:
            return raw
        obj["usage"] = {**obj["usage"], "cost": float(cost)}
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    def event_json(self, backend: str, event: Event) -> Any:
        """The event's data as JSON. A malformed event is dropped, never forwarded, and counted: whatever
        it carried is lost, so the answer can no longer complete here and the attempt fails (recovery
        continues from what the client really has)."""
        try:
            return loads_utf8(event.data)   # SSE is UTF-8: no encoding sniffing per event
        except ValueError:
            self.malformed_events += 1
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
                f"Backend '{backend}' sent a malformed event; its content is lost",
                code="upstream_malformed_event")) from None

    def _emit(self, obj: Any, raw: bytes) -> None:
        outs = self.transform(obj, raw) if self.transform else ((raw, obj),)
        for raw, sent in outs:
            if self.acc is not None:
                if "route_change" in sent:
                    self.acc = StreamAccumulator()  # the client was told to start over
                else:
                    self.acc.feed(sent)
            self._pending.append(raw)

    def _start_timer(self, thinking: ThinkingStream) -> None:
        """The first text is held: decide at first text + reasoning_timeout, silent backend or not."""
        thinking.timer_started = True
        if self.nursery is None or thinking.reasoning_timeout is None:
            return   # no task to run it in: the marker, the size or the end decide
        self._send_lock = trio.Lock()
        self._timer = trio.CancelScope()
        self.nursery.start_soon(self._decide_at, thinking, trio.current_time() + thinking.reasoning_timeout,
                                self._timer)

    async def _decide_at(self, thinking: ThinkingStream, deadline: float, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep_until(deadline)
            if self.thinking is thinking and not self.sink.finished:
                for raw, obj in thinking.timeout():
                    self._emit(obj, raw)
                await self._flush()


class _StreamState:
    __slots__ = ("done", "finished", "timed")

    def __init__(self) -> None:
        self.done = False       # [DONE] seen
        self.finished = False   # a finish_reason seen
        self.timed = False      # the attempt's deadline already moved for the chunk being read


def _finish_reason(obj: Any) -> bool:
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not choices or not isinstance(choices, list):
        return False
    for c in choices:
        if isinstance(c, dict) and c.get("finish_reason"):
            return True
    return False


def _empty_reply(payload: Any) -> bool:
    try:
        choice = payload["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        return True
    if choice.get("finish_reason") == "length":
        return False  # cut by the client's own max_tokens: not empty by fault
    return not (message.get("content") or message.get("tool_calls") or choice.get("text"))   # text: completions


def refused_by_policy(backend: str, obj: dict[str, Any], body: bytes) -> None:
    """An in-band error whose code says content policy (a native wire's refusal: Gemini's blocked prompt),
    before anything reached the client, is the backend's 400 content-policy refusal: failover treats it as
    one (never the same model again), and the client gets it as a 400, not a 502."""
    err = obj.get("error")
    if isinstance(err, dict) and err.get("code") in POLICY_CODES:
        raise AttemptFailed(Failure(Kind.CONTENT_POLICY, status=400),
                            UpstreamStatusError(backend, 400, body, b"application/json"))


def _error_message(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)
