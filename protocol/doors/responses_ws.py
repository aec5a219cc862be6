"""The Responses API over a websocket: ``GET /v1/responses`` upgraded, as OpenAI serves it.

The client sends ``response.create`` events (the body of ``POST
/v1/responses``, without ``stream``, which is implicit) and gets each
response's stream events back, one JSON message per event; an error is an
``error`` event (``{"type": "error", "status", "error": {...}}``) and the
socket stays open for the next turn. A ``stream_id`` on ``response.create``
is echoed on every event of that response.

Each turn is bridged to the HTTP pipeline, as a streamed ``/v1/responses``
call: the API key (checked at the handshake, like HTTP: Bearer or
``x-api-key``), aliases, selection, budgets, retries and failover before the
first event, the ledger and the stored-response map all apply per turn, and
any backend that has the Responses API serves it, whether or not it speaks
the websocket mode itself. Turns run one after another (``stream_id``
multiplexing is not run in parallel), and the backend keeps no state on a
socket of ours. The socket itself keeps the responses it relayed that no
backend holds (``store: false``, or a chat backend's), so a later turn on it
may chain on them by ``previous_response_id`` as on OpenAI's own socket
(``responses_ws_chain.py``); a stored response is continued by the backend
that holds it, as over HTTP. ``response.steer`` and ``background`` are
refused.

The session takes one of ``server.max_concurrent_requests`` while open, is
closed after ``server.realtime_idle_timeout`` without a turn, and with 1001
when the server drains.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any

import attrs
import trio

from switchyard.actors import log_fields
from switchyard.actors.call.pipeline import Door, serve_call
from switchyard.actors.errors import BodyTooLarge, GatewayError, InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.response_owners import owner_of
from switchyard.actors.sse import SSEDecoder
from switchyard.config.access import ApiKey
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import Snapshot
from switchyard.protocol.doors.responses import parse_responses_payload
from switchyard.protocol.doors.responses_ws_chain import SocketResponses, Turn
from switchyard.protocol.http import client_json
from switchyard.protocol.http.asgi import Receive, Scope, Send, new_request_id, refuse_handshake
from switchyard.protocol.http.gate import SOCKET, Identity
from switchyard.protocol.http.refusals import record_refusal

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost

log = logging.getLogger("switchyard.responses")

PATH = "/v1/responses"
INBOX = 16   # client messages read ahead of the turn in progress
_SEQUENCE = re.compile(rb'"sequence_number":\s*(\d+)')
# The events that carry the Response object, and those that end it.
_RESPONSE_EVENT = re.compile(rb'"type":\s*"response\.(created|queued|in_progress|completed|incomplete|failed)"')
FINAL = (b"completed", b"incomplete", b"failed")


async def serve_responses_socket(app: "DoorHost", scope: Scope, receive: Receive, send: Send) -> None:
    """One websocket connection on ``/v1/responses``."""
    await ResponsesSocket(app, scope, receive, send).serve()


def error_event(error: GatewayError, **extra: Any) -> dict[str, Any]:
    """The ``error`` event for ``error``: the backend's own error object when it sent one."""
    try:
        detail = json.loads(error.body()).get("error")
    except (ValueError, AttributeError):
        detail = None
    if not isinstance(detail, dict):
        detail = error.envelope()["error"]
    return {"type": "error", "status": error.status, **extra,
            "error": {"type": detail.get("type", error.type), "code": detail.get("code", error.code),
                      "message": detail.get("message", error.message), "param": detail.get("param", error.param)}}


