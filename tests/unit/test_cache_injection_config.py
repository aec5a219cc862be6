"""``prefix_routing.anthropic_cache_control_injection``: its two shapes, its scoping and its errors."""

import pytest

from switchyard.config.cache_injection import CacheControlInjection
from switchyard.config.load import ConfigError, load_text

BACKENDS = """
backends:
  - {name: claude, type: anthropic, url: http://claude.simulated, models: [claude-x]}
  - {name: oai, type: simulated, models: [m]}
"""


def injection(text):
    return load_text(BACKENDS + text).snapshot.prefix_routing.anthropic_cache_control_injection


def test_a_boolean_turns_it_on_for_every_backend_and_model_and_it_is_off_by_default():
    assert injection("") == CacheControlInjection(enabled=False)
    assert injection("prefix_routing: {anthropic_cache_control_injection: true}") == CacheControlInjection(True)


def test_a_mapping_is_on_and_narrows_by_backend_and_model():
    found = injection("prefix_routing: {anthropic_cache_control_injection: {backends: [claude], models: [claude-x]}}")
    assert found.enabled and found.applies("claude", ["claude-x"])
    assert not found.applies("claude", ["claude-y"]) and not found.applies("other", ["claude-x"])
    assert not injection("prefix_routing: {anthropic_cache_control_injection: {enabled: false}}").enabled


@pytest.mark.parametrize("value, error", [
    ("{backends: [nope]}", "prefix_routing.anthropic_cache_control_injection.backends[0]: no backend is named 'nope'"),
    ("{backends: [oai]}", "prefix_routing.anthropic_cache_control_injection.backends[0]: backend 'oai' is of type "
                          "simulated: breakpoints go only to anthropic (cache_control) and bedrock (cachePoint) "
                          "backends"),
    ("[claude]", "prefix_routing.anthropic_cache_control_injection: must be a boolean or a mapping, got list"),
    ("{model: [x]}", "prefix_routing.anthropic_cache_control_injection.model: unknown key"),
])
def test_bad_values_are_refused_by_path(value, error):
    with pytest.raises(ConfigError) as info:
        load_text(BACKENDS + f"prefix_routing: {{anthropic_cache_control_injection: {value}}}")
    assert info.value.errors == [error]
