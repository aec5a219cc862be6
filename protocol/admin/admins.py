"""``/admin/admins``: the administrators' accounts (the role ``admin`` alone reads and changes them).

- ``GET /admin/admins``: every account, by id.
- ``POST /admin/admins``: a new account (``id``, ``role``); its token is in
  this answer and never again.
- ``GET``, ``PATCH`` (``role``), ``DELETE /admin/admins/{id}``; ``POST
  /admin/admins/{id}/rotate`` (a new token; the old one stops at once) and
  ``POST /admin/admins/{id}/disable`` (its token and sessions stop at once).

The holder of ``admin.token`` (``admin``) is no account: it is listed as
``bootstrap`` when the token is set, and changed in the config only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping
from urllib.parse import unquote

from switchyard.actors.control.admins import BOOTSTRAP_ID, AdminChanges, admin_not_found
from switchyard.actors.control.records import AdminRecord
from switchyard.actors.control.shown import admin_json
from switchyard.actors.errors import MethodNotAllowed, PermissionDenied
from switchyard.config.key_body import KeyBodyError, admin_body
from switchyard.protocol.admin.control_http import actor_of, invalid_body, json_body

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PREFIX = "/admin/admins/"
ACTIONS = ("rotate", "disable")


BOOTSTRAP = {"id": BOOTSTRAP_ID, "role": "admin", "source": "config"}


def shown(record: AdminRecord) -> dict[str, Any]:
    return {**admin_json(record), "source": "database"}


class AdminsAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {"/admin/admins": {"GET": self.all_admins, "POST": self.create}}

    def changes(self, runtime: "Runtime", scope: Mapping[str, Any]) -> AdminChanges:
        return AdminChanges(runtime.control, lambda: runtime.snapshot.admin.token is not None,
                            clock=runtime.control.clock, actor=actor_of(runtime, scope))

    async def all_admins(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        records = runtime.control.view.admins
        body = {"admins": [shown(records[i]) for i in sorted(records)],
                "bootstrap": BOOTSTRAP if runtime.snapshot.admin.token is not None else None}
        await self.respond(send, 200, json.dumps(body).encode())

    async def create(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        runtime.control.writable()   # no store, or one away: the 503 before the body is read
        try:
            body = admin_body(await json_body(scope, receive, runtime), patch=False)
        except KeyBodyError as exc:
            raise invalid_body(exc) from None
        assert body.id is not None   # required: refused above without it
        record, token = await self.changes(runtime, scope).create(body.id, body.role)
        await self.respond(send, 201, json.dumps({**shown(record), "token": token}).encode())

    async def one(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        admin_id, _, action = scope["path"][len(PREFIX):].partition("/")
        admin_id, method = unquote(admin_id), scope["method"]
        changes = self.changes(runtime, scope)
        if admin_id == BOOTSTRAP_ID and (method != "GET" or action):
            raise PermissionDenied("The administrator 'admin' is the holder of admin.token: change it in the config",
                                   code="admin_read_only")
        if action:
            if action not in ACTIONS:
                raise admin_not_found(admin_id)
            if method != "POST":
                raise MethodNotAllowed(f"{method} is not allowed on {scope['path']}", allowed=("POST",))
            if action == "rotate":
                record, token = await changes.rotate(admin_id)
                await self.respond(send, 200, json.dumps({**shown(record), "token": token}).encode())
            else:
                await self.respond(send, 200, json.dumps(shown(await changes.disable(admin_id))).encode())
            return
        if method == "GET":
            if admin_id == BOOTSTRAP_ID and runtime.snapshot.admin.token is not None:
                await self.respond(send, 200, json.dumps(BOOTSTRAP).encode())
                return
            await self.respond(send, 200, json.dumps(shown(changes.record(admin_id))).encode())
        elif method == "PATCH":
            changes.record(admin_id)   # none: 404 before the body is read
            try:
                body = admin_body(await json_body(scope, receive, runtime), patch=True)
            except KeyBodyError as exc:
                raise invalid_body(exc) from None
            await self.respond(send, 200, json.dumps(shown(await changes.update(admin_id, body.role))).encode())
        elif method == "DELETE":
            await changes.delete(admin_id)
            await self.respond(send, 200, json.dumps({"id": admin_id, "deleted": True}).encode())
        else:
            raise MethodNotAllowed(f"{method} is not allowed on {scope['path']}", allowed=("GET", "PATCH", "DELETE"))
