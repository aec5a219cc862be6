"""What the Files and Batch API doors share: the switch, the query's parameters, the list's shape.

These routes manage the key's files and batches; they are not model calls,
so they are let in by the gate (key, drain, concurrency cap) like
``/v1/models`` and leave no ledger record. Every query parameter is checked:
one the route does not take, one sent twice, or a value out of its range is
a 400 naming it, never ignored.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterable, Sequence
from urllib.parse import parse_qsl

from switchyard.actors.batches.service import Page
from switchyard.actors.errors import InvalidRequest, MethodNotAllowed, RouteNotFound
from switchyard.actors.response_owners import owner_of
from switchyard.protocol.http.asgi import Scope, Send, respond
from switchyard.protocol.http.client_json import utf8

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.config.schema import Snapshot
    from switchyard.protocol.http.gate import Identity

ID = r"([A-Za-z0-9_\-]{1,200})"   # a file's or batch's id, as the gateway makes them (and OpenAI's, relayed)


def served(snapshot: "Snapshot", scope: Scope) -> None:
    """With ``batches.enabled: false`` these routes answer as routes that do not exist."""
    if not snapshot.batches.enabled:
        raise RouteNotFound(f"No route for {scope['method']} {scope['path']}")


def owner(runtime: "Runtime", who: "Identity") -> str:
    """Whose files and batches these are: the key as the running revision judges it."""
    return owner_of(who.key_now(runtime.snapshot))


def path_id(pattern: re.Pattern[str], scope: Scope, actions: dict[tuple[str, str], str]) -> tuple[str, str]:
    """``(id, action)`` of a path under a prefix route, or the 404/405 for it (as ``App`` says them)."""
    method, path = scope["method"], scope["path"]
    found = pattern.fullmatch(path)
    if found is None:
        raise RouteNotFound(f"No route for {method} {path}")
    suffix = found.group(2) or ""
    action = actions.get((method, suffix))
    if action is None:
        allowed = tuple(m for m, s in actions if s == suffix)
        raise MethodNotAllowed(f"{method} is not allowed on {path}", allowed=allowed)
    return found.group(1), action


def query(scope: Scope, allowed: Sequence[str]) -> dict[str, str]:
    """The query's parameters, each one the route takes and sent once."""
    raw = scope.get("query_string") or b""
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        raise InvalidRequest("The query string is not UTF-8", param="query", code="invalid_value") from None
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            takes = f"; it takes {', '.join(allowed)}" if allowed else "; it takes none"
            raise InvalidRequest(f"{name}: unknown query parameter{takes}", param=name, code="unknown_parameter")
        if name in params:
            raise InvalidRequest(f"{name}: sent twice", param=name, code="invalid_value")
        params[name] = value
    return params


def whole(params: dict[str, str], name: str, low: int, high: int, default: int) -> int:
    value = params.get(name)
    if value is None:
        return default
    if not re.fullmatch(r"[0-9]{1,9}", value) or not low <= int(value) <= high:
        raise InvalidRequest(f"{name}: must be a whole number from {low} to {high}, got {value!r}", param=name,
                             code="invalid_value")
    return int(value)


def one_of(params: dict[str, str], name: str, values: Iterable[str], default: str | None) -> str | None:
    value = params.get(name, default)
    allowed = tuple(values)
    if value is not None and value not in allowed:
        raise InvalidRequest(f"{name}: must be one of {', '.join(allowed)}, got {value!r}", param=name,
                             code="invalid_value")
    return value


def after(params: dict[str, str]) -> str | None:
    """The cursor: the id of the last row of the page before (an id of another list, or none: an empty page)."""
    value = params.get("after")
    if value is not None and re.fullmatch(ID, value) is None:
        raise InvalidRequest(f"after: must be an id from a previous page, got {value[:200]!r}", param="after",
                             code="invalid_value")
    return value


def list_body(page: Page[Any]) -> dict[str, Any]:
    """The openai SDK's cursor page: ``after=last_id`` asks for the next one."""
    data = [row.body() for row in page.rows]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": page.has_more}


async def answer(send: Send, body: Any) -> None:
    await respond(send, 200, utf8(body))
