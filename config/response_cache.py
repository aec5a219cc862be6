"""The response cache's settings (``response_cache``): which answers are kept, where, for how long.

``enabled`` turns it on; ``models`` (globs on the model that runs) and
``keys`` (API key ids) narrow it to what the operator opts in. ``store``
is ``memory`` (per worker, LRU under ``max_entries`` and ``max_bytes``) or
``redis`` (``state.redis_url``, shared by every worker and instance). The
store and the memory bounds are read once, at start (a reload that changes
them waits for a restart); the rest applies to calls that arrive after a
reload. The rules of what is cached live in ``actors/cache/``.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field
from switchyard.config.rules import Reader, child

if TYPE_CHECKING:
    from switchyard.config.limits import State


class CacheStoreKind(enum.Enum):
    MEMORY = "memory"
    REDIS = "redis"


@frozen
class ResponseCacheConfig:
    enabled: bool = field(False, rules.boolean)
    store: CacheStoreKind = field(CacheStoreKind.MEMORY, rules.one_of({s.value: s for s in CacheStoreKind}),
                                  restart=True)
    # how long an answer is served after it was stored
    ttl: float = field(300.0, rules.duration(minimum=0.001, maximum=30 * 86_400))
    # memory: entries and bytes this worker keeps; past either the least recently used go first
    max_entries: int = field(10_000, rules.integer(1, 10_000_000), restart=True)
    max_bytes: int = field(64 * 1024 * 1024, rules.size(1024, 64 * 1024**3), restart=True)
    # an answer larger than this (its stored form) is not stored, in either store
    max_entry_bytes: int = field(1024 * 1024, rules.size(256, 512 * 1024**2))
    # globs on the model that runs (fnmatch); the default caches every model
    models: tuple[str, ...] = field(("*",), rules.string_list(rules.string()))
    # API key ids whose calls are cached; absent: every key's, and calls without a key
    keys: tuple[str, ...] | None = field(None, rules.string_list(rules.string()))
    # a call that sends a temperature above 0 asks for a sampled answer: not cached unless true
    cache_temperature_above_zero: bool = field(False, rules.boolean)
    # one key's answer may answer another key's identical call
    shared_across_keys: bool = field(False, rules.boolean)
    # redis: the bound on one lookup or store; past it the call goes on uncached
    timeout: float = field(0.25, rules.duration(minimum=0.001, maximum=10))


def check(cache: ResponseCacheConfig, state: "State", r: Reader) -> None:
    """``store: redis`` needs ``state.redis_url`` (the one Redis the gateway speaks to)."""
    if cache.store is CacheStoreKind.REDIS and state.redis_url is None:
        r.problems.error(child(r.path, "store"), "redis needs state.redis_url (the Redis the fleet shares); "
                                                 "set it, or use store: memory")
