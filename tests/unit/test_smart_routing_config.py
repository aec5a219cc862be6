"""smart_routing: defaults, normalization, each error with its path, each warning, the admin parse
functions and the classifier backend resolution."""

import math

import pytest

from switchyard.config.classifier_backend import classifier_backend
from switchyard.config.load import ConfigError, load_text
from switchyard.config.load_smart_routing import SmartRoutingError, parse_model_profiles, parse_routing_policies
from switchyard.config.schema import BackendConfig, BackendType
from switchyard.config.smart_routing import (
    BUILTIN_DOMAINS,
    ClassifierSettings,
    CustomDomain,
    CustomLevel,
    FewShotExample,
    LlmSettings,
    ModelProfile,
    PolicyWhen,
    RouteTo,
    RoutingPolicy,
    SmartRouting,
    TokenRange,
)

BACKENDS = """
backends:
  - name: public
    url: http://127.0.0.1:8000
    models: [m]
  - name: hidden
    url: http://127.0.0.1:8001
    models: [m]
    internal: true
  - name: down
    url: http://127.0.0.1:8002
    models: [m]
    enabled: false
"""


def config(section: str, backends: str = BACKENDS, extra: str = "") -> str:
    body = "\n".join("  " + line for line in section.strip("\n").splitlines())
    return f"{backends}{extra}\nsmart_routing:\n{body}\n"


def smart(section: str, **kw) -> SmartRouting:
    return load_text(config(section, **kw), env={}).snapshot.smart_routing


