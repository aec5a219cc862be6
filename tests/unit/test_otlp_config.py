"""``tracing.otlp``: off unless written, each field checked by its dotted path, headers never shown,
restart-only like the rest of ``tracing``."""

import pytest

from switchyard.config.load import ConfigError, load_text
from switchyard.config.watch import apply_live
from switchyard.protocol.admin.api import MASK, public

BACKENDS = "backends: [{name: a, type: simulated, models: [m]}]\n"


def load(tracing: str):
    return load_text(f"tracing: {tracing}\n" + BACKENDS)


def errors(tracing: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(tracing)
    return caught.value.errors


def test_otlp_is_off_by_default_and_when_empty():
    assert load_text(BACKENDS).snapshot.tracing.otlp is None
    assert load("{otlp: }").snapshot.tracing.otlp is None


def test_otlp_defaults_and_the_traces_path_added_to_a_base_endpoint():
    otlp = load("{otlp: {endpoint: 'http://collector:4318/'}}").snapshot.tracing.otlp
    assert otlp.traces_url == "http://collector:4318/v1/traces"
    assert (otlp.protocol, otlp.sampling_ratio, otlp.service_name, otlp.timeout, otlp.export_interval,
            otlp.max_queue_size) == ("http/protobuf", 1.0, "switchyard", 10.0, 5.0, 2048)
    full = load("{otlp: {endpoint: 'https://c.example/v1/traces'}}").snapshot.tracing.otlp
    assert full.traces_url == "https://c.example/v1/traces"


def test_otlp_endpoint_is_required_when_the_section_is_set():
    assert errors("{otlp: {sampling_ratio: 0.5}}") == [
        "tracing.otlp.endpoint: is required when tracing.otlp is set (the collector's URL, "
        "e.g. http://otel-collector:4318)"]


@pytest.mark.parametrize("entry, error", [
    ("endpoint: 'grpc://c:4317'", "tracing.otlp.endpoint: must be an http:// or https:// URL with a host"),
    ("protocol: grpc", "tracing.otlp.protocol: must be one of http/protobuf, got 'grpc'"),
    ("sampling_ratio: 1.5", "tracing.otlp.sampling_ratio: must be at most 1.0, got 1.5"),
    ("headers: {'bad name': x}", "tracing.otlp.headers: key 'bad name': must be an HTTP header name"),
    ("headers: [a]", "tracing.otlp.headers: must be a mapping of header names to strings, got list"),
    ("headers: {x-token: 7}", "tracing.otlp.headers: x-token: must be a string without control characters"),
    ("resource_attributes: {region: [eu]}", "tracing.otlp.resource_attributes: region: must be a string, number "
                                            "or boolean, got list"),
    ("resource_attributes: {'1bad': x}", "tracing.otlp.resource_attributes: key '1bad': must be an attribute key"),
    ("service_name: ''", "tracing.otlp.service_name: must not be empty"),
    ("timeout: 0s", "tracing.otlp.timeout: must be greater than zero"),
    ("export_interval: 2m", "tracing.otlp.export_interval: must be at most 60s"),
    ("max_queue_size: 0", "tracing.otlp.max_queue_size: must be at least 1, got 0"),
    ("batch: 5", "tracing.otlp.batch: unknown key"),
])
def test_otlp_each_field_is_checked_at_its_dotted_path(entry, error):
    found = errors(f"{{otlp: {{endpoint: 'http://c:4318', {entry}}}}}")
    assert len(found) == 1 and found[0].startswith(error), found


def test_otlp_headers_are_masked_in_the_admin_view():
    snapshot = load("{otlp: {endpoint: 'http://c:4318', headers: {Authorization: 'Bearer s3cret-token'}}}").snapshot
    shown = public(snapshot.tracing)["otlp"]
    assert shown["headers"] == MASK and "s3cret" not in repr(snapshot.tracing)
    assert snapshot.tracing.otlp.headers == (("authorization", "Bearer s3cret-token"),)


def test_otlp_waits_for_a_restart():
    running = load_text(BACKENDS).snapshot
    new = load("{otlp: {endpoint: 'http://c:4318'}}").snapshot
    applied = apply_live(running, new)
    assert applied.snapshot.tracing.otlp is None and "tracing" in applied.pending_restart


def test_a_gateway_without_tracing_otlp_never_imports_the_opentelemetry_sdk():
    import subprocess
    import sys

    code = ("import sys, switchyard.protocol.serving.cli, switchyard.protocol.serving.wiring; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
