"""``/admin/*``: the operator's API, behind a bearer token.

Without ``admin.token`` in the config the whole surface answers 404: it is
off, never open. With it, a missing or wrong token is 401. Nothing here
ever returns a secret.
"""

from __future__ import annotations

import hmac
import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from protocol.errors import AuthenticationError, RouteNotFound

if TYPE_CHECKING:
    from actors.runtime import Runtime

Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Respond = Callable[..., Awaitable[None]]

TRACE_PREFIX, TRACE_SUFFIX = "/admin/requests/", "/events"


class AdminApi:
    def __init__(self, respond: Respond) -> None:
        self.respond = respond

    async def handle(self, runtime: "Runtime", scope: Scope, receive: Any, send: Send) -> None:
        token = runtime.snapshot.admin.token
        path = scope["path"]
        if token is None:
            raise RouteNotFound(f"No route for {scope['method']} {path}")
        self._authenticate(scope, token)
        if path.startswith(TRACE_PREFIX) and path.endswith(TRACE_SUFFIX) and scope["method"] == "GET":
            await self.request_events(runtime, path[len(TRACE_PREFIX):-len(TRACE_SUFFIX)], send)
            return
        raise RouteNotFound(f"No route for {scope['method']} {path}")

    @staticmethod
    def _authenticate(scope: Scope, token: str) -> None:
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        scheme, _, credential = given.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(credential.strip(), token.encode()):
            raise AuthenticationError("The admin API needs 'Authorization: Bearer <admin.token>'")

    async def request_events(self, runtime: "Runtime", request_id: str, send: Send) -> None:
        """The route events of one recent call (the last 1,000 calls are kept)."""
        trace = runtime.traces.get(request_id)
        if trace is None:
            raise RouteNotFound(f"No recent call with request id '{request_id}'", code="request_not_found")
        await self.respond(send, 200, json.dumps(trace.as_dict()).encode())