class SocketSink:
    """A turn's answer: the relayed Responses event stream, one websocket message per event."""

    streaming = True

    def __init__(self, socket: "ResponsesSocket", stream_id: str | None) -> None:
        self.socket, self.stream_id = socket, stream_id
        self.started = self.finished = self.failed = False
        self.echo: str | None = None              # the previous_response_id the Response objects name
        self.final: dict[str, Any] | None = None  # the Response object of the last event that ended it
        self._decoder = SSEDecoder()
        self._next_sequence = 0

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True

    async def send(self, chunk: bytes) -> None:
        for event in self._decoder.feed(chunk):
            await self._event(event.data if event.has_data and not event.is_done else None)

    async def finish(self) -> None:
        tail = self._decoder.close()
        if tail is not None and tail.complete and tail.has_data:
            await self._event(tail.data)
        self.finished = True

    async def fail(self, error: GatewayError) -> None:
        extra: dict[str, Any] = {"sequence_number": self._next_sequence} if self.started else {}
        if self.stream_id is not None:
            extra["stream_id"] = self.stream_id
        await self.socket.emit(json.dumps(error_event(error, **extra)))
        self.finished = self.failed = True

    async def _event(self, data: bytes | None) -> None:
        if data is None:
            return
        found = _SEQUENCE.findall(data)
        if found:
            self._next_sequence = int(found[-1]) + 1
        kind = _RESPONSE_EVENT.search(data)
        final = kind is not None and kind.group(1) in FINAL
        edit = self.stream_id is not None or kind is not None and self.echo is not None
        if edit or final:
            obj = json.loads(data)
            if isinstance(obj, dict):
                response = obj.get("response") if kind is not None else None
                if isinstance(response, dict):
                    if self.echo is not None:   # sent with its conversation instead: the id the client named
                        response["previous_response_id"] = self.echo
                    if final:
                        self.final = response
                if self.stream_id is not None:
                    obj["stream_id"] = self.stream_id
                if edit:
                    data = json.dumps(obj).encode()
        await self.socket.emit(data.decode())


