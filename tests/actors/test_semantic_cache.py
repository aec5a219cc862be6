"""The semantic cache (``response_cache.semantic``) through the real pipeline, on simulated backends. MockClock.

The embeddings come from a simulated backend with ``embedding: words`` (one
dimension per word), so the cosine of two prompts is known exactly:
``word_vector`` computes it here as the gateway's embedding does.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from switchyard.actors.cache.similarity import cosine
from switchyard.actors.ledger.record import UsageQuery
from switchyard.config.load import load_text
from switchyard.protocol.simulated.endpoints import word_vector
from tests.harness import Reply, gateway, request

pytestmark = pytest.mark.simulator_history

DIM = 2048
Q1 = "what is the capital of france please tell me"
Q2 = "what is the capital of france please tell us"          # one word in nine differs
FAR = "how do I reset my password on the console"


def config(semantic: str = "", embed_sim: str = "", keys: str = "", cache_extra: str = "",
           backends: str = "") -> str:
    return f"""
backends:
  - name: a
    type: simulated
    models: [demo]
    simulation: {{latency: 10ms, chunks: 4, text: "Paris."}}
  - name: emb
    type: simulated
    models: [embed]
    simulation: {{latency: 5ms, embedding: words{embed_sim}}}
{backends}
usage: {{ledger: memory}}
{keys}
response_cache:
  enabled: true
  {cache_extra}
  semantic: {{enabled: true, embedding_model: embed, threshold: 0.85, dimensions: {DIM}{semantic}}}
"""


def ask(text: str, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": "demo", "stream": stream, "temperature": 0, "messages": [{"role": "user", "content": text}],
            **extra}


async def call(app: Any, body: dict[str, Any], key: str | None = None) -> Reply:
    headers = [(b"authorization", f"Bearer {key}".encode())] if key else None
    return await request(app, "POST", "/v1/chat/completions", body, headers=headers)


def served(app: Any, name: str = "a") -> int:
    return app.runtime.upstream.simulated[f"{name}.simulated"].served


def similarity(a: str, b: str) -> float:
    return cosine(word_vector(f"user: {a}", DIM), word_vector(f"user: {b}", DIM))


def test_the_pairs_have_the_cosines_the_tests_rely_on():
    assert 0.85 < similarity(Q1, Q2) < 0.95
    assert similarity(Q1, FAR) < 0.5


async def test_a_paraphrase_above_the_threshold_is_a_semantic_hit_with_its_similarity(autojump_clock):
    async with gateway(config()) as app:
        first = await call(app, ask(Q1))
        again = await call(app, ask(Q2))
    assert first.headers[b"x-continuum-cache"] == b"miss"
    assert again.headers[b"x-continuum-cache"] == b"hit"
    assert again.headers[b"x-continuum-cache-kind"] == b"semantic"
    assert float(again.headers[b"x-continuum-cache-similarity"]) == pytest.approx(similarity(Q1, Q2), abs=1e-4)
    assert served(app) == 1
    assert again.json()["choices"][0]["message"]["content"] == "Paris."


async def test_an_exact_repeat_says_kind_exact(autojump_clock):
    async with gateway(config()) as app:
        await call(app, ask(Q1))
        again = await call(app, ask(Q1))
    assert again.headers[b"x-continuum-cache-kind"] == b"exact"
    assert b"x-continuum-cache-similarity" not in again.headers


async def test_a_streamed_paraphrase_is_replayed_as_a_stream(autojump_clock):
    async with gateway(config()) as app:
        await call(app, ask(Q1, stream=True))
        again = await call(app, ask(Q2, stream=True))
    assert again.headers[b"x-continuum-cache-kind"] == b"semantic"
    assert again.headers[b"content-type"].startswith(b"text/event-stream")
    assert again.events()[-1] == b"[DONE]"
    assert served(app) == 1


@pytest.mark.parametrize("threshold, hit", [(0.85, True), (0.95, False)])
async def test_the_threshold_decides_on_either_side_of_the_pair_s_similarity(autojump_clock, threshold, hit):
    async with gateway(config(semantic=f", threshold: {threshold}")) as app:
        await call(app, ask(Q1))
        again = await call(app, ask(Q2))
    assert (again.headers[b"x-continuum-cache"] == b"hit") is hit
    assert served(app) == (1 if hit else 2)


async def test_a_different_question_is_a_miss(autojump_clock):
    async with gateway(config()) as app:
        await call(app, ask(Q1))
        other = await call(app, ask(FAR))
    assert other.headers[b"x-continuum-cache"] == b"miss"
    assert served(app) == 2


KEYS = """
api_keys:
  - {id: k1, key: sk-one}
  - {id: k2, key: sk-two}
  - {id: k3, key: sk-three, cache: false}
