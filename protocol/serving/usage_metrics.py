"""The usage ledger in Prometheus: tokens and cost by key and model, and the ledger's own health.

``observe`` is told each ledger record after it is made (the ledger's
wiring calls it; nothing here awaits). Only client records count: the
classifier's tries are the gateway's own spending, kept apart as everywhere.

Label values are bounded by ``usage.metrics_max_label_values`` (N): the
first N key ids and the first N models seen in this process get a label
value of their own and keep it; later ones count under ``other``, and so
does a name longer than ``NAME_MAX`` (every name is clean text already: the
record made it so, ``actors/safe_text.py``). A record without a key counts
under ``none`` (and one without a model, too). A record that spent nothing
(a refusal, an unknown model) makes no series, so a client sending made-up
names cannot take the label values of real models. The ledger's counters
(written, spilled, replayed, quarantined, dropped, ...) are read at scrape
time from whatever ``read_ledger`` was given (``store_metrics.counters_of``
reads a LedgerActor).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Mapping

from prometheus_client import CollectorRegistry, Counter

from switchyard.actors.ledger.record import CALLS, LedgerRecord
from switchyard.protocol.serving.label_children import LabelChildren
from switchyard.protocol.serving.store_metrics import LEDGER, CountersCollector

log = logging.getLogger("switchyard.metrics")

OTHER = "other"        # a key id or model past the first N
NONE = "none"          # no key (keys are off, or the call was refused before one was read); no model
NAME_MAX = 200         # characters; a longer name is never a label

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
        self._child = LabelChildren()   # metric.labels(...), looked up once per label values
        registry.register(CountersCollector(LEDGER, lambda: self.ledger_source() if self.ledger_source else None))

    def observe(self, rec: LedgerRecord) -> None:
        """Count one ledger record (a client one that spent something; others are ignored)."""
        if rec.purpose not in CALLS:
            return
        if not (rec.input_tokens or rec.output_tokens or rec.cost):
            return   # spent nothing (refused, an unknown model): no series, so junk names take no label
        key, model = self.keys.label(rec.key_id), self.models.label(rec.model)
        self._child(self.tokens, key, model, "input").inc(max(rec.input_tokens, 0))
        self._child(self.tokens, key, model, "output").inc(max(rec.output_tokens, 0))
        if rec.cost is not None and math.isfinite(rec.cost) and rec.cost >= 0:
            self._child(self.cost, key, model).inc(rec.cost)

    def read_ledger(self, source: Callable[[], Mapping[str, Any] | None]) -> None:
        """Export the ledger's counters, read from ``source()`` at each scrape: a mapping with the keys of
        ``LEDGER`` (``written``, ``spilled``, ``replayed``, ``write_failures``, ``queued``, ``store_up``);
        None (or an absent key) exports nothing for it."""
        self.ledger_source = source