class ResponsesSocket:
    def __init__(self, app: "DoorHost", scope: Scope, receive: Receive, send: Send) -> None:
        self.app, self.scope, self.receive, self._send = app, scope, receive, send
        self.request_id = new_request_id()
        self.id_headers = [(b"x-continuum-request-id", self.request_id.encode())]
        self.closed = trio.Event()           # the client left
        self._scope: trio.CancelScope | None = None
        self._end: tuple[int, str] | None = None   # how the server closes it (code, reason)
        self.responses = SocketResponses()   # its responses no backend holds, for chaining on this socket

    async def serve(self) -> None:
        if (await self.receive())["type"] != "websocket.connect":
            return
        fields = log_fields.bind(request_id=self.request_id)
        try:
            gate = self.app.gate
            try:
                who = await gate.identify(self.scope, self.request_id)
                passage = await gate.admit(member=self, elsewhere=SOCKET)
            except GatewayError as err:
                await refuse_handshake(self.scope, self._send, err, self.id_headers)
                return
            with passage:   # counted against the cap, and one of the calls the drain waits for, then ends
                await self._session(passage.runtime, who)
        finally:
            log_fields.unbind(fields)

    def shut_down(self) -> None:
        """The drain window ran out: the turn in progress ends, the socket closes with 1001."""
        self._end = (1001, "server shutting down")
        if self._scope is not None:
            self._scope.cancel()

    async def emit(self, text: str) -> None:
        if not self.closed.is_set():
            await self._send({"type": "websocket.send", "text": text})

    async def _session(self, runtime: "Runtime", who: Identity) -> None:
        await self._send({"type": "websocket.accept", "headers": self.id_headers})
        inbox_send, inbox = trio.open_memory_channel[str](INBOX)
        idle = runtime.snapshot.server.realtime_idle_timeout
        turns = 0
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            if self._end is not None:
                nursery.cancel_scope.cancel()
            nursery.start_soon(self._read, inbox_send)
            while True:
                # the idle timeout counts the wait for the next event, never the turn being answered
                text = None
                with trio.move_on_after(idle):
                    try:
                        text = await inbox.receive()
                    except trio.EndOfChannel:
                        break   # the client left
                if text is None:
                    self._end = (1000, f"idle for {idle:g}s")
                    break
                turns += 1
                await self._turn(runtime, who, text)
            nursery.cancel_scope.cancel()
        if self._end is not None and not self.closed.is_set():
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await self._send({"type": "websocket.close", "code": self._end[0], "reason": self._end[1]})
        log.info("responses websocket ended after %d turn(s): %s", turns,
                 self._end[1] if self._end is not None else "client closed")

    async def _read(self, inbox: trio.MemorySendChannel[str]) -> None:
        async with inbox:
            while True:
                message = await self.receive()
                if message["type"] == "websocket.disconnect":
                    self.closed.set()
                    return
                text = message.get("text")
                if text is None:
                    raw = message.get("bytes") or b""
                    text = raw.decode("utf-8", "replace")
                await inbox.send(text)

    async def _turn(self, runtime: "Runtime", who: Identity, text: str) -> None:
        """One client event: a ``response.create`` run as a streamed ``/v1/responses`` call, or an error event.
        A turn refused before it became a call is recorded as a refused call, as the HTTP doors' are. Each
        turn runs on the revision current when it comes, its key judged by it."""
        key, stream_id = who.key, None
        request_id, arrived, wall = new_request_id(), trio.current_time(), time.time()
        event: Any = None
        try:
            try:
                event = client_json.loads(text)   # bounded depth, as the HTTP doors read a body
            except ValueError:
                raise InvalidRequest("A websocket message must be JSON", code="invalid_json") from None
            if not isinstance(event, dict):
                raise InvalidRequest("A websocket message must be a JSON object (a client event)", param="type")
            stream_id = event.get("stream_id") if isinstance(event.get("stream_id"), str) else None
            payload, body = self._create_body(event, runtime)
            arrival = who.arrival(runtime.snapshot, self.app.gate.active, request_id)
            key = arrival.key
            sink, turns = SocketSink(self, stream_id), list[Turn]()
            door = Door(lambda *args: self._parse(sink, turns, *args), lambda call: sink, Endpoint.RESPONSES)
            fields = log_fields.bind(request_id=request_id)
            try:
                await serve_call(runtime, arrival, payload, body, door, self.closed.wait)
            finally:
                log_fields.unbind(fields)
            self._settle(runtime, key, turns[0] if turns else None, sink)
        except GatewayError as err:   # raised before the pipeline made the turn a call: its refusals are its own
            if isinstance(event, dict) and isinstance(event.get("previous_response_id"), str):
                self.responses.forget(event["previous_response_id"])   # a failed turn forgets what it continued
            model = event.get("model") if isinstance(event, dict) else None
            fields = log_fields.bind(request_id=request_id)   # the request_rejected line names the turn
            try:
                record_refusal(runtime, PATH, err, request_id, key=key, model=model, stream=True, trace_id=None,
                               arrived=arrived, wall=wall)
            finally:
                log_fields.unbind(fields)
            extra = {"stream_id": stream_id} if stream_id is not None else {}
            await self.emit(json.dumps(error_event(err, **extra)))

    def _parse(self, sink: SocketSink, turns: list[Turn], payload: dict[str, Any], body: bytes, snapshot: Snapshot,
               headers: Any, request_id: str) -> Call:
        """The turn's Call, checked as the client sent it; continuing a response this socket keeps, with that
        conversation in its body (``responses_ws_chain.py``)."""
        call = parse_responses_payload(payload, body, snapshot, headers, request_id)
        turn = self.responses.turn(call.payload)
        turns.append(turn)
        if not turn.expanded:
            return call
        sink.echo = turn.named
        return attrs.evolve(call, payload=turn.payload, body=json.dumps(turn.payload).encode())

    def _settle(self, runtime: "Runtime", key: ApiKey | None, turn: Turn | None, sink: SocketSink) -> None:
        """After a turn: the response it made is kept when no backend holds it; a turn that failed forgets
        the response it continued."""
        final = sink.final
        if sink.failed or final is None or final.get("status") not in ("completed", "incomplete"):
            if turn is not None and turn.named is not None:
                self.responses.forget(turn.named)
            return
        rid = final.get("id")
        if turn is None or not isinstance(rid, str):
            return
        if runtime.response_owners.memory.backend_of(owner_of(key), rid, trio.current_time()) is None:
            self.responses.keep(rid, turn, final.get("output"))

    def _create_body(self, event: dict[str, Any], runtime: "Runtime") -> tuple[dict[str, Any], bytes]:
        kind = event.get("type")
        if kind != "response.create":
            raise InvalidRequest(f"Unsupported client event type {kind!r}: this gateway takes 'response.create'",
                                 param="type", code="unsupported_event_type")
        if event.get("background") is not None:
            raise InvalidRequest("'background' is not supported over a websocket", param="background",
                                 code="unsupported_parameter")
        stream = event.get("stream")
        if stream is not None and stream is not True:
            raise InvalidRequest("'stream' is implicit over a websocket: leave it out", param="stream",
                                 code="unsupported_parameter")
        payload = {k: v for k, v in event.items() if k not in ("type", "stream_id")}
        payload["stream"] = True
        body = json.dumps(payload).encode()
        limit = runtime.snapshot.server.max_body_bytes
        if len(body) > limit:
            raise BodyTooLarge(f"The response.create event is larger than server.max_body_bytes ({limit} bytes)")
        return payload, body
