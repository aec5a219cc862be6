"""Relaying a ``/v1/responses`` answer unchanged, judged by the Responses API's own rules.

The chat relay's checks (``choices``, ``finish_reason``, ``[DONE]``, the
empty-reply rule) mean nothing here, so a call on the ``responses``
endpoint is relayed by this module instead (``actors/call/request.py`` asks).

Buffered: the body must be JSON before its status goes out; it is passed
on byte for byte (only a renamed upstream model id is put back). A stream
is passed event by event, ``event:`` lines and all. Its opening lifecycle
events (``response.created``, ``response.in_progress``, ``response.queued``)
are held until the next event: a response that fails right away
(``response.failed`` or ``error`` before any output) is then still a
pre-stream failure, and the call may fail over. Once the client has bytes,
an upstream ``error`` event ends the call as failed (the sink writes the
error event); a stream without a terminal event (``response.completed``,
``response.incomplete``, ``response.failed``) is truncated, never complete.
No ``[DONE]`` is added: Responses streams have none. A broken Responses
stream is never resumed mid-way on another backend.

``remember`` is awaited with the Response's id before the first bytes that
name it go out (the whole answer, or the stream's held lifecycle events), so
a client that asks another worker for the response next finds its owner.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

import httpx
import trio

from switchyard.actors.bodies import body_chunks
from switchyard.actors.budgets import AttemptBudget
from switchyard.actors.errors import UpstreamProtocolError, UpstreamStatusError
from switchyard.actors.relay import DRAIN_GRACE, AttemptFailed, Relay, feed_events, read_json_answer
from switchyard.actors.rename import Rename
from switchyard.actors.routing.failover import Failure, Kind
from switchyard.actors.sse import Event, SSEDecoder
from switchyard.actors.usage import usage_total

# A Responses stream ends with exactly one of these events.
TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")

LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})

Remember = Callable[[str | None], Awaitable[None]]   # notes who created the id (idempotent)


async def _nothing(response_id: str | None) -> None:
    pass


async def relay_responses(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                          headers: list[tuple[bytes, bytes]], stream: bool,
                          remember: Remember = _nothing) -> str | None:
    """Relay the answer; returns the Response object's id when it had one (what the backend may have stored)."""
    relay.acc = None   # nothing to continue from: a Responses stream is not resumed elsewhere
    if stream:
        return await _stream(relay, backend, response, attempt, headers, remember)
    return await _buffered(relay, backend, response, attempt, headers, remember)


def _response_id(obj: Any) -> str | None:
    """``obj.id`` of a Response object (``object: response``), else None."""
    found = obj.get("id") if isinstance(obj, dict) and obj.get("object") == "response" else None
    return found if isinstance(found, str) else None


def _usage(relay: Relay, usage: Any) -> None:
    relay.usage = usage if isinstance(usage, dict) else None
    relay.usage_tokens = usage_total(usage, ("input_tokens", "output_tokens"))


async def _buffered(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                    headers: list[tuple[bytes, bytes]], remember: Remember) -> str | None:
    body, payload = await read_json_answer(backend, response, attempt, relay.answer_limit)
    if not isinstance(payload, dict) or (payload.get("object") != "response" and payload.get("error") is not None):
        # An error with a success status (or no object at all): failed, with a status that says so.
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamStatusError(backend, 502, body, b"application/json"))
    _usage(relay, payload.get("usage"))
    relay.output_seen = 0
    found = _response_id(payload)
    if relay.check is not None:   # an answer kept for later names its owner when it goes out
        headers = await relay.check(backend, body, payload, headers, relay.rename, True, lambda: remember(found))
    await remember(found)
    await relay.send_whole(body, payload, relay.cost_headers(headers))
    return found


