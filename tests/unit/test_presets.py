"""One test per rule of ``request_presets``: loading (exact error strings: dotted path,
then rule), resolving a request's ``preset``, and its order against ``request_params``."""


import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.params import apply_policy, apply_preset
from switchyard.config.params import Bound, ParamPolicy, ParamScope, Preset
from tests.unit.test_request_params import errors_of, load

SPEC_EXAMPLE = """
request_presets:
  support-bot:
    model: gpt-5-mini
    params:
      temperature: 0.2
      max_tokens: 1024
"""

PRESETS = {
    "support-bot": Preset("support-bot", model="gpt-5-mini", params={"temperature": 0.2, "max_tokens": 1024}),
    "sampling": Preset("sampling", params={"top_k": 40, "top_p": 0.8}),
    "model-only": Preset("model-only", model="small"),
}


def refused(payload: dict) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        apply_preset(payload, PRESETS)
    return info.value


# --- loading ----------------------------------------------------------------------------

def test_absent_section_is_no_presets():
    assert load("").request_presets == {}


def test_spec_example_preset_loads():
    assert load(SPEC_EXAMPLE).request_presets == {"support-bot": PRESETS["support-bot"]}


def test_preset_slug_pattern():
    ok = load("request_presets: {A.b_c-9: {model: m}}").request_presets
    assert list(ok) == ["A.b_c-9"]
    assert errors_of("request_presets: {'support bot': {model: m}, 'ü': {model: m}, 7: {model: m}}") == [
        "request_presets.support bot: preset name must be 1-64 letters, digits, '.', '_' or '-'",
        "request_presets.ü: preset name must be 1-64 letters, digits, '.', '_' or '-'",
        "request_presets.7: preset name must be 1-64 letters, digits, '.', '_' or '-'"]


def test_slug_at_most_64_characters():
    assert list(load(f"request_presets: {{{'p' * 64}: {{model: m}}}}").request_presets) == ["p" * 64]
    assert errors_of(f"request_presets: {{{'p' * 65}: {{model: m}}}}") == [
        f"request_presets.{'p' * 65}: preset name must be 1-64 letters, digits, '.', '_' or '-'"]


def test_at_most_256_presets():
    many = "\n".join(f"  p{i}: {{model: m}}" for i in range(257))
    assert errors_of("request_presets:\n" + many) == ["request_presets: at most 256 presets, got 257"]
    assert len(load("request_presets:\n" + "\n".join(many.splitlines()[:256])).request_presets) == 256


def test_preset_model_is_trimmed():
    assert load("request_presets: {p: {model: '  gpt-5 '}}").request_presets["p"].model == "gpt-5"


def test_preset_model_must_be_a_usable_model_id():
    assert errors_of(f"""
    request_presets:
      a: {{model: '   '}}
      b: {{model: "x\\u0000y"}}
      c: {{model: {'m' * 257}}}
      d: {{model: 5}}
    """) == [
        "request_presets.a.model: must not be empty or only spaces",
        "request_presets.b.model: must not contain control characters",
        "request_presets.c.model: must be at most 256 bytes in UTF-8, got 257",
        "request_presets.d.model: must be a string model id, got integer (quote it)"]


def test_preset_must_set_model_or_params():
    assert errors_of("request_presets: {a: {}, b: {params: {}}, c: null, d: {model: null, params: null}}") == [
        "request_presets.a: must set model, params or both",
        "request_presets.b: must set model, params or both",
        "request_presets.c: must set model, params or both",
        "request_presets.d: must set model, params or both"]
    assert load("request_presets: {a: {model: m, params: {}}}").request_presets["a"] == Preset("a", "m", {})


def test_preset_must_be_a_mapping():
    assert errors_of("request_presets: {a: fast}") == ["request_presets.a: must be a mapping, got string"]
    assert errors_of("request_presets: [a]") == ["request_presets: must be a mapping, got list"]


def test_preset_params_only_canonical_names():
    assert errors_of("request_presets: {a: {params: {seed: 1, temprature: 1}}}") == [
        "request_presets.a.params.seed: unknown parameter; expected temperature, top_p, max_tokens, "
        "presence_penalty, frequency_penalty, top_k or min_p",
        "request_presets.a.params.temprature: unknown parameter (did you mean temperature?); expected "
        "temperature, top_p, max_tokens, presence_penalty, frequency_penalty, top_k or min_p"]


def test_preset_params_use_the_request_params_ranges_and_types():
    assert errors_of("request_presets: {a: {params: {temperature: 2.5, max_tokens: 0, top_k: 1.5, min_p: true}}}") == [
        "request_presets.a.params.temperature: must be at most 2.0, got 2.5",
        "request_presets.a.params.max_tokens: must be at least 1, got 0",
        "request_presets.a.params.top_k: must be an integer, got number",
        "request_presets.a.params.min_p: must be a number, got boolean"]


def test_unknown_preset_key_is_refused():
    assert errors_of("request_presets: {a: {modle: m, params: {top_p: 1}}}") == [
        "request_presets.a.modle: unknown preset key (did you mean model?); expected model or params"]


def test_presets_are_a_section_of_their_own():
    snap = load(SPEC_EXAMPLE + "request_params: {overrides: {temperature: 0.0}}\n")
    assert list(snap.request_presets) == ["support-bot"]
    assert snap.request_params.base.overrides == {"temperature": 0.0}


