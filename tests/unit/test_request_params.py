"""One test per rule of ``request_params``: loading (each error is the exact string the
user sees: dotted path, then rule), model scopes, and the request-time policy pass."""

import math
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.actors.params import (
    Applied,
    apply_policy,
    carried_by,
    carried_everywhere,
    check_carriable,
    header_value,
)
from switchyard.config.load import ConfigError, load_text
from switchyard.config.params import PARAMS, SPECS, Bound, ParamPolicy, ParamScope
from switchyard.config.schema import BackendConfig, BackendType

BACKENDS = "backends: [{name: a, type: simulated, models: [m]}]\n"


def load(section: str):
    return load_text(BACKENDS + textwrap.dedent(section), env={}).snapshot


def errors_of(section: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(section)
    return info.value.errors


def policy(section: str) -> ParamPolicy:
    return load(section).request_params


def scope(**modes) -> ParamPolicy:
    return ParamPolicy(base=ParamScope(**modes))


def invalid(payload, pol, model="m") -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        apply_policy(payload, pol, model)
    return info.value


SPEC_EXAMPLE = """
request_params:
  defaults:
    max_tokens: 1024
  overrides:
    temperature: 0.0
  limits:
    max_tokens:
      min: 1
      max: 4096
  models:
    gpt-5:
      defaults:
        top_p: 0.9
      limits:
        max_tokens:
          max: 2048
"""


# --- loading -------------------------------------------------------------------------

def test_absent_section_is_an_empty_policy():
    assert load("").request_params == ParamPolicy()
    assert ParamPolicy().empty and ParamPolicy().scope_for("m").empty


def test_block_and_flow_styles_load_the_same_policy():
    flow = """
    request_params:
      defaults: {max_tokens: 1024}
      overrides: {temperature: 0.0}
      limits: {max_tokens: {min: 1, max: 4096}}
      models: {gpt-5: {defaults: {top_p: 0.9}, limits: {max_tokens: {max: 2048}}}}
    """
    p = policy(SPEC_EXAMPLE)
    assert p == policy(flow)
    assert p.base == ParamScope(defaults={"max_tokens": 1024}, overrides={"temperature": 0.0},
                                limits={"max_tokens": Bound(1, 4096)})
    assert p.models == {"gpt-5": ParamScope(defaults={"top_p": 0.9}, limits={"max_tokens": Bound(None, 2048)})}


def test_unknown_mode_is_refused_with_its_path():
    assert errors_of("request_params: {default: {top_p: 1}}") == [
        "request_params.default: unknown mode (did you mean defaults?); "
        "expected defaults, overrides, limits or models"]


def test_unknown_parameter_is_refused_with_its_path():
    assert errors_of("request_params: {defaults: {tempreature: 1}}") == [
        "request_params.defaults.tempreature: unknown parameter (did you mean temperature?); expected "
        "temperature, top_p, max_tokens, presence_penalty, frequency_penalty, top_k or min_p"]
    assert errors_of("request_params: {limits: {seed: {max: 1}}}")[0].startswith(
        "request_params.limits.seed: unknown parameter; expected temperature")


def test_wrong_scalar_type_is_refused_and_boolean_is_not_a_number():
    assert errors_of("request_params: {overrides: {temperature: true}, defaults: {max_tokens: true, top_p: '1'}}") == [
        "request_params.defaults.top_p: must be a number, got string",
        "request_params.defaults.max_tokens: must be an integer, got boolean",
        "request_params.overrides.temperature: must be a number, got boolean"]


def test_float_for_an_integer_parameter_is_refused():
    assert errors_of("request_params: {defaults: {max_tokens: 1024.0, top_k: 1.5}}") == [
        "request_params.defaults.max_tokens: must be an integer, got number",
        "request_params.defaults.top_k: must be an integer, got number"]


def test_non_finite_values_are_refused():
    assert errors_of("request_params: {defaults: {temperature: .inf}, overrides: {top_p: .nan}}") == [
        "request_params.defaults.temperature: must be a finite number",
        "request_params.overrides.top_p: must be a finite number"]


@pytest.mark.parametrize("name", PARAMS)
def test_each_parameter_range_is_inclusive_and_enforced(name):
    spec = SPECS[name]
    step = 1 if spec.integer else 0.5
    assert policy(f"request_params: {{defaults: {{{name}: {spec.minimum}}}, "
                  f"overrides: {{{name}: {spec.maximum}}}}}").base.defaults == {name: spec.minimum}
    below, above = spec.minimum - step, spec.maximum + step
    assert errors_of(f"request_params: {{defaults: {{{name}: {below}}}, overrides: {{{name}: {above}}}}}") == [
        f"request_params.defaults.{name}: must be at least {spec.minimum}, got {below}",
        f"request_params.overrides.{name}: must be at most {spec.maximum}, got {above}"]


def test_limit_bounds_use_the_parameter_ranges():
    assert errors_of("request_params: {limits: {top_p: {max: 1.5}, max_tokens: {min: 0}}}") == [
        "request_params.limits.top_p.max: must be at most 1.0, got 1.5",
        "request_params.limits.max_tokens.min: must be at least 1, got 0"]


def test_limit_min_greater_than_max_is_refused():
    assert errors_of("request_params: {limits: {temperature: {min: 1.5, max: 0.5}}}") == [
        "request_params.limits.temperature: min 1.5 is greater than max 0.5"]
    assert policy("request_params: {limits: {top_k: {min: 5, max: 5}}}").base.limits == {"top_k": Bound(5, 5)}


def test_limit_entry_must_be_a_mapping():
    assert errors_of("request_params: {limits: {max_tokens: 4096}}") == [
        "request_params.limits.max_tokens: must be a mapping, got integer"]


def test_limit_entry_takes_only_min_and_max():
    assert errors_of("request_params: {limits: {max_tokens: {maximum: 10, min: 5, max: 2}}}") == [
        "request_params.limits.max_tokens.maximum: unknown limit key (did you mean max?); expected min or max",
        "request_params.limits.max_tokens: min 5 is greater than max 2"]


def test_limit_entry_must_set_min_or_max():
    assert errors_of("request_params: {limits: {top_p: {}}}") == [
        "request_params.limits.top_p: must set min, max or both (leave the parameter out for no limit)"]


def test_null_policy_values_are_treated_as_absent():
    p = policy("""
    request_params:
      defaults: {temperature: null, top_p: 0.5}
      overrides: null
      limits: {max_tokens: null, top_k: {min: null, max: 40}}
      models: {m: null}
    """)
    assert p == ParamPolicy(base=ParamScope(defaults={"top_p": 0.5}, limits={"top_k": Bound(None, 40)}))


def test_every_problem_is_reported_at_once():
    errors = errors_of("""
    request_params:
      defaults: {temperature: 3}
      overrides: {top_k: x}
      limits: {min_p: {min: 2}}
    """)
    assert [e.split(":")[0] for e in errors] == [
        "request_params.defaults.temperature", "request_params.overrides.top_k", "request_params.limits.min_p.min"]


# --- model scopes ------------------------------------------------------------------------

def test_models_scope_limit_of_64():
    many = "\n".join(f"    m{i}: {{defaults: {{top_p: 0.5}}}}" for i in range(65))
    assert errors_of("request_params:\n  models:\n" + many) == [
        "request_params.models: at most 64 model scopes, got 65"]
    assert len(policy("request_params:\n  models:\n" + "\n".join(many.splitlines()[:64])).models) == 64


def test_model_key_is_trimmed():
    assert list(policy("request_params: {models: {'  gpt-5 ': {overrides: {top_p: 1}}}}").models) == ["gpt-5"]


@pytest.mark.parametrize("key, error", [
    ("'  '", "request_params.models.  : model id must not be empty or only spaces"),
    ("é" * 129, f"request_params.models.{'é' * 129}: model id must be at most 256 bytes in UTF-8, got 258"),
    ('"gpt\\u00075"', "request_params.models.gpt\\x075: model id must not contain control characters"),
    ("42", "request_params.models.42: model id must be a string model id, got integer (quote it)"),
], ids=["not_empty", "at_most_256_bytes", "no_control_characters", "a_string"])
def test_model_key_rules(key, error):
    assert errors_of(f"request_params: {{models: {{{key}: {{defaults: {{top_p: 1}}}}}}}}") == [error]
    ok = "é" * 128   # 256 bytes: the longest key allowed
    assert list(policy(f"request_params: {{models: {{{ok}: {{defaults: {{top_p: 1}}}}}}}}").models) == [ok]


def test_duplicate_model_keys_after_trimming_are_refused():
    assert errors_of("request_params: {models: {gpt-5: {}, ' gpt-5': {}}}") == [
        "request_params.models. gpt-5: duplicate model 'gpt-5' after trimming spaces "
        "(also request_params.models.gpt-5)"]


def test_model_scope_takes_only_the_three_modes():
    assert errors_of("request_params: {models: {m: {models: {}, limit: {}}}}") == [
        "request_params.models.m.models: unknown mode; expected defaults, overrides or limits",
        "request_params.models.m.limit: unknown mode (did you mean limits?); expected defaults, overrides or limits"]


def test_model_scope_overrides_base_per_field_within_each_mode():
    p = policy("""
    request_params:
      defaults: {max_tokens: 1024, temperature: 0.7}
      overrides: {top_p: 0.9}
      models:
        m: {defaults: {temperature: 0.2}, overrides: {top_k: 40}}
    """)
    s = p.scope_for("m")
    assert s.defaults == {"max_tokens": 1024, "temperature": 0.2}
    assert s.overrides == {"top_p": 0.9, "top_k": 40}
    assert p.scope_for("other") == p.base


def test_model_limit_replaces_the_whole_base_bound():
    s = policy(SPEC_EXAMPLE).scope_for("gpt-5")
    assert s.limits == {"max_tokens": Bound(min=None, max=2048)}   # base min 1 not inherited
    assert s.defaults == {"max_tokens": 1024, "top_p": 0.9}


def test_model_ids_match_exactly():
    p = policy("request_params: {models: {'gpt-*': {overrides: {top_p: 0.1}}, GPT-5: {overrides: {top_p: 0.2}}}}")
    assert p.scope_for("gpt-5").empty
    assert p.scope_for("gpt-*").overrides == {"top_p": 0.1}


# --- apply_policy ---------------------------------------------------------------------

def test_empty_policy_returns_the_same_payload():
    payload = {"model": "m", "temperature": 5}
    assert apply_policy(payload, ParamPolicy(), "m") == Applied(payload)
    assert apply_policy(payload, ParamPolicy(), "m").payload is payload


def test_defaults_fill_missing_and_null_fields_only():
    p = scope(defaults={"temperature": 0.7, "top_p": 0.9, "max_tokens": 100})
    a = apply_policy({"temperature": 1.5, "top_p": None}, p, "m")
    assert a.payload == {"temperature": 1.5, "top_p": 0.9, "max_tokens": 100}
    assert a.tokens == ("default:top_p", "default:max_tokens")


def test_overrides_replace_client_and_default_values():
    p = scope(defaults={"temperature": 0.7}, overrides={"temperature": 0.0, "top_p": 0.5})
    a = apply_policy({"top_p": 0.99}, p, "m")
    assert a.payload == {"temperature": 0.0, "top_p": 0.5}
    assert a.tokens == ("default:temperature", "override:temperature", "override:top_p")


def test_override_equal_to_the_present_value_is_no_change():
    payload = {"temperature": 0, "max_tokens": 10}
    a = apply_policy(payload, scope(overrides={"temperature": 0.0, "max_tokens": 10}), "m")
    assert a == Applied(payload) and a.payload is payload


def test_override_clamped_back_to_the_client_value_is_no_change():
    payload = {"temperature": 0}
    p = scope(overrides={"temperature": 1.5}, limits={"temperature": Bound(None, 0.0)})
    assert apply_policy(payload, p, "m").payload is payload
    assert apply_policy({"temperature": 0.7}, p, "m").tokens == ("override:temperature", "limit:temperature")


def test_boolean_is_not_equal_to_one():
    a = apply_policy({"temperature": True}, scope(overrides={"temperature": 1.0}), "m")
    assert a.payload == {"temperature": 1.0} and type(a.payload["temperature"]) is float
    assert a.tokens == ("override:temperature",)


def test_limits_clamp_present_values_into_bounds():
    p = scope(limits={"temperature": Bound(0.2, 1.0), "top_p": Bound(0.1, 0.9), "max_tokens": Bound(1, 10)})
    a = apply_policy({"temperature": 1.7, "top_p": 0.05, "max_tokens": 5}, p, "m")
    assert a.payload == {"temperature": 1.0, "top_p": 0.1, "max_tokens": 5}
    assert a.tokens == ("limit:temperature", "limit:top_p")


def test_limits_never_create_a_field():
    payload = {"model": "m", "top_p": None}
    a = apply_policy(payload, scope(limits={"temperature": Bound(0.1, 1.0), "top_p": Bound(0.1, 0.5)}), "m")
    assert a.payload is payload and a.tokens == ()


def test_modes_apply_in_order_defaults_overrides_limits():
    p = scope(defaults={"max_tokens": 8000}, overrides={"temperature": 1.9},
              limits={"max_tokens": Bound(1, 4096), "temperature": Bound(None, 1.0)})
    a = apply_policy({}, p, "m")
    assert a.payload == {"max_tokens": 4096, "temperature": 1.0}
    assert a.tokens == ("default:max_tokens", "override:temperature", "limit:temperature", "limit:max_tokens")


def test_tokens_never_carry_values():
    a = apply_policy({"model": "secret-model"}, scope(defaults={"max_tokens": 777}), "secret-model")
    assert header_value(a.tokens) == b"default:max_tokens"


def test_the_request_dict_is_never_mutated():
    payload = {"temperature": 3, "messages": []}
    a = apply_policy(payload, scope(defaults={"top_p": 0.5}, limits={"temperature": Bound(0, 1)}), "m")
    assert payload == {"temperature": 3, "messages": []}
    assert a.payload is not payload and a.payload["messages"] is payload["messages"]


def test_unrelated_fields_pass_through_untouched():
    payload = {"model": "m", "seed": 7, "top_k": "weird", "stream": True}
    a = apply_policy(payload, scope(defaults={"temperature": 0.5}), "m")
    assert a.payload == {**payload, "temperature": 0.5}


def test_limited_client_value_of_wrong_type_is_invalid_type():
    p = scope(limits={"temperature": Bound(0, 1), "max_tokens": Bound(1, 100), "top_k": Bound(-1, 50)})
    for payload, field in (({"temperature": "0.5"}, "temperature"), ({"temperature": False}, "temperature"),
                           ({"max_tokens": 10.5}, "max_tokens"), ({"top_k": [1]}, "top_k"),
                           ({"max_completion_tokens": "9"}, "max_completion_tokens")):
        err = invalid(payload, p)
        assert (err.status, err.code, err.param) == (400, "invalid_type", field)
        assert field in err.message


def test_limited_client_value_non_finite_is_invalid_value():
    for value in (math.inf, -math.inf, math.nan):
        err = invalid({"top_p": value}, scope(limits={"top_p": Bound(0, 1)}))
        assert (err.status, err.code, err.param) == (400, "invalid_value", "top_p")


def test_integral_float_is_an_integer():
    p = scope(limits={"max_tokens": Bound(1, 100)})
    assert apply_policy({"max_tokens": 50.0}, p, "m").tokens == ()
    assert apply_policy({"max_tokens": 500.0}, p, "m").payload == {"max_tokens": 100}


def test_integers_stay_integers_when_clamped():
    a = apply_policy({"max_tokens": 10**12, "top_k": -5}, scope(limits={"max_tokens": Bound(1, 4096),
                                                                        "top_k": Bound(1, 40)}), "m")
    assert a.payload == {"max_tokens": 4096, "top_k": 1}
    assert all(type(v) is int for v in a.payload.values())


def test_fractional_bound_on_an_integer_field_rounds_inward():
    a = apply_policy({"top_k": 0}, scope(limits={"top_k": Bound(2.5, 9.5)}), "m")
    assert a.payload == {"top_k": 3}
    assert apply_policy({"top_k": 100}, scope(limits={"top_k": Bound(2.5, 9.5)}), "m").payload == {"top_k": 9}


def test_max_tokens_limits_also_clamp_max_completion_tokens():
    a = apply_policy({"max_completion_tokens": 9000}, scope(limits={"max_tokens": Bound(1, 4096)}), "m")
    assert a.payload == {"max_completion_tokens": 4096}
    assert a.tokens == ("limit:max_tokens",) and a.managed == {"max_tokens"}


def test_max_tokens_default_is_written_in_the_clients_spelling():
    p = scope(defaults={"max_tokens": 100})
    assert apply_policy({"max_completion_tokens": None}, p, "m").payload == {"max_completion_tokens": 100}
    assert apply_policy({}, p, "m").payload == {"max_tokens": 100}
    assert apply_policy({"max_completion_tokens": 5}, p, "m").tokens == ()


def test_max_tokens_override_writes_the_clients_spelling_never_both():
    a = apply_policy({"max_completion_tokens": 5}, scope(overrides={"max_tokens": 64}), "m")
    assert a.payload == {"max_completion_tokens": 64}
    assert a.tokens == ("override:max_tokens",)


def test_managed_lists_only_fields_the_policy_changed():
    p = scope(defaults={"temperature": 0.5}, overrides={"top_p": 0.5}, limits={"top_k": Bound(1, 40)})
    a = apply_policy({"temperature": 0.9, "top_p": 0.5, "top_k": 20, "min_p": 0.1}, p, "m")
    assert a == Applied({"temperature": 0.9, "top_p": 0.5, "top_k": 20, "min_p": 0.1})
    assert apply_policy({"top_k": 100}, p, "m").managed == {"temperature", "top_p", "top_k"}


def test_model_scope_is_applied_for_its_model_only():
    p = policy(SPEC_EXAMPLE)
    assert apply_policy({"max_tokens": 3000}, p, "gpt-5").payload == {
        "max_tokens": 2048, "top_p": 0.9, "temperature": 0.0}
    assert apply_policy({"max_tokens": 3000}, p, "other").payload == {"max_tokens": 3000, "temperature": 0.0}


# --- check_carriable and the header --------------------------------------------------------

def backend(name: str, btype: BackendType) -> BackendConfig:
    return BackendConfig(name=name, type=btype, url=f"http://{name}.example")


@pytest.mark.parametrize("btype", [BackendType.OPENAI, BackendType.OLLAMA])
@pytest.mark.parametrize("field", ["top_k", "min_p"])
def test_openai_and_ollama_cannot_carry_top_k_or_min_p(btype, field):
    with pytest.raises(UnsupportedRequestParameter) as info:
        check_carriable(frozenset({"temperature", field}), [backend("cloud", btype)])
    err = info.value
    assert (err.status, err.code, err.param) == (400, "unsupported_request_parameter", field)
    assert f"'{field}'" in err.message and "'cloud'" in err.message and btype.value in err.message
    check_carriable(frozenset(PARAMS) - {"top_k", "min_p"}, [backend("cloud", btype)])


@pytest.mark.parametrize("btype", [BackendType.VLLM, BackendType.SGLANG, BackendType.GENERIC,
                                   BackendType.SIMULATED])
def test_engines_carry_all_seven(btype):
    check_carriable(frozenset(PARAMS), [backend("engine", btype)])


def test_any_backend_the_call_may_reach_refuses():
    with pytest.raises(UnsupportedRequestParameter) as info:
        check_carriable(frozenset({"min_p"}), [backend("v", BackendType.VLLM), backend("fb", BackendType.OPENAI)])
    assert info.value.details == {"backend": "fb", "backend_type": "openai"}


def test_what_every_backend_carries_is_the_intersection_and_all_seven_for_none():
    """Admission skips the walk over a call's reachable backends when the policy writes only these."""
    assert carried_everywhere([]) == frozenset(PARAMS)
    assert carried_everywhere([backend("v", BackendType.VLLM), backend("g", BackendType.GENERIC)]) == set(PARAMS)
    mixed = [backend("v", BackendType.VLLM), backend("cloud", BackendType.OPENAI),
             BackendConfig(name="a", type=BackendType.ANTHROPIC, url="https://x", anthropic_version="2026-10-21")]
    assert carried_everywhere(mixed) == {"max_tokens"}


def test_unmanaged_fields_are_not_checked():
    check_carriable(frozenset(), [backend("cloud", BackendType.OPENAI)])


def test_header_value_joins_tokens_or_is_absent():
    assert header_value(("default:max_tokens", "limit:temperature")) == b"default:max_tokens,limit:temperature"
    assert header_value(()) is None


# --- properties -----------------------------------------------------------------------------

def _value(name: str):
    spec = SPECS[name]
    if spec.integer:
        return st.integers(int(spec.minimum), int(spec.maximum))
    return st.floats(spec.minimum, spec.maximum, allow_nan=False)


@st.composite
def _bound(draw, name: str):
    a, b = sorted([draw(_value(name)), draw(_value(name))])
    return draw(st.sampled_from([Bound(a, None), Bound(None, b), Bound(a, b)]))


def _mode(values):
    return st.fixed_dictionaries({}, optional={n: values(n) for n in PARAMS})


policies = st.builds(lambda d, o, lim: ParamPolicy(base=ParamScope(d, o, lim)), _mode(_value), _mode(_value),
                     _mode(_bound))
_ints = st.integers(-10**6, 10**10)
_client = {n: st.one_of(st.none(), _ints, _ints.map(float) if SPECS[n].integer else st.floats(-1e6, 1e10))
           for n in PARAMS}
payloads = st.fixed_dictionaries({"model": st.just("m")},
                                 optional={**_client, "max_completion_tokens": _client["max_tokens"]})


@settings(max_examples=300)
@given(policies, payloads)
def test_property_every_limited_present_field_is_within_bounds(pol, payload):
    out = apply_policy(payload, pol, "m").payload
    for name, bound in pol.base.limits.items():
        for field in ("max_tokens", "max_completion_tokens") if name == "max_tokens" else (name,):
            if out.get(field) is not None:
                assert bound.min is None or out[field] >= bound.min
                assert bound.max is None or out[field] <= bound.max
                if SPECS[name].integer and out[field] is not payload.get(field):
                    assert type(out[field]) is int   # integers stay integers
            if payload.get(field) is None and name not in pol.base.defaults and name not in pol.base.overrides:
                assert out.get(field) is None   # limits never create


@settings(max_examples=300)
@given(policies, payloads)
def test_property_applying_twice_is_idempotent(pol, payload):
    once = apply_policy(payload, pol, "m")
    twice = apply_policy(once.payload, pol, "m")
    assert twice.payload == once.payload and twice.tokens == ()
    assert (once.payload is payload) == (once.tokens == ())
    assert once.managed == {t.split(":")[1] for t in once.tokens}
    both = {"max_tokens", "max_completion_tokens"}
    if both <= {k for k, v in once.payload.items() if v is not None}:   # never written as a second spelling
        assert both <= {k for k, v in payload.items() if v is not None}


def test_an_anthropic_backend_carries_sampling_only_before_version_2026_10_21():
    old = BackendConfig(name="a", type=BackendType.ANTHROPIC, url="https://x", anthropic_version="2023-06-01")
    new = BackendConfig(name="b", type=BackendType.ANTHROPIC, url="https://x", anthropic_version="2026-10-21")
    assert carried_by(old) == {"max_tokens", "temperature", "top_p", "top_k"}
    assert carried_by(new) == {"max_tokens"}
    check_carriable(frozenset({"max_tokens"}), [new])
    with pytest.raises(UnsupportedRequestParameter):
        check_carriable(frozenset({"temperature"}), [new])


def test_a_limit_alone_on_an_anthropic_sampling_field_counts_as_absent_from_2026_10_21():
    from switchyard.actors.params import limited_only

    assert limited_only(["limit:temperature", "default:max_tokens", "default:top_p", "limit:top_p"]) == {"temperature"}
    new = BackendConfig(name="b", type=BackendType.ANTHROPIC, url="https://x", anthropic_version="2026-10-21")
    check_carriable(frozenset({"temperature"}), [new], limited=frozenset({"temperature"}))
    with pytest.raises(UnsupportedRequestParameter):
        check_carriable(frozenset({"temperature"}), [new])


def test_a_policy_writing_sampling_for_a_2026_10_21_anthropic_backend_warns_at_its_version():
    text = textwrap.dedent("""
        backends:
          - {name: c, type: anthropic, url: 'https://x', anthropic_version: '2026-10-21', models: [claude-x]}
        request_params: {defaults: {temperature: 0.3}}
    """)
    warnings = load_text(text, env={}).warnings
    assert any(w.startswith("backends[0].anthropic_version: 2026-10-21 rejects temperature for every model")
               for w in warnings)
    limited = text.replace("defaults: {temperature: 0.3}", "limits: {temperature: {max: 0.5}}")
    assert not any(w.startswith("backends[0].anthropic_version") for w in load_text(limited, env={}).warnings)
