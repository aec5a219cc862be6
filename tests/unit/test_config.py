"""One test per configuration rule: each error names its dotted path and rule."""

import pytest

from switchyard.config.load import ConfigError, load_file, load_text
from switchyard.config.schema import BackendType, Strategy

MINIMAL = """
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [m]
"""


def errors_of(text: str, env: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, env=env or {})
    return info.value.errors


def test_minimal_config_gets_documented_defaults():
    snap = load_text(MINIMAL, env={}).snapshot
    assert snap.server.bind_address == "0.0.0.0:8080"
    assert snap.server.max_body_bytes == 10 * 1024 * 1024
    assert snap.server.connection_pool_size == 100
    assert snap.server.workers == 1
    assert snap.selection_strategy is Strategy.ROUND_ROBIN
    hc = snap.health_checks
    assert (hc.interval, hc.timeout, hc.unhealthy_threshold, hc.healthy_threshold) == (30, 5, 3, 2)
    assert hc.warmup_check_interval == 1.0
    assert snap.timeouts.connection == 10.0
    b = snap.backends[0]
    assert (b.type, b.weight, b.enabled, b.internal, b.discovery) == (BackendType.GENERIC, 1, True, False, True)


def test_revision_is_content_hash():
    a = load_text(MINIMAL, env={}).snapshot.revision
    assert a == load_text(MINIMAL, env={}).snapshot.revision
    assert a != load_text(MINIMAL + "\n# changed\n", env={}).snapshot.revision


def test_env_interpolation_substitutes_value():
    snap = load_text(MINIMAL.replace("http://127.0.0.1:8000", "${URL}") + "    api_key: ${KEY}\n",
                     env={"URL": "http://h:1", "KEY": "sk-1"}).snapshot
    assert snap.backends[0].url == "http://h:1"
    assert snap.backends[0].api_key == "sk-1"


def test_env_interpolation_default_and_escape():
    snap = load_text(MINIMAL + "    api_key: ${KEY:-fallback}$$x\n", env={}).snapshot
    assert snap.backends[0].api_key == "fallback$x"


def test_missing_env_variable_is_error_naming_it_and_path():
    errors = errors_of(MINIMAL + "    api_key: ${OPENAI_KEY}\n")
    assert errors == ["backends[0].api_key: environment variable OPENAI_KEY is not set"]


def test_secret_value_never_in_errors():
    errors = errors_of(MINIMAL + "    api_key: 42\n")
    assert errors == ["backends[0].api_key: must be a string, got integer"]
    errors = errors_of(MINIMAL + "    api_key: ${K}\n    weight: -1\n", env={"K": "sk-secret"})
    assert not any("sk-secret" in e for e in errors)


def test_unknown_top_level_key_is_error():
    assert errors_of(MINIMAL + "selection: RoundRobin\n") == ["selection: unknown key"]


def test_unknown_nested_key_is_error_with_path():
    assert errors_of(MINIMAL + "    wieght: 3\n") == ["backends[0].wieght: unknown key"]


def test_wrong_type_is_error_with_path():
    assert errors_of(MINIMAL + "    weight: heavy\n") == ["backends[0].weight: must be an integer, got string"]


def test_out_of_range_weight_names_rule():
    assert errors_of(MINIMAL + "    weight: 0\n") == ["backends[0].weight: must be at least 1, got 0"]


def test_boolean_is_not_an_integer():
    assert errors_of(MINIMAL + "    weight: true\n") == ["backends[0].weight: must be an integer, got boolean"]


def test_every_error_reported_at_once():
    errors = errors_of("""
server: {workers: 0, max_body_bytes: 10, bind_address: "nohost"}
selection_strategy: Fastest
backends:
  - {name: a, url: "ftp://x"}
  - {name: "bad name", url: "http://x"}
""")
    assert errors == [
        "server.bind_address: must be HOST:PORT with a port in 1-65535, got 'nohost'",
        "server.max_body_bytes: must be at least 1024, got 10",
        "server.workers: must be at least 1, got 0",
        "backends[0].url: must be an http:// or https:// URL with a host, or unix:///path/to.sock, got 'ftp://x'",
        "backends[1].name: must be 1-64 letters, digits, '.', '_' or '-', got 'bad name'",
        "selection_strategy: must be one of RoundRobin, WeightedRoundRobin, LeastLatency, Random, "
        "ConsistentHash, PrefixAwareHash, got 'Fastest'",
    ]


