"""A store's own counters in Prometheus, read at scrape time: the request path pays nothing for them.

A table names each counter (an attribute of the store), its metric, its kind and its help; the
collector reads whatever its source returns (a mapping, or None: the store is not there) at each
scrape. The usage ledger's (``LEDGER``), the shared rate limiter's (``LIMITER``) and the span
export's (``OTLP``) use it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

Table = tuple[tuple[str, str, str, str], ...]   # (attribute, metric, "counter" | "gauge", help)

# The usage ledger's counters (LedgerActor).
LEDGER: Table = (
    ("written", "usage_ledger_written", "counter", "Ledger records written to the store"),
    ("spilled", "usage_ledger_spilled", "counter",
     "Ledger records written to the local spill file because the store was away or the queue full"),
    ("replayed", "usage_ledger_replayed", "counter", "Spilled ledger records written to the store once it answered"),
    ("write_failures", "usage_ledger_write_failures", "counter",
     "Ledger store writes (and probes of an outage) that failed for the store's own reasons, not a record's"),
    ("quarantined", "usage_ledger_quarantined", "counter",
     "Ledger records the store refused while it took others, and spill-file lines that were not whole records, "
     "moved to usage-quarantine.jsonl"),
    ("dropped", "usage_ledger_dropped", "counter",
     "Ledger records lost: the spill file was full (usage.spill_max_bytes), or the quarantine file could not "
     "take a refused one"),
    ("expired", "usage_ledger_spill_expired", "counter",
     "Spilled ledger records older than usage.spill_max_age, dropped instead of written"),
    ("spill_bytes", "usage_ledger_spill_bytes", "gauge", "Bytes in the ledger's spill file now"),
    ("spill_max_bytes", "usage_ledger_spill_max_bytes", "gauge", "The spill file's bound (usage.spill_max_bytes)"),
    ("queued", "usage_ledger_queued", "gauge", "Ledger records waiting to be written now"),
    ("store_up", "usage_ledger_store_up", "gauge", "1 while the ledger's store answers, 0 while it does not"),
)

# The shared rate limiter's counters (RedisLimiter, with state.redis_url).
LIMITER: Table = (
    ("available", "rate_limit_store_up", "gauge", "1 while this worker's rate limits are decided in Redis, "
     "0 while it is away (state.on_unavailable decides)"),
    ("outages", "rate_limit_store_outages", "counter", "Times Redis became unavailable to this worker"),
    ("failures", "rate_limit_store_failures", "counter",
     "Redis operations of the rate limiter that failed or got no answer within their bound"),
    ("fallback_admissions", "rate_limit_fallback_admissions", "counter",
     "Admissions decided by this worker's local share while Redis was away (fail_open)"),
    ("claimed", "rate_limit_claimed_calls", "counter",
     "Calls of the local share claimed in Redis when it came back"),
    ("admission_script_calls", "rate_limit_admission_scripts", "counter",
     "Admission script calls sent to Redis (each decides a batch of admissions)"),
    ("queued_settles", "rate_limit_settles_queued", "gauge", "Settles waiting to be applied in Redis"),
    ("settles_dropped", "rate_limit_settles_dropped", "counter",
     "Settles dropped because the queue was full while Redis was away"),
)


# The stored-response owner map's store (StoredOwners.writes, with usage.ledger sqlite or postgresql).
STORED: Table = (
    ("store_up", "stored_responses_store_up", "gauge",
     "1 while the store that maps stored responses to backends answers, 0 while it is away"),
    ("queued", "stored_responses_queued", "gauge", "Owner rows waiting to be written to that store"),
    ("written", "stored_responses_written", "counter", "Owner rows (creates and deletes) the store took"),
    ("failures", "stored_responses_store_failures", "counter",
     "Calls to that store that failed, within its own deadline (writes, lookups, prunes)"),
    ("dropped", "stored_responses_dropped", "counter",
     "Owner rows dropped: the queue was full while the store was away, or the store refused one it could not take"),
)


# The control plane's (database keys and organizations: actors/control/plane.py), with a store.
CONTROL: Table = (
    ("store_up", "control_plane_store_up", "gauge",
     "1 while the control plane's store (database keys, organizations) answers, 0 while it is away"),
    ("keys", "control_plane_keys", "gauge", "Database keys in this worker's view"),
    ("reloads", "control_plane_reloads", "counter", "Times this worker read the control plane's records anew"),
    ("lookups", "control_plane_lookups", "counter",
     "Secrets of a database key's shape this worker's view did not know, asked of the store"),
    ("failures", "control_plane_store_failures", "counter", "Calls to the control plane's store that failed"),
)


# The export's counters in Prometheus (tracing.otlp; SpanExport in otlp.py).
OTLP: Table = (
    ("queued", "otlp_spans_queued", "counter", "Spans handed to the OTLP exporter's queue (tracing.otlp)"),
    ("dropped", "otlp_spans_dropped", "counter",
     "Spans dropped because the OTLP exporter's queue was full (a slow or unreachable collector)"),
    ("exported", "otlp_spans_exported", "counter", "Spans the collector accepted"),
    ("failed", "otlp_spans_failed", "counter", "Spans whose export failed (the collector refused or was unreachable)"),
    ("unsampled", "otlp_calls_unsampled", "counter", "Calls not exported: sampled out by ratio or parent flag"),
)


def counters_of(store: Any, table: Table) -> dict[str, Any] | None:
    """The store's counters (attributes named in ``table``) as a collector reads them; None without a store."""
    if store is None:
        return None
    return {key: getattr(store, key, None) for key, *_ in table}


class CountersCollector(Collector):
    def __init__(self, table: Table, source: Callable[[], Mapping[str, Any] | None]) -> None:
        self.table = table
        self.source = source

    def collect(self) -> Iterator[Metric]:
        counters = self.source()
        if counters is None:
            return
        for key, name, kind, doc in self.table:
            value = counters.get(key)
            if value is None:
                continue
            family = CounterMetricFamily(name, doc) if kind == "counter" else GaugeMetricFamily(name, doc)
            family.add_metric([], float(value))
            yield family
