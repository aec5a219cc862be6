"""Alias dispatch: when a requested alias is routed as the canonical id its backend serves.

Backend selection matches a requested name literally. A metadata alias that
no backend serves under that name is rewritten to its canonical id before the
first selection, but only when all four conditions hold:

1. **Exact alias.** The requested name, or the name with a ``models/`` prefix
   removed, is an exact alias of another canonical id, declared in an enabled
   backend's ``model_configs[].aliases`` or in the metadata files' aliases
   (``Snapshot.models``). The fuzzy stages of ``config.names`` (dates,
   peeled suffixes, vendor prefixes, ``*`` aliases) never dispatch.
2. **Discovery finished.** Every enabled backend whose ``models`` names the
   requested name exactly, or by a glob matching it, has at least one
   discovered id. A backend absent from the discovery view (first discovery
   not done) or with an empty list holds the name: its absence is no
   evidence. Match-everything globs (``*``, ``models/*``) hold nothing.
   Backends with discovery off count as finished.
3. **Not served literally.** No public backend serves the requested name in
   the live catalogue (``candidates.backend_serves``: discovered ids, or the
   configured names of a backend with discovery off). A discovery-off
   backend's match-everything glob does not count: it would keep every name.
4. **Canonical servable.** At least one public (user-routable) backend
   serves the canonical id.

Pure: no clock, no I/O, no trio.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable, Iterator

from switchyard.actors.routing.candidates import Discovered, backend_serves, public_backends
from switchyard.config.schema import BackendConfig, Snapshot

MODELS_PREFIX = "models/"
MATCH_EVERYTHING = frozenset({"*", "models/*"})


def dispatch_target(requested: str, snapshot: Snapshot, discovered: Discovered) -> str | None:
    """The canonical id to route ``requested`` as, or None to route it as it is."""
    canonical = alias_owner(requested, snapshot)
    if canonical is None:
        return None
    if not discovery_finished(requested, snapshot.backends, discovered):
        return None
    public = public_backends(snapshot.backends)
    if any(serves_literally(b, requested, discovered) for b in public):
        return None
    if not any(backend_serves(b, canonical, discovered) for b in public):
        return None
    return canonical


def alias_owner(requested: str, snapshot: Snapshot) -> str | None:
    """Condition 1: the canonical id ``requested`` is an exact alias of (backend layers first)."""
    for name in _forms(requested):
        if "*" in name:
            continue   # a name holding '*' only ever matches wildcard aliases, which never dispatch
        for b in snapshot.backends:
            if not b.enabled:
                continue
            for model, aliases in b.model_aliases.items():
                if name in aliases and model != name:
                    return model
        owner = snapshot.models.aliases.get(name)
        if owner is not None and owner != name:
            return owner
    return None


def discovery_finished(requested: str, backends: Iterable[BackendConfig], discovered: Discovered) -> bool:
    """Condition 2: no enabled backend that names ``requested`` is still discovering."""
    for b in backends:
        if not b.enabled or not b.discovery:
            continue
        if _names(b, requested) and not discovered.get(b.name):
            return False
    return True


def serves_literally(b: BackendConfig, name: str, discovered: Discovered) -> bool:
    """Condition 3 for one backend: ``name`` is in its live catalogue as itself."""
    if not b.discovery and b.model_globs and name not in b.exact_models:
        # A static list publishes no globs; a narrow one still keeps the names it matches.
        return any(g not in MATCH_EVERYTHING and fnmatchcase(name, g) for g in b.model_globs)
    return backend_serves(b, name, discovered)


def _forms(requested: str) -> Iterator[str]:
    yield requested
    if requested.startswith(MODELS_PREFIX) and len(requested) > len(MODELS_PREFIX):
        yield requested[len(MODELS_PREFIX):]


def _names(b: BackendConfig, name: str) -> bool:
    """``b.models`` names ``name`` exactly or by a glob other than a match-everything one."""
    if name in b.exact_models:
        return True
    return any(g not in MATCH_EVERYTHING and fnmatchcase(name, g) for g in b.model_globs)