def test_backends_required():
    assert errors_of("server: {}\n") == ["backends: at least one backend is required"]


def test_backend_name_required():
    assert errors_of("backends:\n  - {url: 'http://x'}\n") == ["backends[0].name: is required"]


def test_backend_names_unique():
    errors = errors_of("backends:\n  - {name: a, url: 'http://x'}\n  - {name: a, url: 'http://y'}\n")
    assert errors == ["backends[1].name: duplicate backend name 'a' (also backends[0])"]


def test_backend_url_required_except_simulated():
    assert errors_of("backends:\n  - {name: a, type: vllm}\n") == ["backends[0].url: is required for type vllm"]
    snap = load_text("backends:\n  - {name: s, type: simulated, models: [demo]}\n", env={}).snapshot
    assert snap.backends[0].url == "http://s.simulated"


def test_url_credentials_and_api_key_together_are_refused_naming_both_paths():
    """The URL's Basic credentials replace the key's Bearer header; anthropic and azure send the key elsewhere."""
    both = "backends:\n  - {name: a, type: %s, url: 'https://user:pw@h/openai/v1', api_key: sk-1, models: [m]}\n"
    assert errors_of(both % "openai") == [
        "backends[0].url: carries credentials (user:password@) and backends[0].api_key is set: every request "
        "would send the URL's credentials as 'Authorization: Basic' instead of the key's 'Authorization: Bearer', "
        "so the key is never sent; keep one of them"]
    for btype in ("anthropic", "azure"):
        assert load_text(both % btype, env={}).snapshot.backends[0].api_key == "sk-1"
    assert load_text(both.replace(", api_key: sk-1", "") % "openai", env={}).snapshot.backends[0].api_key is None


def test_a_url_error_never_shows_the_urls_password():
    bad = "backends:\n  - {name: a, type: %s, url: '%s', models: [m]}\n"
    for btype, url in [("generic", "ftp://user:s3cret@h/v1"), ("azure", "https://user:s3cret@h/v1"),
                       ("simulated", "http://user:s3cret@h")]:
        (error,) = errors_of(bad % (btype, url))
        assert "s3cret" not in error and "***@h" in error, error


def test_backend_type_must_be_known():
    types = ", ".join(t.value for t in BackendType)
    assert errors_of("backends:\n  - {name: a, type: sagemaker, url: 'http://x'}\n") == [
        f"backends[0].type: must be one of {types}, got 'sagemaker'"]


def test_url_trailing_slash_removed_and_query_refused():
    snap = load_text("backends:\n  - {name: a, url: 'http://x:1/v1/', models: [m]}\n", env={}).snapshot
    assert snap.backends[0].url == "http://x:1/v1"
    assert errors_of("backends:\n  - {name: a, url: 'http://x/?a=1'}\n") == [
        "backends[0].url: must not carry a query string or fragment"]


def test_models_must_be_list_of_names():
    assert errors_of("backends:\n  - {name: a, url: 'http://x', models: demo}\n") == [
        "backends[0].models: must be a list of strings, got string"]
    assert errors_of("backends:\n  - {name: a, url: 'http://x', models: [ok, 3]}\n") == [
        "backends[0].models: item [1] must be a string, got integer"]


def test_models_split_into_exact_and_globs():
    snap = load_text("backends:\n  - {name: a, url: 'http://x', models: [gpt-4o, 'llama-*']}\n", env={}).snapshot
    assert snap.backends[0].exact_models == ("gpt-4o",)
    assert snap.backends[0].model_globs == ("llama-*",)


def test_simulation_only_on_simulated_backends():
    assert errors_of("backends:\n  - {name: a, url: 'http://x', simulation: {chunks: 3}}\n") == [
        "backends[0].simulation: is only allowed on backends of type simulated"]