def errors_of(section: str, **kw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(config(section, **kw), env={})
    return info.value.errors


def warnings_of(section: str, **kw) -> list[str]:
    return [w for w in load_text(config(section, **kw), env={}).warnings if w.startswith("smart_routing")]


def policy(when: str = "{}", tier: int = 1, name: str = "p") -> str:
    return f"routing_policies:\n  - name: {name}\n    when: {when}\n    route_to: {{tier: {tier}}}"


# --- defaults and normalization ---------------------------------------------------------------

def test_defaults_when_section_absent():
    s = load_text(BACKENDS, env={}).snapshot.smart_routing
    assert s == SmartRouting()
    assert (s.enabled, s.default_tier, s.virtual_model, s.intercept_all, s.unprofiled_models, s.debug_headers) == \
        (False, 2, "auto", False, "default_tier", False)
    assert s.classifier.method == "rule" and s.classifier.llm == LlmSettings()


def test_empty_section_is_the_defaults():
    assert load_text(BACKENDS + "smart_routing:\n", env={}).snapshot.smart_routing == SmartRouting()


def test_spec_example_loads():
    s = smart("""
enabled: true
default_tier: 3
virtual_model: smart
intercept_all: true
unprofiled_models: exclude
debug_headers: true
model_profiles:
  - model: "gpt-5.6-sol"
    tier: 1
    domains: [general, code, reasoning, creative]
    cost_per_1k_input_tokens: 0.005
    cost_per_1k_output_tokens: 0.030
  - model_pattern: "*-q4_K_M"
    tier: 3
    domains: [general]
routing_policies:
  - name: trivial_to_lightweight
    when: {complexity: [trivial, simple], domain: [general]}
    route_to: {tier: 3}
  - name: vision_required
    when: {requires: [vision]}
    route_to: {tier: 1, require_capabilities: [vision], prefer_domains: [code]}
  - name: default_to_standard
    when: {}
    route_to: {tier: 2}
""")
    assert (s.enabled, s.default_tier, s.virtual_model, s.intercept_all, s.unprofiled_models, s.debug_headers) == \
        (True, 3, "smart", True, "exclude", True)
    assert s.model_profiles == (
        ModelProfile(1, "gpt-5.6-sol", None, ("general", "code", "reasoning", "creative"), 0.005, 0.030),
        ModelProfile(3, None, "*-q4_K_M", ("general",)),
    )
    assert s.routing_policies == (
        RoutingPolicy("trivial_to_lightweight", PolicyWhen(complexity=("trivial", "simple"), domain=("general",)),
                      RouteTo(3)),
        RoutingPolicy("vision_required", PolicyWhen(requires=("vision",)), RouteTo(1, ("code",), ("vision",))),
        RoutingPolicy("default_to_standard", PolicyWhen(), RouteTo(2)),
    )


# --- top-level fields -------------------------------------------------------------------------

@pytest.mark.parametrize("line, path", [
    ("enabled: yes please", "smart_routing.enabled"),
    ("default_tier: 0", "smart_routing.default_tier"),
    ("default_tier: 4", "smart_routing.default_tier"),
    ("default_tier: true", "smart_routing.default_tier"),
    ('virtual_model: ""', "smart_routing.virtual_model"),
    ("virtual_model: 3", "smart_routing.virtual_model"),
    ("intercept_all: 1", "smart_routing.intercept_all"),
    ("unprofiled_models: drop", "smart_routing.unprofiled_models"),
    ("debug_headers: 1", "smart_routing.debug_headers"),
])
def test_top_level_field_errors_name_the_field(line, path):
    assert [e for e in errors_of(line) if e.startswith(path + ":")]


@pytest.mark.parametrize("section, path", [
    ("colour: blue", "smart_routing.colour"),
    ("model_profiles:\n  - {model: m, tier: 1, speed: 3}", "smart_routing.model_profiles[0].speed"),
    (policy("{colour: [x]}"), "smart_routing.routing_policies[0].when.colour"),
    ("routing_policies:\n  - {name: p, route_to: {tier: 1, model: m}}",
     "smart_routing.routing_policies[0].route_to.model"),
    ("routing_policies:\n  - {name: p, route_to: {tier: 1}, priority: 1}",
     "smart_routing.routing_policies[0].priority"),
    ("classifier: {mode: rule}", "smart_routing.classifier.mode"),
    ("classifier: {rule: {threshold: 0.5}}", "smart_routing.classifier.rule.threshold"),
    ("classifier: {llm: {model: m, seed: 1}}", "smart_routing.classifier.llm.seed"),
    ("classifier: {custom_domains: [{name: legal, colour: x}]}", "smart_routing.classifier.custom_domains[0].colour"),
])
def test_unknown_keys_anywhere_are_errors(section, path):
    assert f"{path}: unknown key" in errors_of(section)


# --- model_profiles ---------------------------------------------------------------------------

@pytest.mark.parametrize("entry", ["{tier: 1}", "{model: a, model_pattern: 'a*', tier: 1}"])
def test_profile_needs_exactly_one_of_model_and_model_pattern(entry):
    assert any(e.startswith("smart_routing.model_profiles[0]: needs exactly one of model")
               for e in errors_of(f"model_profiles:\n  - {entry}"))


@pytest.mark.parametrize("key", ["model", "model_pattern"])
def test_profile_names_are_at_most_200_characters(key):
    assert smart(f"model_profiles:\n  - {{{key}: {'a' * 200}, tier: 1}}").model_profiles[0].tier == 1
    errors = errors_of(f"model_profiles:\n  - {{{key}: {'a' * 201}, tier: 1}}")
    assert f"smart_routing.model_profiles[0].{key}: must be at most 200 characters, got 201" in errors


def test_profile_names_must_not_be_empty():
    assert "smart_routing.model_profiles[0].model: must not be empty" in \
        errors_of('model_profiles:\n  - {model: "", tier: 1}')


def test_model_pattern_uses_only_star_as_wildcard():
    assert smart("model_profiles:\n  - {model_pattern: '*llama*-q4_*', tier: 3}").model_profiles[0].model_pattern \
        == "*llama*-q4_*"
    for pattern in ("gpt-?", "gpt-[45]"):
        assert any(e.startswith("smart_routing.model_profiles[0].model_pattern: may use only '*'")
                   for e in errors_of(f"model_profiles:\n  - {{model_pattern: '{pattern}', tier: 3}}"))


def test_exact_model_with_a_star_points_to_model_pattern():
    assert any("use model_pattern for a glob" in e for e in errors_of("model_profiles:\n  - {model: 'gpt-*', tier: 1}"))


def test_profile_tier_is_required_and_1_to_3():
    assert "smart_routing.model_profiles[0].tier: is required" in errors_of("model_profiles:\n  - {model: m}")
    assert any(e.startswith("smart_routing.model_profiles[0].tier: must be 1 (flagship), 2 (standard) or 3")
               for e in errors_of("model_profiles:\n  - {model: m, tier: 4}"))


def test_profile_domains_are_builtin_or_custom():
    s = smart("classifier: {custom_domains: [{name: medical}]}\nmodel_profiles:\n  - {model: m, tier: 1, "
              "domains: [medical, code, code]}")
    assert s.model_profiles[0].domains == ("medical", "code")
    assert any(e.startswith("smart_routing.model_profiles[0].domains: item [0] 'medical' is not a domain")
               for e in errors_of("model_profiles:\n  - {model: m, tier: 1, domains: [medical]}"))


def test_profile_cost_zero_is_valid():
    p = smart("model_profiles:\n  - {model: m, tier: 3, cost_per_1k_input_tokens: 0, cost_per_1k_output_tokens: 0.0}")
    assert (p.model_profiles[0].cost_per_1k_input_tokens, p.model_profiles[0].cost_per_1k_output_tokens) == (0.0, 0.0)


@pytest.mark.parametrize("value", ["-0.001", ".nan", ".inf", "-.inf", "cheap", "true"])
@pytest.mark.parametrize("key", ["cost_per_1k_input_tokens", "cost_per_1k_output_tokens"])
def test_profile_cost_negative_or_not_finite_is_an_error_naming_the_profile(key, value):
    errors = errors_of(f"model_profiles:\n  - {{model: a, tier: 1}}\n  - {{model: gpt-x, tier: 1, {key}: {value}}}")
    assert any(e.startswith(f'smart_routing.model_profiles[1].{key}: must be a finite number >= 0 (profile "gpt-x")')
               for e in errors), errors


# --- routing_policies ---------------------------------------------------------------------------

def test_policy_name_is_required_non_empty_and_unique():
    assert "smart_routing.routing_policies[0].name: is required" in \
        errors_of("routing_policies:\n  - {route_to: {tier: 1}}")
    assert "smart_routing.routing_policies[0].name: must not be empty" in \
        errors_of('routing_policies:\n  - {name: "", route_to: {tier: 1}}')
    assert "smart_routing.routing_policies[1].name: duplicate policy name 'p' " \
           "(also smart_routing.routing_policies[0])" \
        in errors_of("routing_policies:\n  - {name: p, route_to: {tier: 1}}\n  - {name: p, route_to: {tier: 2}}")


def test_missing_or_empty_when_is_a_catch_all():
    s = smart("routing_policies:\n  - {name: a, route_to: {tier: 1}}\n  - {name: b, when: {}, route_to: {tier: 2}}")
    assert all(p.when.catch_all for p in s.routing_policies)


def test_when_complexity_takes_builtin_and_custom_levels():
    s = smart("classifier: {custom_complexity_levels: [{name: specialized}]}\n" + policy("{complexity: [specialized]}"))
    assert s.routing_policies[0].when.complexity == ("specialized",)
    assert any(e.startswith("smart_routing.routing_policies[0].when.complexity: item [0] 'specialized' is not a")
               for e in errors_of(policy("{complexity: [specialized]}")))


def test_when_domain_and_requires_take_only_known_values():
    assert any(e.startswith("smart_routing.routing_policies[0].when.domain: item [1] 'legal' is not a domain")
               for e in errors_of(policy("{domain: [code, legal]}")))
    assert any(e.startswith("smart_routing.routing_policies[0].when.requires: item [0] 'audio' is not a capability")
               for e in errors_of(policy("{requires: [audio]}")))


@pytest.mark.parametrize("key", ["complexity", "domain", "requires", "key_tier", "org", "language"])
def test_lists_in_when_must_not_be_empty(key):
    assert any(e.startswith(f"smart_routing.routing_policies[0].when.{key}: must not be empty: an empty list matches")
               for e in errors_of(policy(f"{{{key}: []}}")))


def test_when_identity_lists_are_strings():
    when = smart(policy("{key_tier: [tier_build], org: [org_a, org_b]}")).routing_policies[0].when
    assert (when.key_tier, when.org) == (("tier_build",), ("org_a", "org_b"))
    assert any(e.startswith("smart_routing.routing_policies[0].when.org: item [0] must be a string")
               for e in errors_of(policy("{org: [7]}")))


def test_when_language_keeps_the_lower_case_primary_subtag_and_allows_und():
    when = smart(policy("{language: [ko, KO, ko-KR, zh_Hant_TW, und]}")).routing_policies[0].when
    assert when.language == ("ko", "zh", "und")


@pytest.mark.parametrize("tag", ["korean", "k", "ko KR", "12"])
def test_when_language_rejects_what_is_not_a_language_tag(tag):
    assert any(e.startswith("smart_routing.routing_policies[0].when.language: item [0] must be a BCP-47 language tag")
               for e in errors_of(policy(f"{{language: ['{tag}']}}")))


def test_when_header_names_and_values_are_lower_cased_and_an_empty_list_means_present():
    when = smart(policy("{header: {X-Route-Hint: [Thorough, THOROUGH, fast], X-Beta: []}}")).routing_policies[0].when
    assert dict(when.header) == {"x-route-hint": ("thorough", "fast"), "x-beta": ()}


def test_when_header_value_longer_than_256_bytes_can_never_match_so_is_an_error():
    assert smart(policy(f"{{header: {{x-h: ['{'a' * 256}']}}}}")).routing_policies[0].when.header["x-h"] == ("a" * 256,)
    errors = errors_of(policy(f"{{header: {{x-h: ['{'é' * 129}']}}}}"))     # 258 bytes, 129 characters
    assert any(e.startswith("smart_routing.routing_policies[0].when.header: [x-h] item [0] is longer than 256 bytes")
               and "can never match" in e for e in errors)


@pytest.mark.parametrize("header, rule", [
    ("{}", "must name at least one header"),
    ("{'bad name': []}", "which is not an HTTP header name"),
    ("{x-h: thorough}", "must be a list of values"),
    ("{X-H: [a], x-h: [b]}", "names 'x-h' twice"),
])
def test_when_header_shape_errors(header, rule):
    assert any(e.startswith("smart_routing.routing_policies[0].when.header:") and rule in e
               for e in errors_of(policy(f"{{header: {header}}}")))


@pytest.mark.parametrize("bounds, expected", [
    ("{gt: 120000}", TokenRange(gt=120000)),
    ("{gte: 10, lte: 11}", TokenRange(gte=10, lte=11)),
    ("{gt: 10, lt: 13}", TokenRange(gt=10, lt=13)),
    ("{lt: 2}", TokenRange(lt=2)),
    ("{gte: 0}", TokenRange(gte=0)),
])
def test_input_tokens_ranges_admitting_two_or_more_estimates_load(bounds, expected):
    assert smart(policy(f"{{input_tokens: {bounds}}}")).routing_policies[0].when.input_tokens == expected


@pytest.mark.parametrize("bounds, rule", [
    ("{}", "must give a bound"),
    ("{gt: 1, gte: 2}", "gives both gt and gte"),
    ("{lt: 9, lte: 8}", "gives both lt and lte"),
    ("{gte: 10, lte: 10}", "admits 1 token estimate(s)"),
    ("{gt: 10, lt: 11}", "admits 0 token estimate(s)"),
    ("{lte: 0}", "admits 1 token estimate(s)"),
    ("{gt: -1}", "gt must be at least 0"),
    ("{gt: 1.5}", "gt must be an integer"),
    ("{above: 3}", "has unknown key 'above'"),
    ("[1, 2]", "must be a mapping of gt, gte, lt, lte"),
])
def test_input_tokens_invalid_ranges_are_load_errors(bounds, rule):
    errors = errors_of(policy(f"{{input_tokens: {bounds}}}"))
    assert any(e.startswith("smart_routing.routing_policies[0].when.input_tokens:") and rule in e
               for e in errors), errors


def test_route_to_tier_is_required_and_1_to_3():
    assert "smart_routing.routing_policies[0].route_to.tier: is required" in \
        errors_of("routing_policies:\n  - {name: p}")
    assert any(e.startswith("smart_routing.routing_policies[0].route_to.tier: must be 1")
               for e in errors_of(policy(tier=5)))


def test_route_to_domains_and_capabilities_are_known_values():
    s = smart("classifier: {custom_domains: [{name: medical}]}\nrouting_policies:\n  - name: p\n"
              "    route_to: {tier: 1, prefer_domains: [medical], require_capabilities: [tools, vision]}")
    assert s.routing_policies[0].route_to == RouteTo(1, ("medical",), ("tools", "vision"))
    errors = errors_of("routing_policies:\n  - {name: p, route_to: {tier: 1, prefer_domains: [legal], "
                       "require_capabilities: [audio]}}")
    assert any(e.startswith("smart_routing.routing_policies[0].route_to.prefer_domains: item [0] 'legal'")
               for e in errors)
    assert any(e.startswith("smart_routing.routing_policies[0].route_to.require_capabilities: item [0] 'audio'")
               for e in errors)


# --- classifier -------------------------------------------------------------------------------

def test_method_is_rule_llm_or_hybrid():
    assert smart("classifier: {method: hybrid, llm: {model: m}}").classifier.method == "hybrid"
    assert any(e.startswith("smart_routing.classifier.method: must be one of rule, llm, hybrid")
               for e in errors_of("classifier: {method: magic}"))


@pytest.mark.parametrize("method", ["system_one", "hybrid_system_one"])
def test_system_one_methods_are_not_supported(method):
    assert f"smart_routing.classifier.method: '{method}': the System One decision-model classifier is not " \
           "supported in this build (use rule, llm or hybrid)" in errors_of(f"classifier: {{method: {method}}}")


def test_a_system_one_block_is_not_supported():
    errors = errors_of("classifier:\n  system_one: {protocol: typesafe}")
    assert "smart_routing.classifier.system_one: the System One decision-model classifier is not supported in " \
           "this build (use rule, llm or hybrid)" in errors


def test_shadow_is_a_boolean():
    assert smart("classifier: {shadow: true, llm: {model: m}}").classifier.shadow is True
    assert any(e.startswith("smart_routing.classifier.shadow:") for e in errors_of("classifier: {shadow: 1}"))


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0, 0.5])
def test_confidence_threshold_takes_both_ends_of_0_to_1(value):
    rule = smart(f"classifier: {{rule: {{confidence_threshold: {value}}}}}").classifier.rule
    assert rule.confidence_threshold == value


