"""The model-list routes (``/v1/models``, ``/v1/models/extended``, ``/v1/models/{model}``,
``/v1/models/refresh``): one cached listing, shown as the caller's API key may see it, behind the
built-in rate limits. The App routes them here; the Anthropic door reads the same listing."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import attrs
import trio

from switchyard.actors.errors import ModelNotFound, RateLimited
from switchyard.actors.routing.listing import ListedModel, find, list_models
from switchyard.config.access import ApiKey
from switchyard.protocol.doors.openai import model_list, model_list_extended, model_object_extended
from switchyard.protocol.http import limits
from switchyard.protocol.http.asgi import Receive, Scope, Send, respond
from switchyard.protocol.http.client_json import utf8

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.http.gate import Identity

log = logging.getLogger("switchyard.app")

MODEL_PREFIX = "/v1/models/"   # GET /v1/models/{model}; the id may hold '/' (HuggingFace ids)


@attrs.define
class CachedListing:
    """What ``ModelRoutes.models_cache`` holds: the rows, and the ``/v1/models`` body once rendered."""

    rows: tuple[ListedModel, ...]
    body: bytes | None = None


class ModelRoutes:
    """The list routes and what they keep: built-in, fixed protection of the model list
    (``protocol/http/limits.py``) and one cached listing, per worker process."""

    def __init__(self) -> None:
        self.models_limiter = limits.ClientRateLimiter(limits.MODELS_LIMIT)
        self.refresh_limiter = limits.ClientRateLimiter(limits.REFRESH_LIMIT)
        self.models_cache = limits.ModelListCache[CachedListing]()

    def _rate_limit(self, limiter: limits.ClientRateLimiter, client: str, now: float) -> None:
        refused = limiter.check(client, now)
        if refused is None:
            return
        route, rate = limiter.limit.route, refused.rate
        # One warning per client per refused streak; the repeats go to debug so a
        # client hammering a closed bucket cannot flood the log.
        log.log(logging.WARNING if refused.first else logging.DEBUG, "rate limited %s: %s limit (%s) for client %s",
                route, refused.which, rate.describe(), client)
        raise RateLimited(f"Rate limit exceeded on {route}: the {refused.which} limit of {rate.describe()} "
                          f"was reached; retry after {refused.retry_after_header}s",
                          retry_after=refused.retry_after_header)

    def listing(self, runtime: Runtime, now: float) -> CachedListing:
        """The model rows, from the cache while its TTL lasts (an empty list only briefly).

        One cache serves all three list routes, so they agree with each other; health
        (``backend_status``) is not cached but read at answer time.
        """
        cached = self.models_cache.get(runtime.snapshot, now)
        if cached is None:
            cached = CachedListing(list_models(runtime.snapshot, runtime.discovery.view))
            self.models_cache.put(runtime.snapshot, cached, not cached.rows, now)
        return cached

    def _model_list(self, runtime: Runtime, now: float) -> bytes:
        """The /v1/models body (rendered once per cached listing)."""
        cached = self.listing(runtime, now)
        if cached.body is None:
            cached.body = utf8(model_list(cached.rows))
        return cached.body

    def check_limit(self, who: "Identity", runtime: Runtime, now: float) -> None:
        """The built-in /v1/models limit; /v1/models/extended and /v1/models/{model} share its buckets."""
        key = who.key
        if key is not None:   # a verified key: its own bucket, whatever header carried it
            self._rate_limit(self.models_limiter, "verified-key " + key.id, now)
            return
        ip = who.client_ip(runtime.snapshot.server.trusted_proxies)
        self._rate_limit(self.models_limiter, limits.models_client(who.headers, ip), now)

    @staticmethod
    def _backend_status(runtime: Runtime) -> Callable[[str, str], dict[str, Any]]:
        view, now = runtime.health.view, trio.current_time()

        def status(backend: str, model: str) -> dict[str, Any]:
            h = view.backends.get(backend)
            circuit = view.circuit(backend, model)
            return {"state": h.state.value if h is not None else "unknown",
                    "routable": view.admits(backend, model, now),
                    "circuit": circuit.state.value}
        return status

    @staticmethod
    def visible(rows: tuple[ListedModel, ...], key: ApiKey | None) -> tuple[ListedModel, ...]:
        """The rows an API key may use: its model globs, and only the backends it may reach."""
        if key is None or (key.allowed_models is None and key.allowed_backends is None):
            return rows
        out = []
        for row in rows:
            backends = tuple(b for b in row.backends if key.allows_backend(b))
            if backends and key.allows_model(row.id):
                out.append(attrs.evolve(row, backends=backends) if backends != row.backends else row)
        return tuple(out)

    async def models(self, runtime: Runtime, who: "Identity", scope: Scope, receive: Receive, send: Send) -> None:
        now = trio.current_time()
        self.check_limit(who, runtime, now)
        await self._answer_models(send, runtime, who.key)

    async def _answer_models(self, send: Send, runtime: Runtime, key: ApiKey | None) -> None:
        """The /v1/models body, as the key may see it."""
        now = trio.current_time()
        if key is None or (key.allowed_models is None and key.allowed_backends is None):
            await respond(send, 200, self._model_list(runtime, now))
            return
        rows = self.visible(self.listing(runtime, now).rows, key)
        await respond(send, 200, utf8(model_list(rows)))

    async def models_extended(self, runtime: Runtime, who: "Identity", scope: Scope, receive: Receive,
                              send: Send) -> None:
        now = trio.current_time()
        self.check_limit(who, runtime, now)
        rows = self.visible(self.listing(runtime, now).rows, who.key)
        body = model_list_extended(rows, self._backend_status(runtime))
        await respond(send, 200, utf8(body))

    async def model(self, runtime: Runtime, who: "Identity", scope: Scope, receive: Receive, send: Send) -> None:
        now = trio.current_time()
        self.check_limit(who, runtime, now)
        model_id = scope["path"][len(MODEL_PREFIX):]
        row = find(self.visible(self.listing(runtime, now).rows, who.key), model_id)
        if row is None:
            raise ModelNotFound(f"The model '{model_id}' does not exist or no backend serves it", param="model")
        body = model_object_extended(row, self._backend_status(runtime))
        await respond(send, 200, utf8(body))

    async def refresh_models(self, runtime: Runtime, who: "Identity", scope: Scope, receive: Receive,
                             send: Send) -> None:
        """Drop the cached model list, ask every backend again, answer the fresh list."""
        # A verified API key has a bucket of its own; without keys every caller shares one.
        key = who.key
        self._rate_limit(self.refresh_limiter, limits.refresh_client(key.id if key is not None else None),
                         trio.current_time())
        self.models_cache.clear()
        await runtime.discovery.refresh_all()
        await self._answer_models(send, runtime, key)
