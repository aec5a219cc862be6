"""The backend kinds: one module each, registered once here and looked up by type.

A kind (``base.Kind``) says everything that differs between backend types:
its url rules and default, its own ``backends[]`` keys and their checks, its
auth, health path, model list, the wire API it speaks and the endpoints, the
request parameters it carries, how its streams report usage. Nothing else
switches on ``BackendType``: it asks ``kind_of(backend)``. Adding a kind is a
module here, a line in ``KINDS``, and whatever ``tests/unit/test_kinds.py``
then finds missing (docs/architecture.md: "Adding a backend kind").
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Iterable, Mapping

from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds import (
    anthropic,
    azure,
    bedrock,
    gemini,
    generic,
    ollama,
    openai,
    sglang,
    simulated,
    vllm,
)
from switchyard.config.kinds.base import Key, Kind
from switchyard.config.schema import BackendConfig, BackendType, HealthChecks

KINDS: Mapping[BackendType, Kind] = MappingProxyType({k.type: k for k in (
    openai.KIND, vllm.KIND, sglang.KIND, ollama.KIND, generic.KIND, simulated.KIND, azure.KIND, anthropic.KIND,
    gemini.KIND, bedrock.KIND)})


def kind_of(backend: BackendConfig) -> Kind:
    return KINDS[backend.type]


def types_where(test: Callable[[Kind], bool]) -> frozenset[BackendType]:
    """The types whose kind passes ``test``."""
    return frozenset(t for t, kind in KINDS.items() if test(kind))


def listed(types: Iterable[BackendType]) -> str:
    """``types`` for a message: their values, comma-separated, in the order ``BackendType`` declares them."""
    chosen = frozenset(types)
    return ", ".join(t.value for t in BackendType if t in chosen)


def speaking(endpoint: Endpoint) -> frozenset[BackendType]:
    """The types whose kind speaks ``endpoint``."""
    return types_where(lambda kind: endpoint in kind.endpoints)


def health_path(checks: HealthChecks, backend: BackendConfig) -> str:
    """What a health check of ``backend`` asks: ``health_checks.path``, else its kind's own."""
    return checks.path or kind_of(backend).health_path


# Every key some kind owns, once each, in the order the kinds list them.
KEYS: tuple[Key, ...] = tuple({key.name: key for kind in KINDS.values() for key in kind.keys}.values())


def foreign_key(key: Key, kind: Kind) -> str:
    """The error for ``key`` written on a backend of ``kind``, which does not own it."""
    owners = listed(types_where(lambda k: k.owns(key.name)))
    return f"only applies to {key.who.format(owners=owners)}, not {kind.type.value}{key.why}"