@pytest.mark.parametrize("value", ["-0.01", "1.01", ".nan", ".inf", "-.inf", "high"])
def test_confidence_threshold_outside_0_to_1_or_not_finite_is_an_error(value):
    assert any(e.startswith("smart_routing.classifier.rule.confidence_threshold:")
               for e in errors_of(f"classifier: {{rule: {{confidence_threshold: {value}}}}}"))


def test_primary_language_keeps_the_lower_case_first_subtag():
    assert smart("classifier: {rule: {primary_language: ko-KR}}").classifier.rule.primary_language == "ko"
    assert smart("classifier: {rule: {primary_language: FR}}").classifier.rule.primary_language == "fr"
    for bad in ("korean", "k", "1"):
        assert any(e.startswith("smart_routing.classifier.rule.primary_language: must be a BCP-47 language tag")
                   for e in errors_of(f"classifier: {{rule: {{primary_language: '{bad}'}}}}"))


def test_keywords_are_stripped_lower_cased_and_deduplicated_keeping_the_first():
    rule = smart("""
classifier:
  rule:
    keywords:
      ko-KR:
        complex: ["  커널 스케줄러 ", "Kernel", "kernel"]
        code: ["배포", "헬름 차트"]
      FR:
        creative: [Poème]
""").classifier.rule
    assert {k: dict(v) for k, v in rule.keywords.items()} == {
        "ko": {"complex": ("커널 스케줄러", "kernel"), "code": ("배포", "헬름 차트")},
        "fr": {"creative": ("poème",)},
    }


