"""``prefix_routing.anthropic_cache_control_injection``: prompt-caching breakpoints the gateway adds.

Anthropic caches a prompt's prefix only up to a block the request marks
with ``cache_control``, and Bedrock's Converse only up to a ``cachePoint``
block; a client that marks none pays the full input rate on every call.
With this key on, calls to the chosen backends and models get the marks the
wires place (``protocol/wires/cache_breakpoints.py``; docs/cache.md).

Two shapes: ``true``/``false`` (every ``anthropic`` and ``bedrock`` backend,
every model), or a mapping ``{enabled, backends, models}`` whose lists narrow
it (empty: all; ``enabled`` defaults to true once the mapping is written).
Read per call from the call's snapshot, so a reload applies to the next call.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field, load_section
from switchyard.config.rules import Problems, Reader, child

KEY = "anthropic_cache_control_injection"


@frozen
class CacheControlInjection:
    enabled: bool = field(False, rules.boolean)
    backends: tuple[str, ...] = field((), rules.string_list(rules.string()))   # empty: every anthropic/bedrock one
    models: tuple[str, ...] = field((), rules.string_list(rules.string()))     # empty: every model

    def applies(self, backend: str, models: Iterable[str]) -> bool:
        """Whether a call to ``backend`` for a model known by any of ``models`` (its public name, its wire id)
        gets breakpoints."""
        if not self.enabled or (self.backends and backend not in self.backends):
            return False
        return not self.models or any(m in self.models for m in models)

    def names(self, models: Iterable[str]) -> bool:
        """Whether ``models`` lists one of the models by name (the operator vouches that it caches)."""
        return any(m in self.models for m in models)


def read(r: Reader) -> CacheControlInjection:
    """The key from the ``prefix_routing`` section's reader: a boolean or a mapping."""
    raw = r.raw.get(KEY)
    if raw is None or isinstance(raw, bool):
        return CacheControlInjection(enabled=r.get(KEY, rules.boolean, False))
    if not isinstance(raw, dict):
        r.problems.error(child(r.path, KEY), f"must be a boolean or a mapping, got {rules.type_name(raw)}")
    nested = r.section(KEY)
    if not isinstance(raw, dict):
        return CacheControlInjection()
    return load_section(CacheControlInjection, nested, enabled=nested.get("enabled", rules.boolean, True))


def check(injection: CacheControlInjection, backends: Sequence[Any], problems: Problems,
          carries: Callable[[Any], bool]) -> None:
    """Each named backend exists and is one whose wire carries breakpoints (``carries``: its kind's API is
    Anthropic's Messages or Bedrock's Converse; config/kinds imports the schema, so the loader passes it)."""
    by_name = {b.name: b for b in backends}
    for i, name in enumerate(injection.backends):
        path = f"prefix_routing.{KEY}.backends[{i}]"
        backend = by_name.get(name)
        if backend is None:
            problems.error(path, f"no backend is named {name!r}")
        elif not carries(backend):
            problems.error(path, f"backend {name!r} is of type {backend.type.value}: breakpoints go only to "
                                 f"anthropic (cache_control) and bedrock (cachePoint) backends")
