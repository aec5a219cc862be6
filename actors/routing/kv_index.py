"""The KV index: per backend, which prompt-prefix blocks its engine holds, by our block keys.

Each backend has a state:

* ``events``: a live event source feeds it; its entries are what the
  engine's events said (stored, removed, all cleared), with no expiry.
* ``unknown``: a source is configured but not synced (not yet connected,
  down, or a gap it could not replay). ``held`` answers None: the index
  never routes on stale certainty. Its entries are dropped when it goes
  down and it starts empty when synced again.
* ``approximate``: no source; the gateway's own record of the prompts it
  sent there (``record``), each entry aging out ``entry_ttl`` seconds after
  its last use, as SGLang's router keeps one.

Entries are an LRU per backend bounded by ``max_entries`` (the oldest go
first), and so is the map from the engine's block hashes to our keys that
removals and parents are resolved through. An event that cannot be applied
is skipped and counted by reason (``SKIP_REASONS``).

Pure: no trio, no I/O, no clock (``now`` is an argument).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from typing import Iterable, Mapping, Sequence

from attrs import frozen

from switchyard.actors.routing.kv_blocks import ROOT, KeyCache, chain

EVENTS, UNKNOWN, APPROXIMATE = "events", "unknown", "approximate"
GPU = "GPU"

# why an event was skipped (kv_index_events_skipped_total{backend,reason})
BLOCK_SIZE_MISMATCH = "block_size_mismatch"   # the engine's block size is not kv_cache_index.block_size
UNKNOWN_PARENT = "unknown_parent"             # a stored block's parent hash was never seen: it cannot be chained
UNKNOWN_BLOCK = "unknown_block"               # a tier update or removal of a hash never seen (or long evicted)
MALFORMED = "malformed"                       # token_ids is not block_size tokens per block hash
NOT_SYNCED = "not_synced"                     # a batch for a backend whose source is not synced (or has none)
SKIP_REASONS = (BLOCK_SIZE_MISMATCH, UNKNOWN_PARENT, UNKNOWN_BLOCK, MALFORMED, NOT_SYNCED)

EngineHash = int | bytes


class _Entry:
    __slots__ = ("expires", "tiers")

    def __init__(self, tiers: set[str], expires: float | None) -> None:
        self.tiers = tiers
        self.expires = expires   # approximate entries only


class _Backend:
    __slots__ = ("engine", "entries", "hits", "picks", "state")

    def __init__(self, state: str) -> None:
        self.state = state
        self.entries: OrderedDict[int, _Entry] = OrderedDict()
        self.engine: OrderedDict[EngineHash, int] = OrderedDict()   # engine hash -> our key
        self.picks = 0
        self.hits = 0

    def clear(self) -> None:
        self.entries.clear()
        self.engine.clear()


@frozen
class BackendIndex:
    """What the admin API shows of one backend's index."""

    state: str
    entries: int
    picks: int            # calls sent there while the index was consulted
    hits: int             # ... for which it held at least one leading block of the prompt

    @property
    def hit_ratio(self) -> float | None:
        return self.hits / self.picks if self.picks else None