"""


async def test_one_key_s_answer_never_answers_another_key(autojump_clock):
    async with gateway(config(keys=KEYS)) as app:
        await call(app, ask(Q1), key="sk-one")
        other = await call(app, ask(Q2), key="sk-two")
        same = await call(app, ask(Q2), key="sk-one")
    assert other.headers[b"x-continuum-cache"] == b"miss"
    assert same.headers[b"x-continuum-cache-kind"] == b"semantic"


async def test_a_key_with_cache_false_bypasses_the_cache(autojump_clock):
    async with gateway(config(keys=KEYS)) as app:
        await call(app, ask(Q1), key="sk-three")
        again = await call(app, ask(Q1), key="sk-three")
    assert again.headers[b"x-continuum-cache"] == b"bypass"
    assert app.runtime.cache.bypasses["key_opt_out"] == 2
    assert served(app) == 2


async def test_the_client_header_bypass_neither_reads_nor_writes(autojump_clock):
    async with gateway(config()) as app:
        out = await request(app, "POST", "/v1/chat/completions", ask(Q1),
                            headers=[(b"x-continuum-cache", b"bypass")])
        again = await call(app, ask(Q1))
    assert out.headers[b"x-continuum-cache"] == b"bypass"
    assert again.headers[b"x-continuum-cache"] == b"miss"


async def test_calls_with_tools_are_never_answered_by_a_similar_prompt(autojump_clock):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    async with gateway(config()) as app:
        await call(app, ask(Q1, tools=tools))
        again = await call(app, ask(Q2, tools=tools))
    assert again.headers[b"x-continuum-cache"] == b"miss"
    assert app.runtime.cache.semantic.skipped["tools"] == 2


async def test_a_nonzero_temperature_is_left_out_unless_allowed(autojump_clock):
    cfg = "cache_temperature_above_zero: true"
    async with gateway(config(cache_extra=cfg)) as app:
        await call(app, ask(Q1, temperature=0.7))
        again = await call(app, ask(Q2, temperature=0.7))
    assert again.headers[b"x-continuum-cache"] == b"miss"
    async with gateway(config(cache_extra=cfg, semantic=", allow_nonzero_temperature: true")) as app:
        await call(app, ask(Q1, temperature=0.7))
        again = await call(app, ask(Q2, temperature=0.7))
    assert again.headers[b"x-continuum-cache-kind"] == b"semantic"


async def test_a_hit_is_recorded_with_cost_zero_and_the_cost_saved_and_the_embedding_with_purpose_cache(
        autojump_clock):
    priced = "\n    model_configs: [{id: demo, metadata: {pricing: {input_tokens: 5.0, output_tokens: 30.0}}}]"
    cfg = config().replace("    models: [demo]\n", "    models: [demo]" + priced + "\n", 1)
    async with gateway(cfg) as app:
        first = await call(app, ask(Q1))
        await call(app, ask(Q2))
        await app.runtime.ledger.flush()
        records = await app.runtime.ledger.records(UsageQuery(purpose=None), 100)
    assert first.status == 200
    client = [r for r in records if r.purpose == "client"]
    assert [r.cache_hit for r in client] == [False, True]
    assert client[1].cost == 0.0 and client[1].saved_cost == pytest.approx(client[0].cost)
    assert client[0].cost and client[0].cost > 0
    assert sorted(r.purpose for r in records).count("cache") == 2   # one embedding per call


async def test_the_embeddings_call_leaves_no_task_behind(autojump_clock):
    async with gateway(config()) as app:
        await call(app, ask(Q1))
        await trio.testing.wait_all_tasks_blocked()
        before = len(app.runtime.nursery.child_tasks)
        for text in (FAR, Q1 + " again", FAR + " again"):
            await call(app, ask(text))
        await trio.testing.wait_all_tasks_blocked()
        assert len(app.runtime.nursery.child_tasks) == before


async def test_a_failing_embeddings_backend_makes_a_miss_counted_and_logged_once(autojump_clock, caplog):
    caplog.set_level(logging.WARNING, "switchyard.cache")
    async with gateway(config(embed_sim=", failure: {status: 500}")) as app:
        replies = [await call(app, ask(q)) for q in (Q1, Q2, Q1 + " x")]
    assert [r.status for r in replies] == [200, 200, 200]
    assert app.runtime.cache.semantic.faults["error"] == 3
    assert sum("semantic cache" in r.message for r in caplog.records) == 1


async def test_a_slow_embeddings_backend_is_a_miss_within_the_timeout(autojump_clock):
    import trio
    async with gateway(config(embed_sim=", latency: 30s", semantic=", timeout: 200ms")) as app:
        began = trio.current_time()
        reply = await call(app, ask(Q1))
        took = trio.current_time() - began
    assert reply.status == 200 and reply.headers[b"x-continuum-cache"] == b"miss"
    assert app.runtime.cache.semantic.faults["timeout"] == 1
    assert took == pytest.approx(0.2 + 0.01, abs=0.005)   # the timeout, then the backend's 10 ms


async def test_vectors_of_the_wrong_size_are_a_miss(autojump_clock):
    async with gateway(config(embed_sim=", embedding_size: 16")) as app:
        reply = await call(app, ask(Q1))
    assert reply.status == 200
    assert app.runtime.cache.semantic.faults["wrong_size"] == 1


async def test_entries_made_with_another_embedding_model_are_never_served(autojump_clock):
    two = """
  - name: emb2
    type: simulated
    models: [embed2]
    simulation: {latency: 5ms, embedding: words}"""
    async with gateway(config(backends=two)) as app:
        await call(app, ask(Q1))
        app.runtime.apply(load_text(config(backends=two).replace("embedding_model: embed,",
                                                                 "embedding_model: embed2,")).snapshot)
        again = await call(app, ask(Q2))
        exact = await call(app, ask(Q1))
    assert exact.headers[b"x-continuum-cache-kind"] == b"exact"   # the exact entry stays
    assert again.headers[b"x-continuum-cache"] == b"miss"


GUARD = """
guardrails:
  - name: no-mail
    stage: output
    mode: enforce
    detectors: {email: block}
