"""Variant suffix parsing and narrowing (actors/routing/variants.py): pure, no clock."""

import pytest

from switchyard.actors.routing.variants import (
    ThroughputSample,
    Variant,
    fresh_throughput,
    narrow,
    parse,
    price_per_million,
    with_effort,
)

# What the router resolves on its own: plain ids, Ollama name:tag ids, and one id that is
# literally named like a variant.
KNOWN = {"m", "llama3:8b", "qwen2.5:7b-instruct", "x:nitro", "org/model", "ns:inner"}


@pytest.mark.parametrize(("requested", "expected"), [
    ("m:nitro", ("m", "nitro")),
    ("m:floor", ("m", "floor")),
    ("m:thinking", ("m", "thinking")),
    ("m:online", ("m", "online")),
    ("org/model:floor", ("org/model", "floor")),
    ("llama3:8b:nitro", ("llama3:8b", "nitro")),        # an Ollama tag stays part of the base
    ("ns:inner:thinking", ("ns:inner", "thinking")),    # split at the last ':' only
    # not variants
    ("m", None),
    ("llama3:8b", None),                 # an Ollama tag is never read as a variant
    ("qwen2.5:7b-instruct", None),
    ("x:nitro", None),                   # the full name is served: it wins over the suffix
    ("m:cheap", None),                   # an unknown word is never split
    ("m:free", None),
    ("m:extended", None),
    ("m:Nitro", None),                   # the words are exact
    ("nope:nitro", None),                # an unknown base: the whole name stays unknown
    (":nitro", None),
    ("m:", None),
    ("m:nitro:floor", None),             # the base 'm:nitro' is not known
])
def test_parse(requested, expected):
    got = parse(requested, KNOWN.__contains__)
    if expected is None:
        assert got is None
    else:
        assert got == Variant(requested, *expected)


def test_full_name_is_asked_first():
    asked = []

    def known(name):
        asked.append(name)
        return name in KNOWN

    assert parse("x:nitro", known) is None and asked == ["x:nitro"]
    asked.clear()
    assert parse("m:nitro", known) == Variant("m:nitro", "m", "nitro") and asked == ["m:nitro", "m"]
    asked.clear()
    assert parse("m:cheap", known) is None and asked == []   # no lookup at all for another word


def test_narrow_keeps_order_and_ties_and_never_widens():
    scores = {"a": 3.0, "b": 1.0, "c": None, "d": 1.0}
    assert narrow(list("abcd"), scores.get, "min") == ["b", "d"]
    assert narrow(list("abcd"), scores.get, "max") == ["a"]
    assert narrow(list("cd"), scores.get, "max") == ["d"]   # 'c' has no data: not a candidate of the ranking
    assert narrow(["c"], scores.get, "min") is None          # no data at all: the caller keeps the set
    assert narrow([], scores.get, "min") is None


def test_price_needs_both_sides():
    assert price_per_million(1.0, 2.5) == 3.5
    assert price_per_million(0.0, 0.0) == 0.0
    assert price_per_million(None, 2.0) is None
    assert price_per_million(1.0, None) is None


def test_throughput_is_fresh_or_nothing():
    view = {"a": ThroughputSample(120.0, 100.0), "z": ThroughputSample(0.0, 100.0)}
    assert fresh_throughput(view, "a", 110.0, 30.0) == 120.0
    assert fresh_throughput(view, "a", 130.0, 30.0) == 120.0   # the boundary instant is still fresh
    assert fresh_throughput(view, "a", 131.0, 30.0) is None    # older than the window
    assert fresh_throughput(view, "b", 110.0, 30.0) is None
    assert fresh_throughput(view, "z", 110.0, 30.0) is None    # no throughput is no data
    assert fresh_throughput({}, "a", 0.0, 30.0) is None        # engine stats off: an empty view


def test_thinking_effort_keeps_the_clients_own():
    assert with_effort({"model": "m"}) == {"model": "m", "reasoning_effort": "high"}
    assert with_effort({"reasoning_effort": "low"}) == {"reasoning_effort": "low"}


# --- proxy.variant_suffixes.enabled -------------------------------------------------------

def test_config_key_defaults_off_and_is_strict():
    from switchyard.config.load import ConfigError, load_text

    base = "backends: [{name: a, type: simulated, models: [m]}]\n"
    assert load_text(base).snapshot.proxy.variant_suffixes.enabled is False
    assert load_text(base + "proxy: {variant_suffixes: {enabled: true}}").snapshot.proxy.variant_suffixes.enabled
    with pytest.raises(ConfigError) as err:
        load_text(base + "proxy: {variant_suffixes: {enabled: true, nitro: 1}, extra: 2}")
    assert "proxy.variant_suffixes.nitro: unknown key" in str(err.value)
    assert "proxy.extra: unknown key" in str(err.value)
    with pytest.raises(ConfigError, match="proxy.variant_suffixes.enabled: must be true or false"):
        load_text(base + "proxy: {variant_suffixes: {enabled: 'yes'}}")
