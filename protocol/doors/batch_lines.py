"""Batch lines run in process through the App's own doors: the BatchRunner's ``run_line``.

A line is served exactly as a client's call to its url would be: ``App.http``
with a synthetic ASGI scope whose answer is captured, so the door's
validation, the key's allowlists, rate limits and budgets, routing, retries,
fallback, guardrails, the cache, the ledger, metrics and spans all apply,
and a line the gateway refuses gets the very error a client would. Only the
key differs: there is no secret to read, so the line comes with an
``Identity`` whose key its runner looked up by id (``actors/batches/
owner_keys.py``) and whose purpose is ``batch`` (the ledger's, priced with
the model's ``batch_discount``). No client can ask for that purpose: only
this path sets it. A line counts against ``server.max_concurrent_requests``
like any call; one the gateway turns away for now (that cap, the key's rate
limit, a drain) comes back with ``retry_after`` and is run again later.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import trio

from switchyard.actors import log_fields
from switchyard.actors.batches.lines import LineAnswer, LineCall
from switchyard.actors.errors import Unavailable
from switchyard.actors.ledger.record import BATCH
from switchyard.protocol.http.gate import Identity

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost

# The gateway's own refusals that waiting cures: its concurrency cap, a drain (a 429 cures itself too, unless
# it says not to retry: a budget spent)
LATER = frozenset({"too_many_concurrent_requests", "server_shutting_down"})
JSON = [(b"content-type", b"application/json")]


def attach(app: "DoorHost", runtime: "Runtime") -> None:
    """``runtime``'s batch runner (if it has one) runs its lines through ``app``."""
    if runtime.batch_runner is not None:
        runtime.batch_runner.run_line = functools.partial(run_line, app)


async def run_line(app: "DoorHost", call: LineCall) -> LineAnswer:
    """``call`` served by ``app``'s door for its url; the answer as the client would have had it."""
    if call.refused is not None:   # the owner's key is gone: its 401, before any door
        return LineAnswer(call.refused.status, call.refused.body(), call.request_id)
    runtime = app.runtime
    if runtime is None:   # starting or stopping
        return LineAnswer(503, Unavailable("The gateway is starting or stopping").body(), call.request_id, 1.0)
    headers = [*JSON, (b"content-length", str(len(call.body)).encode())]
    scope: dict[str, Any] = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                             "scheme": "http", "path": call.url, "raw_path": call.url.encode(), "query_string": b"",
                             "root_path": "", "headers": headers}
    who = Identity(call.request_id, call.url, headers, None, call.key, runtime.snapshot, credentials=[],
                   control=runtime.control, purpose=BATCH)
    answer = _Captured(call.body)
    bound = log_fields.bind(key_id=call.key.id if call.key is not None else None)   # as the gate binds it
    try:
        await app.http(scope, answer.receive, answer.send, settled=who)
    finally:
        answer.over.set()   # the call's watcher hears its client leave
        log_fields.unbind(bound)
    return answer.line(call.request_id)


class _Captured:
    """The synthetic client: sends the body, keeps the answer, and leaves once the answer is whole."""

    def __init__(self, body: bytes) -> None:
        self.body: bytes | None = body
        self.over = trio.Event()
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    async def receive(self) -> dict[str, Any]:
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.over.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status, self.headers = message["status"], list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                self.over.set()

    def line(self, request_id: str) -> LineAnswer:
        body = b"".join(self.chunks)
        if not self.status:   # no answer at all (not expected: every door answers)
            return LineAnswer(500, body, request_id)
        return LineAnswer(self.status, body, request_id, self._later(body))

    def _later(self, body: bytes) -> float | None:
        """Seconds to wait before the line is run again, when the answer is a refusal that waiting cures."""
        found = {name.lower(): value for name, value in self.headers}
        if self.status == 429 and found.get(b"x-should-retry") != b"false" or \
                self.status == 503 and _code(body) in LATER:
            after = found.get(b"retry-after", b"")
            return float(after) if after.isdigit() else 1.0
        return None


def _code(body: bytes) -> Any:
    """The ``error.code`` of an error body in OpenAI's shape (None when it has none)."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    return error.get("code") if isinstance(error, dict) else None
