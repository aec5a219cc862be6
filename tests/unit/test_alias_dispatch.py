"""Alias dispatch: an alias is routed as its canonical id only when all four conditions hold."""

import json
from types import MappingProxyType

import attrs
import pytest

from switchyard.actors.discovery import public_ids
from switchyard.actors.routing.aliases import dispatch_target
from switchyard.config.load import load_text
from switchyard.config.metadata import ModelCatalogue


def snap(backends: str, file_aliases: dict[str, str] | None = None):
    snapshot = load_text(f"backends:\n{backends}", env={}).snapshot
    if file_aliases is not None:
        snapshot = attrs.evolve(snapshot, models=ModelCatalogue(aliases=MappingProxyType(file_aliases)))
    return snapshot


# A Google-like backend that only serves the -preview id, declaring the short name as its alias.
GOOGLE = """
  - name: google
    url: http://g
    models: [gemini-3.1-pro-preview]
    discovery: false
    model_configs:
      - {id: gemini-3.1-pro-preview, aliases: [gemini-3.1-pro]}
"""


# --- condition 1: an exact alias -----------------------------------------------------

@pytest.mark.parametrize("requested, expected", [
    ("gemini-3.1-pro", "gemini-3.1-pro-preview"),              # exact alias
    ("models/gemini-3.1-pro", "gemini-3.1-pro-preview"),       # with the models/ prefix removed
    ("gemini-3.1-pro-20250101", None),                         # a date suffix is a fuzzy stage
    ("Gemini-3.1-Pro", None),                                  # case-folding is a fuzzy stage
    ("google/gemini-3.1-pro", None),                           # a vendor prefix is a fuzzy stage
    ("gemini-3.1-pro-preview", None),                          # the canonical id itself: nothing to do
    ("unknown", None),
])
def test_only_an_exact_alias_dispatches(requested, expected):
    assert dispatch_target(requested, snap(GOOGLE), {}) == expected


def test_metadata_file_aliases_dispatch_too():
    s = snap("  - {name: g, url: http://g, models: [gpt-5-preview], discovery: false}",
             file_aliases={"gpt-5": "gpt-5-preview", "gpt-*": "gpt-5-preview"})
    assert dispatch_target("gpt-5", s, {}) == "gpt-5-preview"
    assert dispatch_target("gpt-*", s, {}) is None   # a wildcard alias never dispatches


def test_aliases_of_a_disabled_backend_do_not_count():
    s = snap(GOOGLE.replace("discovery: false", "discovery: false\n    enabled: false") +
             "  - {name: other, url: http://o, models: [gemini-3.1-pro-preview], discovery: false}")
    assert dispatch_target("gemini-3.1-pro", s, {}) is None


# --- condition 2: discovery finished -----------------------------------------------

GLOBBED = GOOGLE + """
  - {name: vertex, url: http://v, models: ["gemini-*"]}
"""


@pytest.mark.parametrize("found, expected", [
    ({}, None),                                                           # vertex not discovered yet
    ({"vertex": frozenset()}, None),                                      # discovered nothing: no evidence
    ({"vertex": frozenset({"gemini-2.0-flash"})}, "gemini-3.1-pro-preview"),   # finished, no literal id
])
def test_a_backend_naming_the_alias_by_glob_must_have_finished_discovery(found, expected):
    assert dispatch_target("gemini-3.1-pro", snap(GLOBBED), found) == expected


@pytest.mark.parametrize("everything", ["*", "models/*"])
def test_a_match_everything_glob_holds_nothing(everything):
    s = snap(GOOGLE + f'  - {{name: any, url: http://a, models: ["{everything}"]}}\n')
    assert dispatch_target("gemini-3.1-pro", s, {}) == "gemini-3.1-pro-preview"


def test_a_disabled_backend_still_discovering_holds_nothing():
    s = snap(GLOBBED.replace('models: ["gemini-*"]}', 'models: ["gemini-*"], enabled: false}'))
    assert dispatch_target("gemini-3.1-pro", s, {}) == "gemini-3.1-pro-preview"


# --- condition 3: no backend serves the alias literally -------------------------------

def test_literal_serving_wins_discovered():
    found = {"vertex": frozenset({"gemini-3.1-pro"})}
    assert dispatch_target("gemini-3.1-pro", snap(GLOBBED), found) is None


def test_literal_serving_wins_configured_exact_name():
    s = snap(GOOGLE + "  - {name: local, url: http://l, models: [gemini-3.1-pro], discovery: false}\n")
    assert dispatch_target("gemini-3.1-pro", s, {}) is None


