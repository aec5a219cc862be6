"""The built-in metadata layer: shipped with the package, dated, lowest of the layers, field by field."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from switchyard.config import builtin_metadata
from switchyard.config.load import load_text
from switchyard.config.metadata import Pricing
from switchyard.protocol.serving.cli import metadata_show_command

BUILTIN = "built-in (switchyard/config/builtin_metadata.yaml, as of "
ROOT = Path(__file__).resolve().parents[2]


def config(tmp_path: Path, *, metadata: str | None = None, model_configs: str = "") -> str:
    head = ""
    if metadata is not None:
        (tmp_path / "model-metadata.yaml").write_text(metadata, encoding="utf-8")
        head = "model_metadata_file: model-metadata.yaml\n"
    text = head + ("backends:\n  - name: openai\n    type: openai\n    url: https://api.example.com\n"
                   "    models: [gpt-4o, my-gpt]\n" + model_configs)
    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    return text


def test_the_builtin_file_loads_without_a_problem_and_says_its_date():
    assert builtin_metadata.problems() == ()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", builtin_metadata.as_of())
    ids = {e.id for e in builtin_metadata.entries()}
    assert {"gpt-4o", "gpt-4.1", "o3", "dall-e-3", "gemini-2.5-pro", "gemini-2.5-flash"} <= ids


def test_the_builtin_entries_carry_no_alias_so_they_never_rewrite_a_request():
    assert all(e.aliases == () for e in builtin_metadata.entries())


def test_the_builtin_file_is_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert any(Path(builtin_metadata.FILE).match(glob) for glob in data["switchyard.config"])


def test_with_no_metadata_file_a_builtin_model_is_described(tmp_path):
    snap = load_text(config(tmp_path), base_dir=tmp_path).snapshot
    meta = snap.metadata_for("gpt-4o", "openai")
    assert meta is not None and meta.limits.context_window == 128000
    assert meta.pricing == Pricing(input_tokens=2.5, output_tokens=10.0, cached_input_discount=0.5, batch_discount=0.5)


def test_a_metadata_file_overrides_one_field_and_keeps_the_builtin_others(tmp_path):
    text = config(tmp_path, metadata="models:\n  - id: gpt-4o\n    metadata:\n      pricing: {input_tokens: 2.0}\n")
    entry = load_text(text, base_dir=tmp_path).snapshot.model_entry("gpt-4o")
    assert entry.metadata.pricing.input_tokens == 2.0 and entry.metadata.pricing.output_tokens == 10.0
    assert entry.provenance["pricing.input_tokens"].layer == "model_metadata_file"
    assert entry.provenance["pricing.output_tokens"].layer == "built-in"
    assert entry.provenance["limits.context_window"].layer == "built-in"


def test_model_configs_override_the_file_and_the_builtin_field_by_field(tmp_path):
    text = config(tmp_path, metadata="models:\n  - id: gpt-4o\n    metadata:\n      pricing: {input_tokens: 2.0}\n",
                  model_configs="    model_configs:\n      - id: gpt-4o\n        metadata:\n"
                                "          pricing: {output_tokens: 9.0}\n")
    entry = load_text(text, base_dir=tmp_path).snapshot.model_entry("gpt-4o", "openai")
    pricing = entry.metadata.pricing
    assert (pricing.input_tokens, pricing.output_tokens, pricing.cached_input_discount) == (2.0, 9.0, 0.5)
    assert [entry.provenance[f"pricing.{f}"].layer for f in ("input_tokens", "output_tokens",
                                                             "cached_input_discount")] == \
        ["model_metadata_file", "backends[0].model_configs", "built-in"]


def test_an_operators_file_alias_naming_a_builtin_id_takes_that_name_over(tmp_path):
    text = config(tmp_path, metadata="models:\n  - id: my-gpt\n    aliases: [gpt-4o]\n"
                                     "    metadata: {display_name: Mine}\n")
    snap = load_text(text, base_dir=tmp_path).snapshot
    assert snap.models.get("gpt-4o") is None and snap.models.aliases["gpt-4o"] == "my-gpt"
    assert snap.metadata_for("gpt-4o").display_name == "Mine"


def test_a_backend_alias_naming_a_builtin_id_takes_that_name_over(tmp_path):
    text = config(tmp_path, model_configs="    model_configs:\n      - id: my-gpt\n        aliases: [gpt-4o]\n")
    snap = load_text(text, base_dir=tmp_path).snapshot
    assert snap.models.get("gpt-4o") is None and snap.models.get("gpt-4.1") is not None


def test_metadata_show_names_the_layer_of_each_field(tmp_path, capsys):
    config(tmp_path, metadata="models:\n  - id: gpt-4o\n    metadata:\n      pricing: {input_tokens: 2.0}\n")
    assert metadata_show_command("gpt-4o-2024-08-06", str(tmp_path / "config.yaml"), "json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == "gpt-4o" and shown["resolution"]["stage"] == "DATE_SUFFIX"
    assert shown["sources"]["pricing.input_tokens"].startswith("model_metadata_file (")
    assert shown["sources"]["pricing.output_tokens"] == BUILTIN + builtin_metadata.as_of() + ")"
    assert shown["sources"]["limits.max_output"].startswith(BUILTIN)
