"""Telemetry settings: engine stats polling and the selection terms that use live signals.

``engine_stats`` says whether and how often engines' Prometheus pages are
read; ``routing`` holds the three terms built on them and on what the
router sees itself: ``engine_load`` (queue depth and KV pressure, with an
admission gate), ``usage_weight`` (the share of a declared provider quota
not yet spent) and ``quota_aware`` (the provider's own rate-limit headers),
and ``cache_affinity``, the tie-break that keeps provider prompt caches warm.
Every term is off by default: without them selection is unchanged.

``OtlpExport`` is ``tracing.otlp``: where the gateway's own spans go (an
OpenTelemetry collector over OTLP/HTTP), off unless the section is written.
Restart-only, like the rest of ``tracing``.
"""

from __future__ import annotations

from typing import Any, Mapping

from attrs import Factory, frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, section
from switchyard.config.rules import Invalid, Reader

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


AFFINITY_KEYS = ("both", "prompt_cache_key", "prefix")


@frozen
class CacheAffinity:
    """``routing.cache_affinity``: calls sharing a ``prompt_cache_key`` or a prompt prefix go to the same
    backend among the otherwise equal candidates, so a provider's prompt cache stays warm there. The
    prefix, the ring and the load bound are ``prefix_routing``'s (max_prefix_length, virtual_nodes,
    load_factor_epsilon)."""

    enabled: bool = field(False, rules.boolean)
    key: str = field("both", values.words(*AFFINITY_KEYS))   # both: prompt_cache_key when sent, else the prefix


@frozen
class RoutingConfig:
    engine_load: EngineLoad = section(EngineLoad)
    usage_weight: UsageWeight = section(UsageWeight)
    quota_aware: QuotaAware = section(QuotaAware)
    cache_affinity: CacheAffinity = section(CacheAffinity)


# --- tracing.otlp ---------------------------------------------------------------

OTLP_PROTOCOLS = ("http/protobuf",)   # grpc would need grpcio; the HTTP exporter runs in its own thread
ATTRIBUTE_KEY = r"[A-Za-z_][A-Za-z0-9_.\-/]{0,127}"


def _mapping(value: Any, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping of {what}, got {rules.type_name(value)}")
    return value


def otlp_headers(value: Any) -> tuple[tuple[str, str], ...]:
    """Header name -> string value, sent with every export (a collector's token, say); never shown."""
    out = []
    for name, text in _mapping(value, "header names to strings").items():
        try:
            key = values.header_name(name)
        except Invalid as exc:
            raise Invalid(f"key {name!r}: {exc}") from None
        if not isinstance(text, str) or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
            raise Invalid(f"{key}: must be a string without control characters (the value is not shown)")
        out.append((key, text))
    return tuple(out)


def resource_attributes(value: Any) -> tuple[tuple[str, str | bool | int | float], ...]:
    """Attribute key -> a string, number or boolean: what every span's resource says (deployment, region)."""
    out: list[tuple[str, str | bool | int | float]] = []
    key_rule = rules.string(ATTRIBUTE_KEY, "an attribute key like deployment.environment")
    for key, item in _mapping(value, "attribute keys to values").items():
        try:
            key_rule(key)
        except Invalid as exc:
            raise Invalid(f"key {key!r}: {exc}") from None
        if not isinstance(item, (str, bool, int, float)):
            raise Invalid(f"{key}: must be a string, number or boolean, got {rules.type_name(item)}")
        out.append((key, item))
    return tuple(out)


@frozen
class OtlpExport:
    """``tracing.otlp``: present means on; ``endpoint`` is then required."""

    # The collector's base URL (``/v1/traces`` is added) or the full traces URL.
    endpoint: str | None = field(None, values.http_url)
    protocol: str = field("http/protobuf", values.words(*OTLP_PROTOCOLS))
    headers: tuple[tuple[str, str], ...] = field((), otlp_headers, secret=True)
    sampling_ratio: float = field(1.0, rules.number(0.0, 1.0))
    service_name: str = field("switchyard", rules.string(r"[^\x00-\x1f\x7f]{1,128}", "1 to 128 printable characters"))
    resource_attributes: tuple[tuple[str, str | bool | int | float], ...] = field(Factory(tuple),
                                                                                 resource_attributes)
    timeout: float = field(10.0, rules.duration(minimum=0.1, maximum=60))          # one export request
    export_interval: float = field(5.0, rules.duration(minimum=0.05, maximum=60))  # between two exports
    max_queue_size: int = field(2048, rules.integer(1, 1_000_000))                # spans waiting; more are dropped

    @property
    def traces_url(self) -> str:
        assert self.endpoint is not None
        return self.endpoint if self.endpoint.endswith("/v1/traces") else self.endpoint + "/v1/traces"


def check_otlp(otlp: OtlpExport, r: Reader) -> None:
    if otlp.endpoint is None:   # an invalid one was reported already (one error per path)
        r.problems.error(f"{r.path}.endpoint", "is required when tracing.otlp is set (the collector's URL, "
                         "e.g. http://otel-collector:4318)")
