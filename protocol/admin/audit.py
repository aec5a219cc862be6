"""``GET /admin/audit``: every change made to keys, organizations and administrators, newest first.

Each entry says who made it (an admin's id, ``admin`` for the holder of
``admin.token``, ``cli:<user>`` from the command line), when, from which
client address, what (``key.create``, ``key.rotate``, ``organization.delete``,
...), and the fields before and after, as the admin API shows them: a
secret never, its prefix only. Entries are written in their change's own
transaction (no change without its entry) and kept as long as the ledger's
records (``usage.retention``).

Query: ``actor``, ``action``, ``target`` (``key``, ``organization``, ``admin``),
``target_id``, ``since`` and ``until`` (RFC 3339 or Unix seconds),
``limit`` (1-1000, default 100) and ``before`` (the previous page's
``next``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from switchyard.actors.control.records import AuditEntry
from switchyard.actors.control.shown import iso
from switchyard.actors.errors import InvalidRequest
from switchyard.config.key_body import instant
from switchyard.protocol.admin.control_http import query_int, query_of

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PATH = "/admin/audit"
DEFAULT_PAGE = 100
MAX_PAGE = 1000


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    return {"seq": entry.seq, "at": iso(entry.at), "actor": entry.actor, "address": entry.address,
            "action": entry.action, "target": entry.target, "target_id": entry.target_id,
            "before": entry.before, "after": entry.after}


class AuditAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {PATH: {"GET": self.entries}}

    async def entries(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        query = query_of(scope)
        filters: dict[str, Any] = {name: query.get(name) for name in ("actor", "action", "target", "target_id")}
        for name in ("since", "until"):
            if query.get(name) is not None:
                try:
                    filters[name] = instant(query[name])
                except ValueError as exc:
                    raise InvalidRequest(f"{name} {exc}", param=name) from None
        limit = query_int(query.get("limit"), "limit", 1, MAX_PAGE, DEFAULT_PAGE)
        before = None if query.get("before") is None else query_int(query["before"], "before", 1, 2**62, 0)
        found = await runtime.control.audit(filters, limit + 1, before)
        page = found[:limit]
        next_seq = page[-1].seq if len(found) > limit and page else None
        await self.respond(send, 200, json.dumps({"entries": [entry_json(e) for e in page],
                                                  "next": next_seq}).encode())
