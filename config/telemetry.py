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

from switchyard.config import rules, values
from switchyard.config.fields import field, section

HOUR = 3600.0


@frozen
class EngineStatsConfig:
    enabled: bool = field(False, rules.boolean)
    interval: float = field(15.0, rules.duration(minimum=1, maximum=HOUR))   # between polls of one backend
    timeout: float = field(5.0, rules.duration(maximum=300))                 # one poll's limit
    # on the backend's url, unless backends[].engine_stats_url says otherwise
    path: str = field("/metrics", values.http_path)


@frozen
class EngineAdmission:
    enabled: bool = field(False, rules.boolean)
    kv_usage_threshold: float = field(0.98, rules.number(0.0, 1.0))


@frozen
class EngineLoad:
    enabled: bool = field(False, rules.boolean)
    engine_load_weight: float = field(0.3, rules.number(0.0, 1.0))
    max_staleness_intervals: int = field(3, rules.integer(1, 100))
    balance_abs_threshold: float = field(64.0, rules.number(minimum=0.0))
    balance_rel_threshold: float = field(1.5, rules.number(minimum=1.0))
    admission: EngineAdmission = section(EngineAdmission)


@frozen
class UsageWeight:
    enabled: bool = field(False, rules.boolean)
    weight: float = field(0.2, rules.number(0.0, 1.0))
    # the tumbling window of local token metering
    staleness_interval: float = field(60.0, rules.duration(minimum=1, maximum=HOUR))


@frozen
class QuotaAware:
    enabled: bool = field(False, rules.boolean)
    ttl: float = field(45.0, rules.duration(minimum=1, maximum=HOUR))


@frozen
class RoutingConfig:
    engine_load: EngineLoad = section(EngineLoad)
    usage_weight: UsageWeight = section(UsageWeight)
    quota_aware: QuotaAware = section(QuotaAware)
