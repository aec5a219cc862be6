"""Validation of ``engine_stats``, ``routing`` and the backends' declared provider limits.

The per-section loaders check shapes and ranges; ``check`` holds the
config-validate warnings that need the whole config (a term switched on
without the data it reads, limits declared that nothing reads).
"""

from __future__ import annotations

from typing import Any, Sequence
from urllib.parse import urlsplit

from switchyard.config import rules
from switchyard.config.rules import Invalid, Problems, Reader, child
from switchyard.config.schema import BackendConfig
from switchyard.config.telemetry import (
    EngineAdmission,
    EngineLoad,
    EngineStatsConfig,
    QuotaAware,
    RoutingConfig,
    UsageWeight,
)

HOUR = 3600.0


def metrics_url(value: Any) -> str:
    """An http(s) URL with a host; a query is allowed (some exporters filter by it), a fragment is not."""
    text = rules.string()(value)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"must be an http:// or https:// URL with a host, got {text!r}")
    if parts.fragment:
        raise Invalid("must not carry a fragment")
    return text


def engine_stats(r: Reader) -> EngineStatsConfig:
    d = EngineStatsConfig()
    out = EngineStatsConfig(
        enabled=r.get("enabled", rules.boolean, d.enabled),
        interval=r.get("interval", rules.duration(minimum=1, maximum=HOUR), d.interval),
        timeout=r.get("timeout", rules.duration(maximum=300), d.timeout),
        path=r.get("path", rules.string(r"/[^\s?#]*", "an absolute path starting with /"), d.path),
    )
    r.finish()
    if out.timeout > out.interval:
        r.problems.warn(child(r.path, "timeout"),
                        f"{out.timeout:g}s is longer than interval {out.interval:g}s: a slow engine is "
                        "polled less often than configured")
    return out


def backend_fields(r: Reader) -> dict[str, Any]:
    """``provider_tpm``, ``provider_rpm`` and ``engine_stats_url`` of one backend, as BackendConfig keywords."""
    return {
        "provider_tpm": r.get("provider_tpm", rules.integer(minimum=1), None),
        "provider_rpm": r.get("provider_rpm", rules.integer(minimum=1), None),
        "engine_stats_url": r.get("engine_stats_url", metrics_url, None),
    }


def routing(r: Reader) -> RoutingConfig:
    out = RoutingConfig(engine_load=_engine_load(r.section("engine_load")),
                        usage_weight=_usage_weight(r.section("usage_weight")),
                        quota_aware=_quota_aware(r.section("quota_aware")))
    r.finish()
    return out


def _engine_load(r: Reader) -> EngineLoad:
    d = EngineLoad()
    a = r.section("admission")
    da = EngineAdmission()
    admission = EngineAdmission(
        enabled=a.get("enabled", rules.boolean, da.enabled),
        kv_usage_threshold=a.get("kv_usage_threshold", rules.number(0.0, 1.0), da.kv_usage_threshold),
    )
    a.finish()
    out = EngineLoad(
        enabled=r.get("enabled", rules.boolean, d.enabled),
        engine_load_weight=r.get("engine_load_weight", rules.number(0.0, 1.0), d.engine_load_weight),
        max_staleness_intervals=r.get("max_staleness_intervals", rules.integer(1, 100), d.max_staleness_intervals),
        balance_abs_threshold=r.get("balance_abs_threshold", rules.number(minimum=0.0), d.balance_abs_threshold),
        balance_rel_threshold=r.get("balance_rel_threshold", rules.number(minimum=1.0), d.balance_rel_threshold),
        admission=admission,
    )
    r.finish()
    return out


def _usage_weight(r: Reader) -> UsageWeight:
    d = UsageWeight()
    out = UsageWeight(
        enabled=r.get("enabled", rules.boolean, d.enabled),
        weight=r.get("weight", rules.number(0.0, 1.0), d.weight),
        staleness_interval=r.get("staleness_interval", rules.duration(minimum=1, maximum=HOUR),
                                 d.staleness_interval),
    )
    r.finish()
    return out


def _quota_aware(r: Reader) -> QuotaAware:
    d = QuotaAware()
    out = QuotaAware(
        enabled=r.get("enabled", rules.boolean, d.enabled),
        ttl=r.get("ttl", rules.duration(minimum=1, maximum=HOUR), d.ttl),
    )
    r.finish()
    return out


def check(engine_stats: EngineStatsConfig, routing: RoutingConfig, backends: Sequence[BackendConfig],
          problems: Problems) -> None:
    """The warnings that need the whole config: a term without its data, limits nothing reads.

    ``backends`` are the loaded ``BackendConfig``s; warnings name settings, not
    list positions, so a backend dropped for an error elsewhere shifts nothing.
    """
    load, usage, quota = routing.engine_load, routing.usage_weight, routing.quota_aware
    if not engine_stats.enabled:
        if load.enabled:
            problems.warn("routing.engine_load.enabled",
                          "true while engine_stats.enabled is false: the term has no engine data and never ranks")
        if load.admission.enabled:
            problems.warn("routing.engine_load.admission.enabled",
                          "true while engine_stats.enabled is false: the gate has no engine data and always admits")
    declaring = [b.name for b in backends if b.provider_tpm is not None or b.provider_rpm is not None]
    if usage.enabled and not declaring and not quota.enabled:
        problems.warn("routing.usage_weight.enabled",
                      "true but no backend declares provider_tpm or provider_rpm: every backend scores 0.0 "
                      "and the term never decides")
    if not usage.enabled and declaring:
        problems.warn("routing.usage_weight.enabled",
                      f"false while backend(s) {', '.join(declaring)} declare provider_tpm/provider_rpm: "
                      "the limits are not used")
    if quota.enabled and not usage.enabled:
        problems.warn("routing.quota_aware.enabled",
                      "true while routing.usage_weight.enabled is false: observed quota has no effect")
