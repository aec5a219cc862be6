"""``GET /metrics``: Prometheus text exposition of the gateway's counters.

Counters live where the hot path already keeps them (plain dicts on the
pool, the actors' mailboxes and poll status); a collector reads them at
scrape time, so a request pays nothing for being measured. Per-call and
per-HTTP-request metrics are prometheus-client types fed after the fact
(``protocol/serving/call_metrics.py``); both share the Runtime's own registry.
prometheus-client does the exposition format. Every metric is listed in
docs/metrics.md.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import trio
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from switchyard.actors import safe_text
from switchyard.actors.cache.embed import FAULTS
from switchyard.actors.cache.similarity import REASONS as SKIP_REASONS
from switchyard.actors.cache.stage import BYPASS_REASONS, NOT_STORED_REASONS
from switchyard.actors.dedup import Role
from switchyard.actors.mailbox import Mailbox
from switchyard.actors.params import OUTCOMES
from switchyard.actors.routing.variants import VARIANTS
from switchyard.protocol.http.tracing import CLIENT_REF_REASONS
from switchyard.protocol.wires.responses import BRIDGE, REASONS

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

log = logging.getLogger("switchyard.metrics")

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

# The metric each of the pool's decision counters ((backend, reason) -> picks) becomes.
ROUTING_DECISIONS = (
    ("routing_engine_load_decisions", "routing.engine_load verdicts, one per candidate per pick, by backend and "
     "reason"),
    ("routing_usage_weight_decisions", "routing.usage_weight verdicts, one per candidate per pick, by backend and "
     "reason"),
    ("routing_quota_aware_decisions", "routing.quota_aware verdicts, one per candidate per pick, by backend and "
     "reason"),
    ("routing_kv_decisions", "kv_cache_index scorer verdicts, one per pick of several candidates, by the backend "
     "chosen and reason"),
)


class RuntimeCollector(Collector):
    def __init__(self, runtime: "Runtime") -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        rt = self.runtime
        saturated = CounterMetricFamily(
            "fallback_dial_bound_saturated", "Fallback dials that found no free permit in time, by backend",
            labels=["backend"])
        for backend, count in sorted(rt.pool.dial_saturated.items()):
            saturated.add_metric([backend], count)
        yield saturated
        in_flight = GaugeMetricFamily("backend_in_flight_requests", "Requests in flight, by backend",
                                      labels=["backend"])
        for backend, count in sorted(rt.pool.in_flight.items()):
            in_flight.add_metric([backend], count)
        yield in_flight
        restarts = CounterMetricFamily("actor_restarts", "Actor crashes followed by a restart", labels=["actor"])
        for actor, count in sorted((rt.supervisor.restarts if rt.supervisor else {}).items()):
            restarts.add_metric([actor], count)
        yield restarts
        client_ref = CounterMetricFamily(
            "client_ref_rejected", "Client reference headers dropped as invalid (the request went on), by reason",
            labels=["reason"])
        for reason in CLIENT_REF_REASONS:   # every reason, zero until seen, so rate() works from the start
            client_ref.add_metric([reason], rt.client_ref_rejected.count(reason))
        yield client_ref
        variant = CounterMetricFamily(
            "continuum_model_variant_requests",
            "Chat requests naming a model variant suffix (proxy.variant_suffixes), by variant and whether "
            "it was applied (false: no ranking data, refused, or failed before an answer)",
            labels=["variant", "applied"])
        for name in VARIANTS:   # every series from the start, like client_ref_rejected
            for applied in (True, False):
                variant.add_metric([name, "true" if applied else "false"], rt.variant_requests.count((name, applied)))
        yield variant
        policy = CounterMetricFamily(
            "request_params", "Chat calls whose request_params policy changed a field (applied) or was refused "
            "because a reachable backend cannot carry one (rejected)", labels=["outcome"])
        for outcome in OUTCOMES:
            policy.add_metric([outcome], rt.request_params_outcomes.count(outcome))
        yield policy
        dedup = CounterMetricFamily(
            "dedup_requests", "Chat calls under dedup.enabled, by role: led a shared upstream call, followed one, "
            "or ran alone (no key, or the key table full)", labels=["role"])
        for role in Role:
            dedup.add_metric([role.name.lower()], rt.dedup.counts.get(role, 0))
        yield dedup
        yield _counted("responses_bridge", "Chat calls dispatched to a backend's /v1/responses through the "
                       "Responses API bridge, by reason (per worker process)", ["reason"], BRIDGE.counts, REASONS)
        yield _counted("guardrail_verdicts", "Guardrail verdicts, by guardrail, stage (input, output), action "
                       "(mask, block, log; allow, rewrite; unread, skipped) and mode (enforce, monitor)",
                       ["guardrail", "stage", "action", "mode"], rt.guardrail_verdicts.as_dict())
        yield from self._telemetry(rt)
        yield from _smart_routing(rt)
        yield from _response_cache(rt)

    def _telemetry(self, rt: "Runtime") -> Iterator[Metric]:
        """Mailbox drops, engine-page polling, and the load-aware routing terms' verdicts."""
        dropped = CounterMetricFamily(
            "actor_mailbox_dropped", "Messages an actor's full inbox dropped (the sender never waits), by actor",
            labels=["actor"])
        for name, count in sorted(_mailbox_drops(rt).items()):
            dropped.add_metric([name], count)
        yield dropped
        stats = rt.engine_stats
        failures = CounterMetricFamily(
            "engine_stats_poll_failures",
            "Engine stats polls that failed (the last snapshot stays and ages), by backend", labels=["backend"])
        for backend, status in sorted(stats.status.items()):
            failures.add_metric([backend], status.failures)
        yield failures
        age = GaugeMetricFamily("engine_stats_age_seconds", "Seconds since the backend's engine snapshot was taken",
                                labels=["backend"])
        try:
            now: float | None = trio.current_time()
        except RuntimeError:   # scraped outside Trio (a test's direct call): no clock, no ages
            now = None
        if now is not None:
            for backend, snap in sorted(stats.view.items()):
                age.add_metric([backend], snap.age(now))
        yield age
        pool = rt.pool
        decisions = (pool.engine_load_decisions, pool.usage_weight_decisions, pool.quota_decisions,
                     pool.kv_decisions)
        for (name, doc), counts in zip(ROUTING_DECISIONS, decisions, strict=True):
            family = CounterMetricFamily(name, doc, labels=["backend", "reason"])
            for (backend, reason), count in sorted(counts.items()):
                family.add_metric([backend, reason], count)
            yield family
        affinity = CounterMetricFamily(
            "routing_cache_affinity_decisions", "routing.cache_affinity placements, by backend, key kind "
            "(prompt_cache_key, prefix) and outcome (home; moved: the home was past the load bound)",
            labels=["backend", "key", "outcome"])
        for (backend, kind, outcome), count in sorted(pool.affinity_decisions.items()):
            affinity.add_metric([backend, kind, outcome], count)
        yield affinity
        yield from _kv_index(rt)