def test_simulation_fields_validated():
    errors = errors_of("""
backends:
  - name: s
    type: simulated
    simulation: {latency: fast, chunks: 0, failure: {status: 99, explode: true}}
""")
    assert errors == [
        "backends[0].simulation.failure.status: must be at least 100, got 99",
        "backends[0].simulation.failure.explode: unknown key",
        "backends[0].simulation.latency: must be a duration like 10s, 500ms or 1m30s, got 'fast'",
        "backends[0].simulation.chunks: must be at least 1, got 0",
    ]


def test_durations_accept_units_and_numbers():
    snap = load_text(MINIMAL + "health_checks: {interval: 1m30s, timeout: 500ms, warmup_check_interval: 2}\n"
                     "timeouts: {connection: 5s}\n", env={}).snapshot
    assert snap.health_checks.interval == 90
    assert snap.health_checks.timeout == 0.5
    assert snap.health_checks.warmup_check_interval == 2
    assert snap.timeouts.connection == 5


def test_duration_zero_refused():
    assert errors_of(MINIMAL + "timeouts: {connection: 0s}\n") == ["timeouts.connection: must be greater than zero"]


def test_size_accepts_units():
    snap = load_text(MINIMAL + "server: {max_body_bytes: 2MiB}\n", env={}).snapshot
    assert snap.server.max_body_bytes == 2 * 1024 * 1024


def test_health_thresholds_range():
    assert errors_of(MINIMAL + "health_checks: {unhealthy_threshold: 0}\n") == [
        "health_checks.unhealthy_threshold: must be at least 1, got 0"]


def test_health_path_must_be_absolute():
    assert errors_of(MINIMAL + "health_checks: {path: health}\n") == [
        "health_checks.path: must be an absolute path starting with /, got 'health'"]


def test_health_timeout_longer_than_interval_warns():
    loaded = load_text(MINIMAL + "health_checks: {interval: 1s, timeout: 2s}\n", env={})
    assert loaded.warnings == ("health_checks.timeout: is longer than interval: a backend that does not "
                               "answer is checked back to back",)


def test_prefix_routing_fields_validated():
    assert errors_of(MINIMAL + "prefix_routing: {load_factor_epsilon: -1, virtual_nodes: 0}\n") == [
        "prefix_routing.load_factor_epsilon: must be at least 0.0, got -1",
        "prefix_routing.virtual_nodes: must be at least 1, got 0",
    ]


def test_consistent_hash_header_lowercased():
    snap = load_text(MINIMAL + "consistent_hash: {key_header: X-Session-ID}\n", env={}).snapshot
    assert snap.consistent_hash.key_header == "x-session-id"


def test_section_must_be_mapping():
    assert errors_of(MINIMAL + "server: 8080\n") == ["server: must be a mapping, got integer"]


def test_yaml_syntax_error_names_line():
    errors = errors_of("backends: [\n")
    assert errors[0].startswith("<yaml> line ")


def test_no_public_backend_warns():
    loaded = load_text("backends:\n  - {name: a, url: 'http://x', models: [m], internal: true}\n", env={})
    assert loaded.warnings == ("backends: no enabled public backend: every chat request will get 404 or 503",)


def test_missing_file_is_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_file(tmp_path / "nope.yaml")
    assert info.value.errors[0].startswith("<file>: cannot read")


def test_demo_config_is_valid():
    from switchyard.config.load import load_demo

    snap = load_demo().snapshot
    assert [b.name for b in snap.backends] == ["sim-a", "sim-b"]
    assert all(b.models == ("demo",) for b in snap.backends)


