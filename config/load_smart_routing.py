"""Validation of ``smart_routing``: model profiles, routing policies and the classifier.

The plain fields' rules and defaults are declared in ``smart_routing.py``
and read by ``fields.load_section``. What stays here is special: the
classifier's custom levels and domains extend the names that profiles,
policies and examples may use, so those are read against the taxonomy.

The admin API's PUT of profiles and policies goes through the same
``parse_*`` code as the loader, so an edit cannot pass there and fail at
the next reload (or the reverse). Checks that need other sections (the
classifier's backend, the keys' tiers) live in ``config/check_smart_routing.py``,
which the loader runs once every backend is known to be complete.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from switchyard.config import rules
from switchyard.config import smart_routing as sr
from switchyard.config.fields import load_section, read
from switchyard.config.rules import Invalid, Problems, Reader, child
from switchyard.config.smart_routing import (
    SYSTEM_ONE,
    ClassifierSettings,
    ModelProfile,
    RoutingPolicy,
    SmartRouting,
    language_tag,
)
from switchyard.config.smart_routing import tier as _tier

PATH = "smart_routing"
R = TypeVar("R")
X = TypeVar("X")   # what a list parser needs to know besides the list (the domains, the classifier)
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


class SmartRoutingError(ValueError):
    """Every problem of an admin edit, each naming its dotted path (like ``ConfigError``)."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__(f"{len(errors)} smart routing error(s):\n  " + "\n  ".join(errors))


# --- rules ---------------------------------------------------------------------------

def _raw(value: Any) -> Any:
    return value


def _listed(item: rules.Rule[str], what: str, condition: bool = False) -> rules.Rule[tuple[str, ...]]:
    """A list de-duplicated in order; a ``when`` condition's may not be empty (it would match nothing)."""
    listed = rules.list_of(item, what)

    def rule(value: Any) -> tuple[str, ...]:
        out = tuple(dict.fromkeys(listed(value)))
        if condition and not out:
            raise Invalid("must not be empty: an empty list matches nothing (leave the key out to match any)")
        return out
    return rule


