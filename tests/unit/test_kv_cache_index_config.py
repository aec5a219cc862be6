"""kv_cache_index (config/kv_cache_index.py): defaults, each rule with its path, each warning."""

import pytest

from switchyard.config.kv_cache_index import EventSource, KvCacheIndex, TokenizerFiles
from switchyard.config.load import ConfigError, load_file, load_text

BACKENDS = """
backends:
  - {name: a, url: 'http://127.0.0.1:8000', models: [llama]}
  - {name: b, url: 'http://127.0.0.1:8001', models: [llama]}
"""


def loaded(text: str, base_dir=None):
    return load_text(BACKENDS + text, env={}, base_dir=base_dir)


def errors_of(text: str, base_dir=None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        loaded(text, base_dir)
    return info.value.errors


def test_defaults_when_the_section_is_absent():
    cfg = loaded("").snapshot.kv_cache_index
    assert cfg == KvCacheIndex()
    assert (cfg.enabled, cfg.block_size, cfg.max_entries, cfg.entry_ttl_seconds) == (False, 16, 100_000, 600.0)
    assert (cfg.scoring.overlap_weight, cfg.scoring.load_weight, cfg.scoring.min_overlap) == (1.0, 0.5, 0.1)
    assert not cfg.storage_offloading.enabled and cfg.storage_offloading.tier_weights == {"CPU": 0.5, "DISK": 0.25}
    assert cfg.weights == {}                      # offloading off: no lower tier counts


def test_a_full_section_loads(tmp_path):
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "tokenizer.json").write_text("{}")
    (tmp_path / "llama" / "chat_template.jinja").write_text("{{ messages }}")
    cfg = loaded("""
kv_cache_index:
  enabled: true
  block_size: 32
  max_entries: 5000
  entry_ttl_seconds: 120
  scoring: {overlap_weight: 0.8, load_weight: 0.2, min_overlap: 0.3}
  storage_offloading: {enabled: true, tier_weights: {CPU: 0.4}}
  tokenizers:
    "llama*": {tokenizer: llama/tokenizer.json, chat_template: llama/chat_template.jinja}
  event_sources:
    a: {endpoint: 'tcp://10.0.0.1:5557', replay_endpoint: 'tcp://10.0.0.1:5558', topic: kv}
    b: {endpoint: 'https://b.example/kv-events', reconnect_interval_ms: 250}
""", tmp_path).snapshot.kv_cache_index
    assert cfg.block_size == 32 and cfg.max_entries == 5000 and cfg.entry_ttl_seconds == 120.0
    assert cfg.weights == {"CPU": 0.4}
    assert cfg.tokenizers == {"llama*": TokenizerFiles("llama*", str(tmp_path / "llama" / "tokenizer.json"),
                                                       str(tmp_path / "llama" / "chat_template.jinja"))}
    assert cfg.event_sources == {
        "a": EventSource("tcp://10.0.0.1:5557", "zmq", "tcp://10.0.0.1:5558", "kv", 1000),
        "b": EventSource("https://b.example/kv-events", "sse", None, "", 250)}


def test_a_models_tokenizer_is_its_exact_key_else_the_first_glob_it_matches(tmp_path):
    (tmp_path / "t.json").write_text("{}")
    cfg = loaded("""
kv_cache_index:
  tokenizers:
    "llama-*": {tokenizer: t.json}
    "*": {tokenizer: t.json}
    llama-3: {tokenizer: t.json}
""", tmp_path).snapshot.kv_cache_index
    assert cfg.tokenizer_files("llama-3").pattern == "llama-3"
    assert cfg.tokenizer_files("llama-2").pattern == "llama-*"
    assert cfg.tokenizer_files("qwen").pattern == "*"


@pytest.mark.parametrize("text, error", [
    ("kv_cache_index: {block_size: 0}", "kv_cache_index.block_size: must be at least 1, got 0"),
    ("kv_cache_index: {block_size: 4097}", "kv_cache_index.block_size: must be at most 4096, got 4097"),
    ("kv_cache_index: {max_entries: 0}", "kv_cache_index.max_entries: must be at least 1, got 0"),
    ("kv_cache_index: {entry_ttl_seconds: 0}", "kv_cache_index.entry_ttl_seconds: must be at least 1.0, got 0"),
    ("kv_cache_index: {scoring: {min_overlap: 1.5}}",
     "kv_cache_index.scoring.min_overlap: must be at most 1.0, got 1.5"),
    ("kv_cache_index: {storage_offloading: {tier_weights: {CPU: 2}}}",
     "kv_cache_index.storage_offloading.tier_weights: CPU: must be at most 1.0, got 2"),
    ("kv_cache_index: {storage_offloading: {tier_weights: {GPU: 0.5}}}",
     "kv_cache_index.storage_offloading.tier_weights: GPU: a block on the GPU always counts 1; name the lower "
     "tiers only"),
    ("kv_cache_index: {sharding: 2}", "kv_cache_index.sharding: unknown key"),
])
def test_a_bad_value_is_an_error_naming_its_path(text, error):
    assert errors_of(text) == [error]


def test_a_tokenizer_file_must_exist_relative_to_the_config_files_directory(tmp_path):
    assert errors_of("kv_cache_index: {tokenizers: {llama: {tokenizer: missing.json}}}", tmp_path) == \
        [f"kv_cache_index.tokenizers.llama.tokenizer: no such file: {tmp_path / 'missing.json'}"]


