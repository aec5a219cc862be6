"""ClassifierActor: owns the rule classifier, the LLM classifier and its cache.

A call asks it for a classification; the LLM call (when the method asks
for one) runs in the asking task, bounded by ``llm.timeout_ms``. It runs
before the call's own client watcher exists, so a client that leaves
meanwhile is noticed once the call starts, at most ``timeout_ms`` later. The
actor's state (the compiled rule tables, the cache, the counters) is
touched only between awaits of a single Trio thread, so asking needs no
mailbox: nothing here is read by message.

Every failure of the LLM classifier (timeout, upstream error, malformed
answer twice, no backend, load shedding) falls back to the rule result and
is counted by reason. ``required_capabilities`` and ``language`` always
come from the rule classifier: it reads the whole request for the first
and detects scripts for free.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Mapping

import attrs
import trio
from attrs import frozen

from switchyard.actors.llm_classifier import ClassifierFailed, classify_with_llm
from switchyard.actors.routing.classification import Classification
from switchyard.actors.routing.classifier_prompt import cache_key
from switchyard.actors.routing.classify import RuleClassifier
from switchyard.actors.usage import UsageLedger
from switchyard.config.classifier_backend import classifier_backend
from switchyard.config.schema import BackendConfig, Snapshot
from switchyard.config.smart_routing import RuleSettings

if TYPE_CHECKING:
    from switchyard.actors.ports import Upstream

log = logging.getLogger("switchyard.smart_routing")

FALLBACK_REASONS = ("timeout", "upstream_error", "malformed", "error", "no_backend", "unhealthy", "load")
LOAD_ORDER = {"normal": 0, "warning": 1, "critical": 2}


@frozen
class Verdict:
    """What routes the call, and, with shadow mode on, what the other classifier said."""

    result: Classification
    method: str                                   # the configured method
    fallback: str | None = None                   # why the LLM result is not the one used
    shadow: Classification | None = None


def load_state(active: int, cap: int) -> str:
    """The gateway's load: the calls open (``active``, the asking one included: the share of the cap
    in use if it goes ahead) against ``server.max_concurrent_requests`` (0: no cap)."""
    if cap <= 0:
        return "normal"
    share = active / cap
    return "critical" if share >= 0.95 else "warning" if share >= 0.8 else "normal"


def llm_disabled(setting: str, state: str) -> bool:
    """``disable_under_load_state``: critical disables at critical, warning at warning or worse, "" never."""
    return bool(setting) and LOAD_ORDER.get(state, 0) >= LOAD_ORDER[setting]


def _always(name: str) -> bool:
    return True


@frozen
class Asked:
    """One request for a classification, as the steps of ``classify`` need it."""

    snapshot: Snapshot
    payload: Mapping[str, Any]
    request_id: str
    key_id: str | None
    load: str
    healthy: Callable[[str], bool]
    record: bool


class ClassifierActor:
    def __init__(self, snapshot: Snapshot, upstream: "Upstream", ledger: UsageLedger) -> None:
        self.upstream = upstream
        self.ledger = ledger
        self._cache: OrderedDict[str, tuple[float, Classification]] = OrderedDict()
        self._rule_settings: RuleSettings | None = None
        self._rule = RuleClassifier()
        self._backend_for: tuple[Snapshot, BackendConfig | None] | None = None   # (revision, resolved)
        self.classifications: dict[tuple[str, str], int] = {}   # (method, source) -> count
        self.fallbacks: dict[str, int] = {}
        self.gate: dict[str, int] = {}                          # hybrid: rule | escalated
        self.agreement: dict[tuple[str, str], int] = {}        # (field, "true"/"false")
        self.shadow_failures: dict[str, int] = {}               # reason -> shadow LLM calls that gave nothing
        self.cache_hits = 0
        self._generation = 0
        self.reconfigure(snapshot)

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A new revision: rebuild the rule tables when their settings changed; the cache of LLM
        answers is dropped when anything the classifier is asked changed."""
        settings = snapshot.smart_routing.classifier
        if settings.rule != self._rule_settings:
            self._rule = RuleClassifier(settings.rule)
            self._rule_settings = settings.rule
        if getattr(self, "_asked", None) != (settings.llm, settings.custom_complexity_levels, settings.custom_domains):
            self._cache.clear()
            self._generation += 1     # an answer still in flight from before is not cached
            self._asked = (settings.llm, settings.custom_complexity_levels, settings.custom_domains)

    def rule(self, payload: Mapping[str, Any]) -> Classification:
        return self._rule.classify(payload)

    def backend(self, snapshot: Snapshot) -> BackendConfig | None:
        """The LLM classifier's backend: resolved once per config revision, like the spec asks (and
        a missing one is logged then, not on every request)."""
        cached = self._backend_for
        if cached is None or cached[0] is not snapshot:
            settings = snapshot.smart_routing.classifier
            found = classifier_backend(settings.llm, snapshot.backends)
            if found is None and settings.uses_llm and snapshot.smart_routing.enabled:
                named = settings.llm.backend
                log.warning("smart routing: the classifier backend %s is not in the backend pool; classifying "
                            "by rule", repr(named) if named else "(none reachable)")
            cached = self._backend_for = (snapshot, found)
        return cached[1]

    async def classify(self, snapshot: Snapshot, payload: Mapping[str, Any], *, request_id: str,
                       key_id: str | None, load: str = "normal", healthy: Callable[[str], bool] = _always,
                       record: bool = True) -> Verdict:
        """``record`` False (the admin simulate): the counters are left alone."""
        ask = Asked(snapshot, payload, request_id, key_id, load, healthy, record)
        settings = snapshot.smart_routing.classifier
        rule = self.rule(payload)
        method = settings.method
        if method == "hybrid":
            escalate = rule.confidence < settings.rule.confidence_threshold
            if record:
                outcome = "escalated" if escalate else "rule"
                self.gate[outcome] = self.gate.get(outcome, 0) + 1
        if method == "rule" or (method == "hybrid" and not escalate):
            shadow = await self._llm_shadow(ask, rule) if settings.shadow else None
            return self._done(Verdict(rule, method, shadow=shadow), record)
        found, reason = await self._llm(ask, rule)
        if found is None:
            if record:
                self.fallbacks[reason] = self.fallbacks.get(reason, 0) + 1
            return self._done(Verdict(rule, method, fallback=reason), record)
        return self._done(Verdict(found, method, shadow=rule if settings.shadow else None), record)

    async def _llm_shadow(self, ask: "Asked", rule: Classification) -> Classification | None:
        found, reason = await self._llm(ask, rule)
        if found is None:
            log.debug("shadow classification failed: %s", reason)
            if ask.record:
                self.shadow_failures[reason] = self.shadow_failures.get(reason, 0) + 1
        return found

    async def _llm(self, ask: "Asked", rule: Classification) -> tuple[Classification | None, str]:
        """The LLM's classification (from the cache when fresh), or None and why not."""
        snapshot = ask.snapshot
        settings = snapshot.smart_routing.classifier
        generation = self._generation
        try:
            key = cache_key(ask.payload, settings)
            hit = self._cache.get(key)
            if hit is not None and hit[0] > trio.current_time():   # a cached answer costs nothing: always used
                self.cache_hits += 1 if ask.record else 0
                self._cache.move_to_end(key)
                return self._with_rule(hit[1], rule, "cache"), ""
            if llm_disabled(settings.llm.disable_under_load_state, ask.load):
                return None, "load"
            backend = self.backend(snapshot)
            if backend is None:
                return None, "no_backend"
            if not ask.healthy(backend.name):   # do not wait timeout_ms on a backend known to be down
                return None, "unhealthy"
            found = await classify_with_llm(self.upstream, backend, settings, ask.payload,
                                            request_id=ask.request_id, key_id=ask.key_id, ledger=self.ledger,
                                            now=trio.current_time)
        except ClassifierFailed as err:
            log.info("smart routing: the LLM classifier failed (%s); classifying by rule", err.reason)
            return None, err.reason if err.reason in FALLBACK_REASONS else "error"
        except Exception:   # odd input or an odd answer must never fail the client's call (Cancelled passes)
            log.exception("smart routing: the LLM classifier raised; classifying by rule")
            return None, "error"
        ttl = settings.llm.cache_ttl_seconds
        if ttl > 0 and generation == self._generation:
            self._cache[key] = (trio.current_time() + ttl, found)
            self._cache.move_to_end(key)
            while len(self._cache) > settings.llm.max_cache_entries:
                self._cache.popitem(last=False)
        return self._with_rule(found, rule, "llm"), ""

    @staticmethod
    def _with_rule(found: Classification, rule: Classification, source: str) -> Classification:
        return attrs.evolve(found, required_capabilities=rule.required_capabilities, language=rule.language,
                            source=source, signals=rule.signals)

    def _done(self, verdict: Verdict, record: bool) -> Verdict:
        if not record:
            return verdict
        key = (verdict.method, verdict.result.source)
        self.classifications[key] = self.classifications.get(key, 0) + 1
        shadow = verdict.shadow
        if shadow is not None:
            for field in ("complexity", "domain"):
                agree = "true" if getattr(shadow, field) == getattr(verdict.result, field) else "false"
                self.agreement[(field, agree)] = self.agreement.get((field, agree), 0) + 1
        return verdict

    @property
    def cache_size(self) -> int:
        return len(self._cache)


def shadow_header(verdict: Verdict) -> bytes | None:
    """``X-Smart-Route-Shadow``: the shadow classifier's answer and which fields agree."""
    s = verdict.shadow
    if s is None:
        return None
    same_c, same_d = s.complexity == verdict.result.complexity, s.domain == verdict.result.domain
    agree = "both" if same_c and same_d else "complexity" if same_c else "domain" if same_d else "none"
    return f"complexity={s.complexity};domain={s.domain};confidence={s.confidence:.2f};agree={agree}".encode()
