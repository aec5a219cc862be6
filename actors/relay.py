"""Relaying one successful answer to the client, and judging whether it really is one.

A buffered answer is read whole and must be JSON before its status goes
out. A stream is decoded event by event: it is committed to the client on
its first data event; keep-alive comments pass once committed; malformed
events are dropped and counted; an in-band error event or an end without
``finish_reason`` or ``[DONE]`` is a failed attempt, never a complete
answer. The client always gets a closing ``[DONE]`` of ours.

When a broken stream may be continued elsewhere, the relay keeps what the
client has been sent in a ``StreamAccumulator``; a ``transform`` (the
restart filter) may rewrite or hold back events of a continuation.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Protocol

import httpx

from actors.budgets import AttemptBudget
from actors.routing.failover import Failure, Kind
from actors.routing.stream_state import StreamAccumulator
from protocol.errors import GatewayError, UpstreamProtocolError
from protocol.sse import Event, SSEDecoder

DONE_EVENT = b"data: [DONE]\n\n"

Transform = Callable[[dict, bytes], list[tuple[bytes, dict]]]


class ResponseSink(Protocol):
    """Where the response goes; the protocol layer implements it per ingress."""

    started: bool

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None: ...
    async def send(self, chunk: bytes) -> None: ...
    async def finish(self) -> None: ...
    async def fail(self, error: GatewayError) -> None: ...


class AttemptFailed(Exception):
    """One attempt's end: what kind of failure, and the error the client would see."""

    def __init__(self, failure: Failure, error: GatewayError, upstream: bool = True) -> None:
        super().__init__(error.message)
        self.failure = failure
        self.error = error
        self.upstream = upstream   # False: our own verdict (no dial permit), not the backend's answer


class Relay:
    def __init__(self, sink: ResponseSink, acc: StreamAccumulator | None, empty_reply_is_failure: bool) -> None:
        self.sink = sink
        self.acc = acc
        self.empty_reply_is_failure = empty_reply_is_failure
        self.transform: Transform | None = None
        self.malformed_events = 0

    async def buffered(self, backend: str, response: httpx.Response, attempt: AttemptBudget,
                              headers: list[tuple[bytes, bytes]]) -> None:
        # Read it all before the status goes out: a body that breaks half-way
        # must become an error, not a 200 with half a JSON.
        body = await response.aread()
        try:
            payload = json.loads(body)
        except ValueError:
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
                f"Backend '{backend}' answered 200 with a body that is not JSON")) from None
        if self.empty_reply_is_failure and _empty_reply(payload):
            raise AttemptFailed(Failure(Kind.EMPTY_REPLY), UpstreamProtocolError(
                f"Backend '{backend}' answered with neither text nor tool calls", code="empty_reply"))
        await self.sink.start(200, headers)
        await self.sink.send(body)
        await self.sink.finish()

    async def stream(self, backend: str, response: httpx.Response, attempt: AttemptBudget,
                            headers: list[tuple[bytes, bytes]]) -> None:
        decoder = SSEDecoder()
        state = _StreamState()
        # aiter_bytes, not aiter_raw: a backend that compresses its stream is
        # decoded here, since the client never sees its content-encoding.
        async for chunk in response.aiter_bytes():
            for event in decoder.feed(chunk):
                await self._event(backend, event, attempt, headers, state)
        tail = decoder.close()
        if tail is not None:
            if tail.complete:   # ended by a lone CR at the very end: a whole event
                await self._event(backend, tail, attempt, headers, state)
            elif tail.has_data and not state.done:
                self.malformed_events += 1   # cut off mid-event: not trusted
        if not (state.done or state.finished):
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
                f"Backend '{backend}' ended the stream before the answer was complete",
                code="upstream_stream_truncated"))
        if not self.sink.started:  # a stream with no data at all: still a well-formed empty answer
            await self.sink.start(200, headers)
        await self.sink.send(DONE_EVENT)
        await self.sink.finish()

    async def _event(self, backend: str, event: Event, attempt: AttemptBudget,
                           headers: list[tuple[bytes, bytes]], state: "_StreamState") -> None:
        if state.done:
            return  # nothing counts after [DONE]; the caller reads on so the backend ends cleanly
        if not event.has_data:
            if self.sink.started:
                await self.sink.send(event.raw)  # keep-alive comments pass once committed
            return
        if event.is_done:
            state.done = True
            return
        try:
            obj = json.loads(event.data)
        except ValueError:
            self.malformed_events += 1       # dropped, never forwarded
            return
        if isinstance(obj, dict) and "error" in obj:
            raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
                f"Backend '{backend}' sent an error event: {_error_message(obj)}",
                code="upstream_stream_error"))
        attempt.got_data()
        if not self.sink.started:
            await self.sink.start(200, headers)
        if _finish_reason(obj):
            state.finished = True
        outs = self.transform(obj, event.raw) if self.transform else ((event.raw, obj),)
        for raw, sent in outs:
            if self.acc is not None:
                if "route_change" in sent:
                    self.acc = StreamAccumulator()  # the client was told to start over
                else:
                    self.acc.feed(sent)
            await self.sink.send(raw)


class _StreamState:
    __slots__ = ("done", "finished")

    def __init__(self) -> None:
        self.done = False       # [DONE] seen
        self.finished = False   # a finish_reason seen


def _finish_reason(obj: Any) -> bool:
    choices = obj.get("choices") if isinstance(obj, dict) else None
    return bool(choices) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


def _empty_reply(payload: Any) -> bool:
    try:
        choice = payload["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        return True
    if choice.get("finish_reason") == "length":
        return False  # cut by the client's own max_tokens: not empty by fault
    return not (message.get("content") or message.get("tool_calls"))


def _error_message(obj: dict) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)