@pytest.mark.parametrize("keywords, path, rule", [
    ("{ko: {complex: ['  ']}}", "smart_routing.classifier.rule.keywords.ko.complex", "item [0] must not be empty"),
    ("{ko: {complex: [3]}}", "smart_routing.classifier.rule.keywords.ko.complex", "item [0] must be a string"),
    ("{ko: {medical: [x]}}", "smart_routing.classifier.rule.keywords.ko.medical", "is not a keyword table"),
    ("{korean: {code: [x]}}", "smart_routing.classifier.rule.keywords.korean", "must be a BCP-47 language tag"),
    ("{ko: [x]}", "smart_routing.classifier.rule.keywords.ko", "must be a mapping"),
])
def test_keyword_errors_name_language_and_table(keywords, path, rule):
    assert any(e.startswith(f"{path}: {rule}") for e in errors_of(f"classifier: {{rule: {{keywords: {keywords}}}}}"))


def test_llm_settings_load_every_field():
    c = smart("""
classifier:
  method: llm
  custom_domains: [{name: medical, description: clinical}]
  llm:
    model: gpt-5.6-terra
    backend: "  public  "
    timeout_ms: 1500
    max_input_tokens: 400
    max_retries: 0
    temperature: 2
    max_output_tokens: 100
    structured_output: json_schema
    few_shot_examples: false
    custom_examples:
      - user: "What dose of ibuprofen?"
        classification: {complexity: simple, domain: medical}
    cache_ttl_seconds: 0
    max_cache_entries: 1
    disable_under_load_state: warning
""").classifier
    assert c.llm == LlmSettings("gpt-5.6-terra", "public", 1500, 400, 0, 2.0, 100, "json_schema", False,
                                (FewShotExample("What dose of ibuprofen?", "simple", "medical"),), 0.0, 1, "warning")
    assert c.custom_domains == (CustomDomain("medical", "clinical"),)


