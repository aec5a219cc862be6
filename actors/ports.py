"""What the actors need from outside their layer, as interfaces the protocol layer fills at start.

The actors speak to backends through an ``Upstream``, keep ledger records in
a ``UsageStore``, stored-response owners in an ``OwnerStore``, cached answers
in a ``CacheStore``, search the web for ``:online`` through a ``SearchApi``, ask a ``Limiter`` before
dispatch, call MCP tools through ``ToolServers`` and count their calls through ``CallMetrics`` and
``CallSpans``; they never import the HTTP client, the stores or the exporters that implement them.
``RuntimePorts`` is the one
value the protocol layer hands the Runtime with them
(``switchyard.protocol.serving.wiring`` assembles it with the real ones).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

import attrs
import httpx
from attrs import frozen

# The control plane's store, re-exported: defined beside the ControlPlane that uses it (the control plane may
# not import this module, which imports its records).
from switchyard.actors.alerts.records import AlertStore as AlertStore

# The batch store's port, re-exported: defined beside the batch service and runners that use it.
from switchyard.actors.batches.store import BatchStore as BatchStore
from switchyard.actors.control.store import ControlConflict as ControlConflict
from switchyard.actors.control.store import ControlStore as ControlStore

# The ledger's store, re-exported: the port is defined beside the LedgerActor that uses it, since this module
# imports the ledger (its records, and the relay's meter through CallTrace) and the ledger may not import it back.
from switchyard.actors.ledger.store import UsageStore as UsageStore
from switchyard.actors.limits.tickets import Admission, Demand, Summary, Ticket

# The MCP servers' port, re-exported: defined beside the tool calls that use it (actors/mcp).
from switchyard.actors.mcp.port import ToolServers as ToolServers
from switchyard.actors.owner_writes import Op
from switchyard.actors.search.hits import SearchApi as SearchApi  # the web-search providers' clients (:online)
from switchyard.actors.wire import Wires
from switchyard.config.access import ApiKey
from switchyard.config.limits import Organization
from switchyard.config.schema import Snapshot

if TYPE_CHECKING:
    from switchyard.actors.events import CallTrace
    from switchyard.actors.ledger.record import LedgerRecord

Current = Callable[[], Snapshot]   # the running revision, read afresh each time (a reload replaces it)


class Upstream(Protocol):
    """The one shared client to every backend, real or simulated."""

    client: httpx.AsyncClient   # for a backend's own routes: health, models, engine pages

    def request(self, method: str, url: httpx.URL, headers: list[tuple[str, str]],
                content: bytes) -> httpx.Request: ...

    async def send(self, request: httpx.Request) -> httpx.Response:
        """The request on its way, its answer unread (the caller closes it)."""
        ...

    def errors(self, backend: str) -> AbstractContextManager[None]:
        """A context that turns the transport's failures into ``actors.errors``' upstream errors."""
        ...

    def sync_simulated(self, snapshot: Snapshot) -> None:
        """After a reload: in-process simulators follow the new revision."""
        ...

    async def aclose(self) -> None: ...


class CallMetrics(Protocol):
    """Told of every finished call, and of every ledger record."""

    def observe(self, trace: CallTrace) -> None: ...

    def observe_record(self, rec: LedgerRecord) -> None: ...

    def observe_admission(self, seconds: float, refusal: Any) -> None: ...


class CallSpans(Protocol):
    """Told of every finished call (after the metrics), to export it as spans (``tracing.otlp``).

    ``observe`` never waits and never raises; ``close`` may block (it flushes
    what is queued, bounded by the export timeout) and runs in a worker
    thread when the Runtime stops.
    """

    def observe(self, trace: CallTrace) -> None: ...

    def close(self) -> None: ...


class Limiter(Protocol):
    """Rate limits and budgets (``actors/limits``: the local one; the Redis one below the wire)."""

    async def admit(self, demand: Demand) -> Admission:
        """Check every scope and budget of ``demand`` and reserve them all, or none."""
        ...

    def settle(self, ticket: Ticket, tokens_used: int, cost_usd: float | None) -> None:
        """The call ended: end its lease, give back unused tokens, turn its budget
        reservation into spend (``cost_usd`` None: unpriced, 0 USD). Never waits."""
        ...

    async def key_view(self, key: str | ApiKey, organizations: Mapping[str, Organization] | None = None
                       ) -> dict[str, Any]:
        """A key's windows, leases in flight and budget left (and its organization's), for
        GET /admin/keys/{id}. ``key``: the key itself (a database key), or a key id of the running
        config (``KeyError`` when it has none); ``organizations``: those it is judged by (else the config's)."""
        ...


class CacheStore(Protocol):
    """Where the response cache keeps answers (``actors/cache/store.py``'s memory store, or Redis); a store
    that fails raises ``actors.cache.store.StoreFailed`` and the call goes on uncached."""

    evictions: int         # entries dropped to make room (LRU), since start
    expirations: int       # entries dropped because their TTL passed, since start

    @property
    def stored_bytes(self) -> int | None: ...   # bytes held now; None: the store does not know (Redis)

    @property
    def entries(self) -> int | None: ...

    @property
    def vectors(self) -> "VectorFeed | None":
        """The semantic cache's vectors shared with the fleet (Redis: every worker's index reads them); None:
        this worker's own alone (memory)."""
        ...

    async def get(self, key: bytes) -> bytes | None: ...
    async def put(self, key: bytes, value: bytes, ttl: float) -> None: ...
    async def delete(self, key: bytes) -> None: ...   # a poisoned entry (its answer failed a guardrail)
    async def aclose(self) -> None: ...   # let go of connections (the Runtime's end)


@frozen
class SharedVector:
    """One semantic cache entry as the fleet shares it: its index row, and how long it has left to live."""

    namespace: bytes
    answer_key: bytes
    vector: list[float]
    ttl: float   # seconds left (the publisher's wall-clock expiry, read against this host's clock)


class VectorFeed(Protocol):
    """An append-only log of semantic cache entries, bounded by its writers; a failure raises ``StoreFailed``."""

    async def publish(self, entry: SharedVector, max_entries: int) -> None: ...

    async def read(self, after: str, wait: float) -> tuple[str, list[SharedVector]]:
        """The entries after position ``after`` ("0": from the oldest kept), waiting up to ``wait`` seconds for
        one; the position to read from next."""
        ...


@frozen
class Found:
    """A stored response id as the owner map holds it (``OwnerStore.lookup``, ``StoredOwners.lookup``)."""

    backend: str | None   # the caller's: the backend that created the id for this owner
    other: bool           # another owner holds the id


class OwnerStore(Protocol):
    """The shared map's store; blocking methods, run in worker threads. Each may raise (``StoreUnavailable``)."""

    name: str

    def open(self) -> None: ...

    def apply(self, ops: Sequence[Op]) -> None:
        """Remember and forget, in order, in one transaction."""
        ...

    def lookup(self, owner: str, response_id: str, since: float, max_entries: int) -> Found:
        """The id as this owner and others hold it: rows created after ``since`` and within the newest
        ``max_entries`` only."""
        ...

    def prune(self, before: float, max_entries: int) -> int: ...

    def close(self) -> None: ...


# What the Runtime makes once, at start, from the parts below the wire: each factory is given what it reads.
LimiterFor = Callable[[Current, Summary], Limiter]   # the running revision, the ledger's totals (budget seeds)
CacheStoreFor = Callable[[Current], CacheStore]
SpansFor = Callable[[Current], "CallSpans | None"]   # None: no export configured
MetricsFor = Callable[[Any], CallMetrics]   # given the Runtime itself: the exposition reads all of its counters
ToolsFor = Callable[[Snapshot], ToolServers]   # the first revision's mcp_servers (later ones: reconfigure)


@frozen
class RuntimePorts:
    """Everything the protocol layer plugs into a Runtime; a factory left None takes the actors' own part
    (the local limiter, the memory cache) or none (no metrics, no spans)."""

    upstream: Upstream
    wires: Wires                                # the translating wires (protocol/serving/wiring.py)
    store: UsageStore                           # the ledger's, as usage.ledger names it
    owner_store: OwnerStore | None = None       # stored responses' shared owner map (None: this worker's memory)
    limiter_for: LimiterFor | None = None       # with state.redis_url: the fleet's
    cache_store_for: CacheStoreFor | None = None   # with response_cache.store: redis
    metrics_for: MetricsFor | None = None
    spans_for: SpansFor | None = None
    control_store: ControlStore | None = None   # the database keys' store (None: config keys only)
    control_secret: bytes | None = attrs.field(default=None, repr=False)   # keys the digests of their secrets
    control_off: str | None = None              # why there are no database keys, said to whoever asks for one
    alert_store: AlertStore | None = None       # the alerts table beside the ledger (None: usage.ledger memory)
    batch_store: BatchStore | None = None       # files and batches beside the ledger (None: /v1/files answers 503)
    # kv_cache_index.event_sources' readers (protocol/kv/), given the index's actor to feed and the sources;
    # None: no reader (the fleet simulator feeds the index itself)
    kv_sources_for: Callable[[Any, Mapping[str, Any]], Any] | None = None
    search: SearchApi | None = None             # the web_search providers' clients (None: :online is refused)
    tools_for: ToolsFor | None = None           # mcp_servers' sessions (protocol/mcp; None: /mcp has no tools)
