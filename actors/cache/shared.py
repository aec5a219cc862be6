"""The semantic cache's entries from the rest of the fleet: a feed's vectors read into this worker's index.

With a store that shares them (``CacheStore.vectors``: Redis), every entry
a worker stores is published (``SemanticCache.share``), and this actor
follows the feed from its oldest kept entry on: each vector is added to the
in-process index (bounded by ``semantic.max_entries``, expiring when its
publisher said), so a paraphrase cached through one gateway process is a
hit on another, while a lookup stays in memory. While the semantic cache is
off it reads nothing; a feed that fails is tried again after a pause, its
failure logged at most once a minute.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import trio

from switchyard.actors.cache.store import StoreFailed

if TYPE_CHECKING:
    from switchyard.actors.cache.semantic import SemanticCache
    from switchyard.actors.ports import VectorFeed
    from switchyard.config.response_cache import ResponseCacheConfig

log = logging.getLogger("switchyard.cache")
WAIT = 5.0      # seconds one read waits for a new entry
PAUSE = 1.0     # seconds between two tries of a feed that failed, or two looks at a semantic cache that is off
LOG_EVERY = 60.0


class SharedVectors:
    name = "semantic_vectors"

    def __init__(self, feed: "VectorFeed", semantic: "SemanticCache",
                 settings: Callable[[], "ResponseCacheConfig"]) -> None:
        self.feed = feed
        self.semantic = semantic
        self.settings = settings
        self.position = "0"      # the feed's position read up to (kept across a restart of this actor)
        self.adopted = 0         # entries from the feed added to the index
        self.failures = 0
        self._logged = -LOG_EVERY

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if not self.settings().semantic.enabled:
                await trio.sleep(PAUSE)
                continue
            try:
                self.position, entries = await self.feed.read(self.position, WAIT)
            except StoreFailed as exc:
                self.failures += 1
                if trio.current_time() - self._logged >= LOG_EVERY:
                    self._logged = trio.current_time()
                    log.warning("semantic cache: the shared vectors cannot be read, retrying: %s", exc)
                await trio.sleep(PAUSE)
                continue
            for entry in entries:
                if self.semantic.adopt(entry):
                    self.adopted += 1