@pytest.mark.parametrize("line", [
    "timeout_ms: 0", "max_input_tokens: 0", "max_retries: 2", "temperature: 2.01", "temperature: -0.1",
    "temperature: .nan", "max_output_tokens: 0", "structured_output: xml", "few_shot_examples: 1",
    "cache_ttl_seconds: -1", "max_cache_entries: 0", "disable_under_load_state: fatal", "model: ''",
])
def test_llm_field_errors_name_the_field(line):
    key = line.split(":")[0]
    assert any(e.startswith(f"smart_routing.classifier.llm.{key}:")
               for e in errors_of(f"classifier:\n  llm:\n    model: m\n    {line}"))


def test_llm_backend_is_stripped_and_empty_means_omitted():
    assert smart("classifier: {llm: {backend: '   '}}").classifier.llm.backend is None
    assert smart("classifier: {llm: {backend: ' hidden '}}").classifier.llm.backend == "hidden"


def test_disable_under_load_state_left_empty_means_never_disabled():
    assert smart("classifier:\n  llm:\n    disable_under_load_state:").classifier.llm.disable_under_load_state == ""
    assert smart("classifier: {llm: {disable_under_load_state: ''}}").classifier.llm.disable_under_load_state == ""


def test_custom_examples_need_a_user_and_a_known_level_and_domain():
    errors = errors_of("""
classifier:
  llm:
    custom_examples:
      - classification: {complexity: simple, domain: medical}
      - {user: hi, classification: {complexity: hard}}
""")
    assert "smart_routing.classifier.llm.custom_examples[0].user: is required" in errors
    assert any(e.startswith("smart_routing.classifier.llm.custom_examples[0].classification.domain: must be one of")
               for e in errors)
    assert any(e.startswith("smart_routing.classifier.llm.custom_examples[1].classification.complexity: must be one")
               for e in errors)
    assert "smart_routing.classifier.llm.custom_examples[1].classification.domain: is required" in errors


