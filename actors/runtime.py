"""The running gateway: the shared client, the actors, the pool, one Snapshot.

``Runtime.run`` is what the ASGI lifespan starts: it opens the root nursery,
starts the actors in order under the Supervisor, and closes the upstream
client when the server stops. ``reload_from_file`` / ``apply`` publish a new
config revision to every part at once (Trio runs one task at a time, so no
call ever sees half a reload); each call keeps the Snapshot it started with.
What the protocol layer plugs in arrives as one ``RuntimePorts``
(``actors/ports.py``); each feature's counters are the Runtime's, for the
metrics exposition to read.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import trio

from switchyard.actors.alerts.actor import AlertActor
from switchyard.actors.alerts.actor import Owners as AlertOwners
from switchyard.actors.batches.owner_keys import owner_key
from switchyard.actors.batches.relay import BatchRelay
from switchyard.actors.batches.relay_poller import RelayPoller
from switchyard.actors.batches.runner import BatchRunner
from switchyard.actors.batches.service import Batches
from switchyard.actors.cache.shared import SharedVectors
from switchyard.actors.cache.stage import ResponseCache
from switchyard.actors.cache.store import MemoryCacheStore
from switchyard.actors.config_watcher import ConfigWatcher
from switchyard.actors.control.plane import ControlPlane
from switchyard.actors.dedup import DedupCoordinator
from switchyard.actors.discovery import ModelDiscoveryActor
from switchyard.actors.engine_stats import EngineStatsPoller
from switchyard.actors.events import TraceLog
from switchyard.actors.guardrails.verdicts import GuardrailVerdicts
from switchyard.actors.health import BackendHealthActor
from switchyard.actors.in_flight import InFlight
from switchyard.actors.kv.actor import KvIndexActor
from switchyard.actors.kv.tokenizer_files import Tokenizers, load_tokenizers
from switchyard.actors.ledger import spill
from switchyard.actors.ledger.actor import LedgerActor
from switchyard.actors.ledger.entries import classifier_record
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.actors.limits.local import LocalLimiter
from switchyard.actors.mcp.calls import ToolCalls
from switchyard.actors.params import ParamOutcomes
from switchyard.actors.pool import BackendPool
from switchyard.actors.ports import CallSpans, Limiter, RuntimePorts
from switchyard.actors.prompts import PromptStore
from switchyard.actors.quota import QuotaObserver
from switchyard.actors.routing.variants import ThroughputView, VariantRequests
from switchyard.actors.smart_router import SmartRouter
from switchyard.actors.stored_owners import StoredOwners
from switchyard.actors.stream_usage import StreamUsageMemory
from switchyard.actors.supervisor import Actor, Supervisor
from switchyard.actors.trace import ClientRefRejections
from switchyard.actors.usage import UsageLedger, UsageRecord
from switchyard.config.access import ApiKey
from switchyard.config.load import ConfigError, load_file
from switchyard.config.load_limits import workers_refusal
from switchyard.config.schema import Snapshot
from switchyard.config.watch import Applied, apply_live

log = logging.getLogger("switchyard.config")


@attrs.define
class ReloadStatus:
    """What GET /admin/config/hot-reload-status shows."""

    path: str | None = None
    watcher: str = "disabled"              # disabled | watching | stopped
    revision: str = ""                     # the revision running now
    last_reload: dict[str, Any] | None = None
    last_error: dict[str, Any] | None = None
    pending_restart: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


class Runtime:
    def __init__(self, snapshot: Snapshot, ports: RuntimePorts, *, spill_name: str = spill.NAME, workers: int = 1,
                 config_path: str | None = None, watch: bool = True) -> None:
        self.snapshot = snapshot
        self.workers = workers   # worker processes of this instance (limits without Redis need exactly one)
        self.config_path = Path(config_path) if config_path else None
        self.reload_status = ReloadStatus(path=str(self.config_path) if self.config_path else None,
                                          revision=snapshot.revision)
        self.watcher = ConfigWatcher(self, self.config_path) if self.config_path and watch else None
        self.upstream = ports.upstream
        self.wires = ports.wires           # the translating wires (protocol/serving/wiring.py)
        self.search = ports.search         # the web_search providers' clients (protocol/search/)
        self.health = BackendHealthActor(snapshot, self.upstream)
        self.discovery = ModelDiscoveryActor(snapshot, self.upstream)
        self.engine_stats = EngineStatsPoller(snapshot, self.upstream)
        self.quota = QuotaObserver(snapshot)
        # What each engine's KV cache holds (kv_cache_index): the event sources' readers feed it, picks read it.
        self.kv_index = KvIndexActor(snapshot)
        self.pool = BackendPool(snapshot, kv_index=self.kv_index.index)
        # ... the operator's tokenizer files (a file that cannot be read stops the start, naming its entry)
        self.kv_tokenizers = self._kv_tokenizers(snapshot, None)
        self.pool.kv.tokenizers = self.kv_tokenizers
        # ... and the readers of the engines' events (kv_cache_index.event_sources: opened at start)
        sources = snapshot.kv_cache_index.event_sources if snapshot.kv_cache_index.enabled else {}
        self.kv_sources = ports.kv_sources_for(self.kv_index, sources) \
            if ports.kv_sources_for is not None and sources else None
        self.stream_usage = StreamUsageMemory()   # the backends that refused stream_options, until changed
        self.prompts = PromptStore(snapshot.global_prompts)
        self.dedup = DedupCoordinator(snapshot.dedup)
        # stored response id -> its backend: this worker's memory, then the store beside the ledger (if shared)
        self.response_owners = StoredOwners(snapshot.stored_responses, ports.owner_store)
        self.usage = UsageLedger()         # what the gateway's own calls (the LLM classifier's) and clients used
        # Every call's record, with its cost, kept in the store usage.ledger names (written off the request path).
        self.ledger = LedgerActor(ports.store, snapshot.usage, snapshot.server.data_path() / spill_name)
        self.usage.on_other = self._classifier_try
        current = self._current
        # Rate limits and budgets: shared through Redis when state.redis_url says so, else this worker's own.
        # Keys kept in the database (the control plane): a view in memory, kept current by its actor.
        self.control = ControlPlane(ports.control_store, ports.control_secret, why_off=ports.control_off,
                                    retention=lambda: self.snapshot.usage.retention)
        # Budget thresholds crossed and database keys revoked or expiring, POSTed to alerts.webhooks.
        self.alerts = AlertActor(ports.alert_store, lambda: self.snapshot.alerts, self._alert_owners,
                                 self.ledger.summary)
        # Files and batches (/v1/files, /v1/batches), kept beside the ledger: relayed to OpenAI and Azure (their
        # status synced by the poller), or run by this worker's runner (below) and the fleet's others.
        self.batch_store = ports.batch_store
        self.batch_relay = BatchRelay(ports.batch_store, self.upstream, self.ledger.record,
                                      discovered=lambda: self.discovery.view,
                                      routable=lambda name: self.health.view.routable(name),
                                      organization=self._owner_organization) \
            if ports.batch_store is not None else None
        self.relay_poller = RelayPoller(self.batch_relay, current) if self.batch_relay is not None else None
        self.batches = Batches(ports.batch_store, current, relay=self.batch_relay)
        self.limiter: Limiter = ports.limiter_for(current, self.ledger.summary) if ports.limiter_for is not None \
            else LocalLimiter(current, ledger=self.ledger.summary)
        self.smart = SmartRouter(self)     # model "auto": classify, pick a policy, pick a model in its tier
        # Answers kept and served again (response_cache): this worker's memory, or the fleet's Redis; made once.
        cached = snapshot.response_cache
        self.cache = ResponseCache(lambda: self.snapshot.response_cache, ports.cache_store_for(current)
                                   if ports.cache_store_for is not None
                                   else MemoryCacheStore(cached.max_entries, cached.max_bytes))
        # ... and with Redis, the fleet's semantic cache entries read into this worker's index
        vectors = self.cache.store.vectors
        self.shared_vectors = SharedVectors(vectors, self.cache.semantic, lambda: self.snapshot.response_cache) \
            if vectors is not None else None
        self.nursery: trio.Nursery | None = None   # hosts calls shared by deduplicated clients
        self.traces = TraceLog()
        # Each feature's counters, bumped by the part that counts, read by the metrics exposition.
        self.variant_requests = VariantRequests()
        self.request_params_outcomes = ParamOutcomes()
        self.guardrail_verdicts = GuardrailVerdicts()
        self.client_ref_rejected = ClientRefRejections()   # bumped by the App, which reads the trace headers
        # Every finished call's trace feeds this Runtime's metrics (the protocol layer's exporter).
        self.metrics: Any = ports.metrics_for(self) if ports.metrics_for is not None else None
        if self.metrics is not None:
            self.traces.listener = self.metrics.observe
            self.ledger.listener = self.metrics.observe_record   # tokens and cost by key and model
        # ... and, with tracing.otlp, becomes spans (restart-only: made once, from the first snapshot).
        self.spans: CallSpans | None = ports.spans_for(current) if ports.spans_for is not None else None
        if self.spans is not None:
            self.traces.listeners.append(self.spans.observe)
        # MCP servers behind /mcp (mcp_servers): one session each in this worker; every tool call is judged,
        # limited and recorded by ToolCalls, whichever door makes it.
        self.tool_servers = ports.tools_for(snapshot) if ports.tools_for is not None else None
        self.tool_calls = ToolCalls(self.tool_servers, current,
                                    lambda s: self.control.view.organizations_over(s.organizations), self.limiter,
                                    self.ledger.record)
        for part in (self.metrics, self.spans):
            observe_tool = getattr(part, "observe_tool", None)
            if observe_tool is not None:
                self.tool_calls.listeners.append(observe_tool)
        # The batches the gateway runs itself: this worker's runner (its lease holder id: one per process), whose
        # lines the protocol layer's App serves through its own doors (it sets run_line).
        self.batch_runner = BatchRunner(ports.batch_store, lambda: self.snapshot.batches, uuid.uuid4().hex,
                                        owner_key=self._batch_owner_key) if ports.batch_store is not None else None
        self._throughput: ThroughputView | None = None   # set only by assignment (tests); else the poller's
        self.calls = InFlight()             # RequestActors and sessions in flight, for the drain
        self.draining = False
        self.supervisor: Supervisor | None = None

    def _current(self) -> Snapshot:
        """The running revision (what the parts made once at start read afresh)."""
        return self.snapshot

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            try:   # first, and outside the nursery: a store that cannot be used stops the start with one error
                await self.ledger.open()
            except StoreUnavailable as exc:
                raise StoreUnavailable(f"usage.ledger ({self.ledger.store.name}): {exc}") from None
            await self.control.start()   # the database keys, read before any call is judged
            try:
                await self.response_owners.open()
            except Exception as exc:
                raise StoreUnavailable(f"stored_responses (the usage.ledger's store): {exc}") from None
            try:
                await self.batches.open()
            except StoreUnavailable as exc:
                raise StoreUnavailable(f"batches (the usage.ledger's store): {exc}") from None
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                self.supervisor = Supervisor(nursery)
                await self.supervisor.start(self.ledger)
                await self.supervisor.start(self.response_owners)
                await self.supervisor.start(self.control)
                await self.supervisor.start(self.alerts)
                if isinstance(self.limiter, Actor):   # a limiter with connections of its own (Redis)
                    await self.supervisor.start(self.limiter)
                await self.supervisor.start(self.health)
                await self.supervisor.start(self.discovery)
                await self.supervisor.start(self.engine_stats)
                await self.supervisor.start(self.quota)
                await self.supervisor.start(self.kv_index)
                if self.kv_sources is not None:
                    await self.supervisor.start(self.kv_sources)
                await self.supervisor.start(self.prompts)
                if self.shared_vectors is not None:
                    await self.supervisor.start(self.shared_vectors)
                if self.batch_runner is not None:
                    await self.supervisor.start(self.batch_runner)
                if self.relay_poller is not None:
                    await self.supervisor.start(self.relay_poller)
                if self.watcher is not None:
                    await self.supervisor.start(self.watcher)
                if isinstance(self.tool_servers, Actor):   # the MCP servers' sessions (stdio ones: subprocesses)
                    await self.supervisor.start(self.tool_servers)
                task_status.started(self)
        finally:
            with trio.CancelScope(shield=True):
                await self.upstream.aclose()
                await self.ledger.flush()   # every record written (or spilled) before the process goes
                await self.ledger.aclose()
                await self.response_owners.aclose()
                await self.control.aclose()
                await self.alerts.aclose()
                await self.batches.aclose()
                await self.cache.store.aclose()   # a Redis cache's connections
                if self.spans is not None:   # queued spans out, bounded by the export timeout (its thread)
                    await trio.to_thread.run_sync(self.spans.close, abandon_on_cancel=True)

    def _alert_owners(self) -> AlertOwners:
        """Every budget (the config's keys and organizations, the database's) and the database keys, now."""
        view, snapshot = self.control.view, self.snapshot
        keys = [*snapshot.api_keys.keys, *(r.key for r in view.records.values())]
        orgs = view.organizations_over(snapshot.organizations)
        budgets = [("key", k.id, k.budget) for k in keys if k.budget is not None]
        budgets += [("organization", o.id, o.budget) for o in orgs.values() if o.budget is not None]
        return AlertOwners(budgets=tuple(budgets), keys=tuple(view.records.values()))

    def _kv_tokenizers(self, snapshot: Snapshot, previous: Tokenizers | None) -> Tokenizers:
        """``kv_cache_index.tokenizers``' files, loaded (those unchanged since ``previous`` kept); a
        ``ConfigError`` naming each entry that cannot be read."""
        cfg = snapshot.kv_cache_index
        if not cfg.enabled or not cfg.tokenizers:
            return Tokenizers()
        return load_tokenizers(cfg.tokenizers, str(self.config_path or "<config>"), previous)

    def _owner_organization(self, owner: str) -> str | None:
        """The organization of a batch's owner (a key id), for a relayed batch's ledger records."""
        for key in self.snapshot.api_keys.keys:
            if key.id == owner:
                return key.organization_id
        record = self.control.view.records.get(owner)
        return record.key.organization_id if record is not None else None

    def _batch_owner_key(self, owner: str) -> ApiKey | None:
        """A batch owner's key as each of its lines starts (``owner_keys.py``): the 401 when it is gone."""
        snapshot, control = self.snapshot, self.control
        return owner_key(owner, snapshot.api_keys, control.view, snapshot.api_keys.enabled or control.enabled,
                         control.clock())

    def _classifier_try(self, rec: UsageRecord) -> None:
        """A classifier try's record reaches the ledger like a call's (purpose ``classifier``)."""
        wall = time.time() - max(0.0, trio.current_time() - rec.at) if rec.at is not None else time.time()
        self.ledger.record(classifier_record(rec, self.snapshot, wall))

    @property
    def throughput(self) -> ThroughputView:
        """Backend -> latest throughput sample, what `:nitro` and `sort: throughput` rank by.

        The engine-stats poller's current view (it replaces the mapping on
        every change, so this is read afresh each time); a view assigned
        here instead (tests) takes its place.
        """
        return self._throughput if self._throughput is not None else self.engine_stats.throughput

    @throughput.setter
    def throughput(self, view: ThroughputView) -> None:
        self._throughput = view

    # --- hot reload -------------------------------------------------------------

    def reload_from_file(self, trigger: str) -> dict[str, Any]:
        """Load the config file again; apply it if valid, else keep running as before."""
        if self.config_path is None:
            return {"result": "unavailable", "reason": "running the embedded demo config: no file to reload"}
        at = _now()
        try:
            loaded = load_file(self.config_path)
            self._check_limits(loaded.snapshot)
            tokenizers = self._kv_tokenizers(loaded.snapshot, self.kv_tokenizers)   # one it cannot read: rejected
        except ConfigError as exc:
            self.reload_status.last_error = {"at": at, "trigger": trigger, "errors": exc.errors}
            self.reload_status.last_reload = {"at": at, "trigger": trigger, "result": "rejected"}
            for error in exc.errors:
                log.error("config reload rejected (%s): %s", trigger, error)
            return {"result": "rejected", "errors": exc.errors}
        for warning in loaded.warnings:
            log.warning("config: %s", warning)
        warnings = list(loaded.warnings)
        # read once, used at once: a tokenizer file changed under an unchanged config is a change too
        self.kv_tokenizers = self.pool.kv.tokenizers = tokenizers
        if loaded.snapshot.revision == self.snapshot.revision:
            self.reload_status.last_reload = {"at": at, "trigger": trigger, "result": "unchanged",
                                              "warnings": warnings}
            self.reload_status.last_error = None
            return {"result": "unchanged", "revision": self.snapshot.revision, "warnings": warnings}
        applied = self.apply(loaded.snapshot)
        # Chains the loader could not judge (discovery, globs): against the models known now, at once.
        warnings += self.discovery.check_chains()
        self.reload_status.last_error = None
        self.reload_status.last_reload = {"at": at, "trigger": trigger, "result": "applied", "warnings": warnings}
        log.info("config revision %s applied (%s)%s", applied.snapshot.revision, trigger,
                 f"; waiting for a restart: {', '.join(applied.pending_restart)}" if applied.pending_restart else "")
        return {"result": "applied", "revision": applied.snapshot.revision,
                "pending_restart": list(applied.pending_restart), "warnings": warnings}

    def _check_limits(self, new: Snapshot) -> None:
        """A reload may not bring limits this process cannot keep: several workers, no shared Redis (the
        Redis URL itself only changes at a restart, so the running one is what counts)."""
        kept = attrs.evolve(new, state=attrs.evolve(new.state, redis_url=self.snapshot.state.redis_url))
        refusal = workers_refusal(kept, self.workers)
        if refusal is not None:
            raise ConfigError(str(self.config_path), [f"rate_limiting: {refusal} (state.redis_url needs a restart)"],
                              [])
        taken = self.control.view.records   # an id is the config's or the database's, never both
        clashes = [f"api_keys[{i}].id: {key.id!r} is a database key's id (see GET /admin/keys/{key.id}); "
                   f"rename one" for i, key in enumerate(new.api_keys.keys) if key.id in taken]
        if clashes:
            raise ConfigError(str(self.config_path), clashes, [])

    def apply(self, new: Snapshot) -> Applied:
        """Publish ``new`` to every part; restart-only fields keep their running values."""
        applied = apply_live(self.snapshot, new)
        snapshot = applied.snapshot
        self.upstream.sync_simulated(snapshot)
        self.health.reconfigure(snapshot)
        self.discovery.reconfigure(snapshot)
        self.engine_stats.reconfigure(snapshot)
        self.quota.reconfigure(snapshot)
        self.kv_index.reconfigure(snapshot)
        try:   # files unchanged since they were read keep their tokenizer (reload_from_file read the new ones)
            self.kv_tokenizers = self._kv_tokenizers(snapshot, self.kv_tokenizers)
        except ConfigError as exc:   # a revision applied without reload_from_file's check: the old ones stay
            log.error("kv_cache_index.tokenizers: %s; keeping the tokenizers loaded before", "; ".join(exc.errors))
        self.pool.kv.tokenizers = self.kv_tokenizers
        self.pool.reconfigure(snapshot)
        self.stream_usage.reconfigure(snapshot)
        self.prompts.reconfigure(snapshot.global_prompts)
        self.dedup.reconfigure(snapshot.dedup)
        self.response_owners.reconfigure(snapshot.stored_responses)
        if self.tool_servers is not None:
            self.tool_servers.reconfigure(snapshot)
        self.snapshot = snapshot
        self.smart.reconfigure(snapshot)
        self.reload_status.revision = snapshot.revision
        self.reload_status.pending_restart = applied.pending_restart
        return applied


    # --- graceful drain -----------------------------------------------------------

    async def drain(self, window: float) -> None:
        """Refuse new calls at once, give those in flight ``window`` seconds, then end them cleanly.

        Callers run this in a task of their own; it returns early when the
        last call finishes.
        """
        self.draining = True   # already set by whoever began the drain; set here too for direct callers
        log.info("draining: %d call(s) in flight, %gs to finish", len(self.calls), window)
        with trio.move_on_after(window):
            await self.calls.wait_empty()
        for call in list(self.calls):
            call.shut_down()
        if self.calls:
            log.warning("drain window over: ended %d call(s) with server_shutting_down", len(self.calls))
        flush = getattr(self.limiter, "flush", None)
        if flush is not None:   # the ended calls' settles reach the shared counters while they still can
            await flush()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
