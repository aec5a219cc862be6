"""``smart_routing``: what ``model: "auto"`` means, as validated configuration.

The pipeline is classify -> policy -> model in tier. This module only holds
the validated shape and the rules of its plain fields; ``config/load_smart_routing.py``
reads what depends on other fields (the taxonomy, profiles, policies),
``actors/routing/tiers.py`` and ``actors/routing/smart_policy.py`` decide,
``actors/classifier.py`` classifies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs
from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field
from switchyard.config.rules import Invalid

COMPLEXITY_LEVELS = ("trivial", "simple", "moderate", "complex", "expert")
BUILTIN_DOMAINS = ("general", "code", "reasoning", "creative", "analysis", "multilingual")
# What a request can be found to need (``when.requires``, ``route_to.require_capabilities``).
REQUIRABLE = ("vision", "tools")
DETECTED_LANGUAGES = ("ko", "ja", "zh", "en", "und")   # what the rule classifier's script detection reports
TIERS = (1, 2, 3)                       # 1 Flagship, 2 Standard, 3 Lightweight
METHODS = ("rule", "llm", "hybrid")
UNSUPPORTED_METHODS = ("system_one", "hybrid_system_one")
# The tables ``classifier.rule.keywords.<language>`` may add to.
KEYWORD_CATEGORIES = ("complex", "simple", "creative", "analysis", "code", "translation", "proof")
STRUCTURED_OUTPUTS = ("auto", "json_schema", "tool_use", "json_object", "prompt_only")
LOAD_STATES = ("critical", "warning", "")
UNPROFILED = ("default_tier", "exclude")
MAX_CUSTOM_LEVELS = 5
RULE_MAX_CONFIDENCE = 0.95              # the rule classifier never claims more certainty than this
MAX_PROFILE_NAME = 200                  # characters of model / model_pattern
MAX_HEADER_VALUE = 256                  # bytes; a longer request header value counts as absent
SYSTEM_ONE = "the System One decision-model classifier is not supported in this build (use rule, llm or hybrid)"
_LANGUAGE = re.compile(r"([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*")


def tier(value: Any) -> int:
    if isinstance(value, bool) or value not in TIERS:
        raise Invalid(f"must be 1 (flagship), 2 (standard) or 3 (lightweight), got {value!r}")
    return int(value)


def language_tag(value: Any) -> str:
    """A short BCP-47 tag, case-insensitive, as its lower-case primary subtag (``ko`` from ``ko-KR``)."""
    text = rules.string()(value).strip()
    m = _LANGUAGE.fullmatch(text)
    if not m:
        raise Invalid(f"must be a BCP-47 language tag with a 2-3 letter primary subtag like ko, ko-KR or und, "
                      f"got {text!r}")
    return m.group(1).lower()


def _method(value: Any) -> str:
    if value in UNSUPPORTED_METHODS:
        raise Invalid(f"{value!r}: {SYSTEM_ONE}")
    return values.words(*METHODS)(value)


def _backend_name(value: Any) -> str | None:
    return rules.any_string(value).strip() or None


_POSITIVE = rules.integer(minimum=1)


@frozen
class ModelProfile:
    """One ``model_profiles`` entry: exactly one of ``model`` (exact) and ``model_pattern`` (``*`` globs)."""

    tier: int
    model: str | None = None
    model_pattern: str | None = None
    domains: tuple[str, ...] = ()
    cost_per_1k_input_tokens: float | None = None    # USD; the only cost that affects selection
    cost_per_1k_output_tokens: float | None = None   # USD; informational


@frozen
class TokenRange:
    """``when.input_tokens``: at most one lower (gt | gte) and one upper (lt | lte) bound."""

    gt: int | None = None
    gte: int | None = None
    lt: int | None = None
    lte: int | None = None

    def contains(self, tokens: int) -> bool:
        return ((self.gt is None or tokens > self.gt) and (self.gte is None or tokens >= self.gte)
                and (self.lt is None or tokens < self.lt) and (self.lte is None or tokens <= self.lte))


@frozen
class PolicyWhen:
    """A policy's conditions: AND across the fields that are set (not None), OR within one.

    Values are normalized at load: ``language`` to lower-case primary subtags,
    ``header`` names and values to lower case (an empty value list means
    "present, any value").
    """

    complexity: tuple[str, ...] | None = None
    domain: tuple[str, ...] | None = None
    requires: tuple[str, ...] | None = None
    key_tier: tuple[str, ...] | None = None
    org: tuple[str, ...] | None = None
    language: tuple[str, ...] | None = None
    header: Mapping[str, tuple[str, ...]] | None = None
    input_tokens: TokenRange | None = None

    @property
    def catch_all(self) -> bool:
        """``when: {}``: matches every request (identity or size conditions alone are not a catch-all)."""
        return all(getattr(self, f.name) is None for f in attrs.fields(PolicyWhen))


@frozen
class RouteTo:
    tier: int | None = None
    prefer_domains: tuple[str, ...] = ()
    require_capabilities: tuple[str, ...] = ()


@frozen
class RoutingPolicy:
    name: str
    when: PolicyWhen = PolicyWhen()
    route_to: RouteTo = RouteTo()


@frozen
class RuleSettings:
    # hybrid: at or above it the rule result routes
    confidence_threshold: float = field(0.7, rules.number(0.0, 1.0))
    # lower-case primary subtag (``ko`` from ``ko-KR``)
    primary_language: str | None = field(None, language_tag)
    # language -> table (complex | creative | analysis | code | ...) -> extra keywords, normalized
    keywords: Mapping[str, Mapping[str, tuple[str, ...]]] = attrs.field(factory=lambda: MappingProxyType({}))


@frozen
class FewShotExample:
    user: str
    complexity: str
    domain: str


@frozen
class LlmSettings:
    model: str | None = field(None, rules.string())
    # stripped; None: the first backend user traffic can reach
    backend: str | None = field(None, _backend_name)
    timeout_ms: int = field(2000, _POSITIVE)
    max_input_tokens: int = field(500, _POSITIVE)
    # 0 or 1: one correction prompt after a malformed answer
    max_retries: int = field(1, rules.integer(0, 1))
    temperature: float = field(0.0, rules.number(0.0, 2.0))
    max_output_tokens: int = field(150, _POSITIVE)
    structured_output: str = field("auto", values.words(*STRUCTURED_OUTPUTS))
    few_shot_examples: bool = field(True, rules.boolean)
    custom_examples: tuple[FewShotExample, ...] = ()
    cache_ttl_seconds: float = field(300.0, rules.number(minimum=0.0))
    max_cache_entries: int = field(10_000, _POSITIVE)
    # "" : never disabled (also when the key is left empty)
    disable_under_load_state: str = field("critical", values.words(*LOAD_STATES))


@frozen
class CustomLevel:
    name: str
    description: str = ""
    rank: int | None = None


@frozen
class CustomDomain:
    name: str
    description: str = ""


@frozen
class ClassifierSettings:
    method: str = field("rule", _method)
    # Run the other classifier (llm beside rule, rule beside llm/hybrid) on every request and
    # record whether they agree; routing follows ``method``.
    shadow: bool = field(False, rules.boolean)
    rule: RuleSettings = RuleSettings()
    llm: LlmSettings = LlmSettings()
    custom_complexity_levels: tuple[CustomLevel, ...] = ()
    custom_domains: tuple[CustomDomain, ...] = ()

    @property
    def uses_llm(self) -> bool:
        """Whether the LLM classifier runs at all: to route (llm, hybrid) or beside the rule one (shadow)."""
        return self.method in ("llm", "hybrid") or self.shadow

    @property
    def complexity_levels(self) -> tuple[str, ...]:
        return COMPLEXITY_LEVELS + tuple(c.name for c in self.custom_complexity_levels)

    @property
    def domains(self) -> tuple[str, ...]:
        return BUILTIN_DOMAINS + tuple(d.name for d in self.custom_domains)


@frozen
class SmartRouting:
    enabled: bool = field(False, rules.boolean)
    default_tier: int = field(2, tier)
    virtual_model: str = field("auto", rules.string())
    intercept_all: bool = field(False, rules.boolean)
    unprofiled_models: str = field("default_tier", values.words(*UNPROFILED))
    model_profiles: tuple[ModelProfile, ...] = ()
    routing_policies: tuple[RoutingPolicy, ...] = ()
    classifier: ClassifierSettings = ClassifierSettings()
    debug_headers: bool = field(False, rules.boolean)
