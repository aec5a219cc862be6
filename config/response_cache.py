"""The response cache's settings (``response_cache``): which answers are kept, where, for how long.

``enabled`` turns it on; ``models`` (globs on the model that runs) and
``keys`` (API key ids) narrow it to what the operator opts in. ``store``
is ``memory`` (per worker, LRU under ``max_entries`` and ``max_bytes``) or
``redis`` (``state.redis_url``, shared by every worker and instance). The
store and the memory bounds are read once, at start (a reload that changes
them waits for a restart); the rest applies to calls that arrive after a
reload. The rules of what is cached live in ``actors/cache/``.

``semantic`` answers a call from an earlier one whose prompt is close
enough (cosine similarity of embeddings from ``embedding_model``, a model
this config serves); ``destinations`` declares replicas one cache target
(same models, same request shaping: checked here, at load).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field, section
from switchyard.config.rules import Reader, child

if TYPE_CHECKING:
    from switchyard.config.limits import State
    from switchyard.config.prompts import GlobalPrompts


class CacheStoreKind(enum.Enum):
    MEMORY = "memory"
    REDIS = "redis"


class SemanticScope(enum.Enum):
    LAST_USER_TURN = "last_user_turn"   # the last user message is embedded; the rest must match exactly
    CONVERSATION = "conversation"       # every user and assistant message is embedded


@frozen
class SemanticCache:
    enabled: bool = field(False, rules.boolean)
    # the embeddings model (one this config serves), called through the gateway's own routing
    embedding_model: str | None = field(None, rules.string())
    # cosine similarity at or above which an earlier answer answers the call
    threshold: float = field(0.95, rules.number(0.0, 1.0))
    scope: SemanticScope = field(SemanticScope.LAST_USER_TURN,
                                 rules.one_of({s.value: s for s in SemanticScope}))
    include_system: bool = field(False, rules.boolean)     # system messages embedded rather than matched exactly
    ttl: float = field(300.0, rules.duration(minimum=0.001, maximum=30 * 86_400))
    max_entries: int = field(2_000, rules.integer(1, 100_000))   # vectors this worker's index keeps
    # a call that sends temperature above 0 is semantically cached only when true
    allow_nonzero_temperature: bool = field(False, rules.boolean)
    # the bound on the embeddings call; past it (or the call's own budget) the call is a miss
    timeout: float = field(1.0, rules.duration(minimum=0.001, maximum=60))
    # sent as the embeddings request's `dimensions` and checked on the answer; None: the first answer's size
    dimensions: int | None = field(None, rules.integer(1, 65_536))
    max_text_chars: int = field(8_000, rules.integer(16, 1_000_000))   # longer embedded text: not cached


@frozen
class Destination:
    name: str
    backends: tuple[str, ...]


def _destination(value: object) -> Destination:
    if not isinstance(value, dict) or set(value) != {"name", "backends"}:
        raise rules.Invalid("must be a mapping with exactly the keys name and backends")
    name = rules.string(r"[A-Za-z0-9_.:-]{1,128}", "a name of letters, digits, _ . : -")(value["name"])
    backends = rules.string_list(rules.string())(value["backends"])
    if len(backends) < 2 or len(set(backends)) != len(backends):
        raise rules.Invalid(f"destination {name!r}: backends must name two or more distinct backends")
    return Destination(name, backends)


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
    # backends the operator declares one cache target (replicas): a call that may go to any of them is cached
    destinations: tuple[Destination, ...] = field((), rules.list_of(_destination, "destinations"))
    semantic: SemanticCache = section(SemanticCache)

    def destination_of(self, backend: str) -> Destination | None:
        for d in self.destinations:
            if backend in d.backends:
                return d
        return None


def check(cache: ResponseCacheConfig, state: "State", r: Reader) -> None:
    """``store: redis`` needs ``state.redis_url`` (the one Redis the gateway speaks to)."""
    if cache.store is CacheStoreKind.REDIS and state.redis_url is None:
        r.problems.error(child(r.path, "store"), "redis needs state.redis_url (the Redis the fleet shares); "
                                                 "set it, or use store: memory")
    sem = cache.semantic
    if sem.enabled and not sem.embedding_model:
        r.problems.error(child(child(r.path, "semantic"), "embedding_model"),
                         "required when semantic.enabled is true (an embeddings model this config serves)")


# What must be equal for two backends to be one cache destination: what the model is and how a request is shaped.
SHAPING = ("type", "models", "upstream_ids", "request_extensions", "anthropic_version", "anthropic_betas")


def check_targets(cache: ResponseCacheConfig, backends: "tuple[Any, ...]", prompts: "GlobalPrompts",
                  problems: rules.Problems, path: str = "response_cache") -> None:
    """Every destination names existing backends, in one destination at most, shaping requests alike
    (SHAPING and ``global_prompts.backends``); the semantic cache's model is one some backend lists."""
    by_name = {b.name: b for b in backends}
    seen: dict[str, str] = {}
    for i, d in enumerate(cache.destinations):
        where = f"{path}.destinations[{i}].backends"
        missing = [n for n in d.backends if n not in by_name]
        if missing:
            problems.error(where, f"names no backend: {', '.join(missing)}")
            continue
        for n in d.backends:
            if n in seen:
                problems.error(where, f"backend {n!r} is already in destination {seen[n]!r}")
            seen[n] = d.name
        first = by_name[d.backends[0]]
        for n in d.backends[1:]:
            other = by_name[n]
            differ = [f for f in SHAPING if _shaping(first, f) != _shaping(other, f)]
            if prompts.backends.get(first.name) != prompts.backends.get(n):
                differ.append("global_prompts.backends")
            if differ:
                problems.error(where, f"{first.name!r} and {n!r} differ in {', '.join(differ)}: "
                                      "one cache destination needs the same models and request shaping")
    sem = cache.semantic
    if sem.enabled and sem.embedding_model and not any(sem.embedding_model in b.models for b in backends):
        problems.warn(f"{path}.semantic.embedding_model",
                      f"{sem.embedding_model!r} is listed by no backend (discovery may still find it); "
                      "until one serves it every call is a semantic miss")


def _shaping(backend: Any, name: str) -> object:   # a BackendConfig (schema imports this module)
    value = getattr(backend, name)
    return tuple(sorted(value)) if name == "models" else value
