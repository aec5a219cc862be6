"""Realtime websockets: ``GET /v1/realtime?model=...`` relayed to a backend's own realtime socket.

The handshake is a call like any other: the API key is checked as on HTTP
(Bearer, ``x-api-key``, or the browsers' ``openai-insecure-api-key.<key>``
subprotocol), the ``model`` query parameter is resolved (aliases included)
and the pool picks among the public backends serving it that speak the
realtime API, with health, circuits and the key's reach; the session counts
against ``server.max_concurrent_requests`` while it is open and is a call
in flight for the drain. The client is accepted only once the upstream is:
a refusal is an HTTP answer in our error envelope (the ASGI
``websocket.http.response`` extension; a 1008 close without it), and a
backend that cannot be reached gives way to another one serving the model.
The open session is ``protocol/doors/realtime_relay.py``'s.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import trio
from trio_websocket import (
    ConnectionRejected,
    ConnectionTimeout,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

from switchyard.actors import hops, log_fields
from switchyard.actors.addressing import auth_headers, join_url
from switchyard.actors.call.verdicts import BACKEND_FAULT_STATUSES, failing_caller
from switchyard.actors.errors import (
    GatewayError,
    InvalidRequest,
    ModelNotFound,
    NoHealthyBackend,
    PermissionDenied,
    RouteNotFound,
    ShuttingDown,
    UpstreamConnectError,
    UpstreamFailure,
    UpstreamStatusError,
    UpstreamTimeout,
)
from switchyard.actors.events import CallTrace
from switchyard.actors.messages import Call
from switchyard.actors.routing.aliases import dispatch_target
from switchyard.actors.routing.failover import Kind, classify_status
from switchyard.actors.signals import Signals
from switchyard.actors.trace import TraceContext, new_span_id, outbound_headers
from switchyard.config import kinds
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig
from switchyard.config.unix_socket import is_unix
from switchyard.protocol.doors.openai import check_model_name
from switchyard.protocol.doors.realtime_relay import CLOSE_GRACE, SHUTDOWN, End, Relay, client_end
from switchyard.protocol.http.asgi import Receive, Scope, Send, new_request_id, refuse_handshake
from switchyard.protocol.http.gate import SESSION, Identity, Passage
from switchyard.protocol.wires.upstream import USER_AGENT, basic_auth

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost

log = logging.getLogger("switchyard.realtime")

PATH = "/v1/realtime"
# Backend types that speak OpenAI's realtime websocket; `generic` is the way to name any other server that does.
REALTIME_TYPES = kinds.speaking(Endpoint.REALTIME)   # (config/kinds: Kind.endpoints)
KEY_SUBPROTOCOL = "openai-insecure-api-key."   # how a browser, which cannot set headers, sends its key
FORWARDED_HEADERS = frozenset({b"openai-beta"})
MAX_MESSAGE = 16 * 1024 * 1024   # what the upstream may send in one message: hypercorn's limit for the client

# How the upstream socket is opened (trio-websocket's opener; tests put an in-memory one here).
open_upstream: Callable[..., AbstractAsyncContextManager[WebSocketConnection]] = open_websocket_url


async def serve_websocket(app: "DoorHost", scope: Scope, receive: Receive, send: Send) -> None:
    """One websocket connection (every ASGI ``websocket`` scope): a realtime session, or a refusal."""
    await RealtimeSession(app, scope, receive, send).serve()


class _Failed(Exception):
    """An upstream handshake that did not open; ``move_on``: another backend may take the session."""

    def __init__(self, error: GatewayError, kind: Kind, move_on: bool) -> None:
        self.error, self.kind, self.move_on = error, kind, move_on


class RealtimeSession:
    def __init__(self, app: "DoorHost", scope: Scope, receive: Receive, send: Send) -> None:
        self.app, self.scope, self.receive, self.send = app, scope, receive, send
        self.request_id = new_request_id()
        self.id_headers = [(b"x-continuum-request-id", self.request_id.encode())]
        self.offered = list(scope.get("subprotocols") or ())
        self.trace: CallTrace | None = None
        self.relay = Relay(receive, send)   # holds the session's end, from the handshake on
        self.accepted = False
        self.backend: str | None = None
        self.model: str | None = None
        self.who: Identity | None = None         # the gate's, once the handshake is identified
        self.ctx: TraceContext | None = None     # its trace context, read once the gate let it in
        self._connecting = trio.CancelScope()   # routing and the upstream handshake: cut by an end before the accept
        self._watcher = trio.CancelScope()      # the wait for a client leaving during the upstream handshake

    async def serve(self) -> None:
        if (await self.receive())["type"] != "websocket.connect":
            return   # gone before the handshake reached us
        fields = log_fields.bind(request_id=self.request_id)
        try:
            try:
                passage, name = await self._admit()
            except GatewayError as err:
                log.debug("realtime handshake refused: %s %s", err.status, err.message)
                await refuse_handshake(self.scope, self.send, err, self.id_headers)
                return
            with passage:   # counted against the cap, and one of the calls the drain waits for, then ends
                await self._session(passage.runtime, name)
        finally:
            log_fields.unbind(fields)

    def shut_down(self) -> None:
        """The drain window ran out: close both sides with 1001 (or refuse, if not accepted yet)."""
        self._end(SHUTDOWN)

    def _end(self, end: End) -> None:
        """The first end wins and stops whatever runs now: the upstream handshake, or the relay."""
        self.relay.finish(end)
        if not self.accepted:
            self._connecting.cancel()

    # --- before any upstream: who asks, for what --------------------------------------

    async def _admit(self) -> tuple[Passage, str]:
        """The gate's passage (to enter at once) and the requested model, or the GatewayError refusing the
        handshake. As on HTTP, the key is asked before the path is looked at; the trace context and the
        model are read once the gate let the session in."""
        app, scope = self.app, self.scope
        gate = app.gate
        gate.up()   # starting or stopping: refused before anything else, the path included
        self.who = await gate.identify(scope, self.request_id, credentials=self._credential_headers())
        path = scope["path"]
        if path != PATH:
            raise RouteNotFound(f"No websocket route for {path}; realtime sessions open at {PATH}?model=<model>")
        passage = await gate.admit(member=self, elsewhere=SESSION)
        self.ctx = app.trace_context(scope, self.request_id, self.id_headers)
        models = [v for k, v in self._query() if k == "model"]
        if not models:
            raise InvalidRequest(f"Missing required query parameter: 'model' ({PATH}?model=<model>)", param="model",
                                 code="missing_required_parameter")
        if len(models) > 1 or not models[0]:
            raise InvalidRequest("The 'model' query parameter must be given once, non-empty", param="model")
        check_model_name(models[0])
        return passage, models[0]

    def _credential_headers(self) -> list[tuple[bytes, bytes]]:
        """The handshake's headers, with a browser's key subprotocol as the Bearer key when no header has one
        (an ``Authorization`` header, or a non-blank ``x-api-key``)."""
        headers = list(self.scope["headers"])
        if not any(name == b"authorization" or name == b"x-api-key" and value.strip() for name, value in headers):
            for proto in self.offered:
                if proto.startswith(KEY_SUBPROTOCOL) and len(proto) > len(KEY_SUBPROTOCOL):
                    headers.append((b"authorization", b"Bearer " + proto[len(KEY_SUBPROTOCOL):].encode()))
                    break
        return headers

    def _query(self) -> list[tuple[str, str]]:
        return parse_qsl(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)

    # --- routing and the upstream handshake ---------------------------------------------

    async def _session(self, runtime: "Runtime", name: str) -> None:
        snapshot, who, ctx = runtime.snapshot, self.who, self.ctx
        assert who is not None
        key = who.key
        call = Call(model=name, stream=True, body=b"", payload={"model": name}, snapshot=snapshot,
                    request_id=self.request_id, trace=ctx, key=key, endpoint=Endpoint.REALTIME,
                    client_address=who.client_address(snapshot.server.trusted_proxies) if key is None else None)
        self.trace = trace = CallTrace(self.request_id, snapshot.revision, trace_id=ctx.trace_id if ctx else None,
                                       x_request_id=ctx.x_request_id if ctx else None,
                                       client_ref=ctx.client_ref if ctx else None, route=PATH,
                                       parent_id=ctx.parent_id if ctx else None, flags=ctx.flags if ctx else None)
        trace.add("accepted", model=name, stream=True)
        began = trio.current_time()
        refusal: GatewayError | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_client)
                try:
                    with self._connecting:
                        await self._route(runtime, call)
                except GatewayError as err:   # caught here: the nursery would wrap it in a group
                    refusal = err
                finally:
                    self._watcher.cancel()
            end = self.relay.end
            if refusal is None and end is not None and end.by == "shutdown" and not self.accepted:
                refusal = ShuttingDown("The server is shutting down; open this session on another instance")
            if refusal is not None:
                trace.add("failed", backend=getattr(refusal, "backend", None) or self.backend,
                          model=self.model or name, status=refusal.status, code=refusal.code,
                          error=refusal.message, committed=False)
                log.info("realtime session refused: model %r: %s %s", name, refusal.status, refusal.message)
                await refuse_handshake(self.scope, self.send, refusal, self.id_headers)
            elif self.accepted:
                assert end is not None
                trace.add("completed", backend=self.backend, model=self.model, closed_by=end.by,
                          client_code=end.client_code, upstream_code=end.upstream_code, reason=end.reason,
                          messages_to_upstream=self.relay.to_upstream, messages_to_client=self.relay.to_client)
                log.info("realtime session ended: model %r on backend %s, %d message(s) to the upstream, %d to the "
                         "client, %.1fs; closed by %s (client %d, upstream %d: %s)", self.model, self.backend,
                         self.relay.to_upstream, self.relay.to_client, trio.current_time() - began, end.by,
                         end.client_code, end.upstream_code, end.reason or "-")
        finally:
            if trace.terminal is None:   # the client left before the session opened
                trace.add("client_disconnected", backend=self.backend, model=self.model or name)
            runtime.traces.store(trace)

    async def _watch_client(self) -> None:
        """Until the relay starts: a client leaving during the upstream handshake ends everything at once."""
        with self._watcher:
            message = await self.receive()
            if message["type"] == "websocket.disconnect":
                self._end(client_end(message))
            else:
                self.relay.pending = message   # cannot come before the accept; kept for the relay all the same

    async def _route(self, runtime: "Runtime", call: Call) -> None:
        """Open the session on a backend serving the model; one that cannot be reached gives way to the next."""
        rt, name = runtime, call.model
        model = dispatch_target(name, call.snapshot, rt.discovery.view) or name
        if model != name:
            assert self.trace is not None
            self.trace.add("alias_dispatched", model=model, requested_model=name)
        self.model = model
        allowed = self._reach(rt, call, model)
        tried: list[str] = []
        last: _Failed | None = None
        while True:
            try:
                backend = rt.pool.choose(call, model, rt.health.view, rt.discovery.view, trio.current_time(),
                                         exclude=frozenset(tried), allowed=allowed,
                                         signals=Signals(rt.engine_stats.view, rt.quota.view))
            except (ModelNotFound, NoHealthyBackend) as err:
                if last is not None:
                    raise last.error from None
                raise err.evolve(message=err.message.replace(f"'{model}'", f"'{name}'")) from None
            if last is not None:
                assert self.trace is not None
                self.trace.add("route_changed", backend=backend.name, model=model, from_backend=tried[-1],
                               from_model=model, reason=last.kind.value)
            tried.append(backend.name)
            try:
                await self._attempt(rt, call, backend, model)
                return
            except _Failed as failed:
                assert self.trace is not None
                error = failed.error
                self.trace.add("attempt_failed", backend=backend.name, model=model, kind=failed.kind.value,
                               status=error.status if isinstance(error, UpstreamStatusError) else None,
                               timeout=(error.details or {}).get("timeout"), error=error.message, committed=False)
                if not failed.move_on:
                    raise failed.error from None
                last = failed

    def _reach(self, rt: "Runtime", call: Call, model: str) -> frozenset[str]:
        """The backends this session may use: serving the model, allowed to the key, speaking realtime."""
        key, name = call.key, call.model
        if key is not None and not key.allows_model(name):
            raise PermissionDenied(f"The API key '{key.id}' may not use the model '{name}'", param="model",
                                   code="model_not_allowed")
        serving = rt.pool.serving(model, rt.discovery.view, call.snapshot)
        if not serving:
            raise ModelNotFound(f"The model '{name}' does not exist or no backend serves it", param="model")
        if key is not None:
            serving = [b for b in serving if key.allows_backend(b.name)]
            if not serving:
                raise PermissionDenied(f"The API key '{key.id}' may not use any backend that serves the model "
                                       f"'{name}'", param="model", code="backend_not_allowed")
        # A Unix-socket backend takes HTTP calls only: its websocket is not relayed.
        speaking = [b for b in serving if b.type in REALTIME_TYPES and not is_unix(b.url)]
        if not speaking:
            raise InvalidRequest(f"No backend serving the model '{name}' speaks the realtime API (backend types "
                                 f"{', '.join(sorted(t.value for t in REALTIME_TYPES))}, over the network)",
                                 param="model", code="realtime_unsupported")
        return frozenset(b.name for b in speaking)

    async def _attempt(self, rt: "Runtime", call: Call, backend: BackendConfig, model: str) -> None:
        """One upstream handshake; once it opens, the whole session. Raises _Failed only before it opens."""
        assert self.trace is not None
        url = upstream_url(backend, backend.upstream_ids.get(model, model), self._query())
        headers = self._upstream_headers(backend)
        assert self.who is not None
        name, count = hops.outbound(self.who.hops)   # the next gateway, if this backend is one, counts it
        headers.append((name.encode(), count.encode()))
        self.trace.attempt += 1
        self.backend = backend.name
        if call.trace is not None:
            span_id = new_span_id()
            headers += [(k.encode(), v.encode()) for k, v in outbound_headers(call.trace, call.snapshot.tracing,
                                                                                span_id)]
            self.trace.add("selected", backend=backend.name, model=model, fallback_dial=self.trace.attempt > 1,
                           span_id=span_id)
        else:
            self.trace.add("selected", backend=backend.name, model=model, fallback_dial=self.trace.attempt > 1)
        probe = rt.health.dispatching(backend.name, model, trio.current_time())
        settled = opened = False
        offered = [p for p in self.offered if not p.startswith(KEY_SUBPROTOCOL)]   # the client's key stays here
        with rt.pool.dispatched(backend.name):
            try:
                async with open_upstream(url, subprotocols=offered, extra_headers=headers, max_message_size=MAX_MESSAGE,
                                         connect_timeout=call.snapshot.timeouts.connection,
                                         disconnect_timeout=CLOSE_GRACE) as upstream:
                    opened = settled = True
                    rt.health.call_succeeded(backend.name, model)
                    await self._open(upstream, call)
            except ConnectionRejected as rejected:
                if opened:
                    raise
                settled = True
                raise self._rejected(rt, call, backend, model, rejected) from None
            except (HandshakeError, OSError) as exc:
                if opened:   # the closing handshake outlived its grace: the socket is closed all the same
                    log.debug("realtime upstream %s closed without its closing handshake: %r", backend.name, exc)
                    return
                settled = True
                error: UpstreamFailure
                if isinstance(exc, ConnectionTimeout):
                    error = UpstreamTimeout(
                        f"Backend '{backend.name}' did not open its realtime socket within "
                        f"{call.snapshot.timeouts.connection:g}s", details={"timeout": "connect"},
                        backend=backend.name)
                    kind = Kind.TIMEOUT
                else:
                    cause = exc.__cause__ or exc
                    error = UpstreamConnectError(f"Backend '{backend.name}' could not be reached for a realtime "
                                                 f"session: {cause or type(cause).__name__}", backend=backend.name)
                    kind = Kind.CONNECTION
                rt.health.call_failed(backend.name, model, error.message, failing_caller(call, error))
                raise _Failed(error, kind, move_on=True) from None
            finally:
                if probe and not settled:   # cancelled before the probe proved anything
                    rt.health.probe_abandoned(backend.name, model)

    def _rejected(self, rt: "Runtime", call: Call, backend: BackendConfig, model: str,
                  rejected: ConnectionRejected) -> _Failed:
        """The upstream answered its handshake with an HTTP status: relayed as it is, or another backend tried."""
        status, body = rejected.status_code, rejected.body or b""
        found = {k.lower(): v for k, v in rejected.headers or ()}
        retry_after = found.get(b"retry-after")
        error = UpstreamStatusError(backend.name, status, body, found.get(b"content-type"),
                                    retry_after.decode("latin-1") if retry_after else None)
        if status in BACKEND_FAULT_STATUSES:
            rt.health.call_failed(backend.name, model, error.message, failing_caller(call))
        else:
            rt.health.call_succeeded(backend.name, model)
        kind = classify_status(status, body) if status >= 400 else Kind.UNHEALTHY
        # Overload and server faults, a backend without the model, a redirect: another backend may do better.
        return _Failed(error, kind, move_on=kind in (Kind.STATUS, Kind.MODEL_NOT_FOUND, Kind.UNHEALTHY))

    async def _open(self, upstream: WebSocketConnection, call: Call) -> None:
        """Accept the client with the upstream's subprotocol, then relay until either side ends it."""
        self._watcher.cancel()   # the relay reads the client from now on
        chosen = upstream.subprotocol if upstream.subprotocol in self.offered else None
        self.accepted = True   # from here an end (a drain, say) closes the session instead of refusing it
        await self.send({"type": "websocket.accept", "subprotocol": chosen, "headers": self.id_headers})
        await self.relay.run(upstream, call.snapshot.server.realtime_idle_timeout)

    def _upstream_headers(self, backend: BackendConfig) -> list[tuple[bytes, bytes]]:
        """The backend's credentials (never the client's) and the client's OpenAI-Beta."""
        headers = [(k.encode(), v.encode()) for k, v in auth_headers(backend)]
        basic = basic_auth(httpx.URL(backend.url))
        if basic is not None:   # user:password@ in the url wins, as on HTTP
            headers = [(b"authorization", basic[1].encode())]
        headers.append((USER_AGENT[0].encode(), USER_AGENT[1].encode()))
        headers += [(k, v) for k, v in self.scope["headers"] if k.lower() in FORWARDED_HEADERS]
        return headers

def upstream_url(backend: BackendConfig, upstream_model: str, query: list[tuple[str, str]]) -> str:
    """The backend's realtime socket: its url as ws(s), ``/v1/realtime``, the client's query with its model id."""
    parts = urlsplit(join_url(backend.url, PATH))
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    params = [("model", upstream_model), *((k, v) for k, v in query if k != "model")]
    return urlunsplit((scheme, netloc, parts.path, urlencode(params), ""))