def test_a_discovery_off_narrow_glob_keeps_the_name_but_match_everything_does_not():
    narrow = snap(GOOGLE + '  - {name: local, url: http://l, models: ["gemini-*"], discovery: false}\n')
    assert dispatch_target("gemini-3.1-pro", narrow, {}) is None
    everything = snap(GOOGLE + '  - {name: local, url: http://l, models: ["*"], discovery: false}\n')
    assert dispatch_target("gemini-3.1-pro", everything, {}) == "gemini-3.1-pro-preview"


def test_an_internal_backend_serving_the_alias_does_not_keep_it():
    s = snap(GOOGLE + "  - {name: hidden, url: http://h, models: [gemini-3.1-pro], discovery: false,"
                      " internal: true}\n")
    assert dispatch_target("gemini-3.1-pro", s, {}) == "gemini-3.1-pro-preview"


# --- condition 4: some user-routable backend serves the canonical id --------------------

def test_no_backend_serving_the_canonical_id_means_no_dispatch():
    s = snap("""
  - name: google
    url: http://g
    models: ["gemini-*"]
    model_configs:
      - {id: gemini-3.1-pro-preview, aliases: [gemini-3.1-pro]}
""")
    assert dispatch_target("gemini-3.1-pro", s, {"google": frozenset({"gemini-2.0-flash"})}) is None
    found = {"google": frozenset({"gemini-2.0-flash", "gemini-3.1-pro-preview"})}
    assert dispatch_target("gemini-3.1-pro", s, found) == "gemini-3.1-pro-preview"


def test_an_internal_backend_serving_the_canonical_id_is_not_enough():
    s = snap(GOOGLE.replace("discovery: false", "discovery: false\n    internal: true"))
    assert dispatch_target("gemini-3.1-pro", s, {}) is None


# --- upstream ids in the discovered catalogue ---------------------------------------

def test_discovered_upstream_ids_are_published_as_public_ids():
    s = snap("""
  - name: vllm
    url: http://v
    model_configs:
      - {id: gemma4, upstream_id: gemma-4-26b-a4b-it-fp8}
""")
    b = s.backends[0]
    assert public_ids(b, ["gemma-4-26b-a4b-it-fp8", "other"]) == {"gemma4", "other"}


# --- restoring the public id in answers (actors.relay.Rename) -------------------------

def test_rename_restores_only_a_top_level_upstream_model():
    from switchyard.actors.rename import Rename

    r = Rename("up-8b", "pub")
    for raw in (b'data: {"id":"x","model":"up-8b","choices":[]}\n\n',
                b'data: {"id": "x", "model": "up-8b", "choices": []}\n\n'):
        obj = json.loads(raw[6:])
        out = r.event(obj, raw)
        assert json.loads(out[6:])["model"] == "pub" and obj["model"] == "pub"
        assert out.replace(b"pub", b"up-8b") == raw          # nothing else changed
    other = b'data: {"model":"someone-else","x":{"model":"up-8b"}}\n\n'
    assert r.event(json.loads(other[6:]), other) is other    # top-level differs: untouched
    odd = b'data: {"model" :  "up-8b"}\n\n'                  # unusual spacing: re-encoded
    assert json.loads(r.event(json.loads(odd[6:]), odd)[6:]) == {"model": "pub"}
    body = b'{"model":"up-8b","choices":[]}'
    assert json.loads(r.payload(json.loads(body), body))["model"] == "pub"
    same = b'{"model":"pub"}'
    assert r.payload(json.loads(same), same) is same         # not re-serialized when unchanged


CATCH_ALL = """backends:
  - {name: local, type: openai, url: "http://127.0.0.1:9/v1", discovery: DISCOVERY, models: ["ENTRY"]}
  - {name: claude, type: openai, url: "http://127.0.0.1:9/v1", discovery: false, models: [CANONICAL],
     model_configs: [{id: claude-sonnet-4, aliases: [sonnet]}]}
"""


def catch_all_warnings(entry: str = "*", discovery: str = "false", canonical: str = "claude-sonnet-4") -> list[str]:
    text = CATCH_ALL.replace("ENTRY", entry).replace("DISCOVERY", discovery).replace("CANONICAL", canonical)
    return [w for w in load_text(text, env={}).warnings if w.startswith("backends[0].models[0]")]


@pytest.mark.parametrize("entry", ["*", "models/*"])
def test_validate_warns_that_a_catch_all_backend_takes_a_share_of_an_aliases_canonical_calls(entry):
    [warning] = catch_all_warnings(entry)
    assert f"{entry!r} matches every model name" in warning
    assert "'sonnet' is routed as its canonical id 'claude-sonnet-4', to this backend as much as to 'claude'" \
        in warning


def test_no_catch_all_warning_with_discovery_on_or_no_other_backend_serving_the_canonical_id():
    assert catch_all_warnings(discovery="true") == []        # it serves what it lists, like any list
    assert catch_all_warnings(canonical="other-model") == []   # nobody else serves the alias's id
    assert catch_all_warnings(entry="claude-*") == []          # a narrower glob keeps what it names
