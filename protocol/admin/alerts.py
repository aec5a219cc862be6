"""``GET /admin/alerts``: the alerts claimed by the fleet, newest first, with their delivery's status.

Query: ``event`` (``budget.threshold``, ``key.revoked``, ``key.expiring``),
``owner`` (``key``, ``organization``), ``owner_id``, ``status``
(``pending``, ``delivered``, ``failed``) and ``limit`` (1-1000, default 100).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from switchyard.actors.alerts.records import DELIVERED, FAILED, PENDING, Alert
from switchyard.actors.control.shown import iso
from switchyard.actors.errors import InvalidRequest, Unavailable
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.alerts import EVENTS
from switchyard.protocol.admin.audit import DEFAULT_PAGE, MAX_PAGE
from switchyard.protocol.admin.control_http import query_int, query_of

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PATH = "/admin/alerts"
CHOICES = {"event": EVENTS, "owner": ("key", "organization"), "status": (PENDING, DELIVERED, FAILED)}


def alert_json(alert: Alert) -> dict[str, Any]:
    return {"seq": alert.seq, "event": alert.event, "owner": alert.owner, "owner_id": alert.owner_id,
            "bucket": alert.bucket, "threshold": alert.threshold if alert.event == "budget.threshold" else None,
            "created_at": iso(alert.created_at), "status": alert.status, "attempts": alert.attempts,
            "last_error": alert.last_error, "updated_at": iso(alert.updated_at), "details": dict(alert.details)}


class AlertsAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {PATH: {"GET": self.alerts}}

    async def alerts(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        query = query_of(scope)
        filters = {name: query.get(name) for name in ("event", "owner", "owner_id", "status")}
        for name, allowed in CHOICES.items():
            if filters[name] is not None and filters[name] not in allowed:
                raise InvalidRequest(f"{name} must be one of {', '.join(allowed)}, got {filters[name]!r}",
                                     param=name)
        limit = query_int(query.get("limit"), "limit", 1, MAX_PAGE, DEFAULT_PAGE)
        try:
            found = await runtime.alerts.recent(filters, limit)
        except StoreUnavailable as exc:
            raise Unavailable(f"The alerts' store is unavailable: {exc}", code="alerts_unavailable") from None
        await self.respond(send, 200, json.dumps({"alerts": [alert_json(a) for a in found]}).encode())