class KvIndex:
    def __init__(self, block_size: int = 16, max_entries: int = 100_000,
                 tier_weights: Mapping[str, float] | None = None) -> None:
        self.block_size = block_size
        self.max_entries = max_entries
        self.tier_weights: dict[str, float] = dict(tier_weights or {})   # lower tiers' weights; absent: 0
        self._backends: dict[str, _Backend] = {}
        self.skipped: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.cache = KeyCache()

    # --- configuration ------------------------------------------------------------

    def configure(self, backends: Mapping[str, bool], *, block_size: int, max_entries: int,
                  tier_weights: Mapping[str, float]) -> None:
        """A configuration revision: ``backends`` maps each backend to whether it has an event source.

        A new block size empties every backend (its keys mean other blocks); a backend gone is dropped;
        a new one, or one whose source came or went, starts empty (``unknown`` with a source, else
        ``approximate``); a smaller ``max_entries`` evicts the oldest at once."""
        if block_size != self.block_size:
            for b in self._backends.values():
                b.clear()
            self.block_size = block_size
        self.max_entries = max_entries
        self.tier_weights = dict(tier_weights)
        for name in [n for n in self._backends if n not in backends]:
            del self._backends[name]
        for name, fed in backends.items():
            found = self._backends.get(name)
            if found is None or (found.state == APPROXIMATE) == fed:
                self._backends[name] = _Backend(UNKNOWN if fed else APPROXIMATE)
            else:
                _trim(found.entries, max_entries)
                _trim(found.engine, max_entries)

    def state(self, backend: str) -> str | None:
        found = self._backends.get(backend)
        return found.state if found is not None else None

    def synced(self, backend: str, up: bool) -> None:
        """A source synced (``up``: empty, then fed by its events) or lost (``unknown``, emptied)."""
        found = self._backends.get(backend)
        if found is None or found.state == APPROXIMATE:
            return
        found.clear()
        found.state = EVENTS if up else UNKNOWN

    def clear(self) -> None:
        for b in self._backends.values():
            b.clear()

    # --- events -------------------------------------------------------------------

    def stored(self, backend: str, hashes: Sequence[EngineHash], parent: EngineHash | None,
               tokens: Sequence[int], block_size: int, medium: str | None) -> str | None:
        """An engine's ``BlockStored``; the skip reason, or None when applied."""
        b = self._fed(backend)
        if b is None:
            return self._skip(backend, NOT_SYNCED)
        tier = medium or GPU
        if not tokens:   # an offload tier's copy of blocks already known: a tier update
            return self._tiers(backend, b, hashes, tier)
        if block_size != self.block_size:
            return self._skip(backend, BLOCK_SIZE_MISMATCH)
        if len(tokens) != len(hashes) * block_size:
            return self._skip(backend, MALFORMED)
        start = ROOT if parent is None else b.engine.get(parent)
        if start is None:
            return self._skip(backend, UNKNOWN_PARENT)
        for engine_hash, key in zip(hashes, chain(tokens, block_size, start, self.cache), strict=True):
            _put(b.engine, engine_hash, key, self.max_entries)
            entry = b.entries.pop(key, None)
            if entry is None:
                entry = _Entry({tier}, None)
            else:
                entry.tiers.add(tier)
            _put(b.entries, key, entry, self.max_entries)
        return None

    def removed(self, backend: str, hashes: Iterable[EngineHash], medium: str | None) -> str | None:
        """An engine's ``BlockRemoved``: the tier loses each block; a block left in no tier is gone."""
        b = self._fed(backend)
        if b is None:
            return self._skip(backend, NOT_SYNCED)
        tier, reason = medium or GPU, None
        for engine_hash in hashes:
            key = b.engine.get(engine_hash)
            entry = b.entries.get(key) if key is not None else None
            if entry is None:
                b.engine.pop(engine_hash, None)
                reason = self._skip(backend, UNKNOWN_BLOCK)
                continue
            entry.tiers.discard(tier)
            if not entry.tiers:
                del b.entries[key]   # type: ignore[arg-type]  # key is not None when entry is found
                del b.engine[engine_hash]
        return reason

    def cleared(self, backend: str) -> str | None:
        """An engine's ``AllBlocksCleared`` (its prefix cache was reset)."""
        b = self._fed(backend)
        if b is None:
            return self._skip(backend, NOT_SYNCED)
        b.clear()
        return None

    def _fed(self, backend: str) -> _Backend | None:
        found = self._backends.get(backend)
        return found if found is not None and found.state == EVENTS else None

    def _tiers(self, backend: str, b: _Backend, hashes: Sequence[EngineHash], tier: str) -> str | None:
        reason = None
        for engine_hash in hashes:
            key = b.engine.get(engine_hash)
            entry = b.entries.get(key) if key is not None else None
            if entry is None:
                reason = self._skip(backend, UNKNOWN_BLOCK)
            else:
                entry.tiers.add(tier)
        return reason

    def _skip(self, backend: str, reason: str) -> str:
        self.skipped[(backend, reason)] += 1
        return reason

    # --- the gateway's own record, and lookups ----------------------------------------

    def record(self, backend: str, keys: Sequence[int], now: float, ttl: float) -> None:
        """A call with these prompt keys was sent to ``backend``: an approximate backend holds them until
        ``now + ttl`` (each use renews them). Other states ignore it: their engine says what it holds."""
        b = self._backends.get(backend)
        if b is None or b.state != APPROXIMATE:
            return
        entries = b.entries
        while entries:   # the oldest first: drop what has expired
            first = next(iter(entries.values()))
            if first.expires is None or first.expires > now:
                break
            entries.popitem(last=False)
        for key in keys:
            entry = entries.pop(key, None) or _Entry({GPU}, None)
            entry.expires = now + ttl
            _put(entries, key, entry, self.max_entries)

    def held(self, backend: str, keys: Sequence[int], now: float) -> float | None:
        """How many LEADING blocks of the prompt ``backend`` holds: a block on the GPU counts 1, one only
        in a lower tier that tier's weight (0 stops the count); None while the backend is unknown."""
        b = self._backends.get(backend)
        if b is None:
            return 0.0
        if b.state == UNKNOWN:
            return None
        entries, weights, total = b.entries, self.tier_weights, 0.0
        for key in keys:
            entry = entries.get(key)
            if entry is None or (entry.expires is not None and entry.expires <= now):
                break
            if GPU in entry.tiers:
                total += 1.0
                continue
            weight = max((weights.get(t, 0.0) for t in entry.tiers), default=0.0)
            if weight <= 0.0:
                break
            total += weight
        return total

    def picked(self, backend: str, held: float | None) -> None:
        """A call went to ``backend`` while the index was consulted; ``held`` is what it held of it."""
        b = self._backends.get(backend)
        if b is None or held is None:
            return
        b.picks += 1
        b.hits += held > 0

    def view(self, backend: str) -> BackendIndex | None:
        b = self._backends.get(backend)
        if b is None:
            return None
        return BackendIndex(b.state, len(b.entries), b.picks, b.hits)


def _put(lru: OrderedDict, key: object, value: object, bound: int) -> None:   # type: ignore[type-arg]
    lru[key] = value
    lru.move_to_end(key)
    if len(lru) > bound:
        lru.popitem(last=False)


def _trim(lru: OrderedDict, bound: int) -> None:   # type: ignore[type-arg]
    while len(lru) > bound:
        lru.popitem(last=False)
