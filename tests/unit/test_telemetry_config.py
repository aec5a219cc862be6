"""engine_stats, routing and the declared provider limits: defaults, each error with its path, each warning."""

import pytest

from switchyard.config.load import ConfigError, load_text
from switchyard.config.load_telemetry import check
from switchyard.config.rules import Problems
from switchyard.config.telemetry import (
    EngineAdmission,
    EngineLoad,
    EngineStatsConfig,
    QuotaAware,
    RoutingConfig,
    UsageWeight,
)

BACKEND = """
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [m]
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, env={})
    return info.value.errors


def snapshot(text: str):
    return load_text(text, env={}).snapshot


def warnings_of(text: str) -> list[str]:
    """Loader warnings plus those of ``check`` (the whole-config warnings the lead wires in)."""
    loaded = load_text(text, env={})
    problems = Problems()
    s = loaded.snapshot
    check(s.engine_stats, s.routing, s.backends, problems)
    return [w for w in loaded.warnings if w.startswith(("engine_stats", "routing."))] + \
        [w for w in problems.warnings if w not in loaded.warnings]


# --- defaults and a full example ----------------------------------------------------------------

def test_defaults_when_sections_absent():
    s = snapshot(BACKEND)
    assert s.engine_stats == EngineStatsConfig(enabled=False, interval=15.0, timeout=5.0, path="/metrics")
    assert s.routing == RoutingConfig()
    assert s.routing.engine_load == EngineLoad(False, 0.3, 3, 64.0, 1.5, EngineAdmission(False, 0.98))
    assert s.routing.usage_weight == UsageWeight(False, 0.2, 60.0)
    assert s.routing.quota_aware == QuotaAware(False, 45.0)
    b = s.backends[0]
    assert (b.provider_tpm, b.provider_rpm, b.engine_stats_url) == (None, None, None)


FULL = """
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [m]
    provider_tpm: 200000
    provider_rpm: 500
    engine_stats_url: http://127.0.0.1:9000/metrics?name=vllm
engine_stats:
  enabled: true
  interval: 5s
  timeout: 2s
  path: /prom/metrics
routing:
  engine_load:
    enabled: true
    engine_load_weight: 0.5
    max_staleness_intervals: 4
    balance_abs_threshold: 8
    balance_rel_threshold: 1.0
    admission:
      enabled: true
      kv_usage_threshold: 0.9
  usage_weight:
    enabled: true
    weight: 1
    staleness_interval: 1m
  quota_aware:
    enabled: true
    ttl: 30s
