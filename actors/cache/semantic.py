"""The semantic cache (``response_cache.semantic``): a call answered by an earlier one whose prompt is close.

It runs inside the exact cache's stage, after an exact miss, for a call the
exact cache may serve (same scope rules: one settled target, the key's
scope, no ``:online``, no MCP tools) that ``similarity.ineligible`` lets
through. The embedded text (``similarity.split``) is embedded by
``embed.py`` within ``semantic.timeout`` (the call's budget: it runs before
dispatch), and looked up in this worker's ``SemanticIndex`` under the
namespace of everything that must match exactly, which includes the
embedding model, so entries made with another model are never compared. A
match at or above ``threshold`` names the exact key its answer is kept
under in the cache's store; that answer is served. On a miss the vector is
kept, and added to the index once the answer was stored.

Faults (the embeddings call slow, failing, or answering a vector of the
wrong size) make the call a plain miss: counted in ``faults`` by reason,
logged at most once a minute per reason, never an error.

With a store that shares vectors (Redis), a stored entry is also published
(``share``) and every worker adopts the fleet's entries (``shared.py``):
the index stays in process, Redis only carries the vectors.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

import attrs
import trio

from switchyard.actors.cache import similarity
from switchyard.actors.cache.embed import EmbedFailed, embed
from switchyard.actors.cache.index import Match, SemanticIndex, WrongSize, unit_vector
from switchyard.actors.cache.key import cache_key
from switchyard.actors.cache.store import StoreFailed
from switchyard.actors.ports import SharedVector

if TYPE_CHECKING:
    from switchyard.actors.messages import Call
    from switchyard.actors.ports import VectorFeed
    from switchyard.config.response_cache import ResponseCacheConfig
    from switchyard.config.schema import BackendConfig

log = logging.getLogger("switchyard.cache")
LOG_EVERY = 60.0   # seconds between two log lines of the same fault


@attrs.frozen
class Probe:
    """A semantic lookup made for a call: where its vector goes, and what it found."""

    namespace: bytes
    vector: list[float]   # as the embeddings answer gave it: what the fleet's feed publishes
    unit: Any             # ... as the index keeps it (index.unit_vector), made once for the lookup and the insertion
    match: Match | None = None


class SemanticCache:
    def __init__(self, max_entries: int) -> None:
        self.index = SemanticIndex(max_entries)
        self.hits = 0
        self.misses = 0
        self.skipped: Counter[str] = Counter()   # calls the semantic path left out, by reason
        self.faults: Counter[str] = Counter()    # embeddings calls that failed, by reason
        self.share_failures = 0                  # entries the feed (Redis) did not take
        self._logged: dict[str, float] = {}

    async def probe(self, actor: Any, call: "Call", settings: "ResponseCacheConfig", scope: str | None,
                    model: str, target: "BackendConfig", target_id: str | None) -> Probe | None:
        """The lookup's result, or None when the semantic path does not apply (or failed: a miss)."""
        sem = settings.semantic
        if not sem.enabled or not sem.embedding_model:
            return None
        reason = similarity.ineligible(sem, call.payload)
        cut = similarity.split(sem, call.payload) if reason is None else reason
        if isinstance(cut, str):
            self.skipped[cut] += 1
            return None
        text, rest = cut
        exact = cache_key(attrs.evolve(call, payload=rest), scope, model, target, target_id)
        h = hashlib.blake2b(exact, digest_size=32, person=b"switchyard-sem")
        h.update(f"{sem.embedding_model}\x00{sem.scope.value}\x00{sem.include_system}".encode())
        namespace = h.digest()
        try:
            vector = await embed(actor.runtime, type(actor), call, text, sem.embedding_model, sem.dimensions,
                                 sem.timeout)
            unit = unit_vector(vector)
            match = self.index.search(namespace, unit, sem.threshold, trio.current_time())
        except EmbedFailed as exc:
            self._fault(exc.reason, str(exc))
            return None
        except WrongSize as exc:
            self._fault("wrong_size", str(exc))
            return None
        except ValueError as exc:   # a zero or non-finite vector
            self._fault("malformed", str(exc))
            return None
        return Probe(namespace, vector, unit, match)

    def remember(self, probe: Probe, answer_key: bytes, ttl: float) -> None:
        try:
            self.index.add(probe.namespace, probe.unit, answer_key, trio.current_time() + ttl)
        except (WrongSize, ValueError) as exc:
            self._fault("wrong_size" if isinstance(exc, WrongSize) else "malformed", str(exc))

    async def share(self, feed: "VectorFeed", probe: Probe, answer_key: bytes, ttl: float, max_entries: int) -> None:
        """Publish a stored entry's vector to the fleet (``shared.py`` reads it into every worker's index)."""
        try:
            await feed.publish(SharedVector(probe.namespace, answer_key, probe.vector, ttl), max_entries)
        except StoreFailed as exc:
            self.share_failures += 1
            self._log("share_failed", f"an entry could not be shared, it stays this worker's: {exc}")

    def adopt(self, entry: SharedVector) -> bool:
        """Add an entry another worker (or this one) published; False: already here, or not a vector we take."""
        if self.index.has(entry.namespace, entry.answer_key):
            return False
        try:
            self.index.add(entry.namespace, entry.vector, entry.answer_key, trio.current_time() + entry.ttl)
        except ValueError:   # WrongSize too: a namespace's model changed its size; the entry is not comparable
            return False
        return True

    def _fault(self, reason: str, message: str) -> None:
        self.faults[reason] += 1
        self._log(reason, f"the embeddings call failed ({reason}), the call is a miss: {message}")

    def _log(self, reason: str, message: str) -> None:
        now = trio.current_time()
        if now - self._logged.get(reason, -LOG_EVERY) >= LOG_EVERY:
            self._logged[reason] = now
            log.warning("semantic cache: %s", message)
