"""What makes two calls the same cached answer, and whether a call may use the cache at all.

The key is dedup's normalization (``actors/dedup.py``'s ``dedup_key``: the
endpoint, the API key's scope, the model that runs, what request_params
changed, what another API's client asked beyond the body, and the body as
dispatched, after presets and the parameter policy) with three changes that
fit an answer kept for minutes rather than a call in flight:

- the config revision is replaced by the *target's identity*: the backend
  the route settled on (its name, type, URL) and the id the model is sent
  as there. A reload that leaves that target alone keeps the cache warm; one
  that moves the model, the backend's URL or its upstream id starts afresh.
- stream or not, ``stream_options`` and the body's ``model`` are left out:
  one entry answers streaming and buffered calls alike, and a model variant
  (``base:nitro``) shares its base's entry (the spec: the identity follows
  the route, not the request's spelling).
- the body is hashed as canonical JSON (sorted keys), not as its bytes.

``settled`` says which backend a call settles on before anything runs, or
why it does not (a bypass reason): the spec caches only when routing has one
policy-compatible backend and no fallback chain could move the call.
"""

from __future__ import annotations

import hashlib
import json
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from switchyard.actors.dedup import hash_field
from switchyard.actors.mcp import entries
from switchyard.actors.messages import Call
from switchyard.actors.routing import variants
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig

if TYPE_CHECKING:
    from switchyard.config.response_cache import ResponseCacheConfig

_UNKEYED = ("stream", "stream_options", "model")
# The call's RequestActor (actors/call/request.py): not imported, so the packages import no cycle.
Actor = Any


def cache_key(call: Call, scope: str | None, model: str, backend: BackendConfig, target_id: str | None = None) -> bytes:
    """The digest of everything that makes the answer (see the module's docstring). ``target_id``: the
    destination the backend is part of (``response_cache.destinations``), which replaces its name and URL."""
    h = hashlib.blake2b(digest_size=32, person=b"switchyard-cache")
    name, url = (backend.name, backend.url) if target_id is None else (f"destination:{target_id}", "")
    parts = (name, backend.type.value, url, backend.upstream_ids.get(model, model), call.endpoint,
             scope, model, "\x00".join(call.param_tokens))
    for part in parts:
        hash_field(h, None if part is None else part.encode())
    ingress = {k: _unkeyed(v) if k in ("messages_body", "chat_payload") else v for k, v in call.ingress.items()}
    hash_field(h, _canonical(ingress) if ingress else None)
    hash_field(h, _canonical(_unkeyed(call.payload)))
    return h.digest()


def _unkeyed(payload: Any) -> Any:
    if not isinstance(payload, dict):
        return payload
    return {k: v for k, v in payload.items() if k not in _UNKEYED}


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def opted_out(settings: "ResponseCacheConfig", call: Call, model: str) -> str | None:
    """Why the operator's scope leaves this call out (a bypass reason), or None."""
    if call.endpoint != Endpoint.CHAT:
        return "endpoint"
    if not any(fnmatchcase(model, pattern) for pattern in settings.models):
        return "model"
    if settings.keys is not None and (call.key is None or call.key.id not in settings.keys):
        return "key"
    if call.key is not None and call.key.cache is False:
        return "key_opt_out"   # the operator's per-key switch (config or database key: `cache: false`)
    if not settings.cache_temperature_above_zero:
        temperature = call.payload.get("temperature")   # absent: not sent (a Messages client may not send it)
        if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature > 0:
            return "temperature"
    return None


def settled(actor: Actor) -> BackendConfig | str:
    """The one backend the call can go to, or why there is not exactly one (a bypass reason)."""
    rt, call, model = actor.runtime, actor.call, actor.model
    if actor.variant is not None and actor.variant.variant == variants.ONLINE:
        return "variant_online"   # the spec: :online never reads nor writes the cache
    if entries.named(call.payload):
        return "mcp_tools"   # the tools' answers are the servers' now, not the cache's
    if call.prefs is not None and not call.prefs.empty:
        return "provider_preferences"
    snap = call.snapshot
    if snap.fallback.enabled and snap.fallback.fallback_chains.get(model):
        return "fallback_chain"
    serving = rt.pool.serving(model, rt.discovery.view, snap)
    allowed = actor.reach.of(model)   # computed when the call was admitted
    eligible: list[BackendConfig] = [b for b in serving if allowed is None or b.name in allowed]
    if call.pin is not None:
        eligible = [b for b in eligible if b.name == call.pin]
    if not eligible:
        return "no_backend"
    if len(eligible) > 1:
        # the operator's replicas (response_cache.destinations): one cache target when every candidate is in one
        d = snap.response_cache.destination_of(eligible[0].name)
        if d is None or any(b.name not in d.backends for b in eligible):
            return "several_backends"
        return min(eligible, key=lambda b: d.backends.index(b.name))
    return eligible[0]


def target_of(settings: "ResponseCacheConfig", backend: BackendConfig) -> tuple[str | None, frozenset[str]]:
    """The destination's name (None: the backend alone) and the backends whose answer may be stored."""
    d = settings.destination_of(backend.name)
    return (None, frozenset((backend.name,))) if d is None else (d.name, frozenset(d.backends))
