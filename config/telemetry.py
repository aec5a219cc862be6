"""Telemetry settings: engine stats polling and the selection terms that use live signals.

``engine_stats`` says whether and how often engines' Prometheus pages are
read; ``routing`` holds the three terms built on them and on what the
router sees itself: ``engine_load`` (queue depth and KV pressure, with an
admission gate), ``usage_weight`` (the share of a declared provider quota
not yet spent) and ``quota_aware`` (the provider's own rate-limit headers).
Every term is off by default: without them selection is unchanged.
"""

from __future__ import annotations

from attrs import frozen


@frozen
class EngineStatsConfig:
    enabled: bool = False
    interval: float = 15.0        # seconds between polls of one backend
    timeout: float = 5.0          # one poll's limit
    path: str = "/metrics"        # on the backend's url, unless backends[].engine_stats_url says otherwise


@frozen
class EngineAdmission:
    enabled: bool = False
    kv_usage_threshold: float = 0.98


@frozen
class EngineLoad:
    enabled: bool = False
    engine_load_weight: float = 0.3
    max_staleness_intervals: int = 3
    balance_abs_threshold: float = 64.0
    balance_rel_threshold: float = 1.5
    admission: EngineAdmission = EngineAdmission()


@frozen
class UsageWeight:
    enabled: bool = False
    weight: float = 0.2
    staleness_interval: float = 60.0   # the tumbling window of local token metering


@frozen
class QuotaAware:
    enabled: bool = False
    ttl: float = 45.0


@frozen
class RoutingConfig:
    engine_load: EngineLoad = EngineLoad()
    usage_weight: UsageWeight = UsageWeight()
    quota_aware: QuotaAware = QuotaAware()
