"""``/admin/*``: the operator's API, behind a bearer token.

Without ``admin.token`` in the config and without administrators' accounts
in the database the whole surface answers 404: it is off, never open. With
either, a missing or wrong token is 401 (``identity.py``), and a role that
may not make the request 403 (``roles.py``). Nothing here ever returns a
secret.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

import attrs
import trio

from switchyard.actors.errors import MethodNotAllowed, RouteNotFound
from switchyard.actors.routing.circuit import CircuitState
from switchyard.config.fields import YAML_KEY
from switchyard.config.kinds import kind_of
from switchyard.config.kinds.base import StreamUsage
from switchyard.protocol.admin import identity, roles
from switchyard.protocol.admin.admins import PREFIX as ADMINS_PREFIX
from switchyard.protocol.admin.admins import AdminsAdmin
from switchyard.protocol.admin.alerts import AlertsAdmin
from switchyard.protocol.admin.audit import AuditAdmin
from switchyard.protocol.admin.console import PREFIX as CONSOLE_PREFIX
from switchyard.protocol.admin.console import ConsoleUi
from switchyard.protocol.admin.keys import PREFIX as KEYS_PREFIX
from switchyard.protocol.admin.keys import KeysAdmin
from switchyard.protocol.admin.organizations import PREFIX as ORGS_PREFIX
from switchyard.protocol.admin.organizations import OrganizationsAdmin
from switchyard.protocol.admin.prompts import PREFIX as PROMPTS_PREFIX
from switchyard.protocol.admin.prompts import PromptsAdmin
from switchyard.protocol.admin.smart_routing import SmartRoutingAdmin
from switchyard.protocol.admin.stats import ENGINE_PREFIX, ENGINE_SUFFIX, StatsAdmin
from switchyard.protocol.admin.traffic import TrafficAdmin
from switchyard.protocol.admin.usage import REQUEST_PREFIX as USAGE_REQUEST_PREFIX
from switchyard.protocol.admin.usage import UsageAdmin, kept_route_events
from switchyard.protocol.http.asgi import JSON

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Respond = Callable[..., Awaitable[None]]
Handler = Callable[["Runtime", Scope, Any, Send], Awaitable[None]]

TRACE_PREFIX, TRACE_SUFFIX = "/admin/requests/", "/events"


# On every answer of the admin JSON routes: what they show is for the operator only, never kept by a browser or
# a proxy, and never read as another content type.
PRIVATE = [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]


def private(respond: Respond) -> Respond:
    async def answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] = JSON) -> None:
        await respond(send, status, body, [*headers, *PRIVATE])
    return answer


class AdminApi:
    def __init__(self, respond: Respond, link_login: bool = False) -> None:
        respond = private(respond)
        self.respond = respond
        # Exact paths: path -> method -> handler(runtime, scope, receive, send).
        self.routes: dict[str, Mapping[str, Handler]] = {
            "/admin/config": {"GET": self.config},
            "/admin/backends": {"GET": self.backends},
            "/admin/config/reload": {"POST": self.reload},
            "/admin/config/hot-reload-status": {"GET": self.reload_status},
            roles.WHOAMI_PATH: {"GET": self.whoami},
        }
        self.prompts = PromptsAdmin(respond)
        self.routes.update(self.prompts.routes)
        self.stats = StatsAdmin(respond)
        self.routes.update(self.stats.routes)
        self.smart_routing = SmartRoutingAdmin(respond)
        self.routes.update(self.smart_routing.routes)
        self.usage = UsageAdmin(respond)
        self.routes.update(self.usage.routes)
        self.keys = KeysAdmin(respond)
        self.routes.update(self.keys.routes)
        self.organizations = OrganizationsAdmin(respond)
        self.routes.update(self.organizations.routes)
        self.admins = AdminsAdmin(respond)
        self.routes.update(self.admins.routes)
        self.audit = AuditAdmin(respond)
        self.routes.update(self.audit.routes)
        self.alerts = AlertsAdmin(respond)
        self.routes.update(self.alerts.routes)
        self.traffic = TrafficAdmin(respond)
        self.routes.update(self.traffic.routes)
        self.console = ConsoleUi(link_login)

    async def handle(self, runtime: "Runtime", scope: Scope, receive: Any, send: Send) -> None:
        path = scope["path"]
        if not identity.served(runtime):
            raise RouteNotFound(f"No route for {scope['method']} {path}")
        if path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/"):
            await self.console.handle(runtime, scope, receive, send)   # its login page needs no token yet
            return
        admin = identity.authenticate(runtime, scope)
        roles.check(admin.role, scope["method"], path)
        scope[identity.SCOPE_KEY] = admin   # who makes a change (control_http.actor_of)
        methods = self.routes.get(path)
        if methods is not None:
            handler = methods.get(scope["method"])
            if handler is None:
                raise MethodNotAllowed(f"{scope['method']} is not allowed on {path}", allowed=tuple(methods))
            await handler(runtime, scope, receive, send)
            return
        if path.startswith(PROMPTS_PREFIX):
            await self.prompts.file(runtime, scope, receive, send)
            return
        if path.startswith(ENGINE_PREFIX) and path.endswith(ENGINE_SUFFIX) and scope["method"] == "GET":
            await self.stats.one_engine(runtime, path[len(ENGINE_PREFIX):-len(ENGINE_SUFFIX)], send)
            return
        if path.startswith(USAGE_REQUEST_PREFIX) and len(path) > len(USAGE_REQUEST_PREFIX):
            await self.usage.one_request(runtime, scope, send)
            return
        if path.startswith(ORGS_PREFIX) and len(path) > len(ORGS_PREFIX):
            await self.organizations.one(runtime, scope, receive, send)
            return
        if path.startswith(ADMINS_PREFIX) and len(path) > len(ADMINS_PREFIX):
            await self.admins.one(runtime, scope, receive, send)
            return
        if path.startswith(KEYS_PREFIX) and len(path) > len(KEYS_PREFIX):
            await self.keys.one_key(runtime, scope, receive, send)
            return
        if path.startswith(TRACE_PREFIX) and path.endswith(TRACE_SUFFIX) and scope["method"] == "GET":
            await self.request_events(runtime, path[len(TRACE_PREFIX):-len(TRACE_SUFFIX)], send)
            return
        raise RouteNotFound(f"No route for {scope['method']} {path}")

    async def request_events(self, runtime: "Runtime", request_id: str, send: Send) -> None:
        """The route events of one call: from this worker's memory (its last 1,000 calls), else from the
        usage ledger, which keeps them for every call but one clean attempt, whichever worker served it."""
        trace = runtime.traces.get(request_id)
        if trace is not None:
            body = {**trace.as_dict(), "source": "worker"}
        else:
            kept = await kept_route_events(runtime, request_id)
            if kept is None:
                raise RouteNotFound(f"No route events for request id '{request_id}': it is not among this worker's "
                                    "last 1,000 calls, and the usage ledger keeps them only for calls that did not "
                                    "end in one clean attempt", code="request_not_found")
            body = {**kept, "source": "ledger"}
        await self.respond(send, 200, json.dumps(body).encode())

    async def whoami(self, runtime: "Runtime", scope: Scope, receive: Any, send: Send) -> None:
        """Who calls, and with which role: what a script or the console may offer to do."""
        admin = scope[identity.SCOPE_KEY]
        await self.respond(send, 200, json.dumps({"id": admin.id, "role": admin.role}).encode())

    async def reload(self, runtime: "Runtime", scope: Scope, receive: Any, send: Send) -> None:
        """Reload the config file now: 200 when applied or unchanged, 422 with every error when invalid."""
        result = runtime.reload_from_file("admin")
        status = {"applied": 200, "unchanged": 200, "rejected": 422}.get(result["result"], 409)
        await self.respond(send, status, json.dumps({**result, "status": runtime.reload_status.as_dict()}).encode())

    async def reload_status(self, runtime: "Runtime", scope: Scope, receive: Any, send: Send) -> None:
        """Watcher state, running revision, the last reload and error, fields waiting for a restart."""
        await self.respond(send, 200, json.dumps(runtime.reload_status.as_dict()).encode())

    async def config(self, runtime: "Runtime", scope: Scope, receive: Any, send: Send) -> None:
        """The running Snapshot, secrets masked (see ``public``)."""
        await self.respond(send, 200, json.dumps(public(runtime.snapshot)).encode())

    async def backends(self, runtime: "Runtime", scope: Scope, receive: Any, send: Send) -> None:
        """Every configured backend: its config, health, circuits, discovered models, load and KV index."""
        now = trio.current_time()
        view, pool, discovered = runtime.health.view, runtime.pool, runtime.discovery.view
        out = []
        for b in runtime.snapshot.backends:
            health = view.backends.get(b.name)
            kv = runtime.kv_index.index.view(b.name)
            circuits = {model: {"state": c.state.value, "failures": c.failures, "cooldown": c.cooldown,
                                "opened_at": None if c.state is CircuitState.CLOSED else c.opened_at}
                        for (name, model), c in sorted(view.circuits.items()) if name == b.name}
            found = discovered.get(b.name)
            out.append({
                "name": b.name, "type": b.type.value, "url": mask_url(b.url), "models": list(b.models),
                "discovered_models": sorted(found) if found is not None else None,
                "enabled": b.enabled, "internal": b.internal, "weight": b.weight,
                "health": None if health is None else {
                    "state": health.state.value, "since": health.since, "failures": health.failures,
                    "successes": health.successes, "last_error": health.last_error,
                    "last_check": health.last_check},
                "circuits": circuits,
                "in_flight": pool.in_flight.get(b.name, 0),
                "latency_avg": pool.latency.get(b.name),
                # kinds asked for a stream's usage (OpenAI's wire): whether streams are, and when it refused that
                "stream_usage": {"setting": b.stream_usage, "refused_at": runtime.stream_usage.refused_at(b)}
                if kind_of(b).stream_usage is StreamUsage.OPTION else None,
                # what the KV index knows of its engine's cache (docs/kv-routing.md)
                "kv_index": None if kv is None else {"state": kv.state, "entries": kv.entries, "picks": kv.picks,
                                                     "hits": kv.hits, "hit_ratio": kv.hit_ratio,
                                                     "source": _source(runtime, b.name)},
            })
        body = {"now": now, "health_checks_enabled": view.checks_enabled,
                "kv_cache_index_enabled": runtime.snapshot.kv_cache_index.enabled, "backends": out}
        await self.respond(send, 200, json.dumps(body).encode())


# --- secrets out -------------------------------------------------------------------

MASK = "***"
SECRET_FIELDS = frozenset({"api_key", "token"})


# Fields holding a URL that may carry a password: a backend's, the usage ledger's (postgresql://), the limiters' Redis.
URL_FIELDS = frozenset({"url", "ledger", "redis_url"})
_PASSWORD_PARAM = re.compile(r"((?:^|&)password=)[^&]*")


def mask_url(url: str) -> str:
    """``url`` with the password of any ``user:password@`` part replaced by the mask."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "password=" in parts.query:   # a libpq URL may carry it as a parameter too
        parts = parts._replace(query=_PASSWORD_PARAM.sub(rf"\g<1>{MASK}", parts.query))
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}")
    return urlunsplit(parts)


