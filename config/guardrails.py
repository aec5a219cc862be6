"""The guardrails' settings (``guardrails``): named checks on what a call sends and what it gets back.

Each guardrail is either built-in ``detectors`` (and operator ``patterns``)
with an action each, a ``webhook`` the operator runs, or a ``moderation``
model the gateway routes to; it applies to the
keys and models of its scope, on the input stage, the output stage or both,
in ``enforce`` mode (it acts) or ``monitor`` mode (it records what it would
have done). A pattern is compiled here, so a bad one is a load error naming
its path, never a failed call.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import attrs
from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, load_section
from switchyard.config.rules import Invalid, Reader, child
from switchyard.config.telemetry import otlp_headers

DETECTORS = ("email", "phone", "payment_card", "iban", "ip_address", "secret")
ACTIONS = ("mask", "block", "log")
MODES = ("enforce", "monitor")
STAGES = ("input", "output", "both")
ON_FAILURE = ("fail_open", "fail_closed")
_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
_NAME_WHAT = "1-64 letters, digits, '_' or '-' (starting with a letter or digit)"
_PATTERN_NAME = r"[a-z][a-z0-9_]{0,31}"
_PATTERN_WHAT = "1-32 lowercase letters, digits or '_', starting with a letter (its placeholder is <NAME_n>)"


def _words(choices: tuple[str, ...]) -> rules.Rule[str]:
    return rules.one_of({c: c for c in choices})


def regex(value: Any) -> str:
    """A Python regular expression that compiles; one that matches the empty string is refused
    (it would match between every two characters)."""
    text = rules.string()(value)
    try:
        compiled = re.compile(text)
    except re.error as exc:
        raise Invalid(f"is not a valid regular expression: {exc}") from None
    if compiled.fullmatch(""):
        raise Invalid("must not match the empty string")
    return text


def detector_actions(value: Any) -> tuple[tuple[str, str], ...]:
    """``{detector: action}``: which built-in detectors run, and what each does when it matches."""
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping of detector names to actions, got {rules.type_name(value)}")
    out = []
    for name, action in value.items():
        if name not in DETECTORS:
            raise Invalid(f"key {name!r}: must be one of {', '.join(DETECTORS)}")
        if action not in ACTIONS:
            raise Invalid(f"{name}: must be one of {', '.join(ACTIONS)}, got {action!r}")
        out.append((name, action))
    return tuple(out)


@frozen
class Pattern:
    """An operator's named regular expression: a detector of its own."""

    name: str = field("", rules.string(_PATTERN_NAME, _PATTERN_WHAT))
    regex: str = field("", regex)
    action: str = field("mask", _words(ACTIONS))
    # compiled once, at load (the admin API shows ``regex``, the source)
    compiled: re.Pattern[str] | None = attrs.field(init=False, repr=False, eq=False, metadata={"internal": True})

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "compiled", re.compile(self.regex) if self.regex else None)


@frozen
class Webhook:
    """An external guardrail: the texts POSTed, its verdict read back (docs/guardrails.md)."""

    url: str = field("", values.http_url)
    timeout: float = field(2.0, rules.duration(minimum=0.001, maximum=60))
    on_failure: str = field("fail_closed", _words(ON_FAILURE))
    headers: tuple[tuple[str, str], ...] = field((), otlp_headers, secret=True)   # masked by the admin API


@frozen
class Moderation:
    """A moderation model as the detector: the texts in one ``/v1/moderations`` call, flagged categories
    block (docs/guardrails.md)."""

    model: str = field("", rules.string())
    categories: tuple[str, ...] = field((), rules.string_list(rules.string()))   # empty: every category
    threshold: float | None = field(None, rules.number(0, 1))   # None: the answer's own category booleans
    timeout: float = field(2.0, rules.duration(minimum=0.001, maximum=60))
    on_failure: str = field("fail_closed", _words(ON_FAILURE))


@frozen
class Guardrail:
    name: str = field("", rules.string(_NAME, _NAME_WHAT))
    mode: str = field("enforce", _words(MODES))
    stage: str = field("input", _words(STAGES))
    keys: tuple[str, ...] = field((), rules.string_list(rules.string()))       # key ids; empty: every call
    models: tuple[str, ...] = field((), rules.string_list(rules.string()))     # globs on the requested model
    detectors: tuple[tuple[str, str], ...] = field((), detector_actions)
    patterns: tuple[Pattern, ...] = ()
    webhook: Webhook | None = None
    moderation: Moderation | None = None

    def reads(self, stage: str) -> bool:
        return self.stage in (stage, "both")

    @property
    def rules(self) -> tuple[tuple[str, str], ...]:
        """(detector, action) of every detector, the operator's patterns included, in order."""
        return (*self.detectors, *((p.name, p.action) for p in self.patterns))


def guardrails(top: Reader) -> tuple[Guardrail, ...]:
    """``guardrails``: the list, each entry checked whole; names are unique."""
    out: list[Guardrail] = []
    seen: dict[str, str] = {}
    for r in top.items("guardrails"):
        if not r.has("name"):
            r.problems.error(child(r.path, "name"), "is required")
        patterns = tuple(_pattern(p) for p in r.items("patterns"))
        webhook = load_section(Webhook, r.section("webhook"), _webhook_url) if r.has("webhook") else None
        moderation = load_section(Moderation, r.section("moderation"), _moderation_model) \
            if r.has("moderation") else None
        for key in ("webhook", "moderation"):
            if not r.has(key):
                r.section(key)   # `webhook:` or `moderation:` alone is no unknown key
        g = load_section(Guardrail, r, _check, patterns=patterns, webhook=webhook, moderation=moderation)
        if g.name in seen:
            r.problems.error(child(r.path, "name"), f"duplicate guardrail name {g.name!r} (also {seen[g.name]})")
        elif g.name:
            seen[g.name] = r.path
        out.append(g)
    return tuple(out)


def _pattern(r: Reader) -> Pattern:
    for key in ("name", "regex"):
        if not r.has(key):
            r.problems.error(child(r.path, key), "is required")
    p = load_section(Pattern, r)
    if p.name in DETECTORS:
        r.problems.error(child(r.path, "name"), f"{p.name!r} is a built-in detector's name; choose another")
    return p


def _webhook_url(w: Webhook, r: Reader) -> None:
    if not r.has("url"):
        r.problems.error(child(r.path, "url"), "is required")


def _moderation_model(m: Moderation, r: Reader) -> None:
    if not r.has("model"):
        r.problems.error(child(r.path, "model"), "is required")


def _check(g: Guardrail, r: Reader) -> None:
    """Detectors and patterns, a webhook, or a moderation model: one guardrail, one kind of verdict."""
    names = [p.name for p in g.patterns]
    for i, name in enumerate(names):
        if name and names.index(name) != i:
            r.problems.error(child(child(r.path, "patterns"), i), f"duplicate pattern name {name!r}")
    local = bool(g.detectors or g.patterns)
    if g.webhook is not None and local:
        r.problems.error(child(r.path, "webhook"), "a guardrail has either detectors/patterns or a webhook, "
                                                    "not both: make two guardrails")
    if g.moderation is not None and (local or g.webhook is not None):
        other = "a webhook" if g.webhook is not None else "detectors/patterns"
        r.problems.error(child(r.path, "moderation"), f"a guardrail has either {other} or a moderation model, "
                                                       "not both: make two guardrails")
    if g.webhook is None and g.moderation is None and not local \
            and not any(r.has(k) for k in ("detectors", "patterns")):
        r.problems.error(r.path, "must name detectors, patterns, a webhook or a moderation model")