def test_config_validate_command(tmp_path, capsys):
    from switchyard.protocol.serving.cli import main

    good = tmp_path / "good.yaml"
    good.write_text(MINIMAL)
    assert main(["config", "validate", str(good)]) == 0
    assert "OK" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL + "    weight: 0\nhealth_checks: {interval: 1s, timeout: 2s}\n")
    assert main(["config", "validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "error: backends[0].weight: must be at least 1, got 0" in out
    assert "warning: health_checks.timeout" in out


def test_env_default_covers_empty_variable():
    snap = load_text(MINIMAL + "    api_key: ${KEY:-dflt}\n", env={"KEY": ""}).snapshot
    assert snap.backends[0].api_key == "dflt"


def test_empty_api_key_means_no_key():
    snap = load_text(MINIMAL + "    api_key: ${OPENAI_API_KEY:-}\n", env={}).snapshot
    assert snap.backends[0].api_key is None


def test_missing_env_in_list_item_is_one_error():
    errors = errors_of("backends:\n  - {name: a, url: 'http://x', models: ['${MODEL}']}\n")
    assert errors == ["backends[0].models[0]: environment variable MODEL is not set"]


def test_duplicate_name_reported_alongside_other_errors():
    errors = errors_of("backends:\n  - {name: a, url: 'http://x'}\n  - {name: a, url: 'ftp://y'}\n")
    assert errors == ["backends[1].name: duplicate backend name 'a' (also backends[0])",
                      "backends[1].url: must be an http:// or https:// URL with a host, or unix:///path/to.sock, "
                      "got 'ftp://y'"]


def test_no_public_backend_warning_not_given_when_backends_had_errors():
    with pytest.raises(ConfigError) as info:
        load_text("backends:\n  - {name: a, url: 'ftp://x'}\n", env={})
    assert info.value.warnings == []


def test_simulated_backend_url_host_must_be_simulated():
    assert errors_of("backends:\n  - {name: s, type: simulated, url: 'http://127.0.0.1:8000'}\n") == [
        "backends[0].url: of a simulated backend must have a host ending in .simulated, "
        "got 'http://127.0.0.1:8000'"]


def test_simulated_chunk_numbers_start_at_one():
    assert errors_of("backends:\n  - {name: s, type: simulated, simulation: {failure: {reset_after_chunk: 0}}}\n") == [
        "backends[0].simulation.failure.reset_after_chunk: must be at least 1, got 0"]


def test_model_configs_validated_with_paths():
    # context_window 0 means "not applicable" (model metadata spec); out-of-range values only warn.
    with pytest.raises(ConfigError) as info:
        load_text(MINIMAL + "    model_configs:\n      - {id: m, metadata: {capabilities: [telepathy], "
                  "limits: {context_window: 0, max_output: -1}, price: 1}}\n", env={})
    assert info.value.errors == [
        "backends[0].model_configs[0].metadata.capabilities: unknown capability 'telepathy'; known: chat, text, "
        "vision, code, reasoning, tool, tools, function_calling, embedding, image_generation, audio, decisions",
        "backends[0].model_configs[0].metadata.price: unknown key",
    ]
    assert info.value.warnings == [
        "backends[0].model_configs[0].metadata.limits.max_output: model 'm' field limits.max_output: must be at "
        "least 0, got -1; the value is kept"]


def test_model_configs_is_the_specs_list_with_id_aliases_upstream_id():
    snap = load_text(MINIMAL + "    model_configs:\n      - {id: m, aliases: [m-latest], upstream_id: m-fp8}\n",
                     env={}).snapshot
    b = snap.backends[0]
    assert (b.model_aliases, b.upstream_ids) == ({"m": ("m-latest",)}, {"m": "m-fp8"})


def test_model_configs_entry_rules():
    errors = errors_of(MINIMAL + "    model_configs:\n      - {aliases: [x]}\n      - {id: m, upstream_id: ''}\n"
                       "      - {id: m}\n      - {id: n, upstream_id: m}\n      - {id: 'bad name'}\n")
    assert errors == [
        "backends[0].model_configs[0].id: is required",
        "backends[0].model_configs[1].upstream_id: must not be empty",
        "backends[0].model_configs[2].id: duplicate model id 'm' (also backends[0].model_configs[1])",
        "backends[0].model_configs[4].id: model name has ' ' (U+0020) at byte offset 3; only letters, digits "
        "and - _ . / : are allowed (got 'bad name')",
        "backends[0].model_configs[3].upstream_id: 'm' is another model_configs id of this backend",
    ]