def _member(allowed: Sequence[str], what: str) -> rules.Rule[str]:
    def item(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise Invalid(f"{value!r} is not a {what} (one of {', '.join(allowed)})")
        return value
    return item


def _profile_name(pattern: bool) -> rules.Rule[str]:
    def rule(value: Any) -> str:
        text = rules.string()(value)
        if len(text) > sr.MAX_PROFILE_NAME:
            raise Invalid(f"must be at most {sr.MAX_PROFILE_NAME} characters, got {len(text)}")
        if pattern and any(ch in text for ch in "?[]"):
            raise Invalid(f"may use only '*' as a wildcard, got {text!r}")
        if not pattern and "*" in text:
            raise Invalid(f"is an exact name; use model_pattern for a glob, got {text!r}")
        return text
    return rule


def _cost(profile: str) -> rules.Rule[float]:
    def rule(value: Any) -> float:
        try:
            return rules.number(minimum=0.0)(value)
        except Invalid:
            raise Invalid(f"must be a finite number >= 0{profile}, got {value!r}") from None
    return rule


def _headers(value: Any) -> Mapping[str, tuple[str, ...]]:
    """Header name -> accepted values, all lower case; an empty value list means "present"."""
    if not isinstance(value, dict):
        raise Invalid(f"must be a mapping of header names to lists of values, got {rules.type_name(value)}")
    if not value:
        raise Invalid("must name at least one header")
    out: dict[str, tuple[str, ...]] = {}
    for name, values in value.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise Invalid(f"has {name!r}, which is not an HTTP header name")
        key = name.lower()
        if key in out:
            raise Invalid(f"names {key!r} twice (header names are case-insensitive)")
        if not isinstance(values, list):
            raise Invalid(f"[{name}] must be a list of values ([] matches any value), got {rules.type_name(values)}")
        accepted = []
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise Invalid(f"[{name}] item [{i}] must be a string, got {rules.type_name(v)}")
            text = str(v).strip()   # request values are compared stripped too
            try:
                size = len(text.encode())
            except UnicodeEncodeError:   # a lone surrogate ("\\ud800" in JSON): no request header can carry it
                raise Invalid(f"[{name}] item [{i}] is not UTF-8 text (it holds a lone surrogate)") from None
            if size > sr.MAX_HEADER_VALUE:
                raise Invalid(f"[{name}] item [{i}] is longer than {sr.MAX_HEADER_VALUE} bytes; a longer request "
                              "header value counts as absent, so it can never match")
            accepted.append(text.lower())
        out[key] = tuple(dict.fromkeys(accepted))
    return MappingProxyType(out)


def _token_range(value: Any) -> sr.TokenRange:
    if not isinstance(value, dict):
        raise Invalid(f"must be a mapping of gt, gte, lt, lte, got {rules.type_name(value)}")
    bounds: dict[str, int] = {}
    for key, bound in value.items():
        if key not in ("gt", "gte", "lt", "lte"):
            raise Invalid(f"has unknown key {key!r} (use gt, gte, lt, lte)")
        if bound is not None:
            try:
                bounds[key] = rules.integer(minimum=0)(bound)
            except Invalid as exc:
                raise Invalid(f"{key} {exc}") from None
    if not bounds:
        raise Invalid("must give a bound (gt, gte, lt or lte); an empty range is not a catch-all")
    for a, b in (("gt", "gte"), ("lt", "lte")):
        if a in bounds and b in bounds:
            raise Invalid(f"gives both {a} and {b}; use at most one {'lower' if a == 'gt' else 'upper'} bound")
    out = sr.TokenRange(**bounds)
    low = out.gt + 1 if out.gt is not None else (out.gte or 0)
    high = out.lt - 1 if out.lt is not None else out.lte
    if high is not None and high - low < 1:
        raise Invalid(f"admits {max(0, high - low + 1)} token estimate(s) ({low}..{high}); "
                      "a range must admit at least two")
    return out


# --- model profiles and routing policies ---------------------------------------------------

def _entries(raw: Any, path: str, problems: Problems) -> list[Reader]:
    """A Reader for each mapping in a list (the others are reported as not mappings)."""
    if raw is not None and not isinstance(raw, list):
        problems.error(path, f"must be a list, got {rules.type_name(raw)}")
        return []
    readers = [Reader(item, child(path, i), problems) for i, item in enumerate(raw or ())]
    return [r for r in readers if r.path not in problems.failed_paths]


def _profile(r: Reader, domains: Sequence[str]) -> ModelProfile | None:
    errors_before = len(r.problems.errors)
    if r.has("model") == r.has("model_pattern"):
        r.problems.error(r.path, "needs exactly one of model (an exact name) and model_pattern (a '*' glob)")
    if not r.has("tier"):
        r.problems.error(child(r.path, "tier"), "is required")
    model = r.get("model", _profile_name(pattern=False), None)
    pattern = r.get("model_pattern", _profile_name(pattern=True), None)
    label = model or pattern or r.raw.get("model") or r.raw.get("model_pattern")
    named = f' (profile "{label}")' if isinstance(label, str) else ""
    out = ModelProfile(
        tier=r.get("tier", _tier, 2), model=model, model_pattern=pattern,
        domains=r.get("domains", _listed(_member(domains, "domain"), "domains"), ()),
        cost_per_1k_input_tokens=r.get("cost_per_1k_input_tokens", _cost(named), None),
        cost_per_1k_output_tokens=r.get("cost_per_1k_output_tokens", _cost(named), None),
    )
    r.finish()
    return out if len(r.problems.errors) == errors_before else None


def _profiles(raw: Any, path: str, domains: Sequence[str], problems: Problems) -> tuple[ModelProfile, ...]:
    found = (_profile(r, domains) for r in _entries(raw, path, problems))
    return tuple(p for p in found if p is not None)


def _when(r: Reader, classifier: ClassifierSettings) -> sr.PolicyWhen:
    names = _listed(rules.string(), "strings", condition=True)
    levels = _member(classifier.complexity_levels, "complexity level")
    out = sr.PolicyWhen(
        complexity=r.get("complexity", _listed(levels, "complexity levels", condition=True), None),
        domain=r.get("domain", _listed(_member(classifier.domains, "domain"), "domains", condition=True), None),
        requires=r.get("requires", _listed(_member(sr.REQUIRABLE, "capability"), "capabilities", condition=True),
                       None),
        key_tier=r.get("key_tier", names, None),
        org=r.get("org", names, None),
        language=r.get("language", _listed(language_tag, "language tags", condition=True), None),
        header=r.get("header", _headers, None),
        # The spec only warns at startup about a bad range and loads it as written; here every policy
        # problem fails the load, at startup and on reload alike, so what runs is what was validated.
        input_tokens=r.get("input_tokens", _token_range, None),
    )
    r.finish()
    return out


def _route_to(r: Reader, domains: Sequence[str]) -> sr.RouteTo:
    if not r.has("tier"):
        r.problems.error(child(r.path, "tier"), "is required")
    out = sr.RouteTo(
        tier=r.get("tier", _tier, None),
        prefer_domains=r.get("prefer_domains", _listed(_member(domains, "domain"), "domains"), ()),
        require_capabilities=r.get("require_capabilities", _listed(_member(sr.REQUIRABLE, "capability"),
                                                                   "capabilities"), ()),
    )
    r.finish()
    return out


def _policies(raw: Any, path: str, classifier: ClassifierSettings, problems: Problems) -> tuple[RoutingPolicy, ...]:
    out: list[RoutingPolicy] = []
    seen: dict[str, str] = {}
    for r in _entries(raw, path, problems):
        errors_before = len(problems.errors)
        if not r.has("name"):
            problems.error(child(r.path, "name"), "is required")
        # Sent back in x-smart-route-policy and used as a metric label: a header-safe token.
        name = r.get("name", rules.string(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", "1-128 letters, digits, '.', "
                                                                                 "'_', ':' or '-'"), "")
        if name in seen:
            problems.error(child(r.path, "name"), f"duplicate policy name {name!r} (also {seen[name]})")
        elif name:
            seen[name] = r.path
        policy = RoutingPolicy(name=name, when=_when(r.section("when"), classifier),
                               route_to=_route_to(r.section("route_to"), classifier.domains))
        r.finish()
        if len(problems.errors) == errors_before:
            out.append(policy)
    return tuple(out)


def parse_model_profiles(raw: Any, domains: Sequence[str], path: str = f"{PATH}.model_profiles",
                         ) -> tuple[ModelProfile, ...]:
    """``model_profiles`` as the admin API receives it; SmartRoutingError lists every problem."""
    return _strict(_profiles, raw, path, tuple(domains))


def parse_routing_policies(raw: Any, classifier: ClassifierSettings, path: str = f"{PATH}.routing_policies",
                           ) -> tuple[RoutingPolicy, ...]:
    """``routing_policies`` as the admin API receives it; SmartRoutingError lists every problem."""
    return _strict(_policies, raw, path, classifier)


def _strict(parse: Callable[[Any, str, X, Problems], R], raw: Any, path: str, context: X) -> R:
    problems = Problems()
    out = parse(raw, path, context, problems)
    if problems.errors:
        raise SmartRoutingError(problems.errors)
    return out


# --- classifier ------------------------------------------------------------------------

def _keywords(r: Reader) -> Mapping[str, Mapping[str, tuple[str, ...]]]:
    """language -> category -> extra keywords: stripped, lower case, first of each kept."""
    tables: dict[str, dict[str, list[str]]] = {}
    for key in list(r.raw):
        table = r.section(key)
        try:
            language = language_tag(key)
        except Invalid as exc:
            r.problems.error(table.path, str(exc))
            continue
        for category in list(table.raw):
            words: tuple[str, ...] = table.get(category, _listed(_keyword, "keywords"), ())
            if category not in sr.KEYWORD_CATEGORIES:
                r.problems.error(child(table.path, str(category)),
                                 f"is not a keyword table (one of {', '.join(sr.KEYWORD_CATEGORIES)})")
                continue
            tables.setdefault(language, {}).setdefault(category, []).extend(words)
    r.finish()
    return MappingProxyType({language: MappingProxyType({c: tuple(dict.fromkeys(w)) for c, w in t.items()})
                             for language, t in tables.items()})


def _keyword(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {rules.type_name(value)}")
    text = value.strip().lower()
    if not text:
        raise Invalid("must not be empty or only spaces")
    return text


def _rule(r: Reader) -> sr.RuleSettings:
    return load_section(sr.RuleSettings, r, keywords=_keywords(r.section("keywords")))


def _examples(r: Reader, classifier: ClassifierSettings) -> tuple[sr.FewShotExample, ...]:
    out = []
    for e in _entries(r.get("custom_examples", _raw, None), child(r.path, "custom_examples"), r.problems):
        c = e.section("classification")
        for reader, key in ((e, "user"), (c, "complexity"), (c, "domain")):
            if not reader.has(key):
                reader.problems.error(child(reader.path, key), "is required")
        user = e.get("user", rules.string(), "")
        level = c.get("complexity", rules.one_of({n: n for n in classifier.complexity_levels}), "")
        domain = c.get("domain", rules.one_of({n: n for n in classifier.domains}), "")
        c.finish()
        e.finish()
        if user and level and domain:
            out.append(sr.FewShotExample(user, level, domain))
    return tuple(out)


def _llm(r: Reader, classifier: ClassifierSettings) -> sr.LlmSettings:
    """Special: examples are checked against the taxonomy, and an empty load state means "never"."""
    load_state = read(r, sr.LlmSettings, "disable_under_load_state")
    if "disable_under_load_state" in r.raw and r.raw["disable_under_load_state"] is None:
        load_state = ""     # left empty reads as "never disabled", as the spec says
    return load_section(sr.LlmSettings, r, custom_examples=_examples(r, classifier),
                        disable_under_load_state=load_state)


def _custom_names(r: Reader, key: str, builtin: Sequence[str], what: str) -> list[tuple[Reader, str]]:
    """Each entry of a custom taxonomy list with its name ("" if invalid): required, unique, not built in."""
    out: list[tuple[Reader, str]] = []
    for e in _entries(r.get(key, _raw, None), child(r.path, key), r.problems):
        if not e.has("name"):
            e.problems.error(child(e.path, "name"), "is required")
        name = e.get("name", rules.string(r"\S(.*\S)?", "a name without outer spaces"), "")
        # The LLM's labels are matched without case, so names may not differ by case alone.
        taken = name.lower() in (n.lower() for _, n in out)
        if name.lower() in builtin:
            e.problems.error(child(e.path, "name"), f"{name!r} is a built-in {what}")
        elif taken:
            e.problems.error(child(e.path, "name"), f"duplicate custom {what} {name!r}")
        out.append((e, "" if taken or name.lower() in builtin else name))
    return out


def classifier(r: Reader) -> ClassifierSettings:
    method = read(r, ClassifierSettings, "method")
    if "system_one" in r.raw:
        r.get("system_one", _raw, None)
        r.problems.error(child(r.path, "system_one"), SYSTEM_ONE)
    levels = []
    for e, name in _custom_names(r, "custom_complexity_levels", sr.COMPLEXITY_LEVELS, "complexity level"):
        level = sr.CustomLevel(name, e.get("description", rules.any_string, ""), e.get("rank", rules.integer(), None))
        e.finish()
        levels += [level] if name else []
    if len(r.raw.get("custom_complexity_levels") or ()) > sr.MAX_CUSTOM_LEVELS:
        r.problems.error(child(r.path, "custom_complexity_levels"),
                         f"at most {sr.MAX_CUSTOM_LEVELS} custom levels, got {len(r.raw['custom_complexity_levels'])}")
    domains = []
    for e, name in _custom_names(r, "custom_domains", sr.BUILTIN_DOMAINS, "domain"):
        domain = sr.CustomDomain(name, e.get("description", rules.any_string, ""))
        e.finish()
        domains += [domain] if name else []
    taxonomy = ClassifierSettings(custom_complexity_levels=tuple(levels), custom_domains=tuple(domains))
    out = ClassifierSettings(method=method, shadow=read(r, ClassifierSettings, "shadow"),
                             rule=_rule(r.section("rule")), llm=_llm(r.section("llm"), taxonomy),
                             custom_complexity_levels=taxonomy.custom_complexity_levels,
                             custom_domains=taxonomy.custom_domains)
    r.finish()
    if out.uses_llm and out.llm.model is None:
        why = "shadow is true" if out.shadow and out.method == "rule" else f"method is {out.method}"
        r.problems.error(child(r.path, "llm.model"), f"is required when {why}: the LLM classifier needs a model")
    return out


# --- the section -------------------------------------------------------------------------

def smart_routing(r: Reader) -> SmartRouting:
    """Special: profiles and policies are read against the classifier's taxonomy, so it comes first."""
    settings = classifier(r.section("classifier"))
    profiles = _profiles(r.get("model_profiles", _raw, None), child(r.path, "model_profiles"),
                         settings.domains, r.problems)
    policies = _policies(r.get("routing_policies", _raw, None), child(r.path, "routing_policies"),
                         settings, r.problems)
    return load_section(SmartRouting, r, classifier=settings, model_profiles=profiles, routing_policies=policies)
