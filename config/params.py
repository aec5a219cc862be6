"""Request parameter policy (``request_params``) and presets (``request_presets``): the shapes."""

from __future__ import annotations

from typing import Mapping

import attrs
from attrs import frozen


@frozen
class ParamPolicy:
    pass


@frozen
class Preset:
    slug: str
    model: str | None = None
    params: Mapping[str, float | int] = attrs.field(factory=dict)
