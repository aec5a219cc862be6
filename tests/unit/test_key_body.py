"""The admin API's key bodies: each rule's error with its exact path under ``body`` and its message."""

from datetime import datetime, timezone

import pytest

from switchyard.config.access import ApiKey
from switchyard.config.key_body import (
    CreateBody,
    KeyBodyError,
    PatchBody,
    RotateBody,
    create_body,
    patch_body,
    rotate_body,
)
from switchyard.config.limits import Budget, Period, RateLimit

NOW = datetime(2026, 12, 7, tzinfo=timezone.utc).timestamp()
LATER = datetime(2027, 1, 31, tzinfo=timezone.utc).timestamp()
ID_RULE = "must be 1-128 letters, digits, '.', '_', ':', '@' or '-'"
TIME_RULE = "must be an RFC 3339 time like 2027-01-31T00:00:00Z, or Unix seconds"
NAME_RULE = "names must be 1-64 letters, digits, '.', '_', ':' or '-'"


def errors(parse, data, *args):
    with pytest.raises(KeyBodyError) as info:
        parse(data, *args)
    return list(info.value.errors)


def create_errors(data):
    return errors(create_body, data, NOW)


# --- the body itself -------------------------------------------------------------------

@pytest.mark.parametrize("parse", [create_body, patch_body])
@pytest.mark.parametrize(("data", "got"), [([], "list"), (None, "null"), ("{}", "string"), (3, "integer")])
def test_a_body_that_is_no_object_is_refused(parse, data, got):
    assert errors(parse, data, NOW) == [("body", f"must be a JSON object, got {got}")]


@pytest.mark.parametrize("parse", [create_body, patch_body])
def test_an_unknown_field_is_named_by_its_path(parse):
    assert errors(parse, {"tier": "gold", "colour": "red"}, NOW) == [("body.colour", "unknown field")]


def test_every_error_is_reported_at_once_in_the_order_of_the_fields():
    assert create_errors({"colour": 1, "id": "-x", "tier": "", "rate_limit": {"requests_per_minute": 0},
                          "expires_at": NOW, "metadata": {"team": 5}}) == [
        ("body.id", f"{ID_RULE}, got '-x'"),
        ("body.tier", "must not be empty"),
        ("body.rate_limit.requests_per_minute", "must be at least 1, got 0"),
        ("body.expires_at", f"must be in the future, got {NOW!r}"),
        ("body.metadata.team", "must be a string, got integer"),
        ("body.colour", "unknown field"),
    ]


def test_the_error_lists_every_pair_in_its_message():
    with pytest.raises(KeyBodyError, match=r"2 error\(s\) in the body:\n  body.id: .*\n  body.colour: unknown field"):
        create_body({"id": "", "colour": 1}, NOW)


# --- create ----------------------------------------------------------------------------

def test_an_empty_body_makes_a_key_with_every_default():
    assert create_body({}, NOW) == CreateBody()
    assert create_body({"id": None, "tier": None, "metadata": None}, NOW) == CreateBody()


def test_every_field_is_read_with_its_rule():
    body = create_body({"id": "team-a.svc:1@x", "organization_id": "acme", "tier": "gold",
                        "allowed_models": ["gpt-*", "gpt-*", "claude-3"], "allowed_backends": ["east"],
                        "rate_limit": {"requests_per_minute": 300}, "budget": {"limit_usd": 50, "period": "month"},
                        "expires_at": "2027-01-31T00:00:00Z", "metadata": {"team": "search", "cost.center": ""}},
                       NOW)
    assert body == CreateBody(id="team-a.svc:1@x", organization_id="acme", tier="gold",
                              allowed_models=("gpt-*", "claude-3"), allowed_backends=("east",),
                              rate_limit=RateLimit(requests_per_minute=300),
                              budget=Budget(limit_usd=50.0, period=Period.MONTH),
                              expires_at=LATER, metadata={"team": "search", "cost.center": ""})


def test_the_api_key_takes_the_generated_id_only_when_the_body_named_none():
    assert create_body({"tier": "gold"}, NOW).api_key("key_1") == ApiKey(id="key_1", key="", tier="gold")
    assert create_body({"id": "mine"}, NOW).api_key("key_1") == ApiKey(id="mine", key="")


@pytest.mark.parametrize("bad", ["-lead", "has space", "a" * 129, "ü"])
def test_the_id_follows_the_rule_of_api_keys(bad):
    assert create_errors({"id": bad}) == [("body.id", f"{ID_RULE}, got {bad!r}")]


def test_an_id_that_is_no_string_is_refused():
    assert create_errors({"id": 7}) == [("body.id", "must be a string, got integer")]


@pytest.mark.parametrize("name", ["organization_id", "tier"])
def test_a_label_follows_the_rule_of_api_keys(name):
    assert create_errors({name: " gold"}) == [
        (f"body.{name}", "must be 1-256 characters without control characters or outer spaces")]


