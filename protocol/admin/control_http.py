"""What the admin API's control-plane routes (keys, organizations, administrators) share: bodies, queries, who changes.

A body is JSON read under the server's body deadlines; a ``KeyBodyError``
(``config/key_body.py``) becomes one 400 naming the first path, with every
problem in ``details.errors``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import parse_qsl

from switchyard.actors.control.admins import BOOTSTRAP_ID
from switchyard.actors.control.keys import Actor
from switchyard.actors.errors import InvalidRequest
from switchyard.config.key_body import KeyBodyError
from switchyard.protocol.admin.identity import SCOPE_KEY
from switchyard.protocol.http import client_json
from switchyard.protocol.http.asgi import read_body
from switchyard.protocol.http.limits import client_ip

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

BODY_LIMIT = 64 * 1024


def countable(runtime: "Runtime", limited: bool, path: str) -> None:
    """Limits this instance can count exactly: with several workers, only through state.redis_url (each
    worker would otherwise allow the whole limit), as the config's limits are refused at start."""
    workers = runtime.workers
    if limited and workers > 1 and runtime.snapshot.state.redis_url is None:
        raise InvalidRequest(f"{path}: a rate_limit or budget with {workers} workers needs state.redis_url (each "
                             f"worker would otherwise allow the whole limit: {workers} times it in all)", param=path,
                             code="limits_need_redis")


def query_int(value: str | None, name: str, low: int, high: int, default: int) -> int:
    """A query parameter's integer in ``[low, high]`` (``default`` when absent), or the 400 naming it. ASCII
    digits only: ``"²".isdigit()`` is true, and ``int`` refuses it."""
    if value is None:
        return default
    if not value.isascii() or not value.isdigit() or not low <= int(value) <= high:
        raise InvalidRequest(f"{name} must be an integer from {low} to {high}, got {value!r}", param=name)
    return int(value)


def query_of(scope: Mapping[str, Any]) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("latin-1")
    return dict(parse_qsl(raw, keep_blank_values=True))


async def json_body(scope: Any, receive: Any, runtime: "Runtime", absent_ok: bool = False) -> Any:
    raw = await read_body(scope, receive, BODY_LIMIT, runtime.snapshot.server)
    if not raw.strip():
        if absent_ok:
            return None
        raise InvalidRequest("The body must be a JSON object", param="body", code="invalid_json")
    try:
        return client_json.loads(raw)
    except ValueError:
        raise InvalidRequest("The body must be JSON", param="body", code="invalid_json") from None


def invalid_body(exc: KeyBodyError) -> InvalidRequest:
    path, message = exc.errors[0]
    more = f" (and {len(exc.errors) - 1} more)" if len(exc.errors) > 1 else ""
    return InvalidRequest(f"{path}: {message}{more}", param=path,
                          details={"errors": [{"path": p, "message": m} for p, m in exc.errors]})


def actor_of(runtime: "Runtime", scope: Mapping[str, Any]) -> Actor:
    """Who makes a change, for its record and audit entry: the administrator the request authenticated as
    (``admin``: the holder of ``admin.token``), from the client address it came from."""
    trusted = runtime.snapshot.server.trusted_proxies
    peer = scope.get("client")
    admin = scope.get(SCOPE_KEY)
    return Actor(admin.id if admin is not None else BOOTSTRAP_ID,
                 client_ip(peer, scope["headers"], trusted) if peer else None)
