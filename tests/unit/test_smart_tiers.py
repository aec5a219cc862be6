"""Smart routing's tiers: profiles, inference, the tier cache and the candidate pool (actors/routing/tiers.py)."""

import pytest

from switchyard.actors.routing.tiers import (
    Candidate,
    TierCache,
    candidate_pool,
    glob_matches,
    infer_tier,
    profile_for,
)
from switchyard.config.access import ApiKey
from switchyard.config.load import load_text
from switchyard.config.metadata import ModelMetadata, Pricing
from switchyard.config.smart_routing import ModelProfile, SmartRouting


def priced(usd_per_million: float, capabilities=None) -> ModelMetadata:
    return ModelMetadata(pricing=Pricing(input_tokens=usd_per_million), capabilities=capabilities)


# --- profiles ------------------------------------------------------------------------

def test_exact_profile_wins_over_an_earlier_pattern():
    pattern = ModelProfile(tier=3, model_pattern="gpt-*")
    exact = ModelProfile(tier=1, model="gpt-5.6-sol")
    assert profile_for("gpt-5.6-sol", (pattern, exact)) == (exact, "explicit_exact")


def test_first_matching_pattern_wins():
    first, second = ModelProfile(tier=3, model_pattern="*-q4_K_M"), ModelProfile(tier=2, model_pattern="llama*")
    assert profile_for("llama-3-8b-q4_K_M", (first, second)) == (first, "explicit_pattern")


def test_unmatched_model_has_no_profile():
    assert profile_for("phi-3", (ModelProfile(tier=1, model="phi-4"), ModelProfile(tier=2, model_pattern="gpt-*"))) \
        == (None, "")


def test_glob_star_matches_any_run_and_several_are_allowed():
    assert glob_matches("*-q4_K_M", "llama-3-8b-q4_K_M")
    assert glob_matches("gpt-*-*-sol", "gpt-5-6-sol")
    assert glob_matches("*llama*", "meta-llama-3")
    assert glob_matches("a*", "a")
    assert not glob_matches("a*a", "a")          # the two ends may not overlap
    assert not glob_matches("gpt-*-*-sol", "gpt-5-sol")


def test_glob_matches_the_whole_name_case_sensitively():
    assert not glob_matches("gpt-*", "openai/gpt-4o")
    assert not glob_matches("*-q4_K_M", "llama-q4_K_M-extra")
    assert not glob_matches("*-Q4_K_M", "llama-q4_K_M")


def test_glob_question_mark_and_brackets_are_literal():
    assert not glob_matches("gpt-?o", "gpt-4o")
    assert glob_matches("model[1]*", "model[1]-x")
    assert not glob_matches("model[12]", "model1")


# --- inference ------------------------------------------------------------------------

@pytest.mark.parametrize(("price", "tier"), [(3.0, 1), (75.0, 1), (2.99, 2), (0.5, 2), (0.49, 3), (0.01, 3)])
def test_price_per_million_input_tokens_sets_the_tier_at_3_and_0_5(price, tier):
    assert infer_tier(priced(price), "x") == tier


def test_price_decides_before_capabilities_and_name():
    many = ("vision", "reasoning", "audio", "tool")
    assert infer_tier(priced(0.1, many), "ultra-pro") == 3


def test_free_model_skips_the_price_step():
    assert infer_tier(priced(0.0, ("vision", "reasoning", "audio")), "x") == 1
    assert infer_tier(priced(0.0), "llama-mini") == 3
    assert infer_tier(priced(0.0), "llama") is None


def test_three_premium_capabilities_make_a_flagship():
    assert infer_tier(ModelMetadata(capabilities=("chat", "vision", "reasoning", "function_calling")), "x") == 1


def test_one_premium_capability_makes_a_standard_model():
    assert infer_tier(ModelMetadata(capabilities=("chat", "video")), "x-ultra") == 2


def test_three_capabilities_of_any_kind_make_a_standard_model():
    assert infer_tier(ModelMetadata(capabilities=("chat", "text", "code")), "x") == 2


