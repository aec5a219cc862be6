"""``GET /admin/keys/{id}``: one API key's limits as they stand: window counts, calls in flight, budgets left;
``GET /admin/keys``: every key of the running config, each as its own page shows it.

Read from the running limiter (Redis's shared counters with ``state.redis_url``,
else this worker's), never from the config alone, so what it shows is what
the next call will be judged by. The key's secret is never shown.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable
from urllib.parse import unquote

from switchyard.actors.errors import MethodNotAllowed, RouteNotFound

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PREFIX = "/admin/keys/"


class KeysAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {"/admin/keys": {"GET": self.all_keys}}

    async def all_keys(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        """``{"keys": [...]}`` in config order. A key a reload removed while the list was read is left out:
        the list is the running config's."""
        views = []
        for key in runtime.snapshot.api_keys.keys:
            try:
                views.append(await runtime.limiter.key_view(key.id))
            except KeyError:
                continue
        await self.respond(send, 200, json.dumps({"keys": views}).encode())

    async def one_key(self, runtime: "Runtime", scope: dict[str, Any], send: Any) -> None:
        if scope["method"] != "GET":
            raise MethodNotAllowed(f"{scope['method']} is not allowed on {scope['path']}", allowed=("GET",))
        key_id = unquote(scope["path"][len(PREFIX):])
        try:
            view = await runtime.limiter.key_view(key_id)
        except KeyError:
            raise RouteNotFound(f"No API key with id '{key_id}' in the running config",
                                code="key_not_found") from None
        await self.respond(send, 200, json.dumps(view).encode())
