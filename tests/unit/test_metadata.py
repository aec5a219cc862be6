"""Model metadata: one test per rule (warnings name model and field or the dotted path; layers merge in order)."""

import json

import pytest
import trio

from switchyard.config.load import ConfigError, load_file, load_text
from switchyard.config.metadata import Source
from switchyard.protocol.serving.cli import main

BACKEND = """
backends:
  - name: a
    type: simulated
    models: [m]
"""


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def one_model(meta: str, model: str = "m") -> str:
    return f"models:\n  - id: {model}\n    metadata: {meta}\n"


def load(tmp_path, config: str = "", files: dict | None = None):
    for name, text in (files or {}).items():
        write(tmp_path / name, text)
    return load_file(write(tmp_path / "config.yaml", config + BACKEND))


def warnings_for(tmp_path, meta: str) -> list[str]:
    loaded = load(tmp_path, "model_metadata_file: md.yaml\n", {"md.yaml": one_model(meta)})
    return list(loaded.warnings)


# --- range checks: warn with model and field, keep the value --------------------

@pytest.mark.parametrize("meta, field, rule, kept", [
    ("{pricing: {input_tokens: -1}}", "pricing.input_tokens", "must be at least 0, got -1", -1.0),
    ("{pricing: {output_tokens: -2}}", "pricing.output_tokens", "must be at least 0, got -2", -2.0),
    ("{pricing: {cached_input_discount: 1.5}}", "pricing.cached_input_discount", "must be at most 1, got 1.5", 1.5),
    ("{pricing: {batch_discount: 1.5}}", "pricing.batch_discount", "must be at most 1, got 1.5", 1.5),
    ("{pricing: {image_input_tokens: -1}}", "pricing.image_input_tokens", "must be at least 0, got -1", -1.0),
    ("{pricing: {cached_image_input_tokens: -1}}", "pricing.cached_image_input_tokens",
     "must be at least 0, got -1", -1.0),
    ("{pricing: {per_image: {512x512: -0.1}}}", "pricing.per_image.512x512", "must be at least 0, got -0.1", -0.1),
    ("{pricing: {per_image: {1024x1024: {hd: -1}}}}", "pricing.per_image.1024x1024.hd",
     "must be at least 0, got -1", -1.0),
    ("{pricing: {long_context: {threshold_tokens: 0}}}", "pricing.long_context.threshold_tokens",
     "must be at least 1, got 0", 0),
    ("{pricing: {long_context: {threshold_tokens: 10000001}}}", "pricing.long_context.threshold_tokens",
     "must be at most 10000000, got 10000001", 10_000_001),
    ("{pricing: {long_context: {input_tokens: -1}}}", "pricing.long_context.input_tokens",
     "must be at least 0, got -1", -1.0),
    ("{pricing: {long_context: {output_tokens: .inf}}}", "pricing.long_context.output_tokens",
     "must be a finite number, got inf", float("inf")),
    ("{limits: {context_window: 10000001}}", "limits.context_window", "must be at most 10000000, got 10000001",
     10_000_001),
    ("{limits: {max_output: -1}}", "limits.max_output", "must be at least 0, got -1", -1),
    ("{limits: {max_prompt_length: 0}}", "limits.max_prompt_length", "must be at least 1, got 0", 0),
    ("{limits: {max_n: 0}}", "limits.max_n", "must be at least 1, got 0", 0),
    ("{thinking: {max_buffer_size: 0}}", "thinking.max_buffer_size", "must be at least 1, got 0", 0),
])
def test_out_of_range_value_warns_with_model_and_field_and_is_kept(tmp_path, meta, field, rule, kept):
    loaded = load(tmp_path, "model_metadata_file: md.yaml\n", {"md.yaml": one_model(meta, "gpt-x")})
    path = tmp_path / "md.yaml"
    assert list(loaded.warnings) == [
        f"{path}: models[0].metadata.{field}: model 'gpt-x' field {field}: {rule}; the value is kept"]
    value = loaded.snapshot.models.get("gpt-x").metadata.to_dict()
    for key in field.split("."):
        value = value[key]
    assert value == kept


def test_zero_context_window_and_max_output_mean_not_applicable(tmp_path):
    assert warnings_for(tmp_path, "{limits: {context_window: 0, max_output: 0}}") == []


