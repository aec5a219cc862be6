"""Request parameter policy (``request_params``) and presets (``request_presets``): the shapes.

Only seven canonical sampling parameters exist here. Each has one type and one
range, shared by the loader (what an operator may write) and the request-time
code (what a client value must look like before the policy clamps it), so the
two cannot disagree.
"""

from __future__ import annotations

import math
from typing import Mapping

import attrs
from attrs import frozen

Number = float | int


@frozen
class ParamSpec:
    """One canonical parameter: ``integer`` fields refuse fractions; the range is inclusive."""

    name: str
    integer: bool
    minimum: Number
    maximum: Number

    def kind(self) -> str:
        return "an integer" if self.integer else "a number"


MAX_TOKENS_CEILING = 2**31 - 1

# Canonical order: the order of header tokens and of every loop over parameters.
SPECS: Mapping[str, ParamSpec] = {s.name: s for s in (
    ParamSpec("temperature", False, 0.0, 2.0),
    ParamSpec("top_p", False, 0.0, 1.0),
    ParamSpec("max_tokens", True, 1, MAX_TOKENS_CEILING),
    ParamSpec("presence_penalty", False, -2.0, 2.0),
    ParamSpec("frequency_penalty", False, -2.0, 2.0),
    ParamSpec("top_k", True, -1, 1_000_000),   # -1 and 0 mean "off" on engines that take it
    ParamSpec("min_p", False, 0.0, 1.0),
)}
PARAMS: tuple[str, ...] = tuple(SPECS)

# The wire spellings of one canonical parameter, in the order they are looked
# at. ``max_completion_tokens`` is the newer spelling of ``max_tokens``.
SPELLINGS: Mapping[str, tuple[str, ...]] = {
    name: ((name, "max_completion_tokens") if name == "max_tokens" else (name,)) for name in PARAMS
}


@frozen
class Bound:
    """An inclusive range; either side may be open. At least one side is set by the loader."""

    min: Number | None = None
    max: Number | None = None

    def clamp(self, value: Number, integer: bool) -> Number:
        """``value`` moved into the range. On integer fields a fractional bound rounds
        inward (min up, max down) so the result is always an integer in range."""
        lo, hi = self.min, self.max
        if integer:
            lo = None if lo is None else math.ceil(lo)
            hi = None if hi is None else math.floor(hi)
        if lo is not None and value < lo:
            return lo
        if hi is not None and value > hi:
            return hi
        return value


@frozen
class ParamScope:
    """The three modes for one scope: the global one, or one model's."""

    defaults: Mapping[str, Number] = attrs.field(factory=dict)
    overrides: Mapping[str, Number] = attrs.field(factory=dict)
    limits: Mapping[str, Bound] = attrs.field(factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.defaults or self.overrides or self.limits)

    def under(self, base: ParamScope) -> ParamScope:
        """This scope laid over ``base``, parameter by parameter within each mode.

        A limit entry replaces the base entry of that parameter whole: a model's
        ``max_tokens: {max: 2048}`` has no ``min`` even when the base has one, so
        what an entry says is all of its bound.
        """
        if self.empty:
            return base
        return ParamScope(defaults={**base.defaults, **self.defaults},
                          overrides={**base.overrides, **self.overrides},
                          limits={**base.limits, **self.limits})


@frozen
class ParamPolicy:
    """``request_params``: a global scope and exact-id model scopes. ``ParamPolicy()`` does nothing."""

    base: ParamScope = ParamScope()
    models: Mapping[str, ParamScope] = attrs.field(factory=dict)

    @property
    def empty(self) -> bool:
        return self.base.empty and all(s.empty for s in self.models.values())

    def scope_for(self, model: str) -> ParamScope:
        """The effective scope for a model id after alias resolution; exact match only."""
        scope = self.models.get(model)
        return self.base if scope is None else scope.under(self.base)


@frozen
class Preset:
    """One ``request_presets`` entry: a model used when the request names none, and sampling
    values used where the request leaves a canonical field out (or null)."""

    slug: str
    model: str | None = None
    params: Mapping[str, Number] = attrs.field(factory=dict)