"""


async def test_an_answer_that_fails_a_guardrail_is_never_stored(autojump_clock):
    async with gateway(config().replace('"Paris."', '"Write to paris@example.com"', 1) + GUARD) as app:
        first = await call(app, ask(Q1))
        again = await call(app, ask(Q1))
    assert first.status == 400
    assert again.headers.get(b"x-continuum-cache") != b"hit"
    assert app.runtime.cache.not_stored["guardrail_blocked"] >= 1


REPLICAS = """
  - name: b
    type: simulated
    models: [demo]
    simulation: {latency: 10ms, chunks: 4, text: "Paris."}
"""


async def test_two_replicas_declared_one_destination_share_a_cache(autojump_clock):
    async with gateway(config(backends=REPLICAS, cache_extra="destinations: [{name: demo, backends: [a, b]}]")) as app:
        await call(app, ask(Q1))
        again = await call(app, ask(Q1))
    assert again.headers[b"x-continuum-cache"] == b"hit"
    assert served(app, "a") + served(app, "b") == 1


async def test_two_replicas_without_the_opt_in_bypass_the_cache(autojump_clock):
    async with gateway(config(backends=REPLICAS)) as app:
        reply = await call(app, ask(Q1))
    assert reply.headers[b"x-continuum-cache"] == b"bypass"
    assert app.runtime.cache.bypasses["several_backends"] == 1
