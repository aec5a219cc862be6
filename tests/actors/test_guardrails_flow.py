"""Guardrails on real calls under MockClock (issue 23): the input stage before smart routing and
dispatch, both doors' block shapes, monitor mode, the output stage, ledger records and metrics."""

import json
import logging

import pytest

from switchyard.actors.ledger.record import UsageQuery
from switchyard.protocol.serving.metrics import exposition
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

EMAIL, CARD, KEY = "hong@example.com", "4111 1111 1111 1111", "sk-proj-abcdefghijklmnopqrstuvwx1234"

CONFIG = """
usage: {ledger: memory}
health_checks: {interval: 1h}
backends:
  - name: sim
    type: simulated
    models: [demo, light, heavy]
    simulation: {latency: 10ms, chunks: 2, text: ANSWER}
  - name: judge
    type: simulated
    internal: true
    models: [judge-model]
    simulation: {latency: 10ms, text: '{"complexity": "simple", "domain": "general", "confidence": 0.9}'}
smart_routing:
  enabled: true
  model_profiles:
    - {model: heavy, tier: 1, domains: [general]}
    - {model: light, tier: 2, domains: [general]}
  routing_policies:
    - {name: all, when: {}, route_to: {tier: 2}}
  classifier:
    method: llm
    llm: {model: judge-model, backend: judge, timeout_ms: 500}
guardrails:
  - name: pii
    mode: MODE
    stage: STAGE
    detectors: {email: mask, phone: mask, payment_card: block, secret: block, iban: mask, ip_address: log}
"""


def config(mode="enforce", stage="input", answer="'fine'"):
    return CONFIG.replace("MODE", mode).replace("STAGE", stage).replace("ANSWER", answer)


def chat(*messages, model="demo", stream=False):
    return {"model": model, "stream": stream,
            "messages": [{"role": role, "content": text} for role, text in messages]}


def sent(app, backend="sim"):
    return [json.loads(r.content) for r in app.runtime.upstream.simulated[f"{backend}.simulated"].requests
            if r.url.path.endswith("/chat/completions")]


async def records(app):
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose="client"), 100)


async def test_enforce_masks_every_message_the_system_prompt_included_before_the_upstream(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(
            ("system", f"The owner is {EMAIL}."), ("user", f"연락처는 {EMAIL} 입니다, 또는 bob@corp.example")))
        assert reply.status == 200
        [body] = sent(app)
        assert [m["content"] for m in body["messages"]] == [
            "The owner is <EMAIL_1>.", "연락처는 <EMAIL_1> 입니다, 또는 <EMAIL_2>"]


async def test_the_classifier_reads_the_masked_prompt(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(("user", f"mail {EMAIL} please"), model="auto"))
        assert reply.status == 200
        [asked] = sent(app, "judge")
        assert EMAIL not in json.dumps(asked) and "<EMAIL_1>" in json.dumps(asked)
        assert sent(app)[0]["model"] == "light"


async def test_monitor_mode_changes_nothing_and_the_classifier_gets_the_prompt_as_sent(autojump_clock):
    async with gateway(config(mode="monitor")) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat(("user", f"mail {EMAIL}, card {CARD}"), model="auto"))
        assert reply.status == 200
        assert EMAIL in json.dumps(sent(app, "judge")[0]) and CARD in sent(app)[0]["messages"][0]["content"]
        [rec] = await records(app)
        assert json.loads(rec.guardrails) == [{"guardrail": "pii", "stage": "input", "mode": "monitor",
                                               "action": "block", "detectors": {"email": 1, "payment_card": 1}}]


async def test_a_block_stops_the_call_before_the_classifier_in_the_openai_shape(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(("user", f"card {CARD}"), model="auto"))
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["code"] == "guardrail_blocked" and error["type"] == "invalid_request_error"
        assert error["details"] == {"guardrail": "pii", "stage": "input", "detector": "payment_card"}
        assert "pii" in error["message"] and CARD not in reply.body.decode()
        assert sent(app, "judge") == [] and sent(app) == []


async def test_a_block_on_the_messages_door_is_in_the_anthropic_shape(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", {
            "model": "demo", "max_tokens": 20, "system": "be brief",
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"my key is {KEY}"}]}]})
        assert reply.status == 400
        body = reply.json()
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert "'pii'" in body["error"]["message"] and "'secret'" in body["error"]["message"]
        assert KEY not in reply.body.decode() and sent(app) == []


async def test_the_messages_door_masks_its_system_prompt_and_messages(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", {
            "model": "demo", "max_tokens": 20, "system": f"Owner {EMAIL}",
            "messages": [{"role": "user", "content": f"write to {EMAIL}"}]})
        assert reply.status == 200 and reply.json()["type"] == "message"
        [body] = sent(app)
        assert [m["content"] for m in body["messages"]] == ["Owner <EMAIL_1>", "write to <EMAIL_1>"]