def test_fewer_capabilities_go_on_to_the_name():
    assert infer_tier(ModelMetadata(capabilities=("chat", "text")), "claude-haiku") == 3
    assert infer_tier(ModelMetadata(capabilities=()), "x") is None


def test_tools_and_tool_are_one_premium_capability():
    assert infer_tier(ModelMetadata(capabilities=("tool", "tools", "vision")), "x") == 2


@pytest.mark.parametrize("name", ["gemini-1.5-pro", "Claude-3-Opus", "claude-sonnet-4", "gpt-4-turbo",
                                  "palm:ultra", "vertex/claude-3-5-sonnet@20240620"])
def test_flagship_words_in_the_name_make_a_flagship(name):
    assert infer_tier(None, name) == 1


@pytest.mark.parametrize("name", ["gpt-4o-mini", "mistral-small-latest", "tinyllama/tiny", "gpt-4.1-nano",
                                  "gemini-2.0-flash-lite", "claude-3-haiku", "phi_mini"])
def test_lightweight_words_in_the_name_make_a_lightweight_model(name):
    assert infer_tier(None, name) == 3


@pytest.mark.parametrize("name", ["llama-3-8b-Q4_K_M", "qwen2.5-7b-q5_0", "mistral-q8_0", "TheBloke/Llama-2-7B-GPTQ",
                                  "llama3.gguf", "llama-awq"])
def test_quantization_markers_make_a_lightweight_model(name):
    assert infer_tier(None, name) == 3


def test_lightweight_wins_when_a_name_has_both_kinds_of_word():
    assert infer_tier(None, "gpt-4-turbo-mini") == 3
    assert infer_tier(None, "llama-3-70b-pro-gguf") == 3


def test_name_words_match_whole_tokens_only():
    assert infer_tier(None, "prompt-guard") is None
    assert infer_tier(None, "MiniMax-M1") is None
    assert infer_tier(None, "gpt4turbo") is None


def test_no_evidence_infers_nothing():
    assert infer_tier(None, "llama-3-70b") is None
    assert infer_tier(ModelMetadata(), "qwen3") is None


# --- the cache ------------------------------------------------------------------------

def test_cache_keeps_the_first_inference_per_model_id():
    cache = TierCache()
    assert cache.tier_of("m", priced(5.0)) == 1
    assert cache.tier_of("m", priced(0.1)) == 1
    assert cache.tier_of("unknown", None) is None and "unknown" in cache


def test_cache_holds_at_most_10000_ids_dropping_the_oldest():
    cache = TierCache()
    for i in range(10_001):
        cache.tier_of(f"m{i}", None)
    assert len(cache) == 10_000
    assert "m0" not in cache and "m1" in cache and "m10000" in cache


def test_cache_clear_forgets_every_inference():
    cache = TierCache()
    cache.tier_of("m", priced(5.0))
    cache.clear()
    assert len(cache) == 0
    assert cache.tier_of("m", priced(0.1)) == 3


# --- the candidate pool ----------------------------------------------------------------

SNAP = load_text("""
backends:
  - name: a
    url: "http://a"
    discovery: false
    models: [auto, gpt-5.6-sol, gpt-5.6-terra, llama-q4_K_M, plain, decider, dual, gpt-4o-mini]
    model_configs:
      - {id: gpt-5.6-sol, metadata: {capabilities: [chat, vision, reasoning, tool]}}
      - {id: decider, metadata: {capabilities: [decisions]}}
      - {id: dual, metadata: {capabilities: [decisions, chat]}}
  - name: b
    url: "http://b"
    discovery: false
    models: [gpt-5.6-sol, only-b]
    model_configs:
      - {id: gpt-5.6-sol, metadata: {capabilities: [chat]}}
  - {name: hidden, url: "http://h", models: [secret], internal: true, discovery: false}
  - {name: disabled, url: "http://o", models: [dormant], enabled: false, discovery: false}
""", env={}).snapshot
PROFILES = (ModelProfile(tier=1, model="gpt-5.6-sol", domains=("general", "code"), cost_per_1k_input_tokens=0.005),
            ModelProfile(tier=2, model="gpt-5.6-terra"),
            ModelProfile(tier=3, model_pattern="*-q4_K_M", domains=("general",)))
