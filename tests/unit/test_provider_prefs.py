"""The client's `provider` object (actors/provider_prefs.py): one test per parsing rule.

Every refusal is a 400 invalid_request_error naming the exact path in `param`.
"""

import json

import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.provider_prefs import (
    MAX_NAME_BYTES,
    MAX_NAMES,
    MAX_OBJECT_BYTES,
    parse_provider,
    serialized_size,
    unsatisfiable,
)
from switchyard.actors.routing.provider_prefs import NO_PREFERENCES, MaxPrice, ProviderPrefs


def refusal(value) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        parse_provider(value)
    err = info.value
    assert err.status == 400 and err.type == "invalid_request_error"
    assert err.param and err.param in err.message    # the message names the path too
    return err


# --- the object --------------------------------------------------------------------------

def test_absent_or_null_provider_means_no_preferences():
    assert parse_provider(None) is NO_PREFERENCES
    assert NO_PREFERENCES.empty


@pytest.mark.parametrize("value", [[], "price", 3, True])
def test_provider_must_be_an_object(value):
    err = refusal(value)
    assert (err.param, err.code) == ("provider", "invalid_type")


def test_empty_object_states_nothing():
    prefs = parse_provider({})
    assert prefs == ProviderPrefs() and prefs.empty


def test_every_interpreted_field_is_read():
    prefs = parse_provider({"order": ["a", "b"], "only": ["a", "b", "c"], "ignore": ["d"], "sort": "latency",
                            "max_price": {"prompt": 1, "completion": 2.5}, "require_parameters": False,
                            "data_collection": "allow"})
    assert prefs == ProviderPrefs(order=("a", "b"), only=("a", "b", "c"), ignore=("d",), sort="latency",
                                  max_price=MaxPrice(prompt=1.0, completion=2.5))
    assert prefs.filters and prefs.ranks and not prefs.empty


def test_serialized_object_over_16_kib_is_refused():
    # Unknown fields would be refused too; the size is checked first, on the whole object.
    value = {"order": ["a"], "pad": "x" * MAX_OBJECT_BYTES}
    err = refusal(value)
    assert (err.param, err.code) == ("provider", "invalid_value")
    assert "16384" in err.message


def test_serialized_size_is_compact_utf8_json_and_16_kib_is_allowed():
    assert serialized_size({"a": ["é"]}) == len('{"a":["é"]}'.encode())
    filler = "x" * (MAX_OBJECT_BYTES - serialized_size({"sort": ""}))
    exactly = {"sort": filler}
    assert serialized_size(exactly) == MAX_OBJECT_BYTES
    err = refusal(exactly)                   # passes the size check, then fails as a sort value
    assert err.param == "provider.sort"


def test_unknown_field_is_refused_not_ignored():
    err = refusal({"ignroe": ["a"]})
    assert (err.param, err.code) == ("provider.ignroe", "invalid_value")
    assert "ignore" in err.message           # the known fields are listed


def test_null_field_is_the_same_as_absent():
    assert parse_provider({"order": None, "only": None, "ignore": None, "sort": None, "max_price": None,
                           "require_parameters": None, "data_collection": None}) == ProviderPrefs()


def test_first_problem_in_the_clients_key_order_is_reported():
    err = refusal({"sort": "fast", "only": [1]})
    assert err.param == "provider.sort"
    err = refusal({"only": [1], "sort": "fast"})
    assert err.param == "provider.only[0]"


# --- name lists --------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["order", "only", "ignore"])
def test_name_list_must_be_an_array(field):
    err = refusal({field: "a"})
    assert (err.param, err.code) == (f"provider.{field}", "invalid_type")


@pytest.mark.parametrize("field", ["order", "only", "ignore"])
def test_name_list_longer_than_16_is_refused_with_its_path(field):
    err = refusal({field: [f"b{i}" for i in range(MAX_NAMES + 1)]})
    assert (err.param, err.code) == (f"provider.{field}", "invalid_value")
    assert parse_provider({field: [f"b{i}" for i in range(MAX_NAMES)]})


def test_only_list_longer_than_16_is_refused_with_its_path():
    err = refusal({"only": ["a"] * 17})       # counted as sent, before duplicates collapse
    assert err.param == "provider.only"


def test_name_must_be_a_string_with_its_index():
    err = refusal({"only": ["a", "b", "c", 4]})
    assert (err.param, err.code) == ("provider.only[3]", "invalid_type")


def test_empty_name_is_refused():
    err = refusal({"ignore": ["a", ""]})
    assert (err.param, err.code) == ("provider.ignore[1]", "invalid_value")


def test_name_longer_than_128_bytes_is_refused_counting_utf8_bytes():
    assert parse_provider({"order": ["x" * MAX_NAME_BYTES]}).order == ("x" * MAX_NAME_BYTES,)
    err = refusal({"order": ["x" * (MAX_NAME_BYTES + 1)]})
    assert err.param == "provider.order[0]"
    err = refusal({"order": ["é" * 65]})       # 65 characters, 130 bytes
    assert (err.param, err.code) == ("provider.order[0]", "invalid_value")


@pytest.mark.parametrize("name", [" a", "a ", "a\t", "\u00a0a", "a\n"])
def test_name_with_leading_or_trailing_whitespace_is_refused(name):
    err = refusal({"only": [name]})
    assert (err.param, err.code) == ("provider.only[0]", "invalid_value")


