"""The model list's rows (actors/routing/listing.py) and their shapes (protocol/doors/openai.py)."""

from pathlib import Path

import pytest

from switchyard.actors.routing.listing import describe, find, list_models
from switchyard.config.load import load_text
from switchyard.config.names import Stage
from switchyard.protocol.doors.openai import (
    model_list,
    model_list_extended,
    model_object,
    model_object_extended,
    short_metadata,
)

METADATA = """
models:
  - id: gpt-5.6-sol
    aliases: [gpt-5.6]
    metadata:
      display_name: GPT-5.6 Sol
      summary: Frontier model
      capabilities: [chat, vision, code, reasoning, tool]
      knowledge_cutoff: "2026-02"
      pricing: {input_tokens: 5.0, output_tokens: 30.0, cached_input_discount: 0.5, image_input_tokens: 8.0,
                long_context: {threshold_tokens: 200000, input_tokens: 10.0, output_tokens: 45.0}}
      limits: {context_window: 1050000, max_output: 128000, max_n: 4}
      thinking: {pattern: unterminated_start, end_marker: "</think>"}
  - id: claude-opus-4-5-20251101
    aliases: [claude-opus-4-5]
    metadata: {display_name: Claude Opus 4.5}
  - id: qwen3.6-35b-a3b
    metadata: {display_name: Qwen3.6 35B A3B, limits: {context_window: 262144}}
  - id: thinker
    metadata: {thinking: {pattern: unterminated_start}}
"""

CONFIG = """
model_metadata_file: model-metadata.yaml
health_checks: {enabled: false}
backends:
  - name: a
    type: simulated
    models: [gpt-5.6-sol, gpt-5.6, claude-opus-4-5-20251215, custom/gpt-5.6-sol,
             unsloth/Qwen3.6-35B-A3B-GGUF, thinker, unknown-model, llama-local]
  - name: b
    type: simulated
    models: [gpt-5.6-sol, local-llama]
    model_configs:
      - id: gpt-5.6-sol
        metadata: {display_name: GPT-5.6 Sol on b, limits: {max_output: 64000}}
      - id: local-llama
        aliases: [llama-local]
        metadata: {display_name: Local Llama, capabilities: [chat]}
  - {name: hidden, type: simulated, models: [secret], internal: true}
"""


@pytest.fixture
def snapshot(tmp_path: Path):
    (tmp_path / "model-metadata.yaml").write_text(METADATA, encoding="utf-8")
    return load_text(CONFIG, base_dir=tmp_path).snapshot


@pytest.fixture
def rows(snapshot):
    return {m.id: m for m in list_models(snapshot, {})}


def test_lists_public_models_sorted_with_their_backends(rows):
    assert list(rows) == sorted(rows)
    assert "secret" not in rows
    assert rows["gpt-5.6-sol"].backends == ("a", "b")
    assert rows["local-llama"].backends == ("b",)


@pytest.mark.parametrize("model, entry, stage", [
    ("gpt-5.6-sol", "gpt-5.6-sol", Stage.EXACT_ID),
    ("gpt-5.6", "gpt-5.6-sol", Stage.EXACT_ALIAS),
    ("claude-opus-4-5-20251215", "claude-opus-4-5-20251101", Stage.DATE_SUFFIX),
    ("custom/gpt-5.6-sol", "gpt-5.6-sol", Stage.HF_PREFIX),                  # namespace-aware matching
    ("unsloth/Qwen3.6-35B-A3B-GGUF", "qwen3.6-35b-a3b", Stage.HF_PREFIX),     # prefix, then peel
    ("local-llama", "local-llama", Stage.EXACT_ID),                          # a backend-only entry
])
def test_each_listed_id_resolves_to_its_entry(rows, model, entry, stage):
    row = rows[model]
    assert row.resolution is not None
    assert (row.resolution.entry_id, row.resolution.stage) == (entry, stage)
    assert row.entry is not None and row.entry.id == entry


def test_namespaced_id_gets_the_base_ids_metadata(rows):
    assert model_object(rows["custom/gpt-5.6-sol"])["metadata"] == model_object(rows["gpt-5.6"])["metadata"]
    assert model_object(rows["custom/gpt-5.6-sol"])["metadata"]["display_name"] == "GPT-5.6 Sol"


def test_unknown_model_has_no_metadata(rows):
    row = rows["unknown-model"]
    assert row.resolution is None and row.entry is None
    assert "metadata" not in model_object(row)
    extended = model_object_extended(row, lambda b, m: {})
    assert extended["metadata"] is None and extended["resolution"] is None


