"""Which backend the LLM classifier sends prompts to: one rule for ``config validate`` and the router."""

from __future__ import annotations

from collections.abc import Sequence

from switchyard.config.schema import BackendConfig
from switchyard.config.smart_routing import LlmSettings


def classifier_backend(settings: LlmSettings, backends: Sequence[BackendConfig]) -> BackendConfig | None:
    """Where the LLM classifier sends prompts; None: it cannot, and the router classifies by rule.

    A named backend is taken even if ``internal`` (an operator may keep the
    classifier off the public pool) but never if disabled; an omitted one
    means the first backend user traffic can reach, so prompts go nowhere
    users' own requests could not. ``config validate`` and the router both
    call this, so the warning and the behaviour cannot disagree.
    """
    name = (settings.backend or "").strip()
    if name:
        return next((b for b in backends if b.name == name and b.enabled), None)
    return next((b for b in backends if b.enabled and not b.internal), None)
