"""Guardrail checks that need the backends: a moderation guardrail's model, which the gateway routes to.

A model that no enabled public backend able to answer ``/v1/moderations``
lists (by name, glob or alias) is a warning, as a fallback chain's unknown
model is: discovery may still find it, and until one serves it every check
of the guardrail fails, which its ``on_failure`` settles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from switchyard.config.endpoints import Endpoint
from switchyard.config.guardrails import Guardrail
from switchyard.config.kinds import kind_of
from switchyard.config.rules import Problems, child
from switchyard.config.schema import BackendConfig


def check(guardrails: Sequence[Guardrail], backends: Sequence[BackendConfig], aliases: Mapping[str, str],
          problems: Problems) -> None:
    """Warn about each moderation model no backend that answers moderations lists. ``aliases``: exact
    alias -> the model it dispatches to (``load_access.dispatch_aliases``)."""
    able = [b for b in backends if b.enabled and not b.internal and Endpoint.MODERATIONS in kind_of(b).endpoints]
    for i, g in enumerate(guardrails):
        if g.moderation is None:
            continue
        model = g.moderation.model
        if any(_lists(b, model) or model in aliases and _lists(b, aliases[model]) for b in able):
            continue
        later = " (discovery may still find it)" if any(b.discovery for b in able) else ""
        problems.warn(child(child(child("guardrails", i), "moderation"), "model"),
                      f"no enabled backend that answers moderations lists {model!r}{later}; until one serves it, "
                      f"every check of guardrail {g.name!r} fails and its on_failure decides")


def _lists(b: BackendConfig, model: str) -> bool:
    return model in b.exact_models or any(fnmatchcase(model, glob) for glob in b.model_globs)