def test_backend_layer_of_a_serving_backend_wins(rows):
    row = rows["gpt-5.6-sol"]     # served by a (no model_configs) and b (an override)
    assert row.backend_layer == "b"
    md = model_object(row)["metadata"]
    assert md["display_name"] == "GPT-5.6 Sol on b"
    assert md["limits"] == {"context_window": 1050000, "max_output": 64000}   # merged key by key


def test_a_backends_model_configs_never_lends_metadata_to_another_backends_model(rows):
    # `llama-local` is an alias in b's model_configs, but only `a` serves that name.
    assert rows["llama-local"].entry is None
    assert rows["gpt-5.6"].backend_layer is None           # a alone: the file layers only
    assert model_object(rows["gpt-5.6"])["metadata"]["display_name"] == "GPT-5.6 Sol"


def test_backend_model_configs_come_first_on_ties(tmp_path):
    (tmp_path / "model-metadata.yaml").write_text(METADATA, encoding="utf-8")
    config = CONFIG.replace("aliases: [llama-local]", "aliases: [llama-local, gpt-5.6]")
    snapshot = load_text(config, base_dir=tmp_path).snapshot
    row = describe("gpt-5.6", ["b"], snapshot)           # the file says gpt-5.6-sol; b's model_configs wins
    assert row.resolution.entry_id == "local-llama" and row.backend_layer == "b"
    row = describe("gpt-5.6", ["a"], snapshot)           # a does not carry b's layer
    assert row.resolution.entry_id == "gpt-5.6-sol"


def test_short_metadata_has_exactly_the_spec_fields(rows):
    obj = model_object(rows["gpt-5.6"])
    assert list(obj) == ["id", "object", "created", "owned_by", "backends", "metadata"]
    assert (obj["object"], obj["created"], obj["owned_by"]) == ("model", 0, "a")
    assert obj["metadata"] == {
        "display_name": "GPT-5.6 Sol",
        "summary": "Frontier model",
        "capabilities": ["chat", "vision", "code", "reasoning", "tool"],
        "knowledge_cutoff": "2026-02",
        "pricing": {"input_tokens": 5.0, "output_tokens": 30.0},
        "limits": {"context_window": 1050000, "max_output": 128000},
    }


def test_short_metadata_leaves_out_what_is_not_set(rows):
    assert model_object(rows["claude-opus-4-5-20251215"])["metadata"] == {"display_name": "Claude Opus 4.5"}
    assert model_object(rows["unsloth/Qwen3.6-35B-A3B-GGUF"])["metadata"] == {
        "display_name": "Qwen3.6 35B A3B", "limits": {"context_window": 262144}}
    # An entry that sets none of the short fields: no `metadata` key at all here ...
    assert "metadata" not in model_object(rows["thinker"])
    assert short_metadata(rows["thinker"].entry.metadata) == {}
    # ... but the extended form shows what it has.
    assert model_object_extended(rows["thinker"], lambda b, m: {})["metadata"] == {
        "thinking": {"pattern": "unterminated_start"}}


def test_extended_has_full_metadata_resolution_and_backend_status(rows):
    seen = []

    def status(backend, model):
        seen.append((backend, model))
        return {"state": "healthy", "routable": True, "circuit": "closed"}

    obj = model_object_extended(rows["custom/gpt-5.6-sol"], status)
    assert obj["id"] == "custom/gpt-5.6-sol" and obj["backends"] == ["a"]
    assert obj["metadata"]["pricing"] == {
        "input_tokens": 5.0, "output_tokens": 30.0, "cached_input_discount": 0.5, "image_input_tokens": 8.0,
        "long_context": {"threshold_tokens": 200000, "input_tokens": 10.0, "output_tokens": 45.0}}
    assert obj["metadata"]["limits"]["max_n"] == 4
    assert obj["metadata"]["thinking"]["end_marker"] == "</think>"
    assert obj["resolution"] == {"entry_id": "gpt-5.6-sol", "stage": "HF_PREFIX", "matched": "gpt-5.6-sol",
                                 "backend_layer": None}
    assert obj["backend_status"] == [{"name": "a", "state": "healthy", "routable": True, "circuit": "closed"}]
    assert seen == [("a", "custom/gpt-5.6-sol")]


def test_list_bodies_and_find(snapshot):
    listing = list_models(snapshot, {})
    assert model_list(listing)["object"] == "list"
    assert [m["id"] for m in model_list(listing)["data"]] == [m.id for m in listing]
    assert len(model_list_extended(listing, lambda b, m: {})["data"]) == len(listing)
    assert find(listing, "custom/gpt-5.6-sol").id == "custom/gpt-5.6-sol"
    assert find(listing, "GPT-5.6-SOL") is None          # retrieve is by listed id, exactly


