"""A moderation model as a guardrail's detector, through the pipeline in virtual time: one /v1/moderations
call through the gateway's own routing per stage, flagged categories block (enforce) or are recorded
(monitor), ``categories`` narrows, a failure is settled by ``on_failure``, and the call's ledger record.

The simulated backend flags an input holding ``kill`` or ``bomb`` in ``violence`` (score 1.0)."""

import json
import string

import pytest
import trio
import trio.testing

from switchyard.actors.ledger.record import UsageQuery
from switchyard.protocol.serving.metrics import exposition
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

FLAGGED, CLEAN = "we will kill it", "a quiet afternoon"
CONFIG = """
usage: {ledger: memory}
health_checks: {interval: 1h}
api_keys:
  - {id: team-a, key: sk-team-a-0123456789}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation: {latency: 10ms, chunks: 1, text: $answer}
  - name: mod
    type: simulated
    models: [omni-moderation-latest]
    model_configs: [{id: omni-moderation-latest, metadata: {pricing: {input_tokens: 2.0}}}]
    simulation: {latency: $latency, failure: {$failure}}
guardrails:
  - name: safety
    mode: $mode
    stage: $stage
    moderation: {model: $model, timeout: 2s, on_failure: $on_failure$extra}
"""
KEY = [(b"authorization", b"Bearer sk-team-a-0123456789")]


def config(mode="enforce", stage="input", answer="fine", latency="20ms", failure="", on_failure="fail_closed",
           extra="", model="omni-moderation-latest"):
    return string.Template(CONFIG).substitute(mode=mode, stage=stage, answer=repr(answer), latency=latency,
                                              failure=failure, on_failure=on_failure, extra=extra, model=model)


def chat(*texts):
    return {"model": "demo", "messages": [{"role": "system", "content": "be kind"},
                                          *({"role": "user", "content": t} for t in texts)]}


def sent(app, backend):
    return [json.loads(r.content) for r in app.runtime.upstream.simulated[f"{backend}.simulated"].requests]


async def records(app, purpose="client"):
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose=purpose), 100)


async def test_enforce_refuses_a_request_the_moderation_model_flags_before_the_upstream(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(FLAGGED), KEY)
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["code"] == "guardrail_blocked"
        assert error["details"] == {"guardrail": "safety", "stage": "input", "detector": "moderation",
                                    "categories": ["violence"]}
        assert FLAGGED not in reply.body.decode() and sent(app, "sim") == []
        [rec] = await records(app)
        assert rec.error_code == "guardrail_blocked"
        assert json.loads(rec.guardrails) == [{"guardrail": "safety", "stage": "input", "mode": "enforce",
                                               "action": "block", "categories": ["violence"]}]


async def test_every_text_the_guardrail_reads_goes_in_one_moderations_call(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(CLEAN, "and a walk"), KEY)
        assert reply.status == 200
        assert sent(app, "mod") == [{"model": "omni-moderation-latest", "input": ["be kind", CLEAN, "and a walk"]}]
        [rec] = await records(app)
        assert json.loads(rec.guardrails) == [{"guardrail": "safety", "stage": "input", "mode": "enforce",
                                               "action": "allow"}]


async def test_monitor_mode_lets_a_flagged_request_through_and_records_the_verdict(autojump_clock):
    async with gateway(config(mode="monitor")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(FLAGGED), KEY)
        assert reply.status == 200 and sent(app, "sim")[0]["messages"][1]["content"] == FLAGGED
        [rec] = await records(app)
        assert json.loads(rec.guardrails) == [{"guardrail": "safety", "stage": "input", "mode": "monitor",
                                               "action": "block", "categories": ["violence"]}]
        metrics = exposition(app.runtime).decode()
    assert 'guardrail_verdicts_total{action="block",guardrail="safety",mode="monitor",stage="input"} 1.0' in metrics


async def test_only_the_categories_named_count(autojump_clock):
    async with gateway(config(extra=", categories: [hate, self-harm]")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(FLAGGED), KEY)
        assert reply.status == 200
        [rec] = await records(app)
        assert json.loads(rec.guardrails)[0]["action"] == "allow"


async def test_a_threshold_counts_a_category_by_its_score(autojump_clock):
    # the simulated score of a flagged category is 1.0: a threshold of 1 still counts it
    async with gateway(config(extra=", threshold: 1.0")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(FLAGGED), KEY)
    assert reply.status == 400 and reply.json()["error"]["details"]["categories"] == ["violence"]


async def test_the_output_stage_refuses_a_flagged_answer(autojump_clock):
    async with gateway(config(stage="output", answer=f"Sure: {FLAGGED}")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(CLEAN), KEY)
        assert reply.status == 400
        assert reply.json()["error"]["details"] == {"guardrail": "safety", "stage": "output",
                                                    "detector": "moderation", "categories": ["violence"]}
        assert sent(app, "mod") == [{"model": "omni-moderation-latest", "input": [f"Sure: {FLAGGED}"]}]


async def test_a_timeout_fails_closed_with_a_503_at_the_timeout(autojump_clock):
    async with gateway(config(latency="5s")) as app:
        began = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat(CLEAN), KEY)
        assert reply.status == 503 and reply.ended_at - began == pytest.approx(2.0)
        error = reply.json()["error"]
        assert error["code"] == "guardrail_unavailable"
        assert error["details"] == {"guardrail": "safety", "stage": "input", "reason": "timeout"}
        assert sent(app, "sim") == []


async def test_a_timeout_fails_open_and_the_call_goes_on(autojump_clock):
    async with gateway(config(latency="5s", on_failure="fail_open")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(FLAGGED), KEY)
        assert reply.status == 200 and len(sent(app, "sim")) == 1
        [rec] = await records(app)
        assert json.loads(rec.guardrails) == [{"guardrail": "safety", "stage": "input", "mode": "enforce",
                                               "action": "allow", "failure": "timeout"}]


async def test_an_error_answer_is_a_failure_on_failure_settles(autojump_clock):
    async with gateway(config(failure="status: 500")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(CLEAN), KEY)
    assert reply.status == 503 and reply.json()["error"]["details"]["reason"] == "error"


async def test_a_model_no_backend_serves_is_a_failure_at_call_time(autojump_clock):
    async with gateway(config(model="nobody-serves-it")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(CLEAN), KEY)
        assert reply.status == 503 and reply.json()["error"]["details"]["reason"] == "error"
        [rec] = await records(app, "guardrail")
        assert (rec.model, rec.status >= 400) == ("nobody-serves-it", True)


async def test_the_moderation_call_is_a_ledger_record_with_purpose_guardrail_billed_to_the_key(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(CLEAN), KEY)
        [client] = await records(app)
        [own] = await records(app, "guardrail")
    assert reply.status == 200
    assert (own.endpoint, own.model, own.backend, own.key_id, own.status) == \
        ("moderations", "omni-moderation-latest", "mod", "team-a", 200)
    assert own.request_id == client.request_id and own.cost and own.cost > 0


async def test_the_moderation_call_leaves_no_task_behind(autojump_clock):
    async with gateway(config()) as app:
        await request(app, "POST", "/v1/chat/completions", chat(CLEAN), KEY)
        await trio.testing.wait_all_tasks_blocked()
        before = len(app.runtime.nursery.child_tasks)
        for _ in range(3):
            await request(app, "POST", "/v1/chat/completions", chat(CLEAN), KEY)
        await trio.testing.wait_all_tasks_blocked()
        assert len(app.runtime.nursery.child_tasks) == before