SETTINGS = SmartRouting(enabled=True, model_profiles=PROFILES)


def pool(routable=lambda b, m: True, key=None, settings=SETTINGS, cache=None):
    return candidate_pool(SNAP, {}, routable, key, cache or TierCache(), settings)


def by_model(p):
    return {c.model: c for c in p.candidates}


def test_pool_is_the_public_model_list_without_the_virtual_model():
    models = set(by_model(pool()))
    assert models == {"gpt-5.6-sol", "gpt-5.6-terra", "llama-q4_K_M", "plain", "dual", "gpt-4o-mini", "only-b"}
    assert {"auto", "secret", "dormant"}.isdisjoint(models)


def test_profiled_candidates_carry_tier_source_domains_and_cost():
    found = by_model(pool())
    assert found["gpt-5.6-sol"] == Candidate("gpt-5.6-sol", 1, "explicit_exact", ("general", "code"), 0.005,
                                             ("chat", "vision", "reasoning", "tool"), ("a", "b"))
    assert (found["gpt-5.6-terra"].source, found["gpt-5.6-terra"].cost_in) == ("explicit_exact", None)
    assert (found["llama-q4_K_M"].tier, found["llama-q4_K_M"].source) == (3, "explicit_pattern")


def test_unprofiled_models_keep_an_inferred_tier_or_the_default_tier():
    found = by_model(pool(settings=SmartRouting(model_profiles=PROFILES, default_tier=1)))
    assert (found["gpt-4o-mini"].tier, found["gpt-4o-mini"].source) == (3, "auto_inferred")
    assert (found["plain"].tier, found["plain"].source) == (1, "default")
    assert found["plain"].domains == () and found["plain"].cost_in is None


def test_exclude_moves_unprofiled_models_out_of_the_pool():
    p = pool(settings=SmartRouting(model_profiles=PROFILES, unprofiled_models="exclude"))
    assert set(by_model(p)) == {"gpt-5.6-sol", "gpt-5.6-terra", "llama-q4_K_M"}
    assert p.excluded_unprofiled == ("dual", "gpt-4o-mini", "only-b", "plain")


def test_decisions_only_models_are_excluded_as_incompatible():
    p = pool()
    assert p.excluded_incompatible == ("decider",)
    assert "dual" in by_model(p)


def test_a_model_needs_one_routable_public_backend():
    found = by_model(pool(routable=lambda b, m: b != "a"))
    assert found["gpt-5.6-sol"].backends == ("b",)
    assert "plain" not in found and "only-b" in found


def test_capabilities_come_from_the_first_serving_backend_whatever_its_health():
    assert by_model(pool(routable=lambda b, m: b == "b"))["gpt-5.6-sol"].capabilities == (
        "chat", "vision", "reasoning", "tool")


def test_a_key_sees_only_the_models_it_allows():
    key = ApiKey(id="k", key="s", allowed_models=("gpt-5.6-*",))
    assert set(by_model(pool(key=key))) == {"gpt-5.6-sol", "gpt-5.6-terra"}


def test_a_key_needs_an_allowed_backend_serving_the_model():
    key = ApiKey(id="k", key="s", allowed_backends=("b",))
    found = by_model(pool(key=key))
    assert set(found) == {"gpt-5.6-sol", "only-b"}
    assert found["gpt-5.6-sol"].backends == ("b",)


def test_the_pool_uses_and_fills_the_tier_cache():
    cache = TierCache()
    cache.tier_of("plain", priced(10.0))
    found = by_model(pool(cache=cache))
    assert (found["plain"].tier, found["plain"].source) == (1, "auto_inferred")
    assert "gpt-4o-mini" in cache and "gpt-5.6-sol" not in cache
