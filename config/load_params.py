"""Validation of ``request_params`` and ``request_presets``.

Both sections are operator-enforced request rewriting, so a misspelt mode or
parameter must never load as "no policy": every unknown name is an error that
names its path and, when one is close, the name that was probably meant.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Any, Iterable, Mapping, Sequence

from switchyard.config import rules
from switchyard.config.kinds import kind_of
from switchyard.config.params import PARAMS, SPECS, Bound, Number, ParamPolicy, ParamScope, Preset
from switchyard.config.rules import Invalid, Problems, Reader, child
from switchyard.config.schema import BackendConfig

MODES = ("defaults", "overrides", "limits")
MAX_MODEL_SCOPES = 64
MAX_PRESETS = 256
MAX_MODEL_BYTES = 256
_SLUG = re.compile(r"[A-Za-z0-9._-]{1,64}")


def param_rule(name: str) -> rules.Rule[Number]:
    """The type and range of one canonical parameter, for values and bounds alike."""
    spec = SPECS[name]
    if spec.integer:
        return rules.integer(int(spec.minimum), int(spec.maximum))
    return rules.number(spec.minimum, spec.maximum)


def model_id(value: Any) -> str:
    """An exact model id: trimmed, non-empty, at most 256 UTF-8 bytes, no control characters."""
    if not isinstance(value, str):
        raise Invalid(f"must be a string model id, got {rules.type_name(value)} (quote it)")
    text = value.strip()
    if not text:
        raise Invalid("must not be empty or only spaces")
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        raise Invalid("must not contain control characters")
    size = len(text.encode("utf-8"))
    if size > MAX_MODEL_BYTES:
        raise Invalid(f"must be at most {MAX_MODEL_BYTES} bytes in UTF-8, got {size}")
    return text


def _key_path(path: str, key: Any) -> str:
    """The path of a mapping key, with control characters escaped so the message stays one line."""
    text = "".join(f"\\x{ord(ch):02x}" if unicodedata.category(ch) == "Cc" else ch for ch in str(key))
    return child(path, text)


def _refuse_unknown(r: Reader, known: Iterable[str], what: str) -> None:
    """Report every key of ``r`` that is not in ``known`` as an unknown ``what``."""
    known = tuple(known)
    for key in r.raw:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        expected = ", ".join(known[:-1]) + f" or {known[-1]}" if len(known) > 1 else known[0]
        r.problems.error(_key_path(r.path, key), f"unknown {what}{hint}; expected {expected}")


# --- request_params --------------------------------------------------------------

def request_params(r: Reader) -> ParamPolicy:
    _refuse_unknown(r, MODES + ("models",), "mode")
    base = _scope(r)
    models = _model_scopes(r.section("models"))
    r.finish()
    return ParamPolicy(base=base, models=models)


def _scope(r: Reader) -> ParamScope:
    """The three modes of ``r`` (the top level or one model's entry)."""
    return ParamScope(defaults=param_values(r.section("defaults")),
                      overrides=param_values(r.section("overrides")),
                      limits=_limits(r.section("limits")))


def param_values(r: Reader) -> dict[str, Number]:
    """A mapping of canonical parameter -> value; null values are left out (absent)."""
    _refuse_unknown(r, PARAMS, "parameter")
    out: dict[str, Number] = {}
    for name in PARAMS:
        value = r.get(name, param_rule(name), None)
        if value is not None:
            out[name] = value
    r.finish()
    return out


def _limits(r: Reader) -> dict[str, Bound]:
    _refuse_unknown(r, PARAMS, "parameter")
    out: dict[str, Bound] = {}
    for name in PARAMS:
        present = r.has(name)
        entry = r.section(name)   # read even when null, so a null entry is no unknown key
        if present:
            bound = _bound(entry, name)
            if bound is not None:
                out[name] = bound
    r.finish()
    return out


def _bound(r: Reader, name: str) -> Bound | None:
    _refuse_unknown(r, ("min", "max"), "limit key")
    lo = r.get("min", param_rule(name), None)
    hi = r.get("max", param_rule(name), None)
    r.finish()
    if {child(r.path, "min"), child(r.path, "max")} & r.problems.failed_paths:
        return None   # a bad side was reported; "must set min or max" would be noise
    if lo is None and hi is None:
        r.problems.error(r.path, "must set min, max or both (leave the parameter out for no limit)")
        return None
    if lo is not None and hi is not None and lo > hi:
        r.problems.error(r.path, f"min {lo} is greater than max {hi}")
        return None
    return Bound(min=lo, max=hi)


def _model_scopes(r: Reader) -> dict[str, ParamScope]:
    """``request_params.models``: exact model ids -> their scope. A null scope is absent."""
    entries = [(key, raw) for key, raw in r.raw.items() if raw is not None]
    if len(entries) > MAX_MODEL_SCOPES:
        r.problems.error(r.path, f"at most {MAX_MODEL_SCOPES} model scopes, got {len(entries)}")
    out: dict[str, ParamScope] = {}
    seen: dict[str, str] = {}
    for key, raw in entries:
        path = _key_path(r.path, key)
        try:
            name = model_id(key)
        except Invalid as exc:
            r.problems.error(path, f"model id {exc}")
            continue
        if name in seen:
            r.problems.error(path, f"duplicate model {name!r} after trimming spaces (also {seen[name]})")
            continue
        seen[name] = path
        scope_reader = Reader(raw, path, r.problems)
        _refuse_unknown(scope_reader, MODES, "mode")
        out[name] = _scope(scope_reader)
        scope_reader.finish()
    return out


# --- request_presets -------------------------------------------------------------

def request_presets(r: Reader) -> Mapping[str, Preset]:
    """``request_presets``: slug -> Preset. Every key is a slug, so nothing here is an unknown key."""
    if len(r.raw) > MAX_PRESETS:
        r.problems.error(r.path, f"at most {MAX_PRESETS} presets, got {len(r.raw)}")
    out: dict[str, Preset] = {}
    for slug, raw in r.raw.items():
        path = _key_path(r.path, slug)
        if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
            r.problems.error(path, "preset name must be 1-64 letters, digits, '.', '_' or '-'")
            continue
        preset = _preset(slug, Reader(raw, path, r.problems))
        if preset is not None:
            out[slug] = preset
    return out


def _preset(slug: str, r: Reader) -> Preset | None:
    problems: Problems = r.problems
    errors_before = len(problems.errors)
    _refuse_unknown(r, ("model", "params"), "preset key")
    model = r.get("model", model_id, None)
    params = param_values(r.section("params"))
    r.finish()
    if len(problems.errors) > errors_before:
        return None
    if model is None and not params:
        problems.error(r.path, "must set model, params or both")
        return None
    return Preset(slug=slug, model=model, params=params)


def check_narrowed(policy: ParamPolicy, backends: Sequence[BackendConfig], problems: Problems) -> None:
    """Warn where the policy writes, for a model a backend serves, a parameter its kind carries but the
    backend's own setting makes it refuse (``Kind.narrowing``: an anthropic backend's anthropic_version
    from 2026-10-21 and the sampling fields): such calls are refused there (a limit alone is fine)."""
    for i, b in enumerate(backends):
        kind = kind_of(b)
        if kind.narrowing is None:
            continue
        refused = kind.carries - kind.narrowing.carried(b)
        if not refused:
            continue
        key = kind.narrowing.key
        for model in b.models or ("*",):
            scope = policy.scope_for(model) if model != "*" else policy.base
            written = sorted(f for f in refused if f in scope.defaults or f in scope.overrides)
            if written:
                problems.warn(f"backends[{i}].{key}",
                              f"{getattr(b, key)} rejects {', '.join(written)} for every model, and "
                              f"request_params writes {'it' if len(written) == 1 else 'them'} for '{model}': "
                              f"calls that reach this backend with it are refused (use an earlier "
                              f"{key}, or a limit instead of a default or override)")
                break

