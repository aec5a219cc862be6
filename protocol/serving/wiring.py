"""A Runtime assembled with the protocol layer's parts, one ``RuntimePorts``: the shared upstream client, the
translating wires, the web-search providers' clients, the usage and owner stores, the Prometheus metrics of its
calls and, with ``tracing.otlp``, their spans, with ``state.redis_url`` the shared limiter and cache (the actors
define what they need in ``actors/ports.py``; each factory is given what it reads)."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import attrs

from switchyard.actors.ledger import spill
from switchyard.actors.limits.tickets import Summary
from switchyard.actors.ports import Current, RuntimePorts, SearchApi
from switchyard.actors.runtime import Runtime
from switchyard.actors.wire import Wires
from switchyard.config.response_cache import CacheStoreKind
from switchyard.config.schema import Snapshot
from switchyard.config.values import shown_url
from switchyard.protocol.kv.sources import KvSources
from switchyard.protocol.mcp.servers import McpServers
from switchyard.protocol.search.client import ProviderSearch
from switchyard.protocol.serving.call_metrics import GatewayMetrics
from switchyard.protocol.stores import open_store
from switchyard.protocol.stores.alerts import open_alert_store
from switchyard.protocol.stores.batches import open_batch_store
from switchyard.protocol.stores.control import open_control_store
from switchyard.protocol.stores.control_secret import control_secret
from switchyard.protocol.stores.response_owners import open_owner_store
from switchyard.protocol.wires import anthropic as anthropic_wire
from switchyard.protocol.wires import responses as responses_wire
from switchyard.protocol.wires import responses_on_chat
from switchyard.protocol.wires.native import NATIVE
from switchyard.protocol.wires.upstream import Upstream

if TYPE_CHECKING:
    from switchyard.protocol.serving.otlp import SpanExport
    from switchyard.protocol.stores.redis_cache import RedisCacheStore
    from switchyard.protocol.stores.redis_limits import RedisLimiter

log = logging.getLogger("switchyard.tracing")

WORKER_ENV = "SWITCHYARD_WORKER_INDEX"   # set in each worker process of a multi-worker instance (workers.py)
WORKERS_ENV = "SWITCHYARD_WORKERS"       # ... with how many workers the instance has

# Each kind's own wire by its wire API (protocol/wires/native.py), after the specials, which apply whatever
# the kind, in this order: a Messages call's uncarried content first, then the Responses bridge.
WIRES = Wires(native=NATIVE, special=(anthropic_wire.UNCARRIED_WIRE, responses_wire.BRIDGE_WIRE))
# /v1/responses to a chat-only backend: as a chat call, through the chat wires above.
WIRES = attrs.evolve(WIRES, special=(*WIRES.special, responses_on_chat.special(WIRES)))


def new_runtime(snapshot: Snapshot, *, upstream: Upstream | None = None, config_path: str | None = None,
                watch: bool = True, search: SearchApi | None = None, kv_sources: bool = True) -> Runtime:
    """``search``: the web-search providers' clients (default: over the upstream client); ``kv_sources``:
    read kv_cache_index.event_sources (off: whoever runs the Runtime feeds its index, as the simulator does)."""
    data = snapshot.server.data_path()
    secret, off = control_secret(snapshot.usage, data)   # database keys need one: else none, and why
    upstream = upstream or Upstream(snapshot)
    ports = RuntimePorts(
        upstream=upstream, wires=WIRES, search=search or ProviderSearch(upstream.client),
        store=open_store(snapshot.usage, data),
        owner_store=open_owner_store(snapshot.usage, data),
        limiter_for=shared_limiter if snapshot.state.redis_url else None,
        cache_store_for=shared_cache if snapshot.response_cache.store is CacheStoreKind.REDIS else None,
        metrics_for=GatewayMetrics, spans_for=spans_for,
        control_store=open_control_store(snapshot.usage, data) if secret is not None else None,
        control_secret=secret, control_off=off, alert_store=open_alert_store(snapshot.usage, data),
        batch_store=open_batch_store(snapshot.usage, snapshot.batches, data), tools_for=McpServers,
        kv_sources_for=(lambda sink, sources: KvSources(sink, sources, upstream.client)) if kv_sources else None)
    return Runtime(snapshot, ports, spill_name=spill_name(), workers=int(os.environ.get(WORKERS_ENV, "1")),
                   config_path=config_path, watch=watch)


def shared_limiter(current: Current, ledger: Summary) -> RedisLimiter:
    """With ``state.redis_url``: every worker and instance counts in one Redis (budgets seeded from the ledger).
    The Redis client's modules are imported here, only when Redis is used: its RESP parser's library takes
    about a sixth of a worker's imports."""
    from switchyard.protocol.stores.redis_limits import RedisLimiter

    return RedisLimiter(current().state, current, ledger=ledger)


def shared_cache(current: Current) -> RedisCacheStore:
    """With ``response_cache.store: redis``: one cache for the fleet, in the Redis of ``state.redis_url``."""
    from switchyard.protocol.stores.redis_cache import RedisCacheStore

    url = current().state.redis_url
    assert url is not None   # the config refuses store: redis without it
    return RedisCacheStore(url, lambda: current().response_cache)


def spill_name() -> str:
    """The ledger's spill file of this process: each worker of an instance keeps its own (they share
    ``server.data_dir``), so one worker's replay never removes records another is appending."""
    index = os.environ.get(WORKER_ENV, "0")
    return spill.NAME if index == "0" else spill.NAME.replace(".jsonl", f"-{index}.jsonl")


def spans_for(current: Current) -> SpanExport | None:
    """The Runtime's span export, from its first snapshot (``tracing`` waits for a restart); None when off.
    The OpenTelemetry SDK is imported here, only when spans are exported: a worker without
    ``tracing.otlp`` does not pay its import at start."""
    tracing = current().tracing
    if tracing.otlp is None:
        return None
    if not tracing.enabled:
        log.warning("tracing.otlp is set while tracing.enabled is false: calls carry no trace, no span is exported")
        return None
    from switchyard.protocol.serving.otlp import SpanExport

    log.info("exporting spans to %s (sampling ratio %g)", shown_url(tracing.otlp.traces_url),
             tracing.otlp.sampling_ratio)
    return SpanExport(tracing.otlp, current)