# --- apply_preset -----------------------------------------------------------------------

def test_no_preset_key_returns_the_payload_unchanged():
    payload = {"model": "m", "max_tokens": "not checked without a preset"}
    assert apply_preset(payload, PRESETS) is payload


def test_null_preset_is_removed_and_nothing_else():
    assert apply_preset({"model": "m", "preset": None}, PRESETS) == {"model": "m"}


def test_preset_field_is_removed_before_dispatch():
    payload = {"preset": "support-bot", "messages": []}
    out = apply_preset(payload, PRESETS)
    assert "preset" not in out
    assert payload == {"preset": "support-bot", "messages": []}   # the request dict is not mutated


def test_unknown_preset_is_preset_not_found():
    err = refused({"preset": "nope", "model": "m"})
    assert (err.status, err.code, err.param, err.message) == (
        400, "preset_not_found", "preset", "Preset 'nope' is not configured")


def test_preset_of_wrong_type_is_invalid_type():
    for value in (1, ["support-bot"], {"name": "support-bot"}, True):
        err = refused({"preset": value})
        assert (err.status, err.code, err.param) == (400, "invalid_type", "preset")


def test_preset_params_fill_missing_and_null_fields_only():
    out = apply_preset({"preset": "support-bot", "model": "m", "temperature": None, "max_tokens": 7}, PRESETS)
    assert out == {"model": "m", "temperature": 0.2, "max_tokens": 7}


def test_preset_model_used_only_when_request_has_none():
    for missing in ({}, {"model": None}, {"model": ""}):
        assert apply_preset({"preset": "model-only", **missing}, PRESETS) == {"model": "small"}
    assert apply_preset({"preset": "model-only", "model": "big"}, PRESETS) == {"model": "big"}


def test_models_list_counts_as_the_request_model():
    out = apply_preset({"preset": "model-only", "models": ["a", "b"]}, PRESETS)
    assert out == {"models": ["a", "b"]}
    assert apply_preset({"preset": "model-only", "models": []}, PRESETS)["model"] == "small"


def test_wrong_typed_model_is_left_for_request_validation():
    assert apply_preset({"preset": "model-only", "model": 42}, PRESETS) == {"model": 42}


def test_client_max_tokens_is_checked_before_filling():
    for field in ("max_tokens", "max_completion_tokens"):
        err = refused({"preset": "sampling", field: "1024"})   # even a preset that sets no max_tokens
        assert (err.status, err.code, err.param) == (400, "invalid_type", field)
        err = refused({"preset": "support-bot", field: 0})
        assert (err.status, err.code, err.param) == (400, "invalid_value", field)
        err = refused({"preset": "support-bot", field: 12.5})
        assert (err.status, err.code, err.param) == (400, "invalid_type", field)
    assert apply_preset({"preset": "sampling", "max_tokens": 64.0}, PRESETS)["max_tokens"] == 64.0


def test_client_values_of_fields_the_preset_sets_are_checked():
    err = refused({"preset": "sampling", "top_k": "40"})
    assert (err.code, err.param) == ("invalid_type", "top_k")
    err = refused({"preset": "support-bot", "temperature": 9})
    assert (err.code, err.param) == ("invalid_value", "temperature")
    # a field the preset does not set is the backend's to judge, as without a preset
    assert apply_preset({"preset": "support-bot", "top_k": "x"}, PRESETS)["top_k"] == "x"


def test_preset_max_tokens_respects_the_clients_spelling():
    out = apply_preset({"preset": "support-bot", "max_completion_tokens": 5}, PRESETS)
    assert "max_tokens" not in out and out["max_completion_tokens"] == 5
    out = apply_preset({"preset": "support-bot", "max_completion_tokens": None}, PRESETS)
    assert "max_tokens" not in out and out["max_completion_tokens"] == 1024


# --- order against request_params ------------------------------------------------------------

def test_request_beats_preset_beats_defaults():
    policy = ParamPolicy(base=ParamScope(defaults={"temperature": 0.9, "top_p": 0.5, "max_tokens": 10}))
    payload = apply_preset({"preset": "sampling", "model": "m", "top_p": 0.1}, PRESETS)
    applied = apply_policy(payload, policy, "m")
    assert applied.payload == {"model": "m", "top_p": 0.1, "top_k": 40, "temperature": 0.9, "max_tokens": 10}
    assert applied.tokens == ("default:temperature", "default:max_tokens")


def test_overrides_and_limits_apply_to_preset_values():
    policy = ParamPolicy(base=ParamScope(overrides={"top_p": 0.95}, limits={"top_k": Bound(1, 20)}))
    applied = apply_policy(apply_preset({"preset": "sampling", "model": "m"}, PRESETS), policy, "m")
    assert applied.payload == {"model": "m", "top_k": 20, "top_p": 0.95}
    assert applied.tokens == ("override:top_p", "limit:top_k")
    assert applied.managed == {"top_p", "top_k"}


def test_policy_scope_follows_the_preset_model():
    policy = ParamPolicy(models={"gpt-5-mini": ParamScope(limits={"max_tokens": Bound(None, 512)})})
    payload = apply_preset({"preset": "support-bot"}, PRESETS)
    assert apply_policy(payload, policy, payload["model"]).payload["max_tokens"] == 512