def test_allowed_models_may_not_be_empty():
    assert create_errors({"allowed_models": []}) == [
        ("body.allowed_models", "must not be empty; leave the key out to allow every one")]


def test_allowed_backends_items_must_be_strings():
    assert create_errors({"allowed_backends": ["east", 3]}) == [
        ("body.allowed_backends", "item [1] must be a string, got integer")]


def test_a_rate_limit_must_name_a_limit_and_no_unknown_dimension():
    assert create_errors({"rate_limit": {}}) == [
        ("body.rate_limit", "names no limit: set requests_per_second, requests_per_minute, tokens_per_minute "
                            "or max_concurrent")]
    assert create_errors({"rate_limit": {"requests_per_minute": 5, "per_hour": 1}}) == [
        ("body.rate_limit.per_hour", "unknown field")]


def test_a_rate_limit_that_is_no_object_is_refused():
    assert create_errors({"rate_limit": 5}) == [("body.rate_limit", "must be a mapping, got integer")]


def test_a_budget_must_name_a_limit():
    assert create_errors({"budget": {"period": "day"}}) == [
        ("body.budget", "names no limit: set limit_usd, limit_tokens or both")]
    assert create_errors({"budget": {"limit_usd": -1}}) == [
        ("body.budget.limit_usd", "must be a positive number of US dollars, got -1")]


# --- expires_at ------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "seconds"), [
    ("2027-01-31T00:00:00Z", LATER),
    ("2027-01-31t00:00:00z", LATER),
    ("2027-01-31 09:00:00+09:00", LATER),
    ("2027-01-30T19:00:00-05:00", LATER),
    ("2027-01-31T00:00:00.250Z", LATER + 0.25),
    (int(LATER), LATER),
    (LATER + 0.5, LATER + 0.5),
])
def test_expires_at_takes_an_rfc3339_time_with_a_timezone_or_unix_seconds(given, seconds):
    assert create_body({"expires_at": given}, NOW).expires_at == seconds


def test_expires_at_needs_a_timezone():
    assert create_errors({"expires_at": "2027-01-31T00:00:00"}) == [
        ("body.expires_at", "has no timezone: end it with Z or an offset like +09:00, got '2027-01-31T00:00:00'")]


@pytest.mark.parametrize("bad", ["2027-01-31", "tomorrow", "1801353600", "2027-01-31T00:00Z",
                                 "２０２７-01-31T00:00:00Z", "2027-01-31T00:00:00+0900"])
def test_expires_at_refuses_other_text(bad):
    assert create_errors({"expires_at": bad}) == [("body.expires_at", f"{TIME_RULE}, got {bad!r}")]


def test_expires_at_must_be_a_real_time():
    assert create_errors({"expires_at": "2027-02-30T00:00:00Z"}) == [
        ("body.expires_at", "is not a valid time (day is out of range for month), got '2027-02-30T00:00:00Z'")]


@pytest.mark.parametrize("bad", [True, [], {}])
def test_expires_at_refuses_other_types(bad):
    kind = {bool: "boolean", list: "list", dict: "mapping"}[type(bad)]
    assert create_errors({"expires_at": bad}) == [("body.expires_at", f"{TIME_RULE}, got {kind}")]


@pytest.mark.parametrize("past", [NOW, NOW - 1, 0, "2026-12-06T23:59:59Z", "2026-12-07T09:00:00+09:00"])
def test_expires_at_must_be_after_now(past):
    assert create_errors({"expires_at": past}) == [("body.expires_at", f"must be in the future, got {past!r}")]


@pytest.mark.parametrize("far", [LATER * 1000, 10**400, float("inf")], ids=["ms", "10**400", "inf"])
def test_expires_at_in_milliseconds_is_refused(far):
    assert create_errors({"expires_at": far}) == [
        ("body.expires_at", "must be before the year 10000 (in Unix seconds, not milliseconds)")]


def test_expires_at_may_not_be_nan():
    assert create_errors({"expires_at": float("nan")}) == [
        ("body.expires_at", "must be a number of Unix seconds, got NaN")]


# --- metadata --------------------------------------------------------------------------

def test_metadata_must_be_an_object():
    assert create_errors({"metadata": ["team"]}) == [("body.metadata", "must be an object of string labels, got list")]


def test_metadata_holds_at_most_64_labels():
    assert len(create_body({"metadata": {f"k{i}": "v" for i in range(64)}}, NOW).metadata) == 64
    assert create_errors({"metadata": {f"k{i}": "v" for i in range(65)}}) == [
        ("body.metadata", "must have at most 64 labels, got 65")]


