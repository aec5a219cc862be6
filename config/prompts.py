"""Global prompts (``global_prompts``): the shapes."""

from __future__ import annotations

from attrs import frozen


@frozen
class GlobalPrompts:
    pass
