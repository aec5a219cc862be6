"""Which backends serve a model: exact names, globs, discovery, visibility."""

from switchyard.actors.routing.candidates import listed_models, serving, unserved_chain_entries
from switchyard.config.load import load_text

SNAP = load_text("""
backends:
  - {name: exact, url: "http://a", models: [gpt-4o], discovery: false}
  - {name: globbed, url: "http://b", models: ["llama-*"]}
  - {name: glob-no-discovery, url: "http://c", models: ["qwen-*"], discovery: false}
  - {name: everything, url: "http://d"}
  - {name: hidden, url: "http://e", models: [gpt-4o], internal: true}
  - {name: disabled, url: "http://f", models: [gpt-4o], enabled: false}
""", env={}).snapshot
FOUND = {"globbed": frozenset({"llama-3-8b", "mistral-7b"}), "everything": frozenset({"phi-3", "llama-3-8b"})}


def names(model):
    return [b.name for b in serving(SNAP.backends, model, FOUND)]


def test_exact_name_matches_case_sensitively():
    assert names("gpt-4o") == ["exact"]
    assert names("GPT-4o") == []


def test_glob_matches_discovered_ids_only():
    assert names("llama-3-8b") == ["globbed", "everything"]
    assert names("llama-unknown") == []
    assert "globbed" not in names("mistral-7b")


def test_glob_without_discovery_matches_requested_name():
    assert names("qwen-72b") == ["glob-no-discovery"]


def test_backend_without_models_serves_discovered():
    assert names("phi-3") == ["everything"]


def test_internal_and_disabled_backends_hidden():
    assert "hidden" not in names("gpt-4o") and "disabled" not in names("gpt-4o")


def test_listed_models_merge_backends():
    listed = listed_models(SNAP.backends, FOUND)
    assert listed["llama-3-8b"] == ["globbed", "everything"]
    assert listed["gpt-4o"] == ["exact"]
    assert "mistral-7b" not in listed
    assert list(listed) == sorted(listed)


def test_unserved_chain_entries_wait_for_backends_without_a_list():
    """A backend whose list has not arrived could serve what its globs match (or anything, listing none)."""
    chains = {"gpt-4o": ("llama-unknown", "gpt-4o", "qwen-72b", "nothing-serves-this"), "phi-3": ("unknown-2",)}
    assert unserved_chain_entries(chains, SNAP.backends, FOUND) == [
        ("gpt-4o", 0, "llama-unknown"), ("gpt-4o", 3, "nothing-serves-this"), ("phi-3", 0, "unknown-2")]
    pending = {"everything": FOUND["everything"]}   # globbed's list has not arrived
    assert unserved_chain_entries(chains, SNAP.backends, pending) == [
        ("gpt-4o", 3, "nothing-serves-this"), ("phi-3", 0, "unknown-2")]
    assert unserved_chain_entries(chains, SNAP.backends, {}) == []   # "everything" lists none: anything may come
