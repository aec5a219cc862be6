"""The engine page a simulated vLLM or SGLang backend serves on ``GET .../metrics``.

Rendered by prometheus-client from ready-made families, so the text is what
the engines' own exporters write, in their own metric names. With
``simulation.engine_kv`` the queue, the KV usage and the prefix cache's
counters are the engine model's (``KvStats``), not the configured ones.
"""

from __future__ import annotations

from attrs import frozen
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from switchyard.config.schema import SimulatedEngine


@frozen
class MetricsReply:
    """One scripted answer of the engine page: a status, a raw body, a delay (``math.inf`` stalls)."""

    status: int = 200
    body: str | None = None      # None: the configured engine page (empty for a non-2xx status)
    delay: float = 0.0


@frozen
class KvStats:
    """What the engine model (``kv_engine.py``) reports: its queue, KV usage and prefix-cache counters (tokens)."""

    waiting: int
    usage: float
    queries: int
    hits: int


def render_page(engine: SimulatedEngine, model: str, running: int, tokens: float, kv: KvStats | None = None) -> str:
    """The Prometheus text page of ``engine`` serving ``model``: ``running`` requests, ``tokens`` generated."""
    waiting = engine.waiting if kv is None else kv.waiting
    usage = engine.kv_cache_usage if kv is None else kv.usage
    if engine.kind == "sglang":
        labels = {"model_name": model}
        families = [
            _gauge("sglang:num_running_reqs", "The number of running requests.", labels, running),
            _gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels, waiting),
            _gauge("sglang:token_usage", "The token usage.", labels, usage),
            _gauge("sglang:gen_throughput", "The generation throughput (token/s).", labels,
                   engine.background_tokens_per_second),
            _counter("sglang:generation_tokens", "Number of generation tokens processed.", labels, tokens),
        ]
        if engine.total_slots is not None:
            families.append(_gauge("sglang:max_running_requests", "Maximum running requests", labels,
                                   engine.total_slots))
        if kv is not None:
            families.append(_gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", labels,
                                   kv.hits / kv.queries if kv.queries else 0.0))
    else:
        labels = {"engine": "0", "model_name": model}
        families = [
            _gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                   running),
            _gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, waiting),
            _gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, usage),
            _counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, tokens),
        ]
        if kv is not None:   # vllm/v1/metrics/loggers.py: counted in tokens
            families += [
                _counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                         labels, kv.queries),
                _counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                         labels, kv.hits),
            ]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry).decode()


class _Families:
    """A collector that hands prometheus-client ready-made families, so the page is rendered as engines do."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _gauge(name: str, doc: str, labels: dict[str, str], value: float) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _counter(name: str, doc: str, labels: dict[str, str], value: float) -> Metric:
    family = CounterMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family