def _kv_index(rt: "Runtime") -> Iterator[Metric]:
    """The KV index: each backend's entries, and the engine events it could not apply."""
    index = rt.kv_index.index
    entries = GaugeMetricFamily("kv_index_entries", "Blocks the KV index holds for the backend (kv_cache_index)",
                                labels=["backend"])
    for b in rt.snapshot.backends:
        found = index.view(b.name)
        if found is not None:
            entries.add_metric([b.name], found.entries)
    yield entries
    yield _counted("kv_index_events_skipped", "Engine KV events the index skipped, by backend and reason",
                   ["backend", "reason"], index.skipped)


def _counted(name: str, doc: str, labels: list[str], counts: Mapping[Any, int],
             every: tuple[Any, ...] = ()) -> CounterMetricFamily:
    """A counter family from a dict of label value(s) -> count; ``every`` series from the start
    (zero until seen), the rest as they appear."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for key in [*every, *sorted(k for k in counts if k not in every)]:
        family.add_metric(list(key) if isinstance(key, tuple) else [key], counts.get(key, 0))
    return family


def _smart_routing(rt: "Runtime") -> Iterator[Metric]:
    """Model "auto": classifications, the hybrid gate, LLM classifier fallbacks and cache, shadow mode."""
    from switchyard.actors.classifier import FALLBACK_REASONS  # late: the classifier imports the upstream client

    smart = rt.smart
    c = smart.classifier
    yield _counted("smart_routing_classifications", "Smart-routing classifications, by configured method and by "
                   "what classified (rule, llm, cache)", ["method", "source"], c.classifications)
    yield _counted("smart_routing_hybrid_gate", "method hybrid: requests the rule result routed (confidence at or "
                   "above the threshold) or escalated to the LLM classifier", ["outcome"], c.gate,
                   ("rule", "escalated"))
    yield _counted("smart_routing_classifier_fallbacks", "LLM classifications that fell back to the rule result, "
                   "by reason", ["reason"], c.fallbacks, FALLBACK_REASONS)
    hits = CounterMetricFamily("smart_routing_classifier_cache_hits", "LLM classifications served from the "
                               "cache (no upstream call, no usage record)")
    hits.add_metric([], c.cache_hits)
    yield hits
    yield _counted("smart_routing_shadow_agreement", "Shadow mode: whether the shadow classifier agreed with the "
                   "routing one, by field", ["field", "agree"], c.agreement)
    yield _counted("smart_routing_shadow_failures", "Shadow mode: LLM classifications run beside the routing one "
                   "that gave no answer, by reason", ["reason"], c.shadow_failures, FALLBACK_REASONS)
    yield _counted("smart_routing_decisions", "Smart-routing decisions, by matched policy ((default_tier): none "
                   "matched) and the tier chosen", ["policy", "tier"], smart.decisions)


def _mailbox_drops(rt: "Runtime") -> dict[str, int]:
    """Each actor mailbox's drop count, by the mailbox's name; every actor that has one, from the start."""
    out: dict[str, int] = {}
    actors: tuple[Any, ...] = (rt.quota, rt.health, rt.discovery, rt.engine_stats, rt.prompts,
                               rt.watcher, rt.kv_index)
    for actor in actors:
        mailbox = getattr(actor, "mailbox", None)
        if isinstance(mailbox, Mailbox):
            out[mailbox.name] = out.get(mailbox.name, 0) + mailbox.dropped
    return out


def exposition(runtime: "Runtime") -> bytes:
    """The text exposition. A label value UTF-8 cannot encode (a lone surrogate a source let through) once
    made every scrape fail until a restart; such values are written with U+FFFD instead, and logged."""
    metrics = runtime.metrics
    if metrics.clean_labels:   # once it happened, every scrape cleans (one rendering, no second log line)
        return generate_latest(CleanLabels(metrics.registry))
    try:
        return generate_latest(metrics.registry)
    except UnicodeEncodeError as exc:
        metrics.clean_labels = True
        log.error("metrics: a label value UTF-8 cannot encode (%s); exported with U+FFFD in its place from now "
                  "on", exc)
        return generate_latest(CleanLabels(metrics.registry))


class CleanLabels:
    """A registry's metrics with every label value made clean text (``safe_text.clean``)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            if all(safe_text.is_clean(v) for sample in metric.samples for v in sample.labels.values()):
                yield metric
                continue
            copy = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            copy.samples = [sample._replace(labels={k: safe_text.clean(v) for k, v in sample.labels.items()})
                            for sample in metric.samples]
            yield copy


