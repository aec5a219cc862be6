"""``GET /v1/key``: what the key that asks may do and has left, and nothing about any other key.

OpenRouter's ``GET /api/v1/key`` shape where it fits: ``data.label`` (the
key's id), ``limit`` (its budget in USD, null without one), ``usage`` (USD
spent this period), ``limit_remaining``, ``limit_reset`` (the budget's
period), then ours: the public prefix of a database key, where it comes
from, the period's end, token budgets, rate-limit windows as they stand
(read from the running limiter, Redis's with ``state.redis_url``), what it
may reach, and its expiry. Authenticated by the key itself; a call without
one (an open data plane) gets the 401 that says so.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from switchyard.actors.control.shown import iso, settings
from switchyard.actors.errors import AuthenticationError
from switchyard.protocol.http.asgi import respond

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.http.asgi import Receive, Scope, Send
    from switchyard.protocol.http.gate import Identity

PATH = "/v1/key"


async def key_info(runtime: "Runtime", who: "Identity", scope: "Scope", receive: "Receive", send: "Send") -> None:
    key = who.key
    if key is None:
        raise AuthenticationError("GET /v1/key describes the API key that asks: send 'Authorization: Bearer "
                                  "<API key>'", code="missing_api_key")
    view = await runtime.limiter.key_view(
        key, runtime.control.view.organizations_over(runtime.snapshot.organizations))
    # the view's record, else the store's the key was judged by (made elsewhere a moment ago: not in the view yet)
    record = runtime.control.view.records.get(key.id) or who.record
    if any(k.id == key.id for k in runtime.snapshot.api_keys.keys):
        record = None   # the config's key of this id is the one that asked
    budget: dict[str, Any] = view.get("budget") or {}
    data: dict[str, Any] = {
        "label": key.id,
        "limit": budget.get("limit_usd"),
        "usage": budget.get("spent_usd", 0.0),
        "limit_remaining": budget.get("left_usd"),
        "limit_reset": budget.get("period"),
        "is_free_tier": False,
        "id": key.id,
        "source": "database" if record is not None else "config",
        "prefix": record.prefix if record is not None else None,
        "organization_id": key.organization_id,
        "budget": view.get("budget"),
        "rate_limit": view.get("rate_limit"),
        "settings": settings(key),
        "expires_at": iso(record.expires_at) if record is not None else None,
    }
    if "organization" in view:
        data["organization"] = view["organization"]
    await respond(send, 200, json.dumps({"data": data}).encode())
