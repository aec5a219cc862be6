"""Each config field declared once: type, default and rule beside its attrs field.

A schema class writes ``interval: float = field(30.0, rules.duration(minimum=0.1))``
and ``headers: TracingHeaders = section(TracingHeaders)``; ``load_section``
walks ``attrs.fields`` of the class and reads each one with its rule and
default through a ``Reader``, so the paths and wording of every message come
from ``rules.py`` and nothing spells a field a second time.

What the walk cannot say (cross-field checks, keys renamed or nested
differently in YAML, union shapes, maps keyed by model name) stays in a small
hand-written loader, which passes those fields to ``load_section`` itself.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import attrs

from switchyard.config.rules import Reader, Rule

C = TypeVar("C", bound=attrs.AttrsInstance)

_RULE = "switchyard.config.rule"
_SECTION = "switchyard.config.section"
_OPTIONAL = "switchyard.config.optional"
_KEY = "switchyard.config.key"
YAML_KEY = _KEY   # for readers of a field's metadata: the YAML key it is read from, when not its name
_CHECK = "switchyard.config.check"
_RESTART = "switchyard.config.restart"   # the running process keeps its value until a restart (watch.py)


def field(default: Any, rule: Rule[Any], *, key: str | None = None, repr: bool = True, secret: bool = False,
          restart: bool = False) -> Any:
    """A field read from YAML key ``key`` (default: the field's name) with ``rule``.

    An absent or null key, or an invalid value (reported), leaves ``default``;
    an ``attrs.Factory`` default is called for each instance. ``secret``: the
    admin API masks its value (``metadata["secret"]``) and repr leaves it out.
    ``restart``: a reload keeps the running value until the process restarts
    (``watch.py``).
    """
    metadata = {_RULE: rule, _KEY: key, _RESTART: restart, **({"secret": True} if secret else {})}
    return attrs.field(default=default, repr=repr and not secret, metadata=metadata)


def section(cls: type, *, optional: bool = False, key: str | None = None,
            check: Callable[[Any, Reader], None] | None = None, restart: bool = False) -> Any:
    """A nested mapping loaded as ``cls`` by the same walk (``check`` as in ``load_section``).

    ``optional``: the field is None unless the key holds a value (``engine:``
    alone is None too, yet no unknown key); otherwise an absent key loads
    ``cls()``. ``restart``: the whole section waits for a restart (``field``).
    """
    meta = {_SECTION: cls, _OPTIONAL: optional, _KEY: key, _CHECK: check, _RESTART: restart}
    return attrs.field(default=None if optional else cls(), metadata=meta)


def restart_section(default: Any) -> Any:
    """A section of a class loaded by hand (the Snapshot's) that waits, whole, for a restart."""
    return attrs.field(default=default, metadata={_RESTART: True})


def waits_for_restart(f: attrs.Attribute[Any]) -> bool:
    """Whether a reload keeps ``f``'s running value until the process restarts."""
    return bool(f.metadata.get(_RESTART))


def yaml_key(f: attrs.Attribute[Any]) -> str:
    return f.metadata.get(_KEY) or f.name


def has_rule(cls: type, name: str) -> bool:
    """Whether field ``name`` of ``cls`` declares a rule (``read`` can read it)."""
    return _RULE in getattr(attrs.fields(cls), name).metadata


_DECLARED = object()


def read(r: Reader, cls: type, name: str, default: Any = _DECLARED) -> Any:
    """One declared field of ``cls`` read from ``r``, for loaders that read fields one by one.

    ``default`` replaces the declared one (an override where absent means "inherit").
    """
    f = getattr(attrs.fields(cls), name)
    return _read(r, f, default)


def _read(r: Reader, f: attrs.Attribute[Any], default: Any = _DECLARED) -> Any:
    key = yaml_key(f)
    if _SECTION in f.metadata:
        nested = r.section(key)    # read even when null, so `key:` alone is no unknown key
        if f.metadata[_OPTIONAL] and not r.has(key):
            return None
        return load_section(f.metadata[_SECTION], nested, f.metadata[_CHECK])
    if _RULE in f.metadata:
        if default is _DECLARED:
            default = f.default.factory() if isinstance(f.default, attrs.Factory) else f.default  # type: ignore[arg-type, union-attr]  # attrs' stub: Factory a function
        return r.get(key, f.metadata[_RULE], default)
    raise TypeError(f"{f.name} declares no rule: pass it to load_section")


def load_section(cls: type[C], r: Reader, check: Callable[[C, Reader], None] | None = None, /,
                 **given: Any) -> C:
    """An instance of ``cls`` from ``r``: every declared field read, then unknown keys refused.

    Fields in ``given`` are taken as they are: the caller read (and marked)
    their keys itself because their rule is special. ``check`` runs on the
    instance before unknown keys are reported (a cross-field rule's error
    comes before them, as when the fields were read by hand).
    """
    values = dict(given)
    for f in attrs.fields(cls):
        if f.name not in given and f.init:
            values[f.name] = _read(r, f)
    out = cls(**values)
    if check is not None:
        check(out, r)
    r.finish()
    return out
