"""``smart_routing``: what ``model: "auto"`` means, as validated configuration.

The pipeline is classify -> policy -> model in tier. This module only holds
the validated shape; ``config/load_smart_routing.py`` reads and checks it,
``actors/routing/tiers.py`` and ``actors/routing/smart_policy.py`` decide,
``actors/classifier.py`` classifies.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs
from attrs import frozen

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
    confidence_threshold: float = 0.7            # hybrid: at or above it the rule result routes
    primary_language: str | None = None          # lower-case primary subtag (``ko`` from ``ko-KR``)
    # language -> table (complex | creative | analysis | code | ...) -> extra keywords, normalized
    keywords: Mapping[str, Mapping[str, tuple[str, ...]]] = attrs.field(factory=lambda: MappingProxyType({}))


@frozen
class FewShotExample:
    user: str
    complexity: str
    domain: str


@frozen
class LlmSettings:
    model: str | None = None
    backend: str | None = None                   # stripped; None: the first backend user traffic can reach
    timeout_ms: int = 2000
    max_input_tokens: int = 500
    max_retries: int = 1                         # 0 or 1: one correction prompt after a malformed answer
    temperature: float = 0.0
    max_output_tokens: int = 150
    structured_output: str = "auto"
    few_shot_examples: bool = True
    custom_examples: tuple[FewShotExample, ...] = ()
    cache_ttl_seconds: float = 300.0
    max_cache_entries: int = 10_000
    disable_under_load_state: str = "critical"   # "" : never disabled


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
    method: str = "rule"
    # Run the other classifier (llm beside rule, rule beside llm/hybrid) on every request and
    # record whether they agree; routing follows ``method``.
    shadow: bool = False
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
    enabled: bool = False
    default_tier: int = 2
    virtual_model: str = "auto"
    intercept_all: bool = False
    unprofiled_models: str = "default_tier"
    model_profiles: tuple[ModelProfile, ...] = ()
    routing_policies: tuple[RoutingPolicy, ...] = ()
    classifier: ClassifierSettings = ClassifierSettings()
    debug_headers: bool = False
