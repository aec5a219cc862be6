"""Engine load from a vLLM or SGLang Prometheus page, as one snapshot.

The engines publish queue depth, KV cache pressure and token counters on
``/metrics`` in the Prometheus text exposition. ``parse_exposition`` reads
the few metrics selection needs with prometheus-client's parser and folds
every series of one metric (per ``engine``/``model_name``/rank label) into
one value per backend: counts and rates are summed, usage fractions are
averaged (a data-parallel engine with one full rank still has room).

Pure: no clock, no I/O, no trio. The caller passes the instant of the poll.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

from attrs import frozen
from prometheus_client.parser import text_string_to_metric_families

VLLM, SGLANG = "vllm", "sglang"


@frozen
class EngineNames:
    """Which metric (sample) names one engine uses for each snapshot field; first present wins."""

    waiting: str
    running: str
    kv_cache_usage: tuple[str, ...]
    generation_tokens: str
    gen_throughput: str | None = None
    total_slots: str | None = None


ENGINES: dict[str, EngineNames] = {
    # vllm/v1/metrics/loggers.py; vLLM before 0.10 named the KV gauge gpu_cache_usage_perc.
    # vLLM exports no cap on running requests, so its total_slots stays unknown.
    VLLM: EngineNames(
        waiting="vllm:num_requests_waiting",
        running="vllm:num_requests_running",
        kv_cache_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        generation_tokens="vllm:generation_tokens_total",
    ),
    # python/sglang/srt/metrics/collector.py
    SGLANG: EngineNames(
        waiting="sglang:num_queue_reqs",
        running="sglang:num_running_reqs",
        kv_cache_usage=("sglang:token_usage",),
        generation_tokens="sglang:generation_tokens_total",
        gen_throughput="sglang:gen_throughput",
        total_slots="sglang:max_running_requests",
    ),
}

_NAME = re.compile(r"[^{\s]*")   # a sample line's metric name: up to its labels or its value
WANTED = frozenset(name for e in ENGINES.values()
                   for name in (e.waiting, e.running, *e.kv_cache_usage, e.generation_tokens,
                                e.gen_throughput, e.total_slots) if name)


@frozen
class EngineSnapshot:
    """What one poll of one engine said, and when (the trio clock)."""

    engine: str                              # "vllm" | "sglang", from the metric names on the page
    waiting: int                             # requests queued, not yet running
    running: int                             # requests in the running batch
    observed_at: float
    total_slots: int | None = None           # the engine's cap on running requests, when it reports one
    kv_cache_usage: float | None = None      # 0..1, when reported
    generation_tokens_total: float | None = None   # a counter: throughput comes from two samples
    gen_throughput: float | None = None      # tokens/s, when the engine reports it as a gauge

    def age(self, now: float) -> float:
        return now - self.observed_at


def parse_exposition(text: str, observed_at: float) -> EngineSnapshot | None:
    """The engine snapshot on a Prometheus text page; None when it carries no vLLM or SGLang queue gauge.

    Only lines naming a metric we read reach the parser: a vLLM page is
    mostly histograms (100 KB and more), and parsing them all would hold
    the event loop for tens of milliseconds on every poll. A malformed line
    among those raises ValueError. Non-finite values count as absent.
    """
    values: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(_relevant(text)):
            for sample in family.samples:
                if sample.name in WANTED and math.isfinite(sample.value):
                    values.setdefault(sample.name, []).append(float(sample.value))
    except ValueError as exc:
        raise ValueError(f"malformed Prometheus exposition: {exc}") from None
    for engine, names in ENGINES.items():
        if names.waiting in values:
            return _snapshot(engine, names, values, observed_at)
    return None


def _relevant(text: str) -> str:
    """The sample, HELP and TYPE lines of the metrics in ``WANTED``."""
    keep = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            parts = stripped.split(None, 3)
            name = parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
        else:
            found = _NAME.match(stripped)   # it matches any line (perhaps empty)
            name = found.group() if found is not None else ""
        if name in WANTED:
            keep.append(stripped)
    return "\n".join(keep) + "\n" if keep else ""


MAX_COUNT = 1e9   # more queued or running requests than any engine holds: the page is wrong


def _count(value: float | None, what: str) -> int | None:
    """A request count from summed series; a sum no engine could report is a malformed page."""
    if value is None:
        return None
    if not math.isfinite(value) or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"malformed Prometheus exposition: {what} is {value!r}, not a request count")
    return round(value)


def _snapshot(engine: str, names: EngineNames, values: dict[str, list[float]],
              observed_at: float) -> EngineSnapshot:
    kv = next((_mean(values[n]) for n in names.kv_cache_usage if n in values), None)
    slots = _count(_total(values, names.total_slots), "total slots")
    return EngineSnapshot(
        engine=engine,
        waiting=_count(sum(values[names.waiting]), "waiting requests") or 0,
        running=_count(_total(values, names.running) or 0, "running requests") or 0,
        observed_at=observed_at,
        total_slots=slots or None,    # a cap of 0 says nothing
        kv_cache_usage=min(1.0, max(0.0, kv)) if kv is not None and math.isfinite(kv) else None,
        generation_tokens_total=_total(values, names.generation_tokens),
        gen_throughput=_total(values, names.gen_throughput),
    )


def _total(values: dict[str, list[float]], name: str | None) -> float | None:
    return sum(values[name]) if name and name in values else None


def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def throughput(previous: EngineSnapshot | None, current: EngineSnapshot) -> float | None:
    """Decode tokens/s now: the engine's own gauge when it has one, else the counter's rate since ``previous``.

    None without a usable pair: no earlier sample, no time between them, a
    different engine behind the address, or a counter that went down (the
    engine restarted).
    """
    if current.gen_throughput is not None:
        return current.gen_throughput
    if previous is None or previous.engine != current.engine:
        return None
    if previous.generation_tokens_total is None or current.generation_tokens_total is None:
        return None
    elapsed = current.observed_at - previous.observed_at
    delta = current.generation_tokens_total - previous.generation_tokens_total
    if elapsed <= 0 or delta < 0:
        return None
    return delta / elapsed
