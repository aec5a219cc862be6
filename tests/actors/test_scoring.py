"""Rerank and moderations through the pipeline in virtual time: the simulated answers, what a backend that
does not speak the endpoint gets (nothing), failover, the ledger's prices, and each bad input's 400."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from switchyard.actors.ledger.record import UsageQuery
from switchyard.protocol.doors.scoring import MAX_DOCUMENTS
from tests.harness import gateway, request

CONFIG = """
usage: {ledger: memory}
backends:
  - name: sim-a
    type: simulated
    models: [rr, omni-moderation-latest]
    simulation: {latency: 10ms}
    model_configs:
      - id: rr
        metadata: {pricing: {input_tokens: 1.0, per_search_unit: 0.002}}
  - name: ollama-a
    type: ollama
    url: http://127.0.0.1:9
    discovery: false
    models: [rr-ollama]
"""

RERANK = {"model": "rr", "query": "red fox", "documents": ["a blue fox", {"text": "red fox den"}, "cat"]}


async def records(app: Any) -> list[Any]:
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose=None), 1000)


async def test_rerank_answers_results_best_first_with_top_n_and_documents(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/rerank", {**RERANK, "top_n": 2})
    assert reply.status == 200
    assert [(r["index"], r["relevance_score"], r["document"]["text"]) for r in reply.json()["results"]] == \
        [(1, 1.0, "red fox den"), (0, 0.5, "a blue fox")]


async def test_rerank_is_served_on_the_path_without_v1(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/rerank", {**RERANK, "return_documents": False})
    assert reply.status == 200 and all("document" not in r for r in reply.json()["results"])


async def test_a_rerank_on_the_path_without_v1_is_recorded_under_the_endpoint_rerank(autojump_clock):
    async with gateway(CONFIG) as app:
        await request(app, "POST", "/rerank", RERANK)
        [record] = await records(app)
    assert record.endpoint == "rerank"


async def test_a_rerank_is_priced_per_search_unit_and_per_token_in_the_ledger(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/rerank", RERANK)
        [record] = await records(app)
    tokens = reply.json()["usage"]["total_tokens"]
    expected = Decimal("0.002") + Decimal(tokens) / 1_000_000
    assert (record.endpoint, record.input_tokens, record.estimated) == ("rerank", tokens, False)
    assert Decimal(str(record.cost)) == expected
    assert Decimal(reply.headers[b"x-continuum-cost"].decode()) == expected


async def test_a_moderation_without_model_is_routed_as_openais_default_and_flags_the_word_list(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/moderations", {"input": ["we will kill it", "hello"]})
        [record] = await records(app)
    assert reply.status == 200
    assert [r["flagged"] for r in reply.json()["results"]] == [True, False]
    assert reply.json()["results"][0]["categories"]["violence"] is True
    assert (record.endpoint, record.model) == ("moderations", "omni-moderation-latest")


async def test_a_model_served_only_by_a_kind_without_rerank_is_refused_by_type(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/rerank", {**RERANK, "model": "rr-ollama"})
    assert reply.status == 400 and reply.json()["error"]["code"] == "unsupported_backend_type"


@pytest.mark.simulator_history
async def test_a_rerank_fails_over_to_a_sibling_before_the_answer(autojump_clock):
    config = """
backends:
  - {name: sim-a, type: simulated, models: [rr], simulation: {latency: 10ms, failure: {status: 503}}}
  - {name: sim-b, type: simulated, models: [rr], simulation: {latency: 10ms}}
selection_strategy: RoundRobin
"""
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/rerank", RERANK, headers=[(b"x-backend", b"sim-a")])
        sims = app.runtime.upstream.simulated
        assert reply.status == 200
        assert sims["sim-a.simulated"].count("status:503") >= 1 and sims["sim-b.simulated"].count("completed") == 1


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "rr", "documents": ["a"]}, "query"),
    ({"model": "rr", "query": 3, "documents": ["a"]}, "query"),
    ({"model": "rr", "query": "q"}, "documents"),
    ({"model": "rr", "query": "q", "documents": []}, "documents"),
    ({"model": "rr", "query": "q", "documents": ["a"] * (MAX_DOCUMENTS + 1)}, "documents"),
    ({"model": "rr", "query": "q", "documents": ["a", {"title": "b"}]}, "documents[1].text"),
    ({"model": "rr", "query": "q", "documents": ["a", {"text": 5}]}, "documents[1].text"),
    ({"model": "rr", "query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
    ({"model": "rr", "query": "q", "documents": ["a"], "top_n": "2"}, "top_n"),
    ({"model": "rr", "query": "q", "documents": ["a"], "return_documents": "yes"}, "return_documents"),
    ({"model": "rr", "query": "q", "documents": ["a"], "stream": True}, "stream"),
])
async def test_a_bad_rerank_body_is_a_400_naming_the_field(autojump_clock, body, param):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/rerank", body)
    assert reply.status == 400
    assert reply.json()["error"]["param"] == param and reply.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(("body", "param"), [
    ({}, "input"),
    ({"input": 7}, "input"),
    ({"input": []}, "input"),
    ({"input": ["a", 2]}, "input[1]"),
    ({"input": [{"type": "audio"}]}, "input[0].type"),
    ({"input": [{"type": "image_url", "image_url": {"url": 1}}]}, "input[0].image_url.url"),
])
async def test_a_bad_moderations_body_is_a_400_naming_the_field(autojump_clock, body, param):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/moderations", body)
    assert reply.status == 400 and reply.json()["error"]["param"] == param