@pytest.mark.parametrize("name", ["", "a" * 65, "has space", "slash/ed", "ü", "tab\t"])
def test_a_label_name_is_1_to_64_of_letters_digits_and_dot_underscore_colon_dash(name):
    assert create_body({"metadata": {"a" * 64: "v", "A.b_c:d-9": "v"}}, NOW).metadata == {"a" * 64: "v",
                                                                                         "A.b_c:d-9": "v"}
    assert create_errors({"metadata": {name: "v"}}) == [("body.metadata", f"has the label name {name!r}: {NAME_RULE}")]


def test_a_label_value_must_be_a_string():
    assert create_errors({"metadata": {"team": None}}) == [("body.metadata.team", "must be a string, got null")]


def test_a_label_value_is_at_most_512_characters():
    assert create_body({"metadata": {"team": "é" * 512}}, NOW).metadata == {"team": "é" * 512}
    assert create_errors({"metadata": {"team": "x" * 513}}) == [
        ("body.metadata.team", "must be at most 512 characters, got 513")]


@pytest.mark.parametrize("control", ["\x00", "\n", "\x1b", "\x7f", "\x85"])
def test_a_label_value_has_no_control_characters(control):
    assert create_errors({"metadata": {"team": f"a{control}b"}}) == [
        ("body.metadata.team", "must not contain control characters")]


def test_a_label_value_is_valid_unicode():
    assert create_errors({"metadata": {"team": "a\ud800b"}}) == [
        ("body.metadata.team", "must be valid Unicode text (it holds a lone surrogate)")]


# --- patch -----------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["other", None])
def test_a_patch_cannot_change_the_id(value):
    assert errors(patch_body, {"id": value, "tier": "gold"}, NOW) == [
        ("body.id", "cannot change: a key keeps its id (create a new key instead)")]


def test_a_patch_gives_only_the_fields_present():
    patch = patch_body({"tier": "gold", "rate_limit": {"requests_per_minute": 5}}, NOW)
    assert patch.given == {"tier", "rate_limit"}
    assert patch.changes() == {"tier": "gold", "rate_limit": RateLimit(requests_per_minute=5)}
    key = ApiKey(id="k", key="", tier="silver", organization_id="acme", budget=Budget(limit_tokens=10))
    assert patch.applied(key) == ApiKey(id="k", key="", tier="gold", organization_id="acme",
                                        rate_limit=RateLimit(requests_per_minute=5), budget=Budget(limit_tokens=10))
    assert patch_body({}, NOW) == PatchBody(given=frozenset())


def test_a_patch_clears_a_field_given_as_null():
    fields = ["organization_id", "tier", "allowed_models", "allowed_backends", "rate_limit", "budget",
              "expires_at", "metadata"]
    patch = patch_body(dict.fromkeys(fields), NOW)
    assert patch.given == set(fields)
    assert patch.changes() == {**dict.fromkeys(fields), "metadata": {}}
    key = ApiKey(id="k", key="", tier="gold", allowed_models=("m",), rate_limit=RateLimit(max_concurrent=2))
    assert patch.applied(key) == ApiKey(id="k", key="")


def test_a_patch_reads_each_field_with_the_rules_of_create():
    assert errors(patch_body, {"rate_limit": {"requests_per_minute": 0}, "expires_at": "2027-01-31",
                               "metadata": {"": "v"}}, NOW) == [
        ("body.rate_limit.requests_per_minute", "must be at least 1, got 0"),
        ("body.expires_at", f"{TIME_RULE}, got '2027-01-31'"),
        ("body.metadata", f"has the label name '': {NAME_RULE}"),
    ]
    assert patch_body({"expires_at": "2027-01-31T00:00:00Z"}, NOW).changes() == {"expires_at": LATER}


# --- rotate ----------------------------------------------------------------------------

def test_a_rotation_with_no_body_or_no_grace_stops_the_old_secret_at_once():
    assert rotate_body(None) == rotate_body({}) == rotate_body({"grace_seconds": None}) == RotateBody(0)


@pytest.mark.parametrize("grace", [0, 1, 86400, 2_592_000])
def test_a_rotation_takes_a_grace_of_up_to_30_days(grace):
    assert rotate_body({"grace_seconds": grace}) == RotateBody(grace)


@pytest.mark.parametrize(("grace", "why"), [
    (-1, "must be at least 0, got -1"),
    (2_592_001, "must be at most 2592000, got 2592001"),
    (1.5, "must be an integer, got number"),
    ("1d", "must be an integer, got string"),
    (True, "must be an integer, got boolean"),
])
def test_a_rotation_grace_is_an_integer_of_seconds_up_to_30_days(grace, why):
    assert errors(rotate_body, {"grace_seconds": grace}) == [
        ("body.grace_seconds", f"{why} (0 to 30 days, in seconds)")]


def test_a_rotation_body_is_an_object_with_no_unknown_field():
    assert errors(rotate_body, []) == [("body", "must be a JSON object, got list")]
    assert errors(rotate_body, {"grace": 60}) == [("body.grace", "unknown field")]