def test_a_tokenizer_entry_needs_its_tokenizer_file(tmp_path):
    (tmp_path / "t.jinja").write_text("")
    assert errors_of("kv_cache_index: {tokenizers: {llama: {chat_template: t.jinja}}}", tmp_path) == \
        ["kv_cache_index.tokenizers.llama.tokenizer: is required (a path to the model's tokenizer.json)"]


def test_a_tokenizer_entry_refuses_an_unknown_key(tmp_path):
    (tmp_path / "t.json").write_text("{}")
    assert errors_of("kv_cache_index: {tokenizers: {llama: {tokenizer: t.json, vocab: x}}}", tmp_path) == \
        ["kv_cache_index.tokenizers.llama.vocab: unknown key"]


def test_relative_paths_resolve_against_the_config_files_directory(tmp_path):
    (tmp_path / "t.json").write_text("{}")
    path = tmp_path / "switchyard.yaml"
    path.write_text(BACKENDS + "kv_cache_index: {tokenizers: {llama: {tokenizer: t.json}}}\n")
    cfg = load_file(path, env={}).snapshot.kv_cache_index
    assert cfg.tokenizers["llama"].tokenizer == str(tmp_path / "t.json")


def test_an_event_source_for_a_backend_not_declared_is_an_error():
    assert errors_of("kv_cache_index: {event_sources: {c: {endpoint: 'tcp://h:5557'}}}") == \
        ["kv_cache_index.event_sources.c: no backend is named 'c': an event source belongs to a declared backend"]


def test_an_event_source_needs_an_endpoint():
    assert errors_of("kv_cache_index: {event_sources: {a: {topic: x}}}") == \
        ["kv_cache_index.event_sources.a.endpoint: is required (tcp://host:port for vLLM's ZMQ publisher, "
         "http(s):// for an SSE stream)"]


def test_the_transport_defaults_by_the_endpoints_scheme():
    sources = loaded("kv_cache_index: {event_sources: {a: {endpoint: 'tcp://h:5557'}, "
                     "b: {endpoint: 'http://h:8000/kv'}}}").snapshot.kv_cache_index.event_sources
    assert (sources["a"].transport, sources["b"].transport) == ("zmq", "sse")


@pytest.mark.parametrize("source, error", [
    ("{endpoint: 'tcp://h:5557', transport: sse}",
     "endpoint: transport sse needs a http:// or https:// URL, got 'tcp://h:5557'"),
    ("{endpoint: 'http://h/kv', transport: zmq}",
     "endpoint: transport zmq needs a tcp:// or ipc:// URL, got 'http://h/kv'"),
    ("{endpoint: 'http://h/kv', replay_endpoint: 'tcp://h:5558'}",
     "replay_endpoint: is a zmq source's tcp:// or ipc:// replay address (vLLM's replay_endpoint)"),
    ("{endpoint: 'http://h/kv', topic: kv}", "topic: is for zmq sources only"),
    ("{endpoint: 'tcp://h:5557', transport: nats}", "transport: must be one of zmq, sse, got 'nats'"),
    ("{endpoint: 'tcp://h:5557', reconnect_interval_ms: 5}", "reconnect_interval_ms: must be at least 10, got 5"),
])
def test_an_event_sources_transport_and_addresses_must_agree(source, error):
    assert errors_of(f"kv_cache_index: {{event_sources: {{a: {source}}}}}") == \
        [f"kv_cache_index.event_sources.a.{error}"]


@pytest.mark.parametrize("source, key, address", [
    ("{endpoint: 'tcp://*:5557'}", "endpoint", "tcp://*:5557"),         # vLLM's bind address, copied
    ("{endpoint: 'tcp://10.0.0.5'}", "endpoint", "tcp://10.0.0.5"),
    ("{endpoint: 'tcp://h:5557', replay_endpoint: 'tcp://h'}", "replay_endpoint", "tcp://h"),
    ("{endpoint: 'ipc://'}", "endpoint", "ipc://"),
    ("{endpoint: 'http:///kv'}", "endpoint", "http:///kv"),
])
def test_an_event_sources_address_must_be_one_a_reader_can_connect_to(source, key, address):
    # else the reader fails on each attempt, every reconnect_interval_ms, for as long as the gateway runs
    [error] = errors_of(f"kv_cache_index: {{event_sources: {{a: {source}}}}}")
    assert error.startswith(f"kv_cache_index.event_sources.a.{key}: ") and error.endswith(f", got {address!r}")


def test_the_index_without_prefix_routing_warns():
    warnings = loaded("kv_cache_index: {enabled: true}\nprefix_routing: {enabled: false}").warnings
    assert "kv_cache_index.enabled: true while prefix_routing.enabled is false: the KV-overlap scorer needs both " \
           "and stays off" in warnings


def test_event_sources_with_the_index_off_warn():
    warnings = loaded("kv_cache_index: {event_sources: {a: {endpoint: 'tcp://h:5557'}}}").warnings
    assert "kv_cache_index.event_sources: set while kv_cache_index.enabled is false: no pick reads the index" \
        in warnings


def test_engine_load_without_engine_stats_still_warns():
    warnings = loaded("kv_cache_index: {enabled: true}\nrouting: {engine_load: {enabled: true}}").warnings
    assert any(w.startswith("routing.engine_load.enabled: true while engine_stats.enabled is false") for w in warnings)


def test_event_sources_wait_for_a_restart_and_the_rest_reloads_live():
    from switchyard.config.watch import RESTART_FIELDS
    assert [p for p, _ in RESTART_FIELDS if p.startswith("kv_cache_index")] == ["kv_cache_index.event_sources"]
