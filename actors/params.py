"""Request-time application of ``request_presets`` and ``request_params``.

Pure functions over the decoded JSON body: no I/O, no clock. The order is
fixed so every request is rewritten the same way:

    apply_preset   the client's ``preset`` fills what the request left out
    apply_policy   defaults fill, overrides replace, limits clamp
    check_carriable  every backend the call may reach must carry what the policy wrote

The client's own values win over a preset, and a preset wins over the
policy's defaults only because it runs first; overrides and limits still
apply to whatever the preset wrote. Nothing is dropped on the way: a field
the policy manages that a backend cannot take refuses the request.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Literal, Mapping

from attrs import frozen

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.actors.routing.tally import Tally
from switchyard.config.kinds import kind_of
from switchyard.config.params import PARAMS, SPECS, SPELLINGS, Number, ParamPolicy, Preset
from switchyard.config.schema import BackendConfig

HEADER = b"x-continuum-request-params"

_ALL = frozenset(PARAMS)

Outcome = Literal["applied", "rejected"]
OUTCOMES: tuple[Outcome, ...] = ("applied", "rejected")


class ParamOutcomes(Tally[Outcome]):
    """Chat calls whose request_params policy changed a field (applied) or that it refused because a reachable
    backend cannot carry one (rejected), counted at admission: request_params_total."""


def carried_by(backend: BackendConfig) -> frozenset[str]:
    """The canonical parameters ``backend`` takes: its kind's ``carries``, under its own settings (an
    anthropic backend takes the sampling fields only while its ``anthropic_version`` accepts them)."""
    return kind_of(backend).carried(backend)


@frozen
class Applied:
    """What ``apply_policy`` did. ``tokens`` name actions and parameters only, never values."""

    payload: dict[str, Any]
    tokens: tuple[str, ...] = ()
    managed: frozenset[str] = frozenset()

    @property
    def changed(self) -> bool:
        return bool(self.tokens)


def _type(value: Any) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def check_value(field: str, name: str, value: Any, *, in_range: bool) -> Number:
    """The client's ``value`` for ``field`` (a spelling of canonical ``name``) as a number,
    or a 400 naming the field. Integer fields follow JSON: ``100.0`` is the integer 100."""
    spec = SPECS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidRequest(f"'{field}' must be {spec.kind()}, got {_type(value)}",
                             param=field, code="invalid_type")
    if not math.isfinite(value):
        raise InvalidRequest(f"'{field}' must be a finite number", param=field, code="invalid_value")
    if spec.integer and isinstance(value, float) and not value.is_integer():
        raise InvalidRequest(f"'{field}' must be an integer, got {value!r}", param=field, code="invalid_type")
    if in_range and not spec.minimum <= value <= spec.maximum:
        raise InvalidRequest(f"'{field}' must be between {spec.minimum} and {spec.maximum}, got {value!r}",
                             param=field, code="invalid_value")
    return value


def _set_spellings(payload: Mapping[str, Any], name: str) -> list[str]:
    """The spellings of ``name`` the request gives a non-null value."""
    return [s for s in SPELLINGS[name] if payload.get(s) is not None]


def _target(payload: Mapping[str, Any], name: str) -> str:
    """Where a value for an unset ``name`` is written: the spelling the client used, even
    as null (``max_completion_tokens``), else the canonical name. Never a second spelling."""
    for s in SPELLINGS[name][1:]:
        if s in payload:
            return s
    return name


def _same(old: Any, new: Number) -> bool:
    """Equal as JSON numbers; ``true`` is not ``1``."""
    return not isinstance(old, bool) and isinstance(old, (int, float)) and old == new


# --- presets ------------------------------------------------------------------------

def apply_preset(payload: dict[str, Any], presets: Mapping[str, Preset]) -> dict[str, Any]:
    """The request with its ``preset`` resolved and removed; unchanged when it names none.

    The client's own values of the fields the preset works around are checked
    first, so a wrong ``max_tokens`` is the client's ordinary 400 and never hidden
    behind a preset value.
    """
    if "preset" not in payload:
        return payload
    slug = payload["preset"]
    out = {k: v for k, v in payload.items() if k != "preset"}
    if slug is None:
        return out
    if not isinstance(slug, str):
        raise InvalidRequest(f"'preset' must be a string naming a preset, got {_type(slug)}",
                             param="preset", code="invalid_type")
    preset = presets.get(slug)
    if preset is None:
        raise InvalidRequest(f"Preset {slug[:64]!r} is not configured", param="preset", code="preset_not_found")
    checked = set(SPELLINGS["max_tokens"])
    for name in preset.params:
        checked.update(SPELLINGS[name])
    for name in PARAMS:
        for field in SPELLINGS[name]:
            if field in checked and out.get(field) is not None:
                check_value(field, name, out[field], in_range=True)
    for name, value in preset.params.items():
        if not _set_spellings(out, name):
            out[_target(out, name)] = value
    if preset.model is not None and not _has_model(out):
        out["model"] = preset.model
    return out


def _has_model(payload: Mapping[str, Any]) -> bool:
    """The request names a model: a non-empty ``model``, or a non-empty ``models`` list (whose
    first entry is the model when ``model`` is absent). A wrong type counts as named, so the
    request's own validation reports it."""
    model = payload.get("model")
    if model is not None and model != "":
        return True
    models = payload.get("models")
    return models is not None and models != []