def test_discovered_ids_are_resolved_too(tmp_path):
    (tmp_path / "model-metadata.yaml").write_text(METADATA, encoding="utf-8")
    config = """
model_metadata_file: model-metadata.yaml
backends:
  - {name: globbed, type: generic, url: "http://x.simulated", models: ["openai/*"]}
  - {name: everything, type: generic, url: "http://y.simulated"}
"""
    snapshot = load_text(config, base_dir=tmp_path).snapshot
    discovered = {"globbed": frozenset({"openai/gpt-5.6-sol", "other/x"}),
                  "everything": frozenset({"claude-opus-4-5-20251215"})}
    rows = {m.id: m for m in list_models(snapshot, discovered)}
    assert list(rows) == ["claude-opus-4-5-20251215", "openai/gpt-5.6-sol"]
    assert rows["openai/gpt-5.6-sol"].resolution.stage is Stage.HF_PREFIX
    assert rows["claude-opus-4-5-20251215"].resolution.stage is Stage.DATE_SUFFIX


ALIASES = """
model_metadata_file: model-metadata.yaml
backends:
  - name: g
    type: simulated
    models: [gemini-3.1-pro-preview, gpt-5.6-sol]
    model_configs:
      - id: gemini-3.1-pro-preview
        aliases: [gemini-3.1-pro, "gemini-*"]
        metadata: {display_name: Gemini 3.1 Pro}
  - {name: disabled-one, type: simulated, models: [other], enabled: false,
     model_configs: [{id: other, aliases: [other-alias]}]}
"""


def test_backend_model_configs_aliases_are_listed_while_dispatch_holds(tmp_path):
    (tmp_path / "model-metadata.yaml").write_text(METADATA, encoding="utf-8")
    snapshot = load_text(ALIASES, base_dir=tmp_path).snapshot
    rows = {m.id: m for m in list_models(snapshot, {})}
    # gemini-3.1-pro: its own row, the canonical's backends and metadata. Not listed: the wildcard
    # alias, the metadata file's alias gpt-5.6, a disabled backend's alias.
    assert list(rows) == ["gemini-3.1-pro", "gemini-3.1-pro-preview", "gpt-5.6-sol"]
    alias = rows["gemini-3.1-pro"]
    assert alias.alias_of == "gemini-3.1-pro-preview" and alias.backends == ("g",)
    assert model_object(alias)["metadata"] == {"display_name": "Gemini 3.1 Pro"}
    assert model_object_extended(alias, lambda b, m: {})["resolution"] == {
        "entry_id": "gemini-3.1-pro-preview", "stage": "EXACT_ALIAS", "matched": "gemini-3.1-pro",
        "backend_layer": "g", "alias_of": "gemini-3.1-pro-preview"}
    assert rows["gemini-3.1-pro-preview"].alias_of is None


def test_a_backend_alias_served_literally_is_an_ordinary_row(tmp_path):
    (tmp_path / "model-metadata.yaml").write_text(METADATA, encoding="utf-8")
    literal = "  - {name: lit, type: simulated, models: [gemini-3.1-pro]}\n"
    config = ALIASES.replace("  - {name: disabled-one", literal + "  - {name: disabled-one")
    snapshot = load_text(config, base_dir=tmp_path).snapshot
    rows = {m.id: m for m in list_models(snapshot, {})}
    assert rows["gemini-3.1-pro"].alias_of is None and rows["gemini-3.1-pro"].backends == ("lit",)
    assert rows["gemini-3.1-pro"].entry is None       # g's model_configs does not lend to lit's model


def test_a_backend_only_id_layers_over_the_file_entry_it_resolves_to(tmp_path):
    (tmp_path / "model-metadata.yaml").write_text(METADATA, encoding="utf-8")
    config = """
model_metadata_file: model-metadata.yaml
backends:
  - name: v
    type: simulated
    models: [unsloth/Qwen3.6-35B-A3B-GGUF]
    model_configs:
      - {id: unsloth/Qwen3.6-35B-A3B-GGUF, metadata: {limits: {max_output: 8192}}}
"""
    snapshot = load_text(config, base_dir=tmp_path).snapshot
    (row,) = list_models(snapshot, {})
    assert (row.resolution.entry_id, row.resolution.stage) == ("unsloth/Qwen3.6-35B-A3B-GGUF", Stage.EXACT_ID)
    assert row.backend_layer == "v"
    assert model_object(row)["metadata"] == {"display_name": "Qwen3.6 35B A3B",
                                             "limits": {"context_window": 262144, "max_output": 8192}}
    assert str(row.entry.provenance["limits.max_output"]).startswith("backends[0].model_configs")