def _response_cache(rt: "Runtime") -> Iterator[Metric]:
    """The response cache's outcomes (every reason from zero) and, for the memory store, what it holds."""
    cache = rt.cache
    yield CounterMetricFamily("response_cache_hits", "Calls answered from the response cache", value=cache.hits)
    yield CounterMetricFamily("response_cache_misses", "Calls looked up in the response cache and not found",
                              value=cache.misses)
    yield _counted("response_cache_bypasses", "Calls that did not read the response cache (response_cache "
                   "enabled), by reason", ["reason"], cache.bypasses, BYPASS_REASONS)
    yield CounterMetricFamily("response_cache_stores", "Answers written to the response cache", value=cache.stored)
    yield _counted("response_cache_not_stored", "Misses whose answer was not written to the response cache, "
                   "by reason", ["reason"], cache.not_stored, NOT_STORED_REASONS)
    store = cache.store
    evictions = CounterMetricFamily("response_cache_evictions", "Entries the memory store dropped: the least "
                                    "recently used to make room (size), or past their TTL (expired)",
                                    labels=["reason"])
    evictions.add_metric(["size"], store.evictions)
    evictions.add_metric(["expired"], store.expirations)
    yield evictions
    if store.stored_bytes is not None:   # the memory store's; Redis reports its own (INFO memory)
        yield GaugeMetricFamily("response_cache_stored_bytes", "Bytes the memory store holds (keys and entries)",
                                value=store.stored_bytes)
        yield GaugeMetricFamily("response_cache_entries", "Entries the memory store holds", value=store.entries)
    yield CounterMetricFamily("response_cache_poisoned_deletions", "Entries deleted because their answer failed "
                              "an output guardrail when served", value=cache.poisoned)
    yield from _semantic_cache(rt)


def _semantic_cache(rt: "Runtime") -> Iterator[Metric]:
    """The semantic cache's lookups by outcome (and reason), its index, and the entries shared with the fleet."""
    sem = rt.cache.semantic
    lookups = CounterMetricFamily("response_cache_semantic_lookups", "Exact misses the semantic cache looked at, "
                                  "by outcome (hit, miss, skipped, fault) and reason", labels=["outcome", "reason"])
    lookups.add_metric(["hit", ""], sem.hits)
    lookups.add_metric(["miss", ""], sem.misses)
    for outcome, counts, every in (("skipped", sem.skipped, SKIP_REASONS), ("fault", sem.faults, FAULTS)):
        for reason in [*every, *sorted(k for k in counts if k not in every)]:
            lookups.add_metric([outcome, reason], counts.get(reason, 0))
    yield lookups
    yield GaugeMetricFamily("response_cache_semantic_entries", "Vectors this worker's semantic index holds",
                            value=sem.index.entries)
    shared = rt.shared_vectors
    if shared is not None:   # response_cache.store: redis
        yield CounterMetricFamily("response_cache_semantic_adopted", "Semantic entries read from the fleet's "
                                  "feed (Redis) into this worker's index", value=shared.adopted)
        yield CounterMetricFamily("response_cache_semantic_share_failures", "Semantic entries this worker could "
                                  "not publish to the fleet, and feed reads that failed",
                                  value=sem.share_failures + shared.failures)
