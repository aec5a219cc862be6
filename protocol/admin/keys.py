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

from switchyard.actors.control import listing, shown
from switchyard.actors.control.keys import KeyChanges, not_found
from switchyard.actors.control.listing import SOURCES
from switchyard.actors.control.records import KeyRecord
from switchyard.actors.control.shown import STATUSES
from switchyard.actors.errors import InvalidRequest, MethodNotAllowed
from switchyard.config.access import ApiKey
from switchyard.config.key_body import KeyBodyError, check_backends, create_body, patch_body, rotate_body
from switchyard.protocol.admin.control_http import actor_of, countable, invalid_body, json_body, query_int, query_of

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PREFIX = "/admin/keys/"

MAX_PAGE = 1000


class KeysAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {"/admin/keys": {"GET": self.all_keys, "POST": self.create}}

    def changes(self, runtime: "Runtime", scope: Mapping[str, Any]) -> KeyChanges:
        return KeyChanges(runtime.control, lambda: frozenset(k.id for k in runtime.snapshot.api_keys.keys),
                          clock=runtime.control.clock, actor=actor_of(runtime, scope))

    # --- reading ---------------------------------------------------------------

    async def page(self, runtime: "Runtime", key: ApiKey, record: KeyRecord | None) -> dict[str, Any]:
        """The limiter's live view of the key (organizations: the config's and the database's), with its page
        as written (``shown.page``)."""
        out = await runtime.limiter.key_view(
            key, runtime.control.view.organizations_over(runtime.snapshot.organizations))
        out.update(shown.page(key, record, runtime.control.clock()))
        return out

    async def all_keys(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any) -> None:
        """One page of keys, in id order (config keys first), filtered as the query asks."""
        query = query_of(scope)
        source, org, status = query.get("source"), query.get("organization_id"), query.get("status")
        if source is not None and source not in SOURCES:
            raise InvalidRequest(f"source must be one of {', '.join(SOURCES)}, got {source!r}", param="source")
        if status is not None and status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}, got {status!r}", param="status")
        limit = query_int(query.get("limit"), "limit", 1, MAX_PAGE, MAX_PAGE)
        after = query.get("after")
        now = runtime.control.clock()
        rows = listing.rows(runtime.snapshot.api_keys.keys, runtime.control.view.records, source)
        if after is not None:
            rows = _after(rows, _cursor(after))
        rows = [row for row in rows if listing.matches(row, org, status, now)]
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
            check_backends(values.allowed_backends, _backends(runtime))
        except KeyBodyError as exc:
            raise invalid_body(exc) from None
        countable(runtime, values.rate_limit is not None or values.budget is not None, "body")
        record, secret = await self.changes(runtime, scope).create(values.values(), values.id,
                                                                   actor_of(runtime, scope).id)
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
            key, record = listing.find(runtime.snapshot.api_keys.keys, runtime.control.view.records, key_id)
            await self.respond(send, 200, json.dumps(await self.page(runtime, key, record)).encode())
        elif method == "PATCH":
            self.changes(runtime, scope).record(key_id)   # a config key (403) or none (404): before the body
            body = await json_body(scope, receive, runtime)
            try:
                changes = patch_body(body, runtime.control.clock()).changes()
                check_backends(changes.get("allowed_backends"), _backends(runtime))
            except KeyBodyError as exc:
                raise invalid_body(exc) from None
            countable(runtime, changes.get("rate_limit") is not None or changes.get("budget") is not None, "body")
            record = await self.changes(runtime, scope).update(key_id, changes)
            await self.respond(send, 200, json.dumps(await self.page(runtime, record.key, record)).encode())
        elif method == "DELETE":
            await self.changes(runtime, scope).delete(key_id)
            await self.respond(send, 200, json.dumps({"id": key_id, "deleted": True}).encode())
        else:
            raise MethodNotAllowed(f"{method} is not allowed on {scope['path']}", allowed=("GET", "PATCH", "DELETE"))

    async def _rotate(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Any, key_id: str
                      ) -> None:
        self.changes(runtime, scope).record(key_id)   # a config key (403) or none (404): before the body is read
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
        record = await self.changes(runtime, scope).revoke(key_id)
        await self.respond(send, 200, json.dumps(await self.page(runtime, record.key, record)).encode())


def _backends(runtime: "Runtime") -> set[str]:
    """The backends a key may name: the running config's."""
    return {b.name for b in runtime.snapshot.backends}


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
