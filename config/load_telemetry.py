"""Validation of ``engine_stats`` and ``routing``, and the backends' declared provider limits.

Shapes and ranges are declared on the fields (``telemetry.py``) and read by
``load_section``; ``check`` holds the config-validate warnings that need the
whole config (a term switched on without the data it reads, limits declared
that nothing reads).
"""

from __future__ import annotations

from typing import Sequence

from switchyard.config.fields import load_section
from switchyard.config.rules import Problems, Reader, child
from switchyard.config.schema import BackendConfig
from switchyard.config.telemetry import EngineStatsConfig, RoutingConfig


def engine_stats(r: Reader) -> EngineStatsConfig:
    """Special only for its warning: a poll timeout longer than the interval."""
    out = load_section(EngineStatsConfig, r)
    if out.timeout > out.interval:
        r.problems.warn(child(r.path, "timeout"),
                        f"{out.timeout:g}s is longer than interval {out.interval:g}s: a slow engine is "
                        "polled less often than configured")
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
