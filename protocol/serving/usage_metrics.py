"""The usage ledger in Prometheus: tokens and cost by key and model, and the ledger's own health.

``observe`` is told each ledger record after it is made (the ledger's
wiring calls it; nothing here awaits). Only client records count: the
classifier's tries are the gateway's own spending, kept apart as everywhere.

Label values are bounded by ``usage.metrics_max_label_values`` (N): the
first N key ids and the first N models seen in this process get a label
value of their own and keep it; later ones count under ``other``. A record
without a key counts under ``none`` (and one without a model, refused
before its model was read, too). The ledger's counters (written, spilled,
replayed, write failures, queued, store up) are read at scrape time from
whatever ``read_ledger`` was given (``ledger_counters`` reads a LedgerActor).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from switchyard.actors.ledger.record import LedgerRecord

log = logging.getLogger("switchyard.metrics")

OTHER = "other"        # a key id or model past the first N
NONE = "none"          # no key (keys are off, or the call was refused before one was read); no model
NAME_MAX = 200         # characters; a longer name is never a label

# The ledger's counter -> (metric, kind, help).
LEDGER = (
    ("written", "usage_ledger_written", "counter", "Ledger records written to the store"),
    ("spilled", "usage_ledger_spilled", "counter",
     "Ledger records written to the local spill file because the store was away or the queue full"),
    ("replayed", "usage_ledger_replayed", "counter", "Spilled ledger records written to the store once it answered"),
    ("write_failures", "usage_ledger_write_failures", "counter", "Batch writes the ledger's store failed"),
    ("queued", "usage_ledger_queued", "gauge", "Ledger records waiting to be written now"),
    ("store_up", "usage_ledger_store_up", "gauge", "1 while the ledger's store answers, 0 while it does not"),
)


class BoundedLabels:
    """The first ``limit()`` distinct names keep their own label value; the rest are ``other``."""

    def __init__(self, what: str, limit: Callable[[], int]) -> None:
        self.what = what
        self.limit = limit
        self.names: set[str] = set()
        self._full_logged = False

    def label(self, name: str | None) -> str:
        if name is None:
            return NONE
        if name in self.names:
            return name
        if len(name) > NAME_MAX:
            return OTHER
        limit = self.limit()
        if len(self.names) >= limit:
            if not self._full_logged:
                self._full_logged = True
                log.warning("usage metrics: %d %s label values in use (usage.metrics_max_label_values); "
                            "further ones count as 'other'", limit, self.what)
            return OTHER
        self.names.add(name)
        return name


class UsageMetrics:
    """``switchyard_usage_tokens_total`` and ``switchyard_usage_cost_usd_total`` in ``registry``, and the
    ``usage_ledger_*`` health metrics once ``read_ledger`` names their source."""

    def __init__(self, registry: CollectorRegistry, max_label_values: int | Callable[[], int]) -> None:
        limit = max_label_values if callable(max_label_values) else (lambda: max_label_values)
        self.keys = BoundedLabels("key_id", limit)
        self.models = BoundedLabels("model", limit)
        self.tokens = Counter(
            "switchyard_usage_tokens", "Tokens of clients' calls as the usage ledger records them, by API key id, "
            "requested model and type (input, output)", ["key_id", "model", "type"], registry=registry)
        self.cost = Counter(
            "switchyard_usage_cost_usd", "Cost in USD of clients' calls as the usage ledger records it (calls "
            "with no known price add nothing), by API key id and requested model", ["key_id", "model"],
            registry=registry)
        self.ledger_source: Callable[[], Mapping[str, Any] | None] | None = None
        registry.register(LedgerCollector(self))

    def observe(self, rec: LedgerRecord) -> None:
        """Count one ledger record (a client one; others are ignored)."""
        if rec.purpose != "client":
            return
        key, model = self.keys.label(rec.key_id), self.models.label(rec.model)
        self.tokens.labels(key, model, "input").inc(max(rec.input_tokens, 0))
        self.tokens.labels(key, model, "output").inc(max(rec.output_tokens, 0))
        if rec.cost is not None and math.isfinite(rec.cost) and rec.cost >= 0:
            self.cost.labels(key, model).inc(rec.cost)

    def read_ledger(self, source: Callable[[], Mapping[str, Any] | None]) -> None:
        """Export the ledger's counters, read from ``source()`` at each scrape: a mapping with the keys of
        ``LEDGER`` (``written``, ``spilled``, ``replayed``, ``write_failures``, ``queued``, ``store_up``);
        None (or an absent key) exports nothing for it."""
        self.ledger_source = source


def ledger_counters(ledger: Any) -> dict[str, Any] | None:
    """The LedgerActor's counters (attributes of the same names) as ``read_ledger`` takes them;
    None without a ledger."""
    if ledger is None:
        return None
    return {key: getattr(ledger, key, None) for key, *_ in LEDGER}


class LedgerCollector(Collector):
    def __init__(self, usage: UsageMetrics) -> None:
        self.usage = usage

    def collect(self) -> Iterator[Metric]:
        source = self.usage.ledger_source
        counters = source() if source is not None else None
        if counters is None:
            return
        for key, name, kind, doc in LEDGER:
            value = counters.get(key)
            if value is None:
                continue
            family = CounterMetricFamily(name, doc) if kind == "counter" else GaugeMetricFamily(name, doc)
            family.add_metric([], float(value))
            yield family