def public(value: Any, field: str | None = None) -> Any:
    """``value`` as JSON-ready data with no secret left in it.

    attrs classes become objects field by field, enums their values,
    frozensets sorted lists, tuples lists in their order (order means
    something in ``models`` and fallback chains). Every field named
    ``api_key`` or ``token``, wherever it sits, and every field marked
    ``metadata={"secret": True}`` (a client API key) is the mask when set;
    fields marked ``internal`` (lookup tables) are left out; a ``url`` or
    the ledger's URL loses its password.
    """
    if field in SECRET_FIELDS and value is not None:
        return MASK
    if field in URL_FIELDS and isinstance(value, str):
        return mask_url(value)
    if attrs.has(type(value)):
        # Named as the operator writes it (``rate_limiting.global``, read into ``global_``).
        return {(f.metadata.get(YAML_KEY) or f.name): MASK if f.metadata.get("secret")
                and getattr(value, f.name) is not None else public(getattr(value, f.name), f.name)
                for f in attrs.fields(type(value)) if not f.metadata.get("internal")}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): public(v, str(k)) for k, v in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted((public(v) for v in value), key=lambda v: (str(type(v)), v))
    if isinstance(value, (tuple, list)):
        return [public(v) for v in value]
    return value


def _source(runtime: "Runtime", backend: str) -> dict[str, Any] | None:
    """A backend's event source's counters (kv_cache_index.event_sources; None: it has none running)."""
    sources = runtime.kv_sources
    status = sources.status().get(backend) if sources is not None else None
    return attrs.asdict(status) if status is not None else None