async def test_the_output_stage_masks_a_buffered_answer(autojump_clock):
    async with gateway(config(stage="both", answer=f"'reach {EMAIL} now'")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(("user", "who?")))
        assert reply.status == 200
        assert reply.json()["choices"][0]["message"]["content"] == "reach <EMAIL_1> now"
        assert int(reply.headers.get(b"content-length", str(len(reply.body)).encode())) == len(reply.body)


async def test_the_output_stage_blocks_a_buffered_answer_without_echoing_it(autojump_clock):
    async with gateway(config(stage="output", answer=f"'the key is {KEY}'")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(("user", "key?")))
        assert reply.status == 400 and reply.json()["error"]["details"]["stage"] == "output"
        assert KEY not in reply.body.decode()


async def test_a_stream_is_not_held_back_and_its_output_verdict_says_skipped(autojump_clock):
    async with gateway(config(stage="output", answer=f"'reach {EMAIL}'")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(("user", "who?"), stream=True))
        assert reply.status == 200
        [rec] = await records(app)
        assert json.loads(rec.guardrails) == [{"guardrail": "pii", "stage": "output", "mode": "enforce",
                                               "action": "skipped"}]


async def test_an_endpoint_the_guardrails_cannot_read_is_refused_in_enforce_mode(autojump_clock):
    async with gateway(config()) as app:
        reply = await request(app, "POST", "/v1/completions", {"model": "demo", "prompt": f"mail {EMAIL}"})
        assert reply.status == 400 and reply.json()["error"]["details"]["reason"] == "unread"


async def test_scope_by_key_and_model_glob_leaves_other_calls_alone(autojump_clock):
    scoped = config().replace("    mode: enforce\n", "    mode: enforce\n    models: ['heav*']\n")
    async with gateway(scoped) as app:
        assert (await request(app, "POST", "/v1/chat/completions", chat(("user", f"card {CARD}")))).status == 200
        blocked = await request(app, "POST", "/v1/chat/completions", chat(("user", f"card {CARD}"), model="heavy"))
        assert blocked.status == 400


async def test_verdicts_reach_the_ledger_and_the_metrics_and_the_matched_text_reaches_neither_nor_a_log(
        autojump_clock, caplog):
    caplog.set_level(logging.DEBUG)
    async with gateway(config(stage="both", answer=f"'ok {EMAIL}'")) as app:
        await request(app, "POST", "/v1/chat/completions", chat(("user", f"mail {EMAIL} from 10.0.0.7")))
        blocked = await request(app, "POST", "/v1/chat/completions", chat(("user", f"key {KEY}")))
        assert blocked.status == 400
        recs = await records(app)
        verdicts = [json.loads(r.guardrails) for r in recs]
        assert {"guardrail": "pii", "stage": "input", "mode": "enforce", "action": "mask",
                "detectors": {"email": 1, "ip_address": 1}} in verdicts[0] + verdicts[1]
        assert any(r.error_code == "guardrail_blocked" for r in recs)
        metrics = exposition(app.runtime).decode()
        assert 'guardrail_verdicts_total{action="block",guardrail="pii",mode="enforce",stage="input"} 1.0' in metrics
        assert 'guardrail_verdicts_total{action="mask",guardrail="pii",mode="enforce",stage="output"} 1.0' in metrics
        everything = repr([r.__dict__ for r in caplog.records]) + repr(recs) + metrics
        assert EMAIL not in everything and KEY not in everything and "10.0.0.7" not in everything


@pytest.mark.parametrize("stream", [False, True])
async def test_a_guarded_call_is_shared_under_dedup_like_any_other(autojump_clock, stream):
    async with gateway(config(stage="both") + "dedup: {enabled: true}\n") as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(("user", f"mail {EMAIL}"), stream=stream))
        assert reply.status == 200 and sent(app)[0]["messages"][0]["content"] == "mail <EMAIL_1>"


async def test_the_output_stage_masks_an_answer_of_the_messages_door(autojump_clock):
    async with gateway(config(stage="output", answer=f"'reach {EMAIL}'")) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", {
            "model": "demo", "max_tokens": 20, "messages": [{"role": "user", "content": "who?"}]})
        assert reply.status == 200 and reply.json()["content"][0]["text"] == "reach <EMAIL_1>"


async def test_the_cache_keys_on_the_masked_prompt_and_a_hit_passes_the_output_stage(autojump_clock):
    cached = config(stage="both", answer=f"'reach {EMAIL}'") + "response_cache: {enabled: true}\n"
    async with gateway(cached) as app:
        first = await request(app, "POST", "/v1/chat/completions", chat(("user", "mail a@x.org")))
        # another address masks to the same prompt: the same cache entry, and no second upstream call
        hit = await request(app, "POST", "/v1/chat/completions", chat(("user", "mail b@y.org")))
        assert hit.headers[b"x-continuum-cache"] == b"hit" and len(sent(app)) == 1
        assert [r.json()["choices"][0]["message"]["content"] for r in (first, hit)] == ["reach <EMAIL_2>"] * 2
