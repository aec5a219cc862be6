"""backends[].request_extensions.body: loading (config/load_extensions.py) and the leaf-by-leaf
merge (actors/routing/body_merge.py)."""

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switchyard.actors.routing.body_merge import merge_body
from switchyard.config.load import ConfigError, load_text
from switchyard.config.schema import BodyExtensions

BACKEND = """
backends:
  - name: agg
    url: http://127.0.0.1:8000
    models: [m]
    request_extensions:
{ext}
"""


def ext_of(yaml_block: str) -> BodyExtensions:
    return load_text(BACKEND.format(ext=yaml_block), env={}).snapshot.backends[0].request_extensions


def errors_of(yaml_block: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(BACKEND.format(ext=yaml_block), env={})
    return info.value.errors


P = "backends[0].request_extensions"


# --- loading -------------------------------------------------------------------------------

def test_request_extensions_default_to_empty():
    snap = load_text(BACKEND.format(ext="      {}"), env={}).snapshot
    assert snap.backends[0].request_extensions.empty
    assert ext_of("      body: {}").empty


def test_defaults_and_overrides_load_as_plain_json_data():
    ext = ext_of("""      body:
        defaults: {temperature: 0.2, provider: {sort: price}, stop: ["\\n"], seed: null}
        overrides: {provider: {only: [x, y]}, top_k: 40}""")
    assert ext.defaults == {"temperature": 0.2, "provider": {"sort": "price"}, "stop": ["\n"], "seed": None}
    assert ext.overrides == {"provider": {"only": ["x", "y"]}, "top_k": 40}
    assert type(ext.overrides["provider"]["only"]) is list


def test_unknown_keys_are_refused_with_their_path():
    errors = errors_of("""      headers: {x: y}
      body:
        default: {a: 1}""")
    assert f"{P}.headers: unknown key" in errors
    assert f"{P}.body.default: unknown key" in errors


@pytest.mark.parametrize("field", ["model", "messages", "stream"])
@pytest.mark.parametrize("part", ["defaults", "overrides"])
def test_router_owned_fields_are_refused_at_the_top_level(part, field):
    errors = errors_of(f"""      body:
        {part}: {{{field}: x}}""")
    assert len(errors) == 1 and errors[0].startswith(f"{P}.body.{part}.{field}: ")
    assert "router" in errors[0]


def test_router_owned_names_nested_deeper_are_ordinary_fields():
    ext = ext_of("""      body:
        overrides: {metadata: {model: tag, stream: x}}""")
    assert ext.overrides == {"metadata": {"model": "tag", "stream": "x"}}


def test_defaults_and_overrides_must_be_mappings():
    errors = errors_of("""      body:
        defaults: [a]
        overrides: 5""")
    assert any(e.startswith(f"{P}.body.defaults: must be a mapping") for e in errors)
    assert any(e.startswith(f"{P}.body.overrides: must be a mapping") for e in errors)


def test_values_json_cannot_carry_are_refused_with_their_path():
    errors = errors_of("""      body:
        defaults:
          when: 2024-05-01
          deep: {list: [1, 2024-05-02]}
          big: .inf
          blob: !!binary aGk=
          tags: !!set {a, b}""")
    for path in ("when", "deep.list[1]", "big", "blob", "tags"):
        assert any(e.startswith(f"{P}.body.defaults.{path}: ") for e in errors), path
    assert len(errors) == 5


def test_non_string_keys_are_refused():
    errors = errors_of("""      body:
        overrides: {logit_bias: {50256: -100}}""")
    assert errors == [(f"{P}.body.overrides.logit_bias.50256: key must be a string, got integer 50256; "
                       "quote it in the YAML")]
    assert ext_of("""      body:
        overrides: {logit_bias: {"50256": -100}}""").overrides == {"logit_bias": {"50256": -100}}


# --- merging -------------------------------------------------------------------------------

def test_empty_extensions_return_the_same_payload():
    payload = {"model": "m", "messages": []}
    assert merge_body(payload, BodyExtensions()) is payload


def test_defaults_fill_only_keys_the_body_lacks():
    ext = BodyExtensions(defaults={"temperature": 0.2, "top_p": 0.9})
    assert merge_body({"model": "m", "temperature": 1.0}, ext) == {"model": "m", "temperature": 1.0, "top_p": 0.9}


def test_defaults_recurse_into_objects_leaf_by_leaf():
    ext = BodyExtensions(defaults={"provider": {"sort": "price", "only": ["x"]}, "stream_options": {"a": 1}})
    body = {"provider": {"only": ["y"]}}
    assert merge_body(body, ext) == {"provider": {"only": ["y"], "sort": "price"}, "stream_options": {"a": 1}}


def test_a_default_never_replaces_a_present_value_even_a_non_object_or_null():
    ext = BodyExtensions(defaults={"response_format": {"type": "json_object"}, "seed": 7, "tools": [1]})
    body = {"response_format": "text", "seed": None, "tools": []}
    assert merge_body(body, ext) == body


def test_overrides_replace_leaves_and_recurse_into_objects():
    ext = BodyExtensions(overrides={"temperature": 0.0, "provider": {"sort": "latency"}, "n": {"x": 1}})
    body = {"temperature": 1.5, "provider": {"order": ["a"], "sort": "price"}, "n": 2}
    assert merge_body(body, ext) == {"temperature": 0.0, "provider": {"order": ["a"], "sort": "latency"},
                                     "n": {"x": 1}}                 # a non-object is replaced whole


def test_an_override_non_object_replaces_an_object_and_null_writes_null():
    ext = BodyExtensions(overrides={"provider": None, "stop": ["END"]})
    assert merge_body({"provider": {"a": 1}, "stop": ["x", "y"]}, ext) == {"provider": None, "stop": ["END"]}


def test_overrides_win_over_defaults_on_the_same_key():
    ext = BodyExtensions(defaults={"top_k": 10}, overrides={"top_k": 40})
    assert merge_body({}, ext) == {"top_k": 40}


def test_merge_never_mutates_the_payload_or_the_configuration():
    ext = BodyExtensions(defaults={"a": {"b": {"c": 1}}, "lst": [{"k": 1}]},
                         overrides={"a": {"b": {"d": 2}}, "o": {"p": [1]}})
    payload = {"a": {"b": {"x": 0}, "keep": {"y": 1}}, "messages": [{"role": "user", "content": "hi"}]}
    before, ext_before = copy.deepcopy(payload), copy.deepcopy((dict(ext.defaults), dict(ext.overrides)))
    out = merge_body(payload, ext)
    assert out is not payload and out["a"] is not payload["a"] and out["a"]["b"] is not payload["a"]["b"]
    assert out == {"a": {"b": {"x": 0, "c": 1, "d": 2}, "keep": {"y": 1}},
                   "messages": [{"role": "user", "content": "hi"}], "lst": [{"k": 1}], "o": {"p": [1]}}
    assert payload == before
    out["lst"][0]["k"] = 99                                         # the result is the caller's to edit
    out["o"]["p"].append(2)
    assert (dict(ext.defaults), dict(ext.overrides)) == ext_before


# --- the provider key with client_provider_preferences on ------------------------------------

CLIENT = {"model": "m", "messages": [], "provider": {"only": ["client-pick"]}}


def without_provider(payload):
    return {k: v for k, v in payload.items() if k != "provider"}


def test_overrides_provider_reaches_the_backend_after_the_client_key_is_removed():
    ext = BodyExtensions(overrides={"provider": {"order": ["operator"], "allow_fallbacks": False}})
    out = merge_body(without_provider(CLIENT), ext)
    assert out["provider"] == {"order": ["operator"], "allow_fallbacks": False}


def test_defaults_provider_fills_the_removed_key_with_the_operators_value_never_the_clients():
    ext = BodyExtensions(defaults={"provider": {"sort": "price"}})
    out = merge_body(without_provider(CLIENT), ext)
    assert out["provider"] == {"sort": "price"}
    assert "client-pick" not in repr(out)


def test_the_client_provider_object_never_reaches_the_body_whatever_the_extensions():
    for ext in (BodyExtensions(), BodyExtensions(defaults={"provider": {"only": ["op"]}}),
                BodyExtensions(overrides={"provider": {"sort": "latency"}}),
                BodyExtensions(defaults={"provider": {"x": 1}}, overrides={"other": 1})):
        assert "client-pick" not in repr(merge_body(without_provider(CLIENT), ext))


def test_with_the_switch_off_defaults_provider_cannot_replace_the_clients_object():
    # Passthrough: the client's object stays; defaults only fill unset leaves inside it.
    ext = BodyExtensions(defaults={"provider": {"only": ["op"], "sort": "price"}})
    assert merge_body(CLIENT, ext)["provider"] == {"only": ["client-pick"], "sort": "price"}
    ext = BodyExtensions(overrides={"provider": {"only": ["op"]}})
    assert merge_body(CLIENT, ext)["provider"] == {"only": ["op"]}     # static configuration has the last word


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner,
                                                                                       max_size=3), max_leaves=8)
objects = st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4)


@given(objects, objects, objects)
def test_merge_properties(payload, defaults, overrides):
    before = copy.deepcopy(payload)
    out = merge_body(payload, BodyExtensions(defaults=defaults, overrides=overrides))
    assert payload == before
    for key, value in overrides.items():            # an override's non-object leaves always land
        if not isinstance(value, dict):
            assert out[key] == value
    for key in payload:                             # nothing the body had is dropped
        assert key in out
    for key, value in payload.items():              # defaults never change a present non-object
        if key not in overrides and not isinstance(value, dict):
            assert out[key] == value