async def _stream(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                  headers: list[tuple[bytes, bytes]], remember: Remember) -> str | None:
    decoder = SSEDecoder()
    ids: list[str] = []         # the Response id the lifecycle events carry
    held: list[bytes] = []      # the opening lifecycle events, until something follows them
    ended = False
    async for chunk in body_chunks(response):
        if ended:
            continue   # read on briefly, so the connection can be reused
        events = feed_events(decoder, chunk, backend)
        out: list[bytes] = []
        try:
            for event in events:
                kind = _judge(relay, backend, event, attempt, ids)
                if kind is None:    # a comment, or nothing that counts
                    if relay.sink.started and not event.is_done:
                        out.append(event.raw)
                    continue
                raw = _renamed(relay.rename, event)
                if kind in TERMINAL_EVENTS and relay.meter is not None and isinstance(relay.usage, dict):
                    raw = _with_cost(relay, raw)
                if not relay.sink.started and kind in LIFECYCLE:
                    held.append(raw)
                    continue
                if not relay.sink.started:
                    await remember(ids[0] if ids else None)
                    await relay.sink.start(200, headers)
                    out, held = [*held, *out], []
                elif ids:
                    await remember(ids[0])   # an id first named after the stream began (once)
                out.append(raw)
                if kind in TERMINAL_EVENTS:
                    ended = True
                    break
        finally:
            if out and relay.sink.started:
                await relay.sink.send(b"".join(out))   # what came before a failure is the client's already
        if ended:
            await relay.sink.finish()
            attempt.scope.deadline = min(attempt.scope.deadline, trio.current_time() + DRAIN_GRACE)
    tail = decoder.close()
    if not ended and tail is not None and tail.complete \
            and _judge(relay, backend, tail, attempt, ids) in TERMINAL_EVENTS:
        await remember(ids[0] if ids else None)
        if not relay.sink.started:   # ended by a lone CR at the very end: a whole event
            await relay.sink.start(200, headers)
        await relay.sink.send(b"".join([*held, _renamed(relay.rename, tail)]))
        await relay.sink.finish()
        ended = True
    if not ended:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' ended the stream before the response was complete",
            code="upstream_stream_truncated"))
    return ids[0] if ids else None


def _judge(relay: Relay, backend: str, event: Event, attempt: AttemptBudget, ids: list[str]) -> str | None:
    """The event's type, once it is known to be a sound event of a stream still going; raises when it fails."""
    if not event.has_data or event.is_done:
        return None
    obj = relay.event_json(backend, event)
    attempt.got_data()
    kind = obj.get("type") if isinstance(obj, dict) else None
    if not isinstance(kind, str):
        kind = ""
    failed = kind == "response.failed" and not relay.sink.started
    if kind == "error" or failed:
        detail = (obj.get("response") or {}).get("error") if failed else obj
        message = detail.get("message") if isinstance(detail, dict) else None
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' sent an error event: {message or 'no message'}", code="upstream_stream_error"))
    if not ids and (kind in LIFECYCLE or kind in TERMINAL_EVENTS):
        found = _response_id(obj.get("response"))
        if found is not None:
            ids.append(found)
    if kind in TERMINAL_EVENTS:
        response = obj.get("response")
        _usage(relay, response.get("usage") if isinstance(response, dict) else None)
    elif kind.endswith(".delta"):
        relay.output_seen = (relay.output_seen or 0) + 1   # about a token a delta, should no usage come
    return kind


def _with_cost(relay: Relay, raw: bytes) -> bytes:
    """A terminal event with ``response.usage.cost`` (USD, the call's so far), its ``event:`` line kept."""
    assert relay.meter is not None
    cost = relay.meter.total_with(relay.usage)
    head, sep, data = raw.partition(b"data:")
    if cost is None or not sep:
        return raw
    obj = json.loads(data)
    obj["response"]["usage"] = {**obj["response"]["usage"], "cost": float(cost)}
    return head + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _renamed(rename: Rename | None, event: Event) -> bytes:
    """The event with the public model id in its ``response.model`` (events carry the model only there)."""
    if rename is None or b'"model"' not in event.data:
        return event.raw
    obj = json.loads(event.data)
    inner = obj.get("response") if isinstance(obj, dict) else None
    if not isinstance(inner, dict) or not isinstance(inner.get("model"), str):
        return event.raw
    model = inner["model"]
    if (rename.upstream is not None and model != rename.upstream) or model == rename.public:
        return event.raw
    inner["model"] = rename.public
    name = b"event: " + event.event.encode() + b"\n" if event.event else b""
    return name + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
