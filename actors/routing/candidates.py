"""Which backends may serve a model, before health and strategy have a say.

A backend serves a model when the model is one of its exact ``models``
entries; or, for glob entries, when a discovered id of that backend matches
the glob (with discovery off, the glob matches the requested name itself); or,
when it lists no models at all, when discovery found the id there. Disabled
backends serve nothing; internal ones are hidden from clients.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable, Mapping

from switchyard.config.schema import BackendConfig

Discovered = Mapping[str, frozenset[str]]


def backend_serves(b: BackendConfig, model: str, discovered: Discovered) -> bool:
    if model in b.exact_models:
        return True
    found = discovered.get(b.name, frozenset())
    globs = b.model_globs
    if globs:
        if b.discovery:
            return model in found and any(fnmatchcase(model, g) for g in globs)
        return any(fnmatchcase(model, g) for g in globs)
    return not b.models and model in found


def public_backends(backends: Iterable[BackendConfig]) -> list[BackendConfig]:
    return [b for b in backends if b.enabled and not b.internal]


def serving(backends: Iterable[BackendConfig], model: str, discovered: Discovered) -> list[BackendConfig]:
    return [b for b in public_backends(backends) if backend_serves(b, model, discovered)]


def listed_models(backends: Iterable[BackendConfig], discovered: Discovered) -> dict[str, list[str]]:
    """Model id -> names of the public backends offering it, for /v1/models."""
    out: dict[str, list[str]] = {}
    for b in public_backends(backends):
        ids = set(b.exact_models)
        found = discovered.get(b.name, frozenset())
        if b.model_globs:
            ids |= {m for m in found if any(fnmatchcase(m, g) for g in b.model_globs)}
        elif not b.models:
            ids |= found
        for m in ids:
            out.setdefault(m, []).append(b.name)
    return dict(sorted(out.items()))


def unserved_chain_entries(chains: Mapping[str, tuple[str, ...]], backends: Iterable[BackendConfig],
                           discovered: Discovered) -> list[tuple[str, int, str]]:
    """The fallback chain entries ``(chain, index, model)`` no public backend serves.

    A public backend with discovery on whose list has not arrived (absent or
    empty) could still serve a model its globs match, or any model when it
    lists none: its entries stay undecided rather than reported falsely.
    """
    public = public_backends(backends)
    pending = [b for b in public if b.discovery and not discovered.get(b.name)]
    out = []
    for chain, models in chains.items():
        for i, model in enumerate(models):
            if any(backend_serves(b, model, discovered) for b in public):
                continue
            if any(not b.models or any(fnmatchcase(model, g) for g in b.model_globs) for b in pending):
                continue
            out.append((chain, i, model))
    return out
