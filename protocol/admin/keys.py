"""``/admin/keys``: every API key, from the config and the database, and the changes made to database keys.

- ``GET /admin/keys`` (``?source=config|database``, ``organization_id=``,
  ``status=active|revoked|expired``, ``limit=`` 1-1000, ``after=<next>``):
  config keys in config order, then database keys in id order; ``next`` is
  the cursor of the next page (null on the last).
- ``POST /admin/keys``: a new database key; its secret is in this answer
  and never again.
- ``GET``, ``PATCH``, ``DELETE /admin/keys/{id}``; ``POST
  /admin/keys/{id}/rotate`` (a new secret; the old one works for the
  ``grace_seconds`` asked, then stops) and ``POST /admin/keys/{id}/revoke``.

A key's page is what the limiter holds for it (window counts, calls in
flight, budgets left: read from the running limiter, Redis's shared
counters with ``state.redis_url``), with the record: where it comes from
(``source``), its public prefix, status, settings and dates. Config keys
are read-only here. A secret is never shown but once, at its making.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping
from urllib.parse import unquote

from switchyard.actors.control.keys import KeyChanges, not_found
from switchyard.actors.control.records import KeyRecord
from switchyard.actors.control.shown import STATUSES, config_fields, record_fields, settings, status_of
from switchyard.actors.errors import InvalidRequest, MethodNotAllowed, PermissionDenied
from switchyard.config.access import ApiKey
from switchyard.config.key_body import KeyBodyError, create_body, patch_body, rotate_body
from switchyard.protocol.admin.control_http import actor_of, countable, invalid_body, json_body, query_of

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PREFIX = "/admin/keys/"

MAX_PAGE = 1000
SOURCES = ("config", "database")


class KeysAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {"/admin/keys": {"GET": self.all_keys, "POST": self.create}}

    def changes(self, runtime: "Runtime", scope: Mapping[str, Any]) -> KeyChanges:
        return KeyChanges(runtime.control, lambda: frozenset(k.id for k in runtime.snapshot.api_keys.keys),
                          clock=runtime.control.clock, actor=actor_of(runtime, scope))

    # --- reading ---------------------------------------------------------------

    async def page(self, runtime: "Runtime", key: ApiKey, record: KeyRecord | None) -> dict[str, Any]:
        out = await runtime.limiter.key_view(
            key, runtime.control.view.organizations_over(runtime.snapshot.organizations))
        out.update(record_fields(record, runtime.control.clock()) if record is not None else config_fields())
        out["settings"] = settings(key)
        return out

    def _find(self, runtime: "Runtime", key_id: str) -> tuple[ApiKey, KeyRecord | None]:
        for key in runtime.snapshot.api_keys.keys:
            if key.id == key_id:
                return key, None
        record = runtime.control.view.records.get(key_id)
        if record is None:
            raise not_found(key_id)
        return record.key, record

    async def all_keys(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        """One page of keys, in id order (config keys first), filtered as the query asks."""
        query = query_of(scope)
        source, org, status = query.get("source"), query.get("organization_id"), query.get("status")
        if source is not None and source not in SOURCES:
            raise InvalidRequest(f"source must be one of {', '.join(SOURCES)}, got {source!r}", param="source")
        if status is not None and status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}, got {status!r}", param="status")
        limit = _limit(query.get("limit"))
        after = query.get("after")
        now = runtime.control.clock()
        rows: list[tuple[tuple[int, str], ApiKey, KeyRecord | None]] = []
        if source in (None, "config"):   # in config order, as the file lists them
            rows += [((0, k.id), k, None) for k in runtime.snapshot.api_keys.keys]
        if source in (None, "database"):   # in id order
            records = runtime.control.view.records
            rows += [((1, key_id), records[key_id].key, records[key_id]) for key_id in sorted(records)]
        if after is not None:
            rows = _after(rows, _cursor(after))
        rows = [row for row in rows
                if (org is None or row[1].organization_id == org)
                and (status is None or (status_of(row[2], now) if row[2] is not None else "active") == status)]
        page, more = rows[:limit], len(rows) > limit
        views = [await self.page(runtime, key, record) for _, key, record in page]
        next_cursor = f"{page[-1][0][0]}:{page[-1][0][1]}" if more and page else None
        await self.respond(send, 200, json.dumps({"keys": views, "next": next_cursor}).encode())

    # --- changing --------------------------------------------------------------

    async def create(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        runtime.control.writable()   # no store, or one away: the 503 before the body is read
        body = await json_body(scope, receive, runtime)
        try:
            values = create_body(body, runtime.control.clock())
        except KeyBodyError as exc:
            raise invalid_body(exc) from None
        known_backends(runtime, values.allowed_backends)
        countable(runtime, values.rate_limit is not None or values.budget is not None, "body")
        fields = {name: getattr(values, name) for name in (
            "organization_id", "tier", "allowed_models", "allowed_backends", "rate_limit", "budget",
            "expires_at", "metadata")}
        record, secret = await self.changes(runtime, scope).create(fields, values.id, actor_of(runtime, scope).id)
        out = await self.page(runtime, record.key, record)
        out["secret"] = secret   # the only time it is shown
        await self.respond(send, 201, json.dumps(out).encode())

    async def one_key(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        rest = scope["path"][len(PREFIX):]
        key_id, _, action = rest.partition("/")
        key_id, method = unquote(key_id), scope["method"]
        if action:
            if action not in ("rotate", "revoke"):
                raise not_found(key_id)
            if method != "POST":
                raise MethodNotAllowed(f"{method} is not allowed on {scope['path']}", allowed=("POST",))
            await (self._rotate if action == "rotate" else self._revoke)(runtime, scope, receive, send, key_id)
            return
        if method == "GET":
            key, record = self._find(runtime, key_id)
            await self.respond(send, 200, json.dumps(await self.page(runtime, key, record)).encode())
        elif method == "PATCH":
            self._database_key(runtime, key_id)
            body = await json_body(scope, receive, runtime)
            try:
                changes = patch_body(body, runtime.control.clock()).changes()
            except KeyBodyError as exc:
                raise invalid_body(exc) from None
            known_backends(runtime, changes.get("allowed_backends"))
            countable(runtime, changes.get("rate_limit") is not None or changes.get("budget") is not None, "body")
            record = await self.changes(runtime, scope).update(key_id, changes)
            await self.respond(send, 200, json.dumps(await self.page(runtime, record.key, record)).encode())
        elif method == "DELETE":
            self._database_key(runtime, key_id)
            await self.changes(runtime, scope).delete(key_id)
            await self.respond(send, 200, json.dumps({"id": key_id, "deleted": True}).encode())
        else:
            raise MethodNotAllowed(f"{method} is not allowed on {scope['path']}", allowed=("GET", "PATCH", "DELETE"))

    async def _rotate(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any, key_id: str
                      ) -> None:
        self._database_key(runtime, key_id)
        body = await json_body(scope, receive, runtime, absent_ok=True)
        try:
            grace = rotate_body(body).grace_seconds
        except KeyBodyError as exc:
            raise invalid_body(exc) from None
        record, secret = await self.changes(runtime, scope).rotate(key_id, grace)
        out = await self.page(runtime, record.key, record)
        out["secret"] = secret
        await self.respond(send, 200, json.dumps(out).encode())

    async def _revoke(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any, key_id: str
                      ) -> None:
        self._database_key(runtime, key_id)
        record = await self.changes(runtime, scope).revoke(key_id)
        await self.respond(send, 200, json.dumps(await self.page(runtime, record.key, record)).encode())

    def _database_key(self, runtime: "Runtime", key_id: str) -> None:
        """Refuse a change to a config key (403: edit the config) or to no key (404)."""
        if any(k.id == key_id for k in runtime.snapshot.api_keys.keys):
            raise PermissionDenied(f"The key '{key_id}' is declared in the config's api_keys: change it there "
                                   f"(the admin API changes database keys only)", code="key_read_only")
        if key_id not in runtime.control.view.records:
            raise not_found(key_id)


def known_backends(runtime: "Runtime", names: tuple[str, ...] | None) -> None:
    """A key may only name backends the running config has (a typo would lock it out silently)."""
    known = {b.name for b in runtime.snapshot.backends}
    for j, name in enumerate(names or ()):
        if name not in known:
            path = f"body.allowed_backends[{j}]"
            raise InvalidRequest(f"{path}: no backend is named {name!r}", param=path)


def _limit(value: str | None) -> int:
    if value is None:
        return MAX_PAGE
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_PAGE}, got {value!r}", param="limit")
    return int(value)


def _after(rows: list[Any], cursor: tuple[int, str]) -> list[Any]:
    """The rows after the cursor's; when its key is gone since, the database keys after its id."""
    for i, row in enumerate(rows):
        if row[0] == cursor:
            return rows[i + 1:]
    return [row for row in rows if row[0][0] == 1 and (cursor[0] == 0 or row[0][1] > cursor[1])]


def _cursor(after: str) -> tuple[int, str]:
    """``next`` of a page: ``0:<id>`` after a config key, ``1:<id>`` after a database key (a bare id: either)."""
    head, sep, key_id = after.partition(":")
    if sep and head in ("0", "1"):
        return int(head), key_id
    return 0, after