@pytest.mark.parametrize("section, why", [
    ("classifier: {method: llm}", "method is llm"),
    ("classifier: {method: hybrid}", "method is hybrid"),
    ("classifier: {shadow: true}", "shadow is true"),
])
def test_llm_model_is_required_when_the_llm_classifier_runs(section, why):
    assert f"smart_routing.classifier.llm.model: is required when {why}: the LLM classifier needs a model" in \
        errors_of(section)


def test_llm_model_is_optional_for_the_rule_method():
    assert smart("classifier: {method: rule}").classifier.llm.model is None


@pytest.mark.parametrize("name, state", [("nowhere", "does not exist"), ("down", "is disabled")])
@pytest.mark.parametrize("method", ["llm", "hybrid", "rule\n  shadow: true"])
def test_a_named_classifier_backend_that_is_missing_or_disabled_is_a_load_error(method, name, state):
    errors = errors_of(f"classifier:\n  method: {method}\n  llm: {{model: m, backend: {name}}}")
    assert any(e.startswith(f"smart_routing.classifier.llm.backend: backend '{name}' {state}") for e in errors)


def test_an_internal_classifier_backend_is_fine():
    assert smart("classifier: {method: llm, llm: {model: m, backend: hidden}}").classifier.llm.backend == "hidden"


def test_a_named_backend_is_not_checked_when_the_llm_classifier_never_runs():
    assert smart("classifier: {method: rule, llm: {backend: nowhere}}").classifier.llm.backend == "nowhere"


def test_custom_complexity_levels_at_most_5_unique_not_builtin():
    c = smart("classifier:\n  custom_complexity_levels:\n"
              "    - {name: specialized, description: fine-tuned, rank: 6}\n    - {name: frontier}").classifier
    assert c.custom_complexity_levels == (CustomLevel("specialized", "fine-tuned", 6), CustomLevel("frontier"))
    assert c.complexity_levels[-2:] == ("specialized", "frontier")
    six = "".join(f"\n    - {{name: l{i}}}" for i in range(6))
    assert "smart_routing.classifier.custom_complexity_levels: at most 5 custom levels, got 6" in \
        errors_of(f"classifier:\n  custom_complexity_levels:{six}")
    errors = errors_of("classifier:\n  custom_complexity_levels:\n    - {name: expert}\n    - {name: x}\n"
                       "    - {name: x}\n    - {name: y, rank: high}")
    assert "smart_routing.classifier.custom_complexity_levels[0].name: 'expert' is a built-in complexity level" \
        in errors
    assert "smart_routing.classifier.custom_complexity_levels[2].name: duplicate custom complexity level 'x'" in errors
    assert any(e.startswith("smart_routing.classifier.custom_complexity_levels[3].rank: must be an integer")
               for e in errors)


def test_custom_domains_unique_and_not_builtin():
    c = smart("classifier: {custom_domains: [{name: medical}, {name: legal, description: law}]}").classifier
    assert c.domains == BUILTIN_DOMAINS + ("medical", "legal")
    errors = errors_of("classifier: {custom_domains: [{name: code}, {name: legal}, {name: legal}, {description: x}]}")
    assert "smart_routing.classifier.custom_domains[0].name: 'code' is a built-in domain" in errors
    assert "smart_routing.classifier.custom_domains[2].name: duplicate custom domain 'legal'" in errors
    assert "smart_routing.classifier.custom_domains[3].name: is required" in errors


# --- warnings ---------------------------------------------------------------------------------

def test_exclude_without_profiles_warns_that_every_model_is_excluded():
    warnings = warnings_of("enabled: true\nunprofiled_models: exclude")
    assert any(w.startswith("smart_routing.unprofiled_models: exclude with no model_profiles: every model is excluded")
               for w in warnings)
    assert warnings_of("enabled: false\nunprofiled_models: exclude") == []
    assert warnings_of("enabled: true\nunprofiled_models: exclude\nmodel_profiles: [{model: m, tier: 1}]") == []


EXPERT_ONLY = policy("{complexity: [expert]}")
EXPERT_WARNING = "smart_routing.routing_policies[0].when.complexity: matches expert without complex"


