"""Stored responses: ``GET``/``DELETE /v1/responses/{id}``, ``POST .../cancel``, ``GET .../input_items``.

A stored response lives on the backend that created it, so each of these
goes there, with that backend's credentials; the gateway knows which one
from the ids it relayed, per API key (``actors/stored_owners.py``: this
worker's memory, then the store the workers and instances share). An id this
key did not create, or one forgotten by the ``stored_responses`` bounds, is a
404 worded exactly like an id that never existed: another key's ids cannot be read, cancelled, deleted or probed.
The backend's answer (status, JSON, or the event stream of
``GET ...?stream=true``) is relayed as it comes; a successful ``DELETE``
forgets the id. Nothing is retried or failed over: only one backend holds
the response.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import trio

from switchyard.actors import hops
from switchyard.actors.addressing import api_url, auth_headers
from switchyard.actors.bodies import body_chunks
from switchyard.actors.errors import GatewayError, MethodNotAllowed, RouteNotFound, UpstreamTimeout
from switchyard.actors.response_owners import owner_of
from switchyard.protocol.http.asgi import TIMING, Receive, Scope, Send

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity

log = logging.getLogger("switchyard.responses")

PREFIX = "/v1/responses/"
# {id}, {id}/cancel, {id}/input_items; an id is what OpenAI's are made of (letters, digits, _ and -)
_PATH = re.compile(r"/v1/responses/([A-Za-z0-9_\-]{1,200})(/cancel|/input_items)?")
# (method, suffix) -> what is done
ACTIONS = {("GET", ""): "retrieve", ("DELETE", ""): "delete", ("POST", "/cancel"): "cancel",
           ("GET", "/input_items"): "input_items"}
_PASSED_HEADERS = frozenset({"content-type", "retry-after", "x-request-id", "openai-processing-ms"})


class ResponseNotFound(GatewayError):
    """The one answer for an unknown, forgotten or another key's response id."""

    status = 404
    type = "invalid_request_error"
    code = "not_found"


def not_found(response_id: str) -> ResponseNotFound:
    return ResponseNotFound(f"Response with id '{response_id}' not found.", param="response_id")


def parse_path(method: str, path: str) -> tuple[str, str]:
    """``(response id, action)`` of a stored-response route, or the 404/405 for the path."""
    found = _PATH.fullmatch(path)
    if found is None:
        raise RouteNotFound(f"No route for {method} {path}")
    response_id, suffix = found.group(1), found.group(2) or ""
    action = ACTIONS.get((method, suffix))
    if action is None:
        allowed = tuple(m for m, s in ACTIONS if s == suffix)
        raise MethodNotAllowed(f"{method} is not allowed on {path}", allowed=allowed)
    return response_id, action


async def stored_response(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                          send: Send) -> None:
    """One stored-response call, sent to the backend that created the response."""
    response_id, action = parse_path(scope["method"], scope["path"])
    key = who.key
    owner = owner_of(key)
    snapshot = runtime.snapshot
    name = await runtime.response_owners.backend_of(owner, response_id)
    backend = snapshot.backend(name) if name is not None else None
    if backend is None or not backend.enabled or (key is not None and not key.allows_backend(backend.name)):
        raise not_found(response_id)
    suffix = "" if action in ("retrieve", "delete") else "/" + action
    url = api_url(backend.url, f"/v1/responses/{response_id}{suffix}")
    query = scope.get("query_string") or b""
    if query:
        url = url.copy_with(query=query)
    headers = [("accept", "*/*"), *auth_headers(backend), hops.outbound(who.hops)]
    body = b"{}" if action == "cancel" else b""
    if body:
        headers.insert(0, ("content-type", "application/json"))
    request = runtime.upstream.request(scope["method"], url, headers=headers, content=body)
    timeouts = snapshot.timeouts
    streamed = action == "retrieve" and b"stream=true" in query
    timing = scope.get(TIMING)   # the answer's Server-Timing: the wait for the backend's headers is its
    with runtime.upstream.errors(backend.name):
        with trio.move_on_after(timeouts.standard.first_byte) as waited:
            if timing is not None:
                timing.dial(trio.current_time())
            try:
                response = await runtime.upstream.send(request)
            finally:
                if timing is not None:
                    timing.hang_up(trio.current_time())
        if waited.cancelled_caught:
            raise UpstreamTimeout(f"Backend '{backend.name}' did not answer within "
                                  f"{timeouts.standard.first_byte:g}s", details={"timeout": "first_byte"})
        try:
            passed = [(k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() in _PASSED_HEADERS]
            await send({"type": "http.response.start", "status": response.status_code, "headers": passed})
            # a stream only has to keep moving; a whole answer has the standard total
            bound = timeouts.max_chunk_interval if streamed else timeouts.standard.total
            chunks = aiter(body_chunks(response))
            while True:
                with trio.move_on_after(bound) as quiet:
                    chunk = await anext(chunks, None)
                if quiet.cancelled_caught:
                    # the backend went quiet: the answer is left unfinished (the connection closes), never
                    # presented as whole
                    log.warning("stored response %s: backend %s went quiet after %gs; answer cut", response_id,
                                backend.name, bound)
                    return
                if chunk is None:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()
    if action == "delete" and response.status_code < 300:
        await runtime.response_owners.forget(owner, response_id)