def test_unknown_key_warns_with_dotted_path_and_is_ignored(tmp_path):
    loaded = load(tmp_path, "model_metadata_file: md.yaml\n", {"md.yaml": one_model(
        "{colour: red, pricing: {input_tokens: 1, long_context: {tier: 2}}, limits: {max_width: 3}}")})
    where = tmp_path / "md.yaml"
    assert list(loaded.warnings) == [
        f"{where}: models[0].metadata.colour: unknown key; ignored",
        f"{where}: models[0].metadata.pricing.long_context.tier: unknown key; ignored",
        f"{where}: models[0].metadata.limits.max_width: unknown key; ignored",
    ]
    assert loaded.snapshot.models.get("m").metadata.to_dict() == {"pricing": {"input_tokens": 1.0,
                                                                              "long_context": {}},
                                                                  "limits": {}}


def test_wrong_type_in_a_metadata_file_warns_and_is_ignored(tmp_path):
    warnings = warnings_for(tmp_path, "{limits: {context_window: lots}, responses_only: maybe}")
    assert [w.split(": ", 1)[1] for w in warnings] == [
        "models[0].metadata.limits.context_window: must be an integer, got string; ignored",
        "models[0].metadata.responses_only: must be true or false, got string; ignored"]


def test_full_field_set_is_read(tmp_path):
    meta = """
      display_name: "DALL-E 3"
      summary: images
      capabilities: [image_generation]
      knowledge_cutoff: 2023-12-01
      pricing:
        input_tokens: 0
        output_tokens: 0
        cached_input_discount: 0.5
        image_input_tokens: 8.0
        cached_image_input_tokens: 2.0
        per_image: {1024x1024: {standard: 0.04, hd: 0.08}}
        long_context: {threshold_tokens: 100000, input_tokens: 0.5, output_tokens: 2.5}
      limits:
        context_window: 0
        max_output: 0
        max_prompt_length: 4000
        supported_sizes: ["1024x1024", "1792x1024"]
        max_n: 1
        supported_qualities: [standard, hd]
        supported_output_formats: [png]
        supported_styles: [vivid, natural]
        supports_streaming: false
      thinking:
        pattern: unterminated_start
        end_marker: "</think>"
        assume_reasoning_first: true
        buffered: true
        max_buffer_size: 51200
        reasoning_timeout: 10s
      responses_only: true
      supports_assistant_prefill: false
"""
    text = "models:\n  - id: dall-e-3\n    metadata:" + meta
    loaded = load(tmp_path, "model_metadata_file: md.yaml\n", {"md.yaml": text})
    assert loaded.warnings == ()
    md = loaded.snapshot.models.get("dall-e-3").metadata
    assert md.knowledge_cutoff == "2023-12-01" and md.capabilities == ("image_generation",)
    assert md.pricing.per_image["1024x1024"]["hd"] == 0.08
    assert md.pricing.long_context.threshold_tokens == 100_000
    assert md.limits.supported_sizes == ("1024x1024", "1792x1024") and md.limits.supports_streaming is False
    assert md.thinking.reasoning_timeout == 10.0 and md.thinking.pattern == "unterminated_start"
    assert md.responses_only is True and md.supports_assistant_prefill is False


# --- files that cannot be used are errors naming the file -------------------------

def test_missing_metadata_file_is_an_error_naming_the_path(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "model_metadata_file: nowhere.yaml\n")
    assert info.value.errors == [f"model_metadata_file: no such file: {tmp_path / 'nowhere.yaml'}"]


def test_missing_metadata_dir_is_an_error_naming_the_path(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "model_metadata_dirs: [extra]\n")
    assert info.value.errors == [f"model_metadata_dirs[0]: no such directory: {tmp_path / 'extra'}"]


@pytest.mark.parametrize("text, rule", [
    ("models: {id: m}\n", "models must be a list, got mapping"),
    ("models: [\n", "not valid YAML"),
    ("- id: m\n", "must be a mapping with a models list, got list"),
])
def test_unusable_metadata_file_is_an_error_naming_the_file(tmp_path, text, rule):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "", {"model-metadata.d/a.yaml": text})
    [error] = info.value.errors
    assert error.startswith(f"model-metadata.d: {tmp_path / 'model-metadata.d' / 'a.yaml'}: {rule}")


# --- layers -------------------------------------------------------------------------