def expert_warned(section: str, **kw) -> bool:
    return any(w.startswith(EXPERT_WARNING) and "0.683" in w and "0.734" in w and "[complex, expert]" in w
               and "method llm" in w for w in warnings_of(section, **kw))


def test_expert_only_policy_warns_with_the_rule_classifier():
    assert expert_warned(f"enabled: true\n{EXPERT_ONLY}")


def test_expert_only_policy_does_not_warn_when_smart_routing_is_off():
    assert not expert_warned(EXPERT_ONLY)


def test_complex_and_expert_together_do_not_warn():
    assert not expert_warned(f"enabled: true\n{policy('{complexity: [complex, expert]}')}")


def test_expert_only_policy_warns_in_hybrid_at_the_default_threshold():
    assert expert_warned(f"enabled: true\nclassifier: {{method: hybrid, llm: {{model: m}}}}\n{EXPERT_ONLY}")


def test_hybrid_threshold_above_rule_max_confidence_escalates_everything_so_no_warning():
    section = "enabled: true\nclassifier: {{method: hybrid, rule: {{confidence_threshold: {}}}, llm: {{model: m}}}}\n"
    assert not expert_warned(section.format(0.96) + EXPERT_ONLY)
    assert expert_warned(section.format(0.95) + EXPERT_ONLY)


def test_llm_method_with_a_classifier_backend_does_not_warn_about_expert():
    assert not expert_warned(f"enabled: true\nclassifier: {{method: llm, llm: {{model: m}}}}\n{EXPERT_ONLY}")


NO_PUBLIC = """
backends:
  - name: hidden
    url: http://127.0.0.1:8001
    models: [m]
    internal: true
"""


def test_llm_or_hybrid_without_a_resolvable_backend_warns_about_expert_too():
    for method in ("llm", "hybrid"):
        section = f"enabled: true\nclassifier: {{method: {method}, rule: {{confidence_threshold: 1}}, " \
                  f"llm: {{model: m}}}}"
        assert expert_warned(f"{section}\n{EXPERT_ONLY}", backends=NO_PUBLIC)


@pytest.mark.parametrize("method", ["llm", "hybrid"])
def test_llm_or_hybrid_without_a_classifier_backend_warns_the_router_classifies_by_rule(method):
    warnings = warnings_of(f"classifier: {{method: {method}, llm: {{model: m}}}}", backends=NO_PUBLIC)
    assert any(w.startswith("smart_routing.classifier.llm.backend:") and "the router will classify by rule" in w
               for w in warnings)
    assert warnings_of(f"classifier: {{method: {method}, llm: {{model: m, backend: hidden}}}}",
                       backends=NO_PUBLIC) == []


KEYS = """
api_keys:
  - id: team-a
    key: sk-aaaaaaaaaaaaaaaaaaaa
"""


def test_key_tier_without_any_tiered_key_matches_nothing_and_warns():
    warnings = warnings_of(policy("{key_tier: [tier_build]}"), extra=KEYS)
    assert any(w.startswith("smart_routing.routing_policies[0].when.key_tier: no api_keys entry has a tier")
               and "fail closed" in w for w in warnings)
    tiered = KEYS + "    tier: tier_build\n"
    assert warnings_of(policy("{key_tier: [tier_build]}"), extra=tiered) == []


def test_shadow_beside_the_rule_classifier_without_a_backend_warns_no_shadow_runs():
    warnings = warnings_of("classifier: {method: rule, shadow: true, llm: {model: m}}", backends=NO_PUBLIC)
    assert any(w.startswith("smart_routing.classifier.llm.backend: method rule with shadow: true")
               and "no shadow classification" in w for w in warnings)


def test_a_virtual_model_a_backend_serves_warns_that_it_is_intercepted():
    warnings = warnings_of("enabled: true\nvirtual_model: m")
    assert any(w.startswith("smart_routing.virtual_model: 'm' is also a model a backend serves") for w in warnings)
    assert not any(w.startswith("smart_routing.virtual_model") for w in warnings_of("enabled: true"))


def test_a_language_the_classifier_never_detects_warns_that_it_never_matches():
    warnings = warnings_of(policy("{language: [fr, ko]}"))
    assert any(w.startswith("smart_routing.routing_policies[0].when.language: fr: the classifier detects only")
               for w in warnings)


def test_policy_names_are_header_safe_tokens():
    errors = errors_of('routing_policies:\n  - {name: "two words", route_to: {tier: 1}}')
    assert any(e.startswith("smart_routing.routing_policies[0].name: must be 1-128 letters, digits") for e in errors)


