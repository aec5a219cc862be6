"""One test per rule of ``fallback.quality_check`` at load: each error at its field path."""

import pytest

from switchyard.config.load import ConfigError, load_text
from switchyard.config.quality_check import CHECKS

MINIMAL = """
backends:
  - {name: sim, type: simulated, models: [big]}
fallback:
  quality_check: """


def errors_of(section: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(MINIMAL + section + "\n", env={})
    return info.value.errors


def test_defaults_judge_no_model_with_every_check():
    qc = load_text(MINIMAL + "{}\n", env={}).snapshot.fallback.quality_check
    assert (qc.models, qc.checks, qc.refusal_patterns) == ((), frozenset(CHECKS), ())


def test_patterns_are_compiled_at_load():
    loaded = load_text(MINIMAL + "{models: [big], refusal_patterns: ['(?i)^sorry']}\n", env={})
    qc = loaded.snapshot.fallback.quality_check
    assert qc.applies_to("big") and qc.compiled[0].search("SORRY, no")


def test_a_pattern_that_does_not_compile_is_an_error_naming_its_index():
    assert errors_of("{refusal_patterns: ['fine', '(']}") == [
        "fallback.quality_check.refusal_patterns: item [1] is not a valid regular expression: "
        "missing ), unterminated subpattern at position 0"]


def test_a_pattern_matching_the_empty_string_is_an_error():
    assert errors_of("{refusal_patterns: ['x*']}") == [
        "fallback.quality_check.refusal_patterns: item [0] must not match the empty string"]


def test_an_unknown_check_is_an_error():
    assert errors_of("{checks: [json_schema, grammar]}") == [
        "fallback.quality_check.checks: item [1] must be one of json_schema, tool_arguments, empty, refusal, "
        "got 'grammar'"]


def test_an_empty_check_list_is_an_error():
    assert errors_of("{checks: []}") == [
        "fallback.quality_check.checks: must name at least one check of json_schema, tool_arguments, empty, refusal"]


def test_models_follow_the_chain_model_name_rule():
    assert errors_of("{models: ['gpt 4o']}") == [
        "fallback.quality_check.models: item [0] model name has ' ' (U+0020) at byte offset 3; only letters, "
        "digits and - _ . / : are allowed (got 'gpt 4o')"]


def test_an_unknown_key_is_refused_at_its_path():
    assert errors_of("{model: [big]}") == ["fallback.quality_check.model: unknown key"]