def test_layer_order_and_merge(tmp_path):
    files = {
        "base.yaml": "models:\n  - id: m\n    aliases: [m-alias]\n    metadata:\n"
                     "      display_name: Base\n      capabilities: [chat, tool]\n"
                     "      pricing: {input_tokens: 1, output_tokens: 2}\n      limits: {context_window: 8192}\n",
        "model-metadata.d/10-a.yaml": one_model("{pricing: {input_tokens: 3}, capabilities: [chat]}"),
        "extra/a.yaml": one_model("{limits: {max_output: 100}, display_name: Extra}"),
    }
    loaded = load(tmp_path, "model_metadata_file: base.yaml\nmodel_metadata_dirs: [extra]\n", files)
    entry = loaded.snapshot.models.get("m")
    assert entry.metadata.to_dict() == {
        "display_name": "Extra",
        "capabilities": ["chat"],                               # a list replaces, never appends
        "pricing": {"input_tokens": 3.0, "output_tokens": 2.0},  # mappings merge key by key
        "limits": {"context_window": 8192, "max_output": 100},
    }
    assert entry.aliases == ("m-alias",) and loaded.snapshot.models.aliases == {"m-alias": "m"}
    base, drop_in, extra = (str(tmp_path / n) for n in ("base.yaml", "model-metadata.d/10-a.yaml", "extra/a.yaml"))
    assert dict(entry.provenance) == {
        "display_name": Source("model_metadata_dirs[0]", extra),
        "capabilities": Source("model-metadata.d", drop_in),
        "pricing.input_tokens": Source("model-metadata.d", drop_in),
        "pricing.output_tokens": Source("model_metadata_file", base),
        "limits.context_window": Source("model_metadata_file", base),
        "limits.max_output": Source("model_metadata_dirs[0]", extra),
    }
    assert entry.sources("pricing") == (Source("model_metadata_file", base), Source("model-metadata.d", drop_in))
    assert loaded.snapshot.models.files == (base, drop_in, extra)


def test_drop_in_files_apply_in_file_name_order(tmp_path):
    files = {
        "model-metadata.d/20-b.yml": one_model("{display_name: B}"),
        "model-metadata.d/10-a.yaml": one_model("{display_name: A}"),
        "model-metadata.d/30-c.txt": one_model("{display_name: not read}"),
    }
    entry = load(tmp_path, "", files).snapshot.models.get("m")
    assert entry.metadata.display_name == "B"
    assert entry.provenance["display_name"].file.endswith("20-b.yml")


def test_model_configs_override_the_files_for_that_backend_only(tmp_path):
    files = {"md.yaml": one_model("{responses_only: true, limits: {context_window: 8192, max_output: 100}}")}
    config = "model_metadata_file: md.yaml\n" + BACKEND + (
        "    model_configs:\n      - {id: m, metadata: {responses_only: false, limits: {max_output: 50}}}\n"
        "  - {name: b, type: simulated, models: [m]}\n")
    write(tmp_path / "md.yaml", files["md.yaml"])
    snap = load_file(write(tmp_path / "c.yaml", config)).snapshot
    on_a = snap.model_entry("m", "a")
    assert on_a.metadata.to_dict() == {"limits": {"context_window": 8192, "max_output": 50}, "responses_only": False}
    assert on_a.provenance["limits.max_output"].layer == "backends[0].model_configs"
    assert on_a.provenance["limits.context_window"].layer == "model_metadata_file"
    assert snap.model_entry("m", "b").metadata.responses_only is True      # b has no override
    assert snap.backend("a").model_configs["m"].max_output == 50             # the routing view
    assert snap.models.get("m").metadata.responses_only is True


def test_a_backends_merged_layer_is_built_once_per_snapshot_and_never_shown(tmp_path):
    # Read per priced call (the ledger's price): merged once, and a reload's snapshot merges afresh.
    import attrs

    from switchyard.protocol.admin.api import public
    config = BACKEND + "    model_configs:\n      - {id: m, metadata: {limits: {max_output: 50}}}\n"
    snap = load_file(write(tmp_path / "c.yaml", config)).snapshot
    first = snap.model_entry("m", "a")
    assert snap.model_entry("m", "a") is first and snap.metadata_for("m", "a") is first.metadata
    assert attrs.evolve(snap, revision="next").model_entry("m", "a") is not first
    assert snap.model_entry("unknown", "a") is None and list(snap._layered) == [("m", "a")]   # configured ids only
    assert "_layered" not in public(snap) and "_layered" not in repr(snap)


