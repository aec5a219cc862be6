"""Usage metrics (protocol/serving/usage_metrics.py): tokens and cost by key and model with bounded labels,
and the ledger's health read at scrape time, in a registry of their own and on a gateway's /metrics."""

from typing import Any

from prometheus_client import CollectorRegistry

from switchyard.actors.ledger.record import LedgerRecord
from switchyard.protocol.serving.usage_metrics import UsageMetrics
from tests.harness import gateway, request

CONFIG = """
health_checks: {interval: 1h}
usage: {ledger: memory, metrics_max_label_values: 1}
backends:
  - {name: a, type: simulated, models: [demo]}
"""


def rec(key: str | None = "k1", model: str | None = "m1", **kw: Any) -> LedgerRecord:
    base: dict[str, Any] = dict(request_id="r", time=0.0, key_id=key, organization_id=None, endpoint="chat",
                                model=model, served_model=model, backend="a", attempts=1, status=200,
                                error_code=None, input_tokens=10, output_tokens=4, cost=0.5)
    return LedgerRecord(**{**base, **kw})


def metrics(limit: int = 2) -> tuple[UsageMetrics, CollectorRegistry]:
    registry = CollectorRegistry(auto_describe=False)
    return UsageMetrics(registry, limit), registry


def tokens(registry: CollectorRegistry, key: str, model: str, kind: str) -> float | None:
    return registry.get_sample_value("switchyard_usage_tokens_total", {"key_id": key, "model": model, "type": kind})


def cost(registry: CollectorRegistry, key: str, model: str) -> float | None:
    return registry.get_sample_value("switchyard_usage_cost_usd_total", {"key_id": key, "model": model})


def test_a_client_record_adds_its_input_and_output_tokens_and_its_cost():
    usage, registry = metrics()
    usage.observe(rec())
    usage.observe(rec(input_tokens=1, output_tokens=2, cost=0.25))
    assert (tokens(registry, "k1", "m1", "input"), tokens(registry, "k1", "m1", "output")) == (11, 6)
    assert cost(registry, "k1", "m1") == 0.75


def test_a_record_without_a_known_cost_adds_tokens_and_no_cost():
    usage, registry = metrics()
    usage.observe(rec(cost=None))
    assert tokens(registry, "k1", "m1", "input") == 10 and cost(registry, "k1", "m1") is None


def test_classifier_records_are_not_counted():
    usage, registry = metrics()
    usage.observe(rec(purpose="classifier"))
    assert tokens(registry, "k1", "m1", "input") is None


def test_a_record_without_a_key_or_model_counts_under_none():
    usage, registry = metrics()
    usage.observe(rec(key=None, model=None))
    assert tokens(registry, "none", "none", "input") == 10


def test_past_the_first_n_key_ids_and_models_the_rest_count_as_other():
    usage, registry = metrics(limit=2)
    for i in range(4):
        usage.observe(rec(key=f"k{i}", model=f"m{i}"))
    usage.observe(rec(key="k1", model="m0"))   # a value that got its label keeps it
    assert [tokens(registry, f"k{i}", f"m{i}", "input") for i in range(2)] == [10, 10]
    assert tokens(registry, "other", "other", "input") == 20
    assert tokens(registry, "k1", "m0", "input") == 10
    assert tokens(registry, "k2", "m2", "input") is None


def test_a_limit_of_zero_counts_every_key_and_model_as_other():
    usage, registry = metrics(limit=0)
    usage.observe(rec())
    usage.observe(rec(key=None))
    assert (tokens(registry, "other", "other", "output"), tokens(registry, "none", "other", "output")) == (4, 4)


def test_a_model_name_over_200_characters_is_never_a_label():
    usage, registry = metrics()
    usage.observe(rec(model="m" * 201))
    assert tokens(registry, "k1", "other", "input") == 10


def test_the_ledger_health_is_read_at_scrape_time():
    usage, registry = metrics()
    counters = {"written": 3, "spilled": 1, "replayed": 1, "write_failures": 2, "queued": 5, "store_up": True}
    usage.read_ledger(lambda: counters)
    counters["written"] = 7
    assert [registry.get_sample_value(name) for name in (
        "usage_ledger_written_total", "usage_ledger_spilled_total", "usage_ledger_replayed_total",
        "usage_ledger_write_failures_total", "usage_ledger_queued", "usage_ledger_store_up")] == [7, 1, 1, 2, 5, 1]


async def test_the_gateways_metrics_bound_usage_labels_by_its_config_and_show_its_ledger(autojump_clock):
    async with gateway(CONFIG) as app:
        usage = app.runtime.metrics.usage
        usage.observe(rec(key="k1", model="m1"))
        usage.observe(rec(key="k2", model="m2"))   # usage.metrics_max_label_values: 1
        text = (await request(app, "GET", "/metrics")).body.decode()
        assert 'switchyard_usage_tokens_total{key_id="k1",model="m1",type="input"} 10.0' in text
        assert 'switchyard_usage_tokens_total{key_id="other",model="other",type="input"} 10.0' in text
        assert 'switchyard_usage_cost_usd_total{key_id="k1",model="m1"} 0.5' in text
        assert "usage_ledger_store_up 1.0" in text and "usage_ledger_written_total 0.0" in text


def test_a_model_name_that_was_not_clean_text_is_labelled_as_its_record_keeps_it():
    usage, registry = metrics()
    usage.observe(rec(model="m\ud800"))
    assert tokens(registry, "k1", "m\ufffd", "input") == 10


def test_records_that_spent_nothing_take_no_label_value():
    """Refusals of made-up names (no tokens, no cost) never crowd a real model out of the bounded labels."""
    usage, registry = metrics(limit=2)
    for i in range(5):
        usage.observe(rec(model=f"made-up-{i}", input_tokens=0, output_tokens=0, cost=None, status=404))
    usage.observe(rec(model="m1"))
    assert tokens(registry, "k1", "m1", "input") == 10
    assert tokens(registry, "k1", "made-up-0", "input") is None
