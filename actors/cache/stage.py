"""The response cache's stage in the call pipeline: look up, answer a hit, or record and store a miss.

It runs after admission and the rate limits (a hit is a request like any
other: it counts against the key's rate limits, and costs 0) and before
dedup and the call's own run (``actors/call/pipeline.py``). Per call it
decides one of three, told to the client in ``x-continuum-cache``:

- ``bypass`` (a reason, counted): the cache is not for this call -- the
  operator's scope (``key.opted_out``), ``Cache-Control: no-store`` or
  ``no-cache`` (that one may still store), no single settled backend
  (``key.settled``), or the store could not be asked;
- ``hit``: the stored answer is replayed into the client's sink, buffered
  as JSON or as a stream (``answer.py``), and recorded like a call
  (route events ``accepted``, ``cache_hit``, ``completed``; a ledger record
  with ``cache_hit``, cost 0, no attempts, the backend whose answer it was);
- ``miss``: the call runs with a ``Recorder`` around the sink it writes to,
  and its answer is stored only when it is whole and clean: status 200,
  finished, not failed, from the settled backend with no route change, a
  buffered body with a finish reason or a stream that ended with a finish
  reason and ``[DONE]``, and not larger than ``max_entry_bytes``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

import attrs

from switchyard.actors.cache.answer import Unclean, clean_completion, fold_stream, stream_events, with_model
from switchyard.actors.cache.key import Actor, cache_key, opted_out, settled, target_of
from switchyard.actors.cache.recorder import Recorder
from switchyard.actors.cache.semantic import Probe, SemanticCache
from switchyard.actors.cache.store import StoreFailed
from switchyard.actors.ledger.counts import TokenCounts
from switchyard.actors.ledger.entries import call_record
from switchyard.actors.params import HEADER as PARAMS_HEADER
from switchyard.actors.params import header_value
from switchyard.actors.ports import CacheStore
from switchyard.config.response_cache import ResponseCacheConfig
from switchyard.config.schema import BackendConfig

if TYPE_CHECKING:
    from switchyard.actors.relay import ResponseSink

log = logging.getLogger("switchyard.cache")

HEADER = b"x-continuum-cache"
KIND_HEADER = b"x-continuum-cache-kind"               # exact | semantic, on a hit
SIMILARITY_HEADER = b"x-continuum-cache-similarity"   # a semantic hit's cosine similarity
JSON_TYPE = b"application/json"
SSE_TYPE = b"text/event-stream"
# Every reason a call bypasses the cache, and a miss's answer is not stored (docs/cache.md; the metrics' labels).
BYPASS_REASONS = ("endpoint", "model", "key", "key_opt_out", "temperature", "no_store", "no_cache", "client_bypass",
                  "variant_online", "mcp_tools",
                  "provider_preferences", "fallback_chain", "several_backends", "no_backend", "store_unavailable")
NOT_STORED_REASONS = ("error", "truncated", "route_changed", "no_finish_reason", "malformed", "too_large",
                      "store_unavailable", "quality_check_failed", "guardrail_blocked")
Run = Callable[["ResponseSink", Callable[[], Awaitable[None]]], Awaitable[None]]


@attrs.frozen
class Lookup:
    """What the stage did: ``answered`` (a hit went out), or how the call runs (``run``)."""

    answered: bool = False
    key: bytes | None = None                 # a miss to record under this key
    backend: BackendConfig | None = None
    members: frozenset[str] = frozenset()    # the backends whose answer may be stored (a destination's)
    probe: Probe | None = None               # the semantic lookup's vector, indexed once the answer is stored


OFF = Lookup()


class ResponseCache:
    """One per process (the Runtime's): the store, and the counters the metrics read."""

    def __init__(self, settings: Callable[[], ResponseCacheConfig], store: CacheStore) -> None:
        self.settings = settings     # the running revision's section
        self.store = store
        self.semantic = SemanticCache(settings().semantic.max_entries)
        self.poisoned = 0            # entries dropped because their answer failed a guardrail
        self.hits = 0
        self.misses = 0
        self.stored = 0
        self.bypasses: Counter[str] = Counter()     # by reason
        self.not_stored: Counter[str] = Counter()   # misses whose answer was not stored, by reason

    # --- the lookup ----------------------------------------------------------------

    async def lookup(self, actor: Actor, sink: "ResponseSink", headers: Mapping[bytes, bytes]) -> Lookup:
        """Answer ``actor``'s call from the cache, or say how it runs; the answer's header is set either way."""
        settings = actor.call.snapshot.response_cache
        if not settings.enabled:
            return OFF
        directives = _cache_control(headers)
        reason = opted_out(settings, actor.call, actor.model)
        if reason is None and "no-store" in directives:
            reason = "no_store"
        if reason is None and headers.get(HEADER, b"").strip().lower() == b"bypass":
            reason = "client_bypass"   # the client's x-continuum-cache: bypass: neither read nor written
        target = settled(actor) if reason is None else reason
        if isinstance(target, str):
            return self._bypass(actor, target)
        scope = None if settings.shared_across_keys or actor.call.key is None else actor.call.key.id
        target_id, members = target_of(settings, target)
        key = cache_key(actor.call, scope, actor.model, target, target_id)
        if "no-cache" in directives:
            self._bypass(actor, "no_cache")
            return Lookup(key=key, backend=target, members=members)   # not read, but a clean answer is stored
        try:
            found = await self.store.get(key)
        except StoreFailed as exc:
            log.warning("response cache lookup failed, the call runs uncached: %s", exc)
            return self._bypass(actor, "store_unavailable")
        if found is not None and await self._serve(actor, sink, key, found, None):
            return Lookup(answered=True)
        probe = await self.semantic.probe(actor, actor.call, settings, scope, actor.model, target, target_id)
        if probe is not None and probe.match is not None:
            try:
                similar = await self.store.get(probe.match.answer_key)
            except StoreFailed:
                similar = None
            if similar is None:   # the answer expired in the store (or another worker's is gone)
                self.semantic.index.remove(probe.namespace, probe.match.answer_key)
            elif await self._serve(actor, sink, probe.match.answer_key, similar, probe.match.similarity):
                self.semantic.hits += 1
                return Lookup(answered=True)
        if probe is not None:
            self.semantic.misses += 1
        self.misses += 1
        _tell(actor, b"miss")
        return Lookup(key=key, backend=target, members=members, probe=probe)

    async def _serve(self, actor: Actor, sink: "ResponseSink", key: bytes, found: bytes,
                     similarity: float | None) -> bool:
        """Answer from a stored entry; False when it cannot be (unreadable): the call goes on as a miss."""
        try:
            entry = json.loads(found)
            await self._answer(actor, sink, entry, similarity)
        except (ValueError, KeyError, TypeError):
            if sink.started:
                raise
            log.warning("response cache entry unreadable; answered by the backend instead")
            return False
        self.hits += 1
        if _blocked(sink):   # the answer failed a guardrail: poisoned, never served again
            await self._forget(key)
        return True

    async def _forget(self, key: bytes) -> None:
        self.poisoned += 1
        self.semantic.index.forget_answer(key)
        try:
            await self.store.delete(key)
        except StoreFailed as exc:
            log.warning("response cache: a poisoned entry could not be deleted: %s", exc)

    def _bypass(self, actor: Actor, reason: str) -> Lookup:
        self.bypasses[reason] += 1
        _tell(actor, b"bypass")
        return OFF

    # --- a hit -----------------------------------------------------------------------

    async def _answer(self, actor: Actor, sink: "ResponseSink", entry: dict[str, Any],
                      similarity: float | None = None) -> None:
        call, trace = actor.call, actor.trace
        backend, model = entry["backend"], entry["model"]
        completion = with_model(entry["answer"], call.model if actor.variant is not None else None)
        kind = "exact" if similarity is None else "semantic"
        if trace.timing is not None:
            trace.timing.cached = True   # its Server-Timing says so
        trace.add("cache_hit", backend=backend, model=model, kind=kind,
                  **({} if similarity is None else {"similarity": round(similarity, 4)}))
        params = header_value(call.param_tokens)   # x-continuum-request-params, as a fresh answer has it
        headers = [*([(PARAMS_HEADER, params)] if params is not None else []), *call.route_headers,
                   (HEADER, b"hit"), (KIND_HEADER, kind.encode()),
                   *([(SIMILARITY_HEADER, f"{similarity:.4f}".encode())] if similarity is not None else [])]
        if call.stream:
            options = call.payload.get("stream_options")
            events = stream_events(completion, isinstance(options, dict) and options.get("include_usage") is True,
                                   entry.get("events"))
            await sink.start(200, [(b"content-type", SSE_TYPE), *headers])
            trace.answered(backend)
            for event in events:
                await sink.send(event)
        else:
            await sink.start(200, [(b"content-type", JSON_TYPE), *headers])
            trace.answered(backend)
            await sink.send(json.dumps(completion, ensure_ascii=False).encode())
        await sink.finish()
        trace.add("completed", backend=backend, model=model)
        rt = actor.runtime
        rt.traces.store(trace)
        if actor.ticket is not None:   # a request against the key's rate limits; no tokens, no cost
            rt.limiter.settle(actor.ticket, 0, 0.0)
            actor.ticket = None
        record = call_record(trace, key=call.key, model=call.model, stream=call.stream, counts=TokenCounts(),
                             cost=None, estimated=False, served=(backend, model), purpose=actor.purpose)
        saved = entry.get("cost")
        rt.ledger.record(attrs.evolve(record, backend=backend, served_model=model, cost=0.0, cache_hit=True,
                                      saved_cost=float(saved) if isinstance(saved, (int, float)) else None))

    # --- a miss ----------------------------------------------------------------------

    def recording(self, actor: Actor, lookup: Lookup) -> Run:
        """``actor.run``, recording its answer and storing it if clean (a miss); as it is otherwise."""
        if lookup.key is None:
            unchanged: Run = actor.run
            return unchanged
        key, backend = lookup.key, lookup.backend
        assert backend is not None

        async def run(sink: "ResponseSink", disconnected: Callable[[], Awaitable[None]]) -> None:
            settings = actor.call.snapshot.response_cache
            recorder = Recorder(sink, settings.max_entry_bytes * 4)
            await actor.run(recorder, disconnected)
            if await self._store(actor, recorder, key, lookup.members, settings) and lookup.probe is not None:
                ttl = min(settings.ttl, settings.semantic.ttl)
                self.semantic.remember(lookup.probe, key, ttl)
                if self.store.vectors is not None:   # the fleet's workers add it to their indexes too
                    await self.semantic.share(self.store.vectors, lookup.probe, key, ttl,
                                              settings.semantic.max_entries)
        return run

    async def _store(self, actor: Actor, rec: Recorder, key: bytes, members: frozenset[str],
                     settings: ResponseCacheConfig) -> bool:
        reason = _unclean(actor, rec, members)
        value = b""
        if reason is None:
            try:
                answer, events = fold_stream(rec.body, actor.relay.usage) if actor.call.stream else \
                    (clean_completion(rec.body), None)
                if actor.variant is not None and answer.get("model") == actor.call.model:
                    answer["model"] = actor.model   # stored under the base's name; a variant's hit says its own
                served = actor.trace.steps[-1][3] if actor.trace.steps else None
                entry = {"v": 1, "backend": served, "model": actor.model, "answer": answer}
                if actor.meter.cost is not None:   # what a hit saves (the ledger's saved_cost)
                    entry["cost"] = float(actor.meter.cost)
                if events is not None:
                    entry["events"] = events
                value = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()
            except Unclean as exc:
                reason = str(exc)
        if reason is None and len(value) > settings.max_entry_bytes:
            reason = "too_large"
        if reason is not None:
            self.not_stored[reason] += 1
            return False
        try:
            await self.store.put(key, value, settings.ttl)
        except StoreFailed as exc:
            log.warning("response cache store failed: %s", exc)
            self.not_stored["store_unavailable"] += 1
            return False
        self.stored += 1
        return True


def _blocked(sink: Any) -> bool:
    """The output guardrails refused the answer that went into ``sink`` (``GuardedSink.blocked``)."""
    return bool(getattr(sink, "blocked", False))


def _unclean(actor: Actor, rec: Recorder, members: frozenset[str]) -> str | None:
    """Why the recorded answer is not one to store, from the sink and the route events; None: it is."""
    if _blocked(rec.sink):
        return "guardrail_blocked"   # a poisoned answer is never kept
    if rec.failed or rec.status not in (0, 200):
        return "error"
    if not rec.finished or actor.trace.terminal != "completed":
        return "truncated"
    if actor.call.stream and not actor.relay.state.done:
        return "truncated"   # ended on a finish reason alone: the relay closed it, the backend never did
    if rec.overflow:
        return "too_large"
    steps = actor.trace.steps   # (event, instant, attempt, backend, model, detail): see CallTrace
    if any(step[0] == "route_changed" for step in steps):
        return "route_changed"
    if any(step[0] == "quality_check_unmet" for step in steps):
        return "quality_check_failed"   # an answer given only because none passed (actors/call/quality_gate.py)
    if steps and steps[-1][3] not in members:
        return "route_changed"   # a pin given up: another backend answered
    return None


def _tell(actor: Actor, outcome: bytes) -> None:
    """Every answer of the call (errors too) carries the outcome, like its other route headers."""
    actor.call = attrs.evolve(actor.call, route_headers=(*actor.call.route_headers, (HEADER, outcome)))


def _cache_control(headers: Mapping[bytes, bytes]) -> set[str]:
    value = headers.get(b"cache-control")
    if not value:
        return set()
    return {d.strip().split("=", 1)[0].lower() for d in value.decode("latin-1").split(",")}