def test_a_snapshot_may_think_only_when_some_layer_has_thinking_metadata(tmp_path):
    # Without any, a stream call runs with no nursery of its own (actors/call/request.py).
    from switchyard.protocol.admin.api import public
    thinking = "{thinking: {pattern: unterminated_start, end_marker: '</think>'}}"
    assert load(tmp_path / "none").snapshot.may_think is False
    in_file = load(tmp_path / "file", "model_metadata_file: md.yaml\n", {"md.yaml": one_model(thinking)})
    assert in_file.snapshot.may_think is True
    configs = load_file(write(tmp_path / "c.yaml",
                              BACKEND + f"    model_configs:\n      - {{id: m, metadata: {thinking}}}\n"))
    assert configs.snapshot.may_think is True
    assert "may_think" not in public(configs.snapshot)


def test_model_configs_read_the_full_field_set_strictly(tmp_path):
    config = BACKEND + "    model_configs:\n" \
                       "      - {id: m, metadata: {pricing: {input_tokens: 1, per_image: {hd: 0.1}}, " \
                       "thinking: {pattern: unterminated_start, end_marker: '</think>'}, responses_only: true}}\n"
    snap = load_text(config, env={}, base_dir=tmp_path).snapshot
    assert snap.backend("a").model_metadata["m"].thinking.end_marker == "</think>"
    with pytest.raises(ConfigError) as info:
        load_text(BACKEND + "    model_configs:\n      - {id: m, metadata: {pricing: {input: 1}}}\n", env={},
                  base_dir=tmp_path)
    assert info.value.errors == ["backends[0].model_configs[0].metadata.pricing.input: unknown key"]


def test_a_changed_metadata_file_is_a_new_revision(tmp_path):
    first = load(tmp_path, "model_metadata_file: md.yaml\n", {"md.yaml": one_model("{display_name: A}")})
    second = load(tmp_path, "model_metadata_file: md.yaml\n", {"md.yaml": one_model("{display_name: B}")})
    assert first.snapshot.revision != second.snapshot.revision
    assert str(tmp_path / "md.yaml") in second.snapshot.models.watch
    assert str(tmp_path / "model-metadata.d") in second.snapshot.models.watch


async def test_watcher_reloads_when_a_metadata_file_changes(autojump_clock, tmp_path):
    from switchyard.protocol.serving.wiring import new_runtime

    config = load(tmp_path, "", {"model-metadata.d/a.yaml": one_model("{display_name: A}")})
    path = tmp_path / "config.yaml"
    async with trio.open_nursery() as nursery:
        rt = await nursery.start(new_runtime(config.snapshot, config_path=str(path), watch=True).run)
        write(tmp_path / "model-metadata.d" / "a.yaml", one_model("{display_name: Changed}"))
        await trio.sleep(1.5)
        assert rt.snapshot.models.get("m").metadata.display_name == "Changed"
        write(tmp_path / "model-metadata.d" / "b.yaml", one_model("{display_name: New file}", "n"))
        await trio.sleep(1.5)
        assert rt.snapshot.models.get("n").metadata.display_name == "New file"
        assert rt.reload_status.last_reload["result"] == "applied"
        nursery.cancel_scope.cancel()


# --- metadata show -------------------------------------------------------------------

def test_metadata_show_prints_entry_sources_and_stage(tmp_path, capsys):
    load(tmp_path, "model_metadata_file: md.yaml\n", {
        "md.yaml": "models:\n  - id: gpt-5.6-sol\n    aliases: [gpt-5.6]\n    metadata: {display_name: Sol}\n",
        "model-metadata.d/a.yaml": one_model("{pricing: {input_tokens: 6}}", "gpt-5.6-sol")})
    assert main(["metadata", "show", "gpt-5.6", "--config", str(tmp_path / "config.yaml"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["id"] == "gpt-5.6-sol" and doc["resolution"]["stage"] == "EXACT_ALIAS"
    assert doc["metadata"] == {"display_name": "Sol", "pricing": {"input_tokens": 6.0}}
    assert doc["sources"] == {
        "display_name": f"model_metadata_file ({tmp_path / 'md.yaml'})",
        "pricing.input_tokens": f"model-metadata.d ({tmp_path / 'model-metadata.d' / 'a.yaml'})"}
    assert main(["metadata", "show", "gpt-5.6-sol", "--config", str(tmp_path / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert "stage: EXACT_ID" in out and "display_name: Sol" in out


def test_metadata_show_unknown_model_exits_1(tmp_path, capsys):
    load(tmp_path, "", {"model-metadata.d/a.yaml": one_model("{display_name: A}")})
    assert main(["metadata", "show", "nothing-like-it", "--config", str(tmp_path / "config.yaml")]) == 1
    assert "no model metadata matches 'nothing-like-it'" in capsys.readouterr().err
