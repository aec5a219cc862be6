"""A budgeted call reserves its worst-case cost: its tokens at the priciest pricing of its model on any
enabled backend (actors/call/limits.py), each snapshot's pricings merged once per model."""

from __future__ import annotations

import pytest

from switchyard.actors.call.limits import worst_cost
from switchyard.config.load import load_text


def snapshot(price_a: float, price_b: float, b_enabled: bool = True):
    return load_text(f"""
backends:
  - name: a
    url: http://127.0.0.1:8001
    models: [m]
    model_configs:
      - id: m
        metadata: {{pricing: {{input_tokens: {price_a}, output_tokens: {price_a}}}}}
  - name: b
    url: http://127.0.0.1:8002
    models: [m]
    enabled: {str(b_enabled).lower()}
    model_configs:
      - id: m
        metadata: {{pricing: {{input_tokens: {price_b}, output_tokens: {price_b}}}}}
""", env={}).snapshot


PAYLOAD = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000}


def test_the_worst_cost_is_at_the_priciest_enabled_backend():
    cheap_a = worst_cost(snapshot(1.0, 3.0), "m", PAYLOAD, None)
    assert cheap_a == pytest.approx(worst_cost(snapshot(3.0, 1.0), "m", PAYLOAD, None))
    assert cheap_a > worst_cost(snapshot(1.0, 1.0), "m", PAYLOAD, None) > 0
    assert worst_cost(snapshot(1.0, 3.0, b_enabled=False), "m", PAYLOAD, None) == \
        pytest.approx(worst_cost(snapshot(1.0, 1.0), "m", PAYLOAD, None))


def test_a_new_snapshot_prices_by_its_own_pricings_not_the_last_ones():
    first, second = snapshot(1.0, 1.0), snapshot(5.0, 5.0)
    low = worst_cost(first, "m", PAYLOAD, None)
    assert worst_cost(second, "m", PAYLOAD, None) == pytest.approx(5 * low)
    assert worst_cost(first, "m", PAYLOAD, None) == pytest.approx(low)


def test_a_model_nobody_prices_reserves_nothing():
    assert worst_cost(snapshot(1.0, 1.0), "unknown-model", PAYLOAD, None) == 0.0