# --- the policy -----------------------------------------------------------------------

def apply_policy(payload: dict[str, Any], policy: ParamPolicy, model: str) -> Applied:
    """``payload`` rewritten by the scope of ``model`` (the id after alias resolution).

    Each step sees what the one before left: a default that a limit then clamps
    gives both ``default:`` and ``limit:`` tokens. A token is given only when its
    step changed the field and the field ends unlike the client sent it, so
    applying twice changes and reports nothing the second time.
    """
    scope = policy.scope_for(model)
    if scope.empty:
        return Applied(payload)
    out = dict(payload)
    tokens: list[str] = []
    managed: set[str] = set()

    def wrote(action: str, name: str) -> None:
        tokens.append(f"{action}:{name}")
        managed.add(name)

    for name in PARAMS:
        if name in scope.defaults and not _set_spellings(out, name):
            out[_target(out, name)] = scope.defaults[name]
            wrote("default", name)
    for name in PARAMS:
        if name not in scope.overrides:
            continue
        value = scope.overrides[name]
        fields = _set_spellings(out, name) or [_target(out, name)]
        changed = [f for f in fields if not _same(out.get(f), value)]
        for field in changed:
            out[field] = value
        if changed:
            wrote("override", name)
    for name in PARAMS:
        bound = scope.limits.get(name)
        if bound is None:
            continue
        clamped = False
        for field in _set_spellings(out, name):
            value = check_value(field, name, out[field], in_range=False)
            new = bound.clamp(value, SPECS[name].integer)
            if new != value:
                out[field] = new
                clamped = True
        if clamped:
            wrote("limit", name)
    for name in list(managed):
        if all(_same_field(payload, out, field) for field in SPELLINGS[name]):
            # Net no change (an override outside its own limit, clamped back to the
            # client's value): keep the client's value as sent, and report nothing.
            managed.discard(name)
            for field in SPELLINGS[name]:
                if field in payload:
                    out[field] = payload[field]
    tokens = [t for t in tokens if t.partition(":")[2] in managed]
    if not tokens:
        return Applied(payload)
    return Applied(out, tuple(tokens), frozenset(managed))


def _same_field(before: Mapping[str, Any], after: Mapping[str, Any], field: str) -> bool:
    if (field in before) != (field in after):
        return False
    if field not in before or before[field] is after[field]:
        return True
    old, new = before[field], after[field]
    return old is not None and new is not None and _same(old, new) and _same(new, old)


def limited_only(tokens: Iterable[str]) -> frozenset[str]:
    """Fields the policy only limited: the client's own value, clamped (no default, no override)."""
    tokens = tuple(tokens)
    written = {t.split(":", 1)[1] for t in tokens if t.startswith(("default:", "override:"))}
    return frozenset(t.split(":", 1)[1] for t in tokens if t.startswith("limit:")) - written


def carried_everywhere(backends: Iterable[BackendConfig]) -> frozenset[str]:
    """What every one of ``backends`` carries (all parameters when there are none). A policy that
    writes only these fields needs no ``check_carriable`` over the backends a call may reach: those
    are among them, and a hop carries at least what ``carried_by`` says."""
    out = _ALL
    for backend in backends:
        out = out & carried_by(backend)
    return out


def check_carriable(managed: frozenset[str], backends: Iterable[BackendConfig],
                    limited: frozenset[str] = frozenset()) -> None:
    """Refuse, before any upstream I/O, a call whose policy-written field some backend it
    may reach (first choice or fallback) would not carry. Client fields the policy left
    alone are not checked: they pass through as they always did."""
    if not managed:
        return
    fields = [name for name in PARAMS if name in managed] + sorted(managed - _ALL)
    for backend in backends:
        kind = kind_of(backend)
        # A field the kind carries but this backend's setting refuses (an anthropic hop's sampling fields from
        # 2026-10-21) is left out of the hop, so a limit on one changes nothing there: the field counts as
        # absent (the spec's rule); only a value the policy wrote must arrive.
        carried = kind.carried(backend) | (limited & kind.carries)
        for field in fields:
            if field not in carried:
                raise UnsupportedRequestParameter(
                    f"The request parameter policy changed '{field}', but backend '{backend.name}' "
                    f"(type {backend.type.value}) does not accept that parameter; the request is "
                    f"refused rather than sent without it",
                    param=field, details={"backend": backend.name, "backend_type": backend.type.value})


def header_value(tokens: Iterable[str]) -> bytes | None:
    """The ``x-continuum-request-params`` value: the tokens joined by ``","``; None for none."""
    tokens = tuple(tokens)
    return ",".join(tokens).encode("ascii") if tokens else None