"""


def test_full_example_loads_without_warnings():
    s = snapshot(FULL)
    assert s.engine_stats == EngineStatsConfig(True, 5.0, 2.0, "/prom/metrics")
    assert s.routing.engine_load == EngineLoad(True, 0.5, 4, 8.0, 1.0, EngineAdmission(True, 0.9))
    assert s.routing.usage_weight == UsageWeight(True, 1.0, 60.0)
    assert s.routing.quota_aware == QuotaAware(True, 30.0)
    b = s.backends[0]
    assert (b.provider_tpm, b.provider_rpm, b.engine_stats_url) == (200000, 500, "http://127.0.0.1:9000/metrics?name=vllm")
    assert warnings_of(FULL) == []


# --- errors, each at its path ---------------------------------------------------------------------

@pytest.mark.parametrize("section, error", [
    ("engine_stats: {enabled: 1}", "engine_stats.enabled: must be true or false, got integer"),
    ("engine_stats: {interval: 0.5s}", "engine_stats.interval: must be at least 1s, got '0.5s'"),
    ("engine_stats: {interval: 2h}", "engine_stats.interval: must be at most 3600s, got '2h'"),
    ("engine_stats: {interval: soon}",
     "engine_stats.interval: must be a duration like 10s, 500ms or 1m30s, got 'soon'"),
    ("engine_stats: {timeout: 0}", "engine_stats.timeout: must be greater than zero"),
    ("engine_stats: {timeout: 10m}", "engine_stats.timeout: must be at most 300s, got '10m'"),
    ("engine_stats: {path: metrics}", "engine_stats.path: must be an absolute path starting with /, got 'metrics'"),
    ("engine_stats: {url: x}", "engine_stats.url: unknown key"),
    ("engine_stats: [1]", "engine_stats: must be a mapping, got list"),
    ("routing: {engine_load: {enabled: yes please}}", "routing.engine_load.enabled: must be true or false, got string"),
    ("routing: {engine_load: {engine_load_weight: 1.5}}",
     "routing.engine_load.engine_load_weight: must be at most 1.0, got 1.5"),
    ("routing: {engine_load: {engine_load_weight: -0.1}}",
     "routing.engine_load.engine_load_weight: must be at least 0.0, got -0.1"),
    ("routing: {engine_load: {engine_load_weight: .nan}}",
     "routing.engine_load.engine_load_weight: must be a finite number"),
    ("routing: {engine_load: {max_staleness_intervals: 0}}",
     "routing.engine_load.max_staleness_intervals: must be at least 1, got 0"),
    ("routing: {engine_load: {max_staleness_intervals: 101}}",
     "routing.engine_load.max_staleness_intervals: must be at most 100, got 101"),
    ("routing: {engine_load: {max_staleness_intervals: 2.5}}",
     "routing.engine_load.max_staleness_intervals: must be an integer, got number"),
    ("routing: {engine_load: {balance_abs_threshold: -1}}",
     "routing.engine_load.balance_abs_threshold: must be at least 0.0, got -1"),
    ("routing: {engine_load: {balance_rel_threshold: 0.99}}",
     "routing.engine_load.balance_rel_threshold: must be at least 1.0, got 0.99"),
    ("routing: {engine_load: {admission: {enabled: 0}}}",
     "routing.engine_load.admission.enabled: must be true or false, got integer"),
    ("routing: {engine_load: {admission: {kv_usage_threshold: 1.01}}}",
     "routing.engine_load.admission.kv_usage_threshold: must be at most 1.0, got 1.01"),
    ("routing: {engine_load: {admission: {threshold: 1}}}", "routing.engine_load.admission.threshold: unknown key"),
    ("routing: {engine_load: {kv_cache_index: true}}", "routing.engine_load.kv_cache_index: unknown key"),
    ("routing: {usage_weight: {weight: 2}}", "routing.usage_weight.weight: must be at most 1.0, got 2"),
    ("routing: {usage_weight: {weight: .inf}}", "routing.usage_weight.weight: must be a finite number"),
    ("routing: {usage_weight: {weight: '0.5'}}", "routing.usage_weight.weight: must be a number, got string"),
    ("routing: {usage_weight: {staleness_interval: 500ms}}",
     "routing.usage_weight.staleness_interval: must be at least 1s, got '500ms'"),
    ("routing: {usage_weight: {staleness_interval: 61m}}",
     "routing.usage_weight.staleness_interval: must be at most 3600s, got '61m'"),
    ("routing: {quota_aware: {enabled: 'on'}}", "routing.quota_aware.enabled: must be true or false, got string"),
    ("routing: {quota_aware: {ttl: 0}}", "routing.quota_aware.ttl: must be greater than zero"),
    ("routing: {quota_aware: {ttl: 0.5}}", "routing.quota_aware.ttl: must be at least 1s, got 0.5"),
    ("routing: {quota_aware: {ttl: 3601}}", "routing.quota_aware.ttl: must be at most 3600s, got 3601"),
    ("routing: {prefix: 1}", "routing.prefix: unknown key"),
])
def test_section_errors(section, error):
    assert errors_of(BACKEND + section + "\n") == [error]


@pytest.mark.parametrize("line, error", [
    ("provider_tpm: 0", "backends[0].provider_tpm: must be at least 1, got 0"),
    ("provider_tpm: 1.5", "backends[0].provider_tpm: must be an integer, got number"),
    ("provider_tpm: '100'", "backends[0].provider_tpm: must be an integer, got string"),
    ("provider_rpm: -3", "backends[0].provider_rpm: must be at least 1, got -3"),
    ("provider_rpm: true", "backends[0].provider_rpm: must be an integer, got boolean"),
    ("engine_stats_url: ftp://h/metrics",
     "backends[0].engine_stats_url: must be an http:// or https:// URL with a host, got 'ftp://h/metrics'"),
    ("engine_stats_url: /metrics",
     "backends[0].engine_stats_url: must be an http:// or https:// URL with a host, got '/metrics'"),
    ("engine_stats_url: 'http://h/metrics#x'", "backends[0].engine_stats_url: must not carry a fragment"),
    ("engine_stats_url: ''", "backends[0].engine_stats_url: must not be empty"),
])
def test_backend_field_errors(line, error):
    assert errors_of(BACKEND + "    " + line + "\n") == [error]


def test_declared_limits_accept_one():
    b = snapshot(BACKEND + "    provider_tpm: 1\n    provider_rpm: 1\n").backends[0]
    assert (b.provider_tpm, b.provider_rpm) == (1, 1)


# --- warnings ---------------------------------------------------------------------------------------

LIMITED = BACKEND + "    provider_tpm: 1000\n"


@pytest.mark.parametrize("text, warnings", [
    (BACKEND + "routing: {engine_load: {enabled: true}}\n",
     ["routing.engine_load.enabled: true while engine_stats.enabled is false: the term has no engine data "
      "and never ranks"]),
    (BACKEND + "routing: {engine_load: {admission: {enabled: true}}}\n",
     ["routing.engine_load.admission.enabled: true while engine_stats.enabled is false: the gate has no "
      "engine data and always admits"]),
    (BACKEND + "engine_stats: {enabled: true}\nrouting: {engine_load: {enabled: true, admission: {enabled: true}}}\n",
     []),
    (BACKEND + "routing: {usage_weight: {enabled: true}}\n",
     ["routing.usage_weight.enabled: true but no backend declares provider_tpm or provider_rpm: every backend "
      "scores 0.0 and the term never decides"]),
    (LIMITED + "routing: {usage_weight: {enabled: true}}\n", []),
    (LIMITED, ["routing.usage_weight.enabled: false while backend(s) a declare provider_tpm/provider_rpm: "
               "the limits are not used"]),
    (BACKEND + "    provider_rpm: 5\n  - {name: b, url: 'http://h:1', models: [m], provider_tpm: 9}\n",
     ["routing.usage_weight.enabled: false while backend(s) a, b declare provider_tpm/provider_rpm: "
      "the limits are not used"]),
    (BACKEND + "routing: {quota_aware: {enabled: true}}\n",
     ["routing.quota_aware.enabled: true while routing.usage_weight.enabled is false: observed quota has no effect"]),
    # observed quota lets backends take part without declarations: no "nothing declared" warning
    (BACKEND + "routing: {usage_weight: {enabled: true}, quota_aware: {enabled: true}}\n", []),
    # the KV-overlap prerequisite of other routers does not exist here: no warning about it
    (BACKEND + "selection_strategy: RoundRobin\nengine_stats: {enabled: true}\n"
               "routing: {engine_load: {enabled: true}}\n",
     []),
    (BACKEND + "engine_stats: {interval: 2s}\n",
     ["engine_stats.timeout: 5s is longer than interval 2s: a slow engine is polled less often than configured"]),
])
def test_warnings(text, warnings):
    assert warnings_of(text) == warnings


def test_check_takes_parts_directly():
    problems = Problems()
    check(EngineStatsConfig(), RoutingConfig(quota_aware=QuotaAware(enabled=True)), (), problems)
    assert problems.warnings == ["routing.quota_aware.enabled: true while routing.usage_weight.enabled is false: "
                                 "observed quota has no effect"]
    assert problems.errors == []
