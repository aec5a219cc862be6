"""``/admin/organizations``: every organization, from the config and the database, and the database's changed.

- ``GET /admin/organizations`` (``?source=config|database``): the config's
  in config order, then the database's by id.
- ``POST /admin/organizations``: a new one (``id`` required; ``budget``,
  ``rate_limit``, ``metadata`` as in ``organizations[]``).
- ``GET``, ``PATCH``, ``DELETE /admin/organizations/{id}``.

Keys belong to an organization by their ``organization_id``; its budget and
rate limit are shared by all of them, the same for both kinds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping
from urllib.parse import unquote

from switchyard.actors.control.organizations import OrgChanges, org_not_found
from switchyard.actors.control.records import OrgRecord
from switchyard.actors.control.shown import iso, limits_json, mcp_json
from switchyard.actors.errors import InvalidRequest, MethodNotAllowed, PermissionDenied
from switchyard.config.key_body import KeyBodyError, org_body
from switchyard.config.limits import Organization
from switchyard.protocol.admin.control_http import actor_of, countable, invalid_body, json_body, query_of

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PREFIX = "/admin/organizations/"
SOURCES = ("config", "database")


def org_json(org: Organization, record: OrgRecord | None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": org.id, "source": "database" if record is not None else "config",
                           **limits_json(org.rate_limit, org.budget), **mcp_json(org)}
    if record is None:
        out["read_only"] = True
    else:
        out.update(created_at=iso(record.created_at), updated_at=iso(record.updated_at),
                   created_by=record.created_by, metadata=dict(record.metadata))
    return out


class OrganizationsAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {"/admin/organizations": {"GET": self.all_organizations, "POST": self.create}}

    def changes(self, runtime: "Runtime", scope: Mapping[str, Any]) -> OrgChanges:
        return OrgChanges(runtime.control, lambda: frozenset(runtime.snapshot.organizations),
                          clock=runtime.control.clock, actor=actor_of(runtime, scope))

    async def all_organizations(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        source = query_of(scope).get("source")
        if source is not None and source not in SOURCES:
            raise InvalidRequest(f"source must be one of {', '.join(SOURCES)}, got {source!r}", param="source")
        out = []
        if source in (None, "config"):
            out += [org_json(org, None) for org in runtime.snapshot.organizations.values()]
        if source in (None, "database"):
            records = runtime.control.view.organizations
            out += [org_json(records[i].organization, records[i]) for i in sorted(records)]
        await self.respond(send, 200, json.dumps({"organizations": out}).encode())

    async def create(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        runtime.control.writable()
        try:
            body = org_body(await json_body(scope, receive, runtime), patch=False)
        except KeyBodyError as exc:
            raise invalid_body(exc) from None
        countable(runtime, body.budget is not None or body.rate_limit is not None, "body")
        assert body.id is not None   # required: refused above without it
        record = await self.changes(runtime, scope).create(body.id, body.changes(), actor_of(runtime, scope).id)
        await self.respond(send, 201, json.dumps(org_json(record.organization, record)).encode())

    async def one(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        org_id, method = unquote(scope["path"][len(PREFIX):]), scope["method"]
        config = runtime.snapshot.organizations.get(org_id)
        if method == "GET":
            if config is not None:
                await self.respond(send, 200, json.dumps(org_json(config, None)).encode())
                return
            record = self.changes(runtime, scope).record(org_id)
            await self.respond(send, 200, json.dumps(org_json(record.organization, record)).encode())
            return
        if method not in ("PATCH", "DELETE"):
            raise MethodNotAllowed(f"{method} is not allowed on {scope['path']}", allowed=("GET", "PATCH", "DELETE"))
        if config is not None:
            raise PermissionDenied(f"The organization '{org_id}' is declared in the config's organizations: change "
                                   f"it there (the admin API changes database organizations only)",
                                   code="organization_read_only")
        if org_id not in runtime.control.view.organizations:
            raise org_not_found(org_id)
        changes = self.changes(runtime, scope)
        if method == "DELETE":
            await changes.delete(org_id)
            await self.respond(send, 200, json.dumps({"id": org_id, "deleted": True}).encode())
            return
        try:
            body = org_body(await json_body(scope, receive, runtime), patch=True)
        except KeyBodyError as exc:
            raise invalid_body(exc) from None
        countable(runtime, body.budget is not None or body.rate_limit is not None, "body")
        record = await changes.update(org_id, body.changes())
        await self.respond(send, 200, json.dumps(org_json(record.organization, record)).encode())
