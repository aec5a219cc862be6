"""``/admin/smart-routing/*``: see the candidate pool, try a request, edit profiles and policies.

``simulate`` runs the real pipeline (the configured classifier, the
policies, the pool) without dispatching; ``key_tier``, ``org`` and
``headers`` stand in for the caller's identity, so a tier policy can be
checked without that tier's key. The two PUTs validate exactly like the
config loader and publish a new Snapshot at once; the config file stays as
it is, so the next reload that changes it replaces these edits.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

import attrs

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.smart_router import text_headers
from switchyard.config.load_smart_routing import SmartRoutingError, parse_model_profiles, parse_routing_policies
from switchyard.protocol.http import client_json
from switchyard.protocol.http.asgi import read_body

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

BODY_LIMIT = 4 * 1024 * 1024
SIMULATE_FIELDS = ("payload", "key_tier", "org", "headers")
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


class SmartRoutingAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {
            "/admin/smart-routing/status": {"GET": self.status},
            "/admin/smart-routing/simulate": {"POST": self.simulate},
            "/admin/smart-routing/model-profiles": {"GET": self.profiles, "PUT": self.put_profiles},
            "/admin/smart-routing/policies": {"GET": self.policies, "PUT": self.put_policies},
        }

    async def status(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        snap = runtime.snapshot
        sr = snap.smart_routing
        smart = runtime.smart
        pool = smart.pool(snap, None)
        backend = smart.classifier.backend(snap)
        body = {
            "enabled": sr.enabled, "virtual_model": sr.virtual_model, "intercept_all": sr.intercept_all,
            "default_tier": sr.default_tier, "unprofiled_models": sr.unprofiled_models,
            "debug_headers": sr.debug_headers,
            "classifier": {"method": sr.classifier.method, "shadow": sr.classifier.shadow,
                           "llm_backend": backend.name if backend is not None else None,
                           "llm_model": sr.classifier.llm.model,
                           "cache_entries": smart.classifier.cache_size, "cache_hits": smart.classifier.cache_hits},
            "policies": [p.name for p in sr.routing_policies],
            "candidate_models": [{"model": c.model, "tier": c.tier, "source": c.source} for c in pool.candidates],
            "excluded_unprofiled_models": list(pool.excluded_unprofiled),
            "excluded_incompatible_models": list(pool.excluded_incompatible),
        }
        await self.respond(send, 200, _json(body))

    async def simulate(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        body = await _object(scope, receive, runtime.snapshot.server,
                             "{\"payload\": {\"messages\": [...]}, \"key_tier\", \"org\", \"headers\"}")
        for key in body:
            if key not in SIMULATE_FIELDS:
                raise InvalidRequest(f"Unknown field {key!r}; the body takes {', '.join(SIMULATE_FIELDS)}",
                                     param=key, code="unknown_parameter")
        payload = body.get("payload")
        if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
            raise InvalidRequest("'payload' must be a chat completion body with a 'messages' list", param="payload",
                                 code="invalid_type" if "payload" in body else "missing_required_parameter")
        for field in ("key_tier", "org"):
            if body.get(field) is not None and not isinstance(body[field], str):
                raise InvalidRequest(f"'{field}' must be a string", param=field, code="invalid_type")
        headers = body.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(k, str) and HEADER_NAME.fullmatch(k)
                                                    and isinstance(v, str) for k, v in headers.items()):
            raise InvalidRequest("'headers' must be an object of HTTP header names to string values",
                                 param="headers", code="invalid_type")
        # A lone surrogate (JSON allows "\\ud800") has no UTF-8 bytes: it goes in as its escape.
        raw = {k.lower().encode("latin-1"): v.encode("utf-8", "backslashreplace") for k, v in headers.items()}
        snap = runtime.snapshot
        decision = await runtime.smart.decide(snap, payload, key=None, key_tier=body.get("key_tier"),
                                              org=body.get("org"), headers=text_headers(raw),
                                              request_id=scope.get("switchyard.request_id", "simulate"),
                                              record=False)
        out = decision.describe()
        out["enabled"] = snap.smart_routing.enabled
        out["candidates"] = [{"model": c.model, "tier": c.tier, "source": c.source} for c in decision.pool.candidates]
        await self.respond(send, 200, _json(out))

    async def profiles(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        profiles = runtime.snapshot.smart_routing.model_profiles
        await self.respond(send, 200, _json({"model_profiles": [_plain(p) for p in profiles]}))

    async def policies(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        policies = runtime.snapshot.smart_routing.routing_policies
        await self.respond(send, 200, _json({"routing_policies": [_plain(p) for p in policies]}))

    async def put_profiles(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        raw = await _listed(scope, receive, runtime.snapshot.server, "model_profiles")
        sr = runtime.snapshot.smart_routing
        try:
            profiles = parse_model_profiles(raw, sr.classifier.domains)
        except SmartRoutingError as err:
            raise _invalid(err, "model_profiles") from None
        runtime.apply(attrs.evolve(runtime.snapshot, smart_routing=attrs.evolve(sr, model_profiles=profiles)))
        await self.respond(send, 200, _json({"model_profiles": [_plain(p) for p in profiles]}))

    async def put_policies(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        raw = await _listed(scope, receive, runtime.snapshot.server, "routing_policies")
        sr = runtime.snapshot.smart_routing
        try:
            policies = parse_routing_policies(raw, sr.classifier)
        except SmartRoutingError as err:
            raise _invalid(err, "routing_policies") from None
        runtime.apply(attrs.evolve(runtime.snapshot, smart_routing=attrs.evolve(sr, routing_policies=policies)))
        await self.respond(send, 200, _json({"routing_policies": [_plain(p) for p in policies]}))


def _invalid(err: SmartRoutingError, field: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid {field}: " + "; ".join(err.errors), param=field,
                          code="invalid_smart_routing_config", details={"errors": list(err.errors)})


async def _object(scope: Any, receive: Any, server: Any, shape: str) -> dict[str, Any]:
    raw = await read_body(scope, receive, BODY_LIMIT, server)
    try:
        body = client_json.loads(raw)
    except ValueError:
        raise InvalidRequest(f"The body must be JSON: {shape}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise InvalidRequest(f"The body must be a JSON object: {shape}", code="invalid_json")
    return body


async def _listed(scope: Any, receive: Any, server: Any, field: str) -> Any:
    """The list of a PUT body ``{"<field>": [...]}`` (a bare JSON list is taken as that list)."""
    raw = await read_body(scope, receive, BODY_LIMIT, server)
    try:
        body = client_json.loads(raw)
    except ValueError:
        raise InvalidRequest(f"The body must be JSON: {{\"{field}\": [...]}}", code="invalid_json") from None
    if isinstance(body, list):
        return body
    if not isinstance(body, dict) or set(body) != {field}:
        raise InvalidRequest(f"The body must be {{\"{field}\": [...]}}", param=field, code="invalid_json")
    return body[field]


def _plain(value: Any) -> Any:
    """A frozen config object as JSON-able data, unset fields left out."""
    if attrs.has(type(value)):
        return {k: _plain(v) for k, v in attrs.asdict(value, recurse=False).items() if v is not None and v != ()}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _json(body: Any) -> bytes:
    return json.dumps(body, default=str).encode()