def test_an_empty_load_state_is_named_in_the_allowed_values():
    errors = errors_of("classifier: {llm: {disable_under_load_state: normal}}")
    assert any("must be one of critical, warning, '', got 'normal'" in e for e in errors)


# --- admin parse functions ----------------------------------------------------------------------

def test_parse_model_profiles_validates_like_the_loader_and_lists_every_problem():
    raw = [{"model": "a", "tier": 1, "domains": ["medical"]},
           {"model": "gpt-x", "tier": 2, "cost_per_1k_input_tokens": math.nan},
           {"model_pattern": "b*", "model": "b", "tier": 9}]
    with pytest.raises(SmartRoutingError) as info:
        parse_model_profiles(raw, BUILTIN_DOMAINS)
    errors = info.value.errors
    assert any(e.startswith("smart_routing.model_profiles[0].domains: item [0] 'medical'") for e in errors)
    assert any(e.startswith('smart_routing.model_profiles[1].cost_per_1k_input_tokens: must be a finite number >= 0 '
                            '(profile "gpt-x")') for e in errors)
    assert any(e.startswith("smart_routing.model_profiles[2]: needs exactly one of") for e in errors)
    assert any(e.startswith("smart_routing.model_profiles[2].tier:") for e in errors)
    assert parse_model_profiles(raw[:1], BUILTIN_DOMAINS + ("medical",)) == \
        (ModelProfile(1, "a", domains=("medical",)),)


def test_parse_routing_policies_uses_the_classifier_taxonomy_and_the_given_path():
    classifier = ClassifierSettings(custom_complexity_levels=(CustomLevel("specialized"),))
    raw = [{"name": "s", "when": {"complexity": ["specialized"], "language": ["KO-kr"]}, "route_to": {"tier": 1}}]
    assert parse_routing_policies(raw, classifier) == (
        RoutingPolicy("s", PolicyWhen(complexity=("specialized",), language=("ko",)), RouteTo(1)),)
    with pytest.raises(SmartRoutingError) as info:
        parse_routing_policies(raw + [{"name": "s", "when": {"input_tokens": {}}}], ClassifierSettings(), path="body")
    errors = info.value.errors
    assert any(e.startswith("body[0].when.complexity: item [0] 'specialized'") for e in errors)
    assert "body[1].name: duplicate policy name 's' (also body[0])" in errors
    assert any(e.startswith("body[1].when.input_tokens: must give a bound") for e in errors)
    assert "body[1].route_to.tier: is required" in errors


def test_parse_routing_policies_rejects_what_is_not_a_list():
    with pytest.raises(SmartRoutingError) as info:
        parse_routing_policies({"name": "p"}, ClassifierSettings())
    assert info.value.errors == ["smart_routing.routing_policies: must be a list, got mapping"]


# --- classifier backend resolution --------------------------------------------------------------

def backend(name: str, enabled: bool = True, internal: bool = False) -> BackendConfig:
    return BackendConfig(name=name, type=BackendType.OPENAI, url=f"http://{name}", enabled=enabled, internal=internal)


POOL = (backend("hidden", internal=True), backend("down", enabled=False), backend("first"), backend("second"))


def test_named_classifier_backend_resolves_even_if_internal():
    assert classifier_backend(LlmSettings(backend="hidden"), POOL).name == "hidden"
    assert classifier_backend(LlmSettings(backend="second"), POOL).name == "second"


def test_named_classifier_backend_that_is_disabled_or_missing_resolves_to_none():
    assert classifier_backend(LlmSettings(backend="down"), POOL) is None
    assert classifier_backend(LlmSettings(backend="nowhere"), POOL) is None


def test_omitted_classifier_backend_is_the_first_one_user_traffic_can_reach():
    assert classifier_backend(LlmSettings(), POOL).name == "first"
    assert classifier_backend(LlmSettings(backend="  "), POOL).name == "first"


def test_omitted_classifier_backend_with_no_public_enabled_backend_is_none():
    assert classifier_backend(LlmSettings(), POOL[:2]) is None


def test_a_load_state_without_a_concurrency_cap_warns_it_has_no_effect():
    section = "enabled: true\nclassifier: {method: llm, llm: {model: m, backend: public}}"
    warnings = warnings_of(section)
    assert any(w.startswith("smart_routing.classifier.llm.disable_under_load_state: 'critical' has no effect")
               for w in warnings)
    assert not any("disable_under_load_state" in w
                   for w in warnings_of(section, extra="server: {max_concurrent_requests: 100}\n"))


def test_custom_names_may_not_differ_from_others_or_built_ins_by_case_alone():
    errors = errors_of("classifier:\n  custom_domains: [{name: Medical}, {name: medical}, {name: Code}]")
    assert any("duplicate custom domain 'medical'" in e for e in errors)
    assert any("'Code' is a built-in domain" in e for e in errors)