@pytest.mark.parametrize("name", ["a\x00b", "a\x1bb", "a\x7fb", "a\x85b"])
def test_name_with_control_characters_is_refused(name):
    err = refusal({"only": ["ok", name]})
    assert (err.param, err.code) == ("provider.only[1]", "invalid_value")


def test_name_with_a_lone_surrogate_is_refused():
    value = json.loads('{"only": ["a\\ud800"]}')
    err = refusal(value)
    assert (err.param, err.code) == ("provider.only[0]", "invalid_value")


def test_inner_spaces_and_unicode_names_are_accepted():
    assert parse_provider({"order": ["my backend", "вэб-1"]}).order == ("my backend", "вэб-1")


def test_duplicates_collapse_keeping_first_occurrence():
    prefs = parse_provider({"order": ["b", "a", "b", "c", "a"], "only": ["x", "x"], "ignore": ["y", "z", "y"]})
    assert prefs.order == ("b", "a", "c")
    assert prefs.only == ("x",)
    assert prefs.ignore == ("y", "z")


def test_names_are_compared_exactly():
    assert parse_provider({"order": ["A", "a"]}).order == ("A", "a")


def test_empty_only_is_an_allowlist_of_nothing_not_absent():
    prefs = parse_provider({"only": []})
    assert prefs.only == () and prefs.filters
    assert parse_provider({"ignore": [], "order": []}).empty


# --- sort ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sort", ["price", "throughput", "latency"])
def test_sort_accepts_price_throughput_latency(sort):
    assert parse_provider({"sort": sort}).sort == sort


@pytest.mark.parametrize(("value", "code"), [("cheapest", "invalid_value"), ("Price", "invalid_value"),
                                             (["price"], "invalid_type"), (1, "invalid_type")])
def test_sort_other_values_are_refused(value, code):
    err = refusal({"sort": value})
    assert (err.param, err.code) == ("provider.sort", code)


def test_default_sort_is_none():
    assert parse_provider({"order": ["a"]}).sort is None


# --- max_price -----------------------------------------------------------------------------

def test_max_price_reads_prompt_and_or_completion():
    assert parse_provider({"max_price": {"prompt": 0}}).max_price == MaxPrice(prompt=0.0)
    assert parse_provider({"max_price": {"completion": 3}}).max_price == MaxPrice(completion=3.0)
    assert parse_provider({"max_price": {}}).max_price == MaxPrice()
    assert not parse_provider({"max_price": {}}).filters


def test_max_price_must_be_an_object():
    err = refusal({"max_price": 3})
    assert (err.param, err.code) == ("provider.max_price", "invalid_type")


def test_max_price_unknown_key_is_refused_with_its_path():
    err = refusal({"max_price": {"prompt": 1, "request": 2}})
    assert (err.param, err.code) == ("provider.max_price.request", "invalid_value")


@pytest.mark.parametrize(("value", "code"), [("1", "invalid_type"), (True, "invalid_type"), ([1], "invalid_type"),
                                             (-0.01, "invalid_value"), (float("inf"), "invalid_value"),
                                             (float("nan"), "invalid_value")])
def test_max_price_must_be_a_finite_non_negative_number(value, code):
    err = refusal({"max_price": {"completion": value}})
    assert (err.param, err.code) == ("provider.max_price.completion", code)


def test_max_price_nan_from_the_wire_is_refused():
    err = refusal(json.loads('{"max_price": {"prompt": NaN}}'))   # Python's json reads NaN
    assert err.param == "provider.max_price.prompt"


# --- permissive-only fields ----------------------------------------------------------------

def test_require_parameters_false_is_accepted_and_changes_nothing():
    assert parse_provider({"require_parameters": False}).empty


def test_require_parameters_true_is_refused_by_name():
    err = refusal({"require_parameters": True})
    assert (err.param, err.code) == ("provider.require_parameters", "unsupported_provider_preference")
    assert "true" in err.message


def test_require_parameters_must_be_a_boolean():
    err = refusal({"require_parameters": "false"})
    assert (err.param, err.code) == ("provider.require_parameters", "invalid_type")


def test_data_collection_allow_is_accepted_and_changes_nothing():
    assert parse_provider({"data_collection": "allow"}).empty


def test_data_collection_deny_is_refused_by_name():
    err = refusal({"data_collection": "deny"})
    assert (err.param, err.code) == ("provider.data_collection", "unsupported_provider_preference")
    assert '"deny"' in err.message


@pytest.mark.parametrize(("value", "code"), [("Allow", "invalid_value"), ("maybe", "invalid_value"),
                                             (False, "invalid_type")])
def test_data_collection_other_values_are_refused(value, code):
    err = refusal({"data_collection": value})
    assert (err.param, err.code) == ("provider.data_collection", code)


# --- the unsatisfiable 400 ---------------------------------------------------------------

def test_unsatisfiable_is_a_400_naming_the_filter():
    err = unsatisfiable("m", ["a", "b"], "only")
    assert (err.status, err.type, err.code, err.param) == (400, "invalid_request_error",
                                                           "provider_preferences_unsatisfiable", "provider.only")
    assert "'m'" in err.message and "a, b" in err.message
    assert unsatisfiable("m", ["a"]).param == "provider"
