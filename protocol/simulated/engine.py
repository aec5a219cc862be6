"""The engine page a simulated vLLM or SGLang backend serves on ``GET .../metrics``.

Rendered by prometheus-client from ready-made families, so the text is what
the engines' own exporters write, in their own metric names.
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


def render_page(engine: SimulatedEngine, model: str, running: int, tokens: float) -> str:
    """The Prometheus text page of ``engine`` serving ``model``: ``running`` requests, ``tokens`` generated."""
    if engine.kind == "sglang":
        labels = {"model_name": model}
        families = [
            _gauge("sglang:num_running_reqs", "The number of running requests.", labels, running),
            _gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels,
                   engine.waiting),
            _gauge("sglang:token_usage", "The token usage.", labels, engine.kv_cache_usage),
            _gauge("sglang:gen_throughput", "The generation throughput (token/s).", labels,
                   engine.background_tokens_per_second),
            _counter("sglang:generation_tokens", "Number of generation tokens processed.", labels, tokens),
        ]
        if engine.total_slots is not None:
            families.append(_gauge("sglang:max_running_requests", "Maximum running requests", labels,
                                   engine.total_slots))
    else:
        labels = {"engine": "0", "model_name": model}
        families = [
            _gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                   running),
            _gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
                   engine.waiting),
            _gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
                   engine.kv_cache_usage),
            _counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, tokens),
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
