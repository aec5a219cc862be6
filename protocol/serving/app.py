"""ASGI entry: the lifespan starts the Runtime; a plain route table serves HTTP.

Hypercorn does not cancel an ASGI app when its client goes away, so every
call hands the RequestActor a ``disconnected`` awaitable that waits on
``receive()`` for ``http.disconnect``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Awaitable, Callable

import attrs
import trio

from switchyard.actors import log_fields
from switchyard.actors.call.pipeline import Door, serve_call
from switchyard.actors.dedup import StreamingSink
from switchyard.actors.errors import (
    GatewayError,
    HttpVersionNotSupported,
    InternalError,
    InvalidRequest,
    MethodNotAllowed,
    RouteNotFound,
)
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.actors.messages import Call
from switchyard.actors.runtime import Runtime
from switchyard.actors.timing import HEADER as SERVER_TIMING
from switchyard.actors.timing import Timing
from switchyard.actors.trace import TraceContext
from switchyard.config.endpoints import Endpoint
from switchyard.config.load import ConfigError, load_demo, load_file
from switchyard.config.schema import ServerConfig, Snapshot
from switchyard.protocol.admin.api import AdminApi
from switchyard.protocol.doors import anthropic as anthropic_ingress
from switchyard.protocol.doors import audio, endpoints, images, key_info, mcp, responses_stored, responses_ws, scoring
from switchyard.protocol.doors import batches as batch_door
from switchyard.protocol.doors import files as file_door
from switchyard.protocol.doors import responses as responses_api
from switchyard.protocol.doors.anthropic_sink import respond_error
from switchyard.protocol.doors.batch_lines import attach as serve_batch_lines
from switchyard.protocol.doors.models import MODEL_PREFIX, ModelRoutes
from switchyard.protocol.doors.openai import (
    parse_chat_payload,
    parse_json_object,
)
from switchyard.protocol.doors.realtime import serve_websocket
from switchyard.protocol.http.asgi import (
    TIMING,
    AsgiSink,
    ClientGone,
    Receive,
    Scope,
    Send,
    disconnect_waiter,
    new_request_id,
    read_body,
    respond,
    unread_body,
    whole,
)
from switchyard.protocol.http.gate import Gate, Identity
from switchyard.protocol.http.multipart import read_upload
from switchyard.protocol.http.refusals import account_refusal
from switchyard.protocol.http.tracing import trace_context
from switchyard.protocol.serving.demo_console import with_admin_token
from switchyard.protocol.serving.metrics import CONTENT_TYPE, exposition
from switchyard.protocol.serving.wiring import new_runtime

log = logging.getLogger("switchyard.app")

ANTHROPIC_PREFIX = "/anthropic/"
ANTHROPIC_MODEL_PREFIX = "/anthropic/v1/models/"
BodyReader = Callable[[Scope, Receive, Snapshot], Awaitable[bytes]]   # a door's own body reader


def ambiguous_framing(headers: list[tuple[bytes, bytes]]) -> bool:
    """Both ``Transfer-Encoding`` and ``Content-Length``: how requests are smuggled past a proxy that reads
    the other one. RFC 9112 section 6.3 says such a connection must not be reused."""
    framing = 0
    for name, _ in headers:
        if name == b"content-length":
            framing |= 1
        elif name == b"transfer-encoding":
            framing |= 2
    return framing == 3



class App:
    def __init__(self, load: Callable[[], Snapshot], runtime: Runtime | None = None,
                 config_path: str | None = None, watch: bool = True, link_login: bool = False) -> None:
        """``link_login``: the console also takes the admin token from a link (the demo's token of one run)."""
        self._load = load
        self.runtime = runtime
        self.config_path = config_path
        self.watch = watch
        if runtime is not None:
            serve_batch_lines(self, runtime)   # its batch runner calls this App's doors
        self.admin = AdminApi(respond, link_login=link_login)
        self.gate = Gate(lambda: self.runtime)   # who asks, whether it may come in, how many are in
        self.model_routes = ModelRoutes()   # the model list, its cache and its rate limits
        self.mcp_endpoint = mcp.McpEndpoint()   # /mcp: the MCP servers behind the gateway
        self.stop_requested = False       # a drain was asked for (possibly before the Runtime was up)
        # path -> method -> handler(who, scope, receive, send)
        self.routes: dict[str, dict[str, Callable[..., Awaitable[None]]]] = {
            "/v1/chat/completions": {"POST": self._with_body(self.chat_completions)},
            "/v1/completions": {"POST": self._door(endpoints.completions)},
            "/v1/embeddings": {"POST": self._door(endpoints.embeddings)},
            "/v1/images/generations": {"POST": self._door(images.generations)},
            "/v1/images/edits": {"POST": self._door(images.edits, upload=True)},
            "/v1/images/variations": {"POST": self._door(images.variations, upload=True)},
            "/v1/rerank": {"POST": self._door(scoring.rerank)},
            "/rerank": {"POST": self._door(scoring.rerank)},   # vLLM's and Jina's clients' path too
            "/v1/moderations": {"POST": self._door(scoring.moderations)},
            "/v1/audio/transcriptions": {"POST": self._door(audio.transcriptions, upload=True)},
            "/v1/audio/translations": {"POST": self._door(audio.translations, upload=True)},
            "/v1/audio/speech": {"POST": self._door(audio.speech)},
            "/v1/responses": {"POST": self._door(responses_api.responses)},
            "/v1/responses/compact": {"POST": self._door(responses_api.compact)},
            file_door.PATH: {"POST": self._door(file_door.upload, read=file_door.read_upload),
                             "GET": self._door(file_door.listing, body=False)},
            batch_door.PATH: {"POST": self._door(batch_door.create), "GET": self._door(batch_door.listing, body=False)},
            "/anthropic/v1/messages": {"POST": self._door(anthropic_ingress.messages)},
            "/anthropic/v1/messages/count_tokens": {"POST": self._door(anthropic_ingress.count_tokens)},
            "/anthropic/v1/models": {"GET": self._door(anthropic_ingress.models, body=False)},
            "/v1/models": {"GET": self._capped(self.model_routes.models)},
            "/v1/models/refresh": {"POST": self._capped(self.model_routes.refresh_models)},
            "/v1/models/extended": {"GET": self._capped(self.model_routes.models_extended)},
            key_info.PATH: {"GET": self._capped(key_info.key_info)},
            mcp.PATH: {method: self._with_body(self.mcp) for method in mcp.METHODS},   # docs/mcp.md
            "/health": {"GET": self.health},
            "/ready": {"GET": self.ready},
            "/metrics": {"GET": self.metrics},
        }
        # Every other path under /v1/models/ names one model.
        self.model_route: dict[str, Callable[..., Awaitable[None]]] = {"GET": self._capped(self.model_routes.model)}
        self.anthropic_model_route: dict[str, Callable[..., Awaitable[None]]] = {
            "GET": self._door(anthropic_ingress.model, body=False)}
        # Every other path under /v1/responses/ names a stored response (protocol/doors/responses_stored.py).
        stored = self._door(responses_stored.stored_response, body=False)
        self.stored_response_route = {"GET": stored, "POST": stored, "DELETE": stored}
        # ... under /v1/files/ a file, under /v1/batches/ a batch (protocol/doors/files.py, batches.py).
        file_item, batch_item = self._door(file_door.item, body=False), self._door(batch_door.item, body=False)
        self.file_route = {"GET": file_item, "DELETE": file_item}
        self.batch_route = {"GET": batch_item, "POST": batch_item}

    @property
    def active_requests(self) -> int:
        """Calls and sessions in progress, for ``server.max_concurrent_requests`` (the gate's count)."""
        return self.gate.active

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket" and scope["path"] == responses_ws.PATH:   # the Responses websocket mode
            await responses_ws.serve_responses_socket(self, scope, receive, send)
        elif scope["type"] == "websocket":
            await serve_websocket(self, scope, receive, send)
        elif scope["type"] == "lifespan":
            await self.lifespan(receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        try:
            async with trio.open_nursery() as nursery:
                try:
                    snapshot = self._load()
                    runtime = new_runtime(snapshot, config_path=self.config_path, watch=self.watch)
                    serve_batch_lines(self, runtime)
                    self.runtime = await nursery.start(runtime.run)
                except Exception as exc:
                    if isinstance(exc, (StoreUnavailable, ConfigError)):   # the operator's to fix: the reason only
                        log.error("startup failed: %s", exc)
                    else:
                        log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                log.info("serving %d backend(s), config revision %s from %s", len(snapshot.backends),
                         snapshot.revision, snapshot.source)
                self._nursery = nursery
                if self.stop_requested:   # told to stop while starting: drain before the first call
                    self.begin_drain()
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown
                nursery.cancel_scope.cancel()
        finally:
            self.runtime = None
        await send({"type": "lifespan.shutdown.complete"})

    async def http(self, scope: Scope, receive: Receive, send: Send, settled: Identity | None = None) -> None:
        """``settled``: an in-process call's Identity (a batch line's: protocol/doors/batch_lines.py), whose key
        its caller looked up; no key is read from its headers."""
        arrived, wall = trio.current_time(), time.time()
        request_id = new_request_id() if settled is None else settled.request_id
        trace: TraceContext | None = None
        who: Identity | None = settled   # settled at the edge: no key before it (a 401, a hop guard's refusal)
        # x-continuum-request-id is always ours; x-request-id joins it when tracing is on.
        id_headers = [(b"x-continuum-request-id", request_id.encode())]
        started = False
        status: int | None = None   # what the client got, for the metrics
        # Where the answer's time goes: a call notes its upstream waits on it (actors/timing.py).
        scope[TIMING] = timing = Timing(arrived)

        async def send_with_id(message: dict[str, Any]) -> None:
            nonlocal started, status
            if message["type"] == "http.response.start":
                started, status = True, message["status"]
                headers = message.get("headers", ())
                message = {**message, "headers": [
                    *headers, *id_headers, (SERVER_TIMING, timing.header(trio.current_time(), whole(headers)))]}
            await send(message)

        bound_fields = log_fields.bind(request_id=request_id)
        metrics = self.runtime.metrics if self.runtime is not None else None   # none while starting
        if metrics is not None:
            metrics.http_began()
        try:
            if scope.get("http_version") == "2":
                self._refuse_h2c_if_off()
            elif ambiguous_framing(scope["headers"]):
                await self._refuse_ambiguous_framing(scope, receive)
            trace = self.trace_context(scope, request_id, id_headers)
            path = scope["path"]
            if path.startswith("/admin/"):
                scope["switchyard.request_id"] = request_id   # the admin API's own (smart-routing simulate's)
                await self.admin.handle(self._runtime(), scope, receive, send_with_id)
                return
            # The hop guard, then the key: before the path is looked at, like the admin token.
            who = await self.gate.identify(scope, request_id, trace=trace) if settled is None \
                else attrs.evolve(settled, trace=trace)
            methods = self.routes.get(path)
            if methods is None and path.startswith(MODEL_PREFIX) and len(path) > len(MODEL_PREFIX):
                methods = self.model_route
            elif methods is None and path.startswith(ANTHROPIC_MODEL_PREFIX) and path != ANTHROPIC_MODEL_PREFIX:
                methods = self.anthropic_model_route
            elif methods is None and path.startswith(responses_stored.PREFIX):
                methods = self.stored_response_route
            elif methods is None and path.startswith(file_door.PREFIX):
                methods = self.file_route
            elif methods is None and path.startswith(batch_door.PREFIX):
                methods = self.batch_route
            if methods is None:
                raise RouteNotFound(f"No route for {scope['method']} {path}")
            handler = methods.get(scope["method"])
            if handler is None:
                raise MethodNotAllowed(f"{scope['method']} is not allowed on {path}", allowed=tuple(methods))
            await handler(who, scope, receive, send_with_id)
        except GatewayError as err:
            account_refusal(self.runtime, scope, err, request_id, arrived, wall, who.key if who else None, trace,
                            who.purpose if who else "client")
            if unread_body(scope):   # the server closes a connection whose body it did not read: say so
                err = err.with_headers([(b"connection", b"close")])
            if scope["path"].startswith(ANTHROPIC_PREFIX):   # Anthropic SDKs read their own error shape
                await respond_error(send_with_id, err, request_id)
            else:
                await respond(send_with_id, err.status, err.body(), err.headers())
        except ClientGone:
            pass
        except Exception:
            # A bug must still answer in our envelope, and be loud in the log.
            log.exception("unhandled error on %s %s (request %s)", scope["method"], scope["path"], request_id)
            if not started:
                internal = InternalError()
                account_refusal(self.runtime, scope, internal, request_id, arrived, wall, who.key if who else None,
                                trace, who.purpose if who else "client")
                if scope["path"].startswith(ANTHROPIC_PREFIX):
                    await respond_error(send_with_id, internal, request_id)
                else:
                    await respond(send_with_id, internal.status, internal.body(), internal.headers())
        finally:
            log_fields.unbind(bound_fields)
            if metrics is not None:
                metrics.http_ended(scope["path"], scope["method"], status, self.routes)

    def trace_context(self, scope: Scope, request_id: str, id_headers: list[tuple[bytes, bytes]]
                      ) -> TraceContext | None:
        """The request's TraceContext (None with tracing off or no config yet); sets the x-request-id echo.

        An invalid client x-request-id raises InvalidRequest; the 400 then
        echoes the router's id.
        """
        runtime = self.runtime
        if runtime is None or not runtime.snapshot.tracing.enabled:
            return None
        id_headers.append((b"x-request-id", request_id.encode()))
        ctx = trace_context(scope["headers"], runtime.snapshot.tracing)
        assert ctx is not None
        if ctx.x_request_id is not None:
            id_headers[-1] = (b"x-request-id", ctx.x_request_id.encode())
        if ctx.client_ref_rejected is not None:
            runtime.client_ref_rejected.add(ctx.client_ref_rejected)
        log_fields.bind(trace_id=ctx.trace_id, x_request_id=ctx.x_request_id, client_ref=ctx.client_ref)
        return ctx

    async def _refuse_ambiguous_framing(self, scope: Scope, receive: Receive) -> None:
        """A 400 that closes the connection. The body is read first (under the usual limits), so the
        answer is the last thing on the connection and nothing pipelined behind it is served."""
        server = self._runtime().snapshot.server
        await read_body(scope, receive, server.max_body_bytes, server)
        raise InvalidRequest("The request has both Transfer-Encoding and Content-Length; send one of them "
                             "(RFC 9112 section 6.3)", param="headers", code="ambiguous_request_framing",
                             extra_headers=[(b"connection", b"close")])

    def _refuse_h2c_if_off(self) -> None:
        """hypercorn always speaks h2c (``Upgrade: h2c`` or the HTTP/2 preface); with
        ``server.http2_cleartext`` off nothing is served over it."""
        if self.runtime is None or not self.runtime.snapshot.server.http2_cleartext:
            raise HttpVersionNotSupported("HTTP/2 without TLS (h2c) is off on this gateway "
                                          "(server.http2_cleartext); use HTTP/1.1")

    def _runtime(self) -> Runtime:
        return self.gate.up()

    def chat_completions(self, runtime: Runtime, who: Identity, scope: Scope, receive: Receive, send: Send,
                         body: bytes) -> Awaitable[None]:
        """The call, to await (returned, not awaited here: one frame less for as long as a stream is open)."""
        payload = parse_json_object(body)
        return self.serve_chat(runtime, who, scope, receive, payload, body, lambda call: AsgiSink(send, call.stream))

    def serve_chat(self, runtime: Runtime, who: Identity, scope: Scope, receive: Receive, payload: dict[str, Any],
                   body: bytes, sink_for: Callable[[Call], StreamingSink], endpoint: Endpoint = Endpoint.CHAT,
                   parse: Callable[..., Call] = parse_chat_payload,
                   shape: Callable[[Call], Call] | None = None) -> Awaitable[None]:
        """One call in an OpenAI format (``payload``, parsed from ``body``), answered into the sink
        ``sink_for`` makes for it: Chat Completions' own sink, or an ingress's translating one.
        ``shape`` (an ingress's) fixes the Call once it is parsed, before anything is decided on it.
        What is HTTP (``who`` asks, the client's disconnect) is settled here; the call itself runs in
        ``actors/call/pipeline.py``, whose coroutine is returned for the caller to await: a frame of
        this method would stay alive as long as the call (0.4 KB per open stream)."""
        # What the body asked, for the refusal record of a call refused before the pipeline made it one.
        scope["switchyard.model"], scope["switchyard.stream"] = payload.get("model"), payload.get("stream")
        # The revision the call runs on is the one current once its body is in; a key
        # revoked or narrowed while a slow body was uploading is judged by it too.
        arrival = who.arrival(runtime.snapshot, self.gate.active, timing=scope.get(TIMING))
        return serve_call(runtime, arrival, payload, body, Door(parse, sink_for, endpoint, shape),
                          disconnect_waiter(receive, scope))

    def _door(self, handler: Callable[..., Awaitable[None]], *, body: bool = True, upload: bool = False,
              read: BodyReader | None = None) -> Callable[[Identity, Scope, Receive, Send], Awaitable[None]]:
        """A door that lives in a module of its own: ``handler(app, runtime, who, scope, receive, send[, body])``."""
        if not body:
            async def serve(runtime: Runtime, who: Identity, scope: Scope, receive: Receive, send: Send) -> None:
                await handler(self, runtime, who, scope, receive, send)
            return self._capped(serve)

        async def serve_body(runtime: Runtime, who: Identity, scope: Scope, receive: Receive, send: Send,
                             raw: bytes) -> None:
            await handler(self, runtime, who, scope, receive, send, raw)
        return self._with_body(serve_body, upload=upload, read=read)

    def _capped(self, handler: Callable[..., Awaitable[None]]
                ) -> Callable[[Identity, Scope, Receive, Send], Awaitable[None]]:
        """``handler(runtime, who, scope, receive, send)`` let in by the gate, and counted against
        ``server.max_concurrent_requests`` (0: no cap) for its whole run."""
        async def capped(who: Identity, scope: Scope, receive: Receive, send: Send) -> None:
            with await self.gate.admit() as passage:
                await handler(passage.runtime, who, scope, receive, send)
        return capped

    def _with_body(self, handler: Callable[..., Awaitable[None]], upload: bool = False,
                   read: BodyReader | None = None) -> Callable[[Identity, Scope, Receive, Send], Awaitable[None]]:
        """``handler(runtime, who, scope, receive, send, body)``, the body read first, under its deadlines
        (``protocol/http/asgi.py``; ``upload``: a file upload's, bounded by ``server.max_upload_bytes``;
        ``read``: the door's own reader, given the revision: /v1/files' bound is ``batches.max_file_bytes``),
        and only then counted against ``server.max_concurrent_requests``: a client still uploading holds
        no slot, so slow bodies cannot starve the calls."""
        async def capped(who: Identity, scope: Scope, receive: Receive, send: Send) -> None:
            def reader(server: ServerConfig) -> Awaitable[bytes]:
                if read is not None:
                    return read(scope, receive, self._runtime().snapshot)
                return read_upload(scope, receive, server) if upload else \
                    read_body(scope, receive, server.max_body_bytes, server)
            began = trio.current_time()
            with await self.gate.admit(read=reader) as passage:
                timing = scope.get(TIMING)
                if timing is not None:   # the client's upload is not the gateway's time
                    timing.arrived += trio.current_time() - began
                await handler(passage.runtime, who, scope, receive, send, passage.body)
        return capped

    async def mcp(self, runtime: Runtime, who: Identity, scope: Scope, receive: Receive, send: Send,
                  body: bytes) -> None:
        await self.mcp_endpoint.serve(self._nursery, runtime, who, scope, receive, send, body)

    async def metrics(self, who: Identity, scope: Scope, receive: Receive, send: Send) -> None:
        await respond(send, 200, exposition(self._runtime()), [(b"content-type", CONTENT_TYPE)])

    async def health(self, who: Identity, scope: Scope, receive: Receive, send: Send) -> None:
        await respond(send, 200, b'{"status":"ok"}')

    def begin_drain(self) -> float:
        """Stop taking calls (``/ready`` says 503 at once) and end the ones in flight cleanly
        after ``server.shutdown_drain_timeout``; returns that window in seconds."""
        # Remembered even before the Runtime is up, so a worker told to stop while it
        # was starting never answers /ready 200 or takes a call in between.
        self.stop_requested = True
        runtime, nursery = self.runtime, getattr(self, "_nursery", None)
        if runtime is None or nursery is None or runtime.draining:
            return 0.0
        window = runtime.snapshot.server.shutdown_drain_timeout
        runtime.draining = True   # now, not when the drain task first runs: /ready must say so at once
        nursery.start_soon(runtime.drain, window)
        return window

    async def ready(self, who: Identity, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self.runtime
        if runtime is None:
            await respond(send, 503, b'{"status":"starting","healthy_backends":0}')
            return
        if runtime.draining:  # the load balancer must stop sending at once
            await respond(send, 503, b'{"status":"draining","healthy_backends":0}')
            return
        # Ready when some public backend takes traffic: healthy, or not yet
        # checked (the first check runs at start; with checks off it never does).
        view = runtime.health.view
        public = [b.name for b in runtime.snapshot.backends if b.enabled and not b.internal]
        routable = [name for name in public if view.routable(name)]
        states = {name: view.backends[name].state.value for name in public if name in view.backends}
        body = {"status": "ready" if routable else "unavailable",
                "healthy_backends": sum(1 for s in states.values() if s == "healthy"),
                "routable_backends": len(routable), "backends": states}
        await respond(send, 200 if routable else 503, json.dumps(body).encode())


def create_app(config_path: str | None = None, watch: bool = True, run_token: str | None = None) -> App:
    """The ASGI app for a config file (watched for changes), or for the embedded demo when None; ``run_token``:
    the demo's admin token for this run, which its console also takes from the printed link
    (``demo_console.py``)."""
    if config_path:
        assert run_token is None, "a config file's admin token is the operator's"
        return App(lambda: load_file(config_path).snapshot, config_path=config_path, watch=watch)
    if run_token is None:
        return App(lambda: load_demo().snapshot)
    return App(lambda: with_admin_token(load_demo().snapshot, run_token), link_login=True)
