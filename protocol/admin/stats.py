"""``GET /admin/stats/backends`` and ``GET /admin/backends/{name}/engine-stats``: what the
live-signal terms see, per backend, with every age measured against the window that decides
whether it still counts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import attrs
import trio

from switchyard.actors.errors import RouteNotFound
from switchyard.actors.ledger.record import StoreUnavailable, UsageQuery
from switchyard.actors.routing import quota as quota_rules
from switchyard.actors.signals import engine_window
from switchyard.protocol.admin.usage import usage_reader

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

Respond = Callable[..., Awaitable[None]]

ENGINE_PREFIX, ENGINE_SUFFIX = "/admin/backends/", "/engine-stats"


def engine_stats(runtime: "Runtime", backend: str, now: float) -> dict[str, Any] | None:
    """The engine snapshot of ``backend`` with its age and freshness; None when it is not polled."""
    poller, snap = runtime.engine_stats, runtime.snapshot
    status = poller.status.get(backend)
    sample = poller.view.get(backend)
    if status is None and sample is None:
        return None
    window = engine_window(snap)
    out: dict[str, Any] = {"poll": attrs.asdict(status) if status is not None else None,
                           "freshness_window": window, "snapshot": None}
    if sample is not None:
        age = sample.age(now)
        out["snapshot"] = {**attrs.asdict(sample), "age": age, "fresh": age <= window}
    throughput = poller.throughput.get(backend)
    out["throughput_tokens_per_second"] = throughput.tokens_per_second if throughput is not None else None
    return out


def quota(runtime: "Runtime", backend: str, now: float) -> dict[str, Any] | None:
    """The latest quota observation of ``backend`` against the configured TTL; None when none."""
    observed = runtime.quota.view.get(backend)
    if observed is None:
        return None
    ttl = runtime.snapshot.routing.quota_aware.ttl
    age = quota_rules.age(observed, now)
    return {"observed_at": observed.observed_at, "age": age, "ttl": ttl,
            "fresh": quota_rules.is_fresh(observed, now, ttl),
            "usable": observed.usable, "requests_ratio": observed.requests_ratio,
            "tokens_ratio": observed.tokens_ratio,
            "axes": {family: attrs.asdict(source) for family, source in sorted(observed.sources.items())},
            "headers": dict(observed.raw)}


def backend_stats(runtime: "Runtime", name: str, now: float) -> dict[str, Any]:
    health = runtime.health.view.backends.get(name)
    used = runtime.pool.signals.meter.used(name, now)
    b = runtime.snapshot.backend(name)
    return {"name": name,
            "health": None if health is None else {"state": health.state.value, "since": health.since,
                                                   "failures": health.failures},
            "in_flight": runtime.pool.in_flight.get(name, 0),
            "latency_avg": runtime.pool.latency.get(name),
            "engine_stats": engine_stats(runtime, name, now),
            "quota": quota(runtime, name, now),
            "usage_window": {"tokens": used.tokens, "requests": used.requests,
                             "window_seconds": runtime.pool.signals.meter.interval,
                             "provider_tpm": b.provider_tpm if b is not None else None,
                             "provider_rpm": b.provider_rpm if b is not None else None}}


class StatsAdmin:
    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.routes = {"/admin/stats/backends": {"GET": self.all_backends}, "/admin/stats": {"GET": self.usage}}

    async def usage(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        """Tokens and calls by purpose: clients' own calls, and the gateway's (the LLM classifier's),
        never summed together; with a usage ledger, clients' calls by key and by model too."""
        body: dict[str, Any] = {"by_purpose": runtime.usage.by_purpose()}
        body.update(await ledger_totals(runtime))
        await self.respond(send, 200, _json(body))

    async def all_backends(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        now = trio.current_time()
        body = {"now": now, "engine_stats_enabled": runtime.snapshot.engine_stats.enabled,
                "backends": [backend_stats(runtime, b.name, now) for b in runtime.snapshot.backends]}
        await self.respond(send, 200, _json(body))

    async def one_engine(self, runtime: "Runtime", name: str, send: Any) -> None:
        if runtime.snapshot.backend(name) is None:
            raise RouteNotFound(f"No backend named '{name}'", code="backend_not_found")
        now = trio.current_time()
        body = {"name": name, "now": now, "engine_stats": engine_stats(runtime, name, now),
                "quota": quota(runtime, name, now)}
        await self.respond(send, 200, _json(body))


async def ledger_totals(runtime: "Runtime") -> dict[str, Any]:
    """``by_key`` and ``by_model``: clients' calls over everything the ledger holds, as its summary
    rows; both None with ``ledger_error`` when its store cannot answer (the in-memory totals are
    still worth showing)."""
    reader = usage_reader(runtime)
    try:
        return {"by_key": await reader.summary(UsageQuery(purpose="client", group_by="key")),
                "by_model": await reader.summary(UsageQuery(purpose="client", group_by="model"))}
    except StoreUnavailable as exc:
        return {"by_key": None, "by_model": None, "ledger_error": str(exc)}


def _json(body: Any) -> bytes:
    return json.dumps(body, default=str).encode()
