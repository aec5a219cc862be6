"""``GET /metrics``: Prometheus text exposition of the gateway's counters.

Counters live where the hot path already keeps them (plain dicts on the
pool); a collector reads them at scrape time, so a request pays nothing for
being measured. prometheus-client does the exposition format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.dedup import Role
from actors.routing.variants import VARIANTS
from protocol.tracing import CLIENT_REF_REASONS

if TYPE_CHECKING:
    from actors.runtime import Runtime

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class RuntimeCollector(Collector):
    def __init__(self, runtime: "Runtime") -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        rt = self.runtime
        saturated = CounterMetricFamily(
            "fallback_dial_bound_saturated", "Fallback dials that found no free permit in time, by backend",
            labels=["backend"])
        for backend, count in sorted(rt.pool.dial_saturated.items()):
            saturated.add_metric([backend], count)
        yield saturated
        in_flight = GaugeMetricFamily("backend_in_flight_requests", "Requests in flight, by backend",
                                      labels=["backend"])
        for backend, count in sorted(rt.pool.in_flight.items()):
            in_flight.add_metric([backend], count)
        yield in_flight
        restarts = CounterMetricFamily("actor_restarts", "Actor crashes followed by a restart", labels=["actor"])
        for actor, count in sorted((rt.supervisor.restarts if rt.supervisor else {}).items()):
            restarts.add_metric([actor], count)
        yield restarts
        client_ref = CounterMetricFamily(
            "client_ref_rejected", "Client reference headers dropped as invalid (the request went on), by reason",
            labels=["reason"])
        for reason in CLIENT_REF_REASONS:   # every reason, zero until seen, so rate() works from the start
            client_ref.add_metric([reason], rt.client_ref_rejected.get(reason, 0))
        yield client_ref
        variant = CounterMetricFamily(
            "continuum_model_variant_requests",
            "Chat requests naming a model variant suffix (proxy.variant_suffixes), by variant and whether "
            "it was applied (false: no ranking data, refused, or failed before an answer)",
            labels=["variant", "applied"])
        for name in VARIANTS:   # every series from the start, like client_ref_rejected
            for applied in ("true", "false"):
                variant.add_metric([name, applied], rt.variant_requests.get((name, applied), 0))
        yield variant
        policy = CounterMetricFamily(
            "request_params", "Chat calls whose request_params policy changed a field (applied) or was refused "
            "because a reachable backend cannot carry one (rejected)", labels=["outcome"])
        for outcome in ("applied", "rejected"):
            policy.add_metric([outcome], rt.request_params_outcomes.get(outcome, 0))
        yield policy
        dedup = CounterMetricFamily(
            "dedup_requests", "Chat calls under dedup.enabled, by role: led a shared upstream call, followed one, "
            "or ran alone (no key, or the key table full)", labels=["role"])
        for role in Role:
            dedup.add_metric([role.name.lower()], rt.dedup.counts.get(role, 0))
        yield dedup


def exposition(runtime: "Runtime") -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RuntimeCollector(runtime))
    return generate_latest(registry)
