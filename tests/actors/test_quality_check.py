"""fallback.quality_check end to end on the simulated backends, under MockClock: one test per rule."""

import json
import threading

import pytest
import trio

from switchyard.actors.call import quality_gate
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

BASE = """
health_checks: {interval: 1h}
fallback:
  enabled: true
  fallback_chains: {big: [small]}
  quality_check: {models: [big], refusal_patterns: ["(?i)^i can't help"]}
backends:
"""
SCHEMA = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}
PERSON = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CHAT = "/v1/chat/completions"
VALID, INVALID = "'{\"age\": 3}'", "'{\"age\": \"three\"}'"


def backend(name, model, sim="{}"):
    return f"  - {{name: {name}, type: simulated, models: [{model}], simulation: {sim}}}\n"


def asked(app, name):
    return [k for _, k in app.runtime.upstream.simulated[f"{name}.simulated"].events if k == "request"]


def content(reply):
    return reply.json()["choices"][0]["message"]["content"]


def trace_of(app, reply):
    return app.runtime.traces.get(reply.headers[b"x-continuum-request-id"].decode()).as_dict()["events"]


async def test_a_schema_invalid_answer_falls_back_to_the_next_model_and_the_client_gets_the_valid_one(
        autojump_clock):
    config = BASE + backend("a", "big", f"{{latency: 0s, text: {INVALID}}}") + \
        backend("b", "small", f"{{latency: 0s, text: {VALID}}}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big", response_format=PERSON))
        assert reply.status == 200 and json.loads(content(reply)) == {"age": 3}
        assert reply.json()["model"] == "small" and reply.headers[b"x-continuum-quality-check"] == b"passed"
        assert len(asked(app, "a")) == len(asked(app, "b")) == 1


async def test_a_failed_check_moves_to_the_chain_model_never_to_a_sibling_backend(autojump_clock):
    config = BASE + backend("a1", "big", f"{{latency: 0s, text: {INVALID}}}") + \
        backend("a2", "big", f"{{latency: 0s, text: {INVALID}}}") + \
        backend("b", "small", f"{{latency: 0s, text: {VALID}}}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big", response_format=PERSON))
        assert reply.json()["model"] == "small"
        assert len(asked(app, "a1")) + len(asked(app, "a2")) == 1 and len(asked(app, "b")) == 1


async def test_tool_arguments_that_break_the_tools_parameters_fall_back(autojump_clock):
    config = BASE + \
        backend("a", "big", "{latency: 0s, call_tools: true, tool_arguments: '{\"town\": \"Oslo\"}'}") + \
        backend("b", "small", "{latency: 0s, call_tools: true, tool_arguments: '{\"city\": \"Oslo\"}'}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big", tools=[WEATHER]))
        call = reply.json()["choices"][0]["message"]["tool_calls"][0]["function"]
        assert reply.json()["model"] == "small" and json.loads(call["arguments"]) == {"city": "Oslo"}


async def test_an_empty_answer_falls_back_without_empty_reply_retry(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 0s, failure: {empty_reply: true}}") + \
        backend("b", "small", "{latency: 0s, text: fine}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big"))
        assert reply.json()["model"] == "small" and content(reply) == "fine"


async def test_an_answer_a_refusal_pattern_matches_falls_back(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 0s, text: \"I can't help with that.\"}") + \
        backend("b", "small", "{latency: 0s, text: Sure}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big"))
        assert reply.json()["model"] == "small" and content(reply) == "Sure"


async def test_when_no_model_passes_the_client_gets_the_last_answer_marked_failed(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 0s, text: 'not json'}") + \
        backend("b", "small", f"{{latency: 0s, text: {INVALID}}}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big", response_format=PERSON))
        assert reply.status == 200 and reply.json()["model"] == "small" and content(reply) == '{"age": "three"}'
        assert reply.headers[b"x-continuum-quality-check"] == b"failed"
        assert reply.headers[b"x-continuum-quality-check-failed"] == b"json_schema"
        events = trace_of(app, reply)
        assert [e["event"] for e in events][-2:] == ["quality_check_unmet", "completed"]
        assert events[-1]["backend"] == "b"


async def test_route_events_and_the_metric_name_the_failed_check(autojump_clock):
    config = BASE + backend("a", "big", f"{{latency: 0s, text: {INVALID}}}") + \
        backend("b", "small", f"{{latency: 0s, text: {VALID}}}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big", response_format=PERSON))
        failed = [e for e in trace_of(app, reply) if e["event"] == "attempt_failed"]
        assert [(e["backend"], e["detail"]["kind"]) for e in failed] == [("a", "quality_check_failed")]
        assert failed[0]["detail"]["quality_check_failed"] == {
            "check": "json_schema", "reason": "the answer's JSON breaks the schema: 'type' fails at $.age"}
        assert "three" not in json.dumps(failed)   # never the answer's text
        page = (await request(app, "GET", "/metrics")).body.decode()
        assert 'continuum_quality_check_failures_total{check="json_schema",model="big"} 1.0' in page


async def test_empty_reply_retry_steps_aside_on_calls_the_check_applies_to(autojump_clock):
    steps_aside = "empty_reply_retry: {enabled: true}\n  quality_check: {models: [big], checks: [refusal], "
    config = BASE.replace("quality_check: {models: [big], ", steps_aside) + \
        backend("a", "big", "{latency: 0s, failure: {empty_reply: true}}") + backend("b", "small", "{latency: 0s}")
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big"))
        assert reply.status == 200 and reply.json()["model"] == "big" and asked(app, "b") == []


async def test_a_schema_the_client_sent_that_is_no_json_schema_is_its_400(autojump_clock):
    config = BASE + backend("a", "big", "{latency: 0s}")
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "bogus"}}}
    async with gateway(config) as app:
        reply = await request(app, "POST", CHAT, chat("big", response_format=bad))
        assert reply.status == 400 and asked(app, "a") == []
        assert reply.json()["error"]["param"] == "response_format.json_schema.schema"
        assert reply.json()["error"]["code"] == "invalid_json_schema"


async def test_a_responses_answer_is_judged_against_text_format(autojump_clock):
    config = BASE + backend("a", "big", f"{{latency: 0s, text: {INVALID}}}") + \
        backend("b", "small", f"{{latency: 0s, text: {VALID}}}")
    body = {"model": "big", "input": "hi", "text": {"format": {"type": "json_schema", "name": "p", "schema": SCHEMA}}}
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/responses", body)
        text = reply.json()["output"][-1]["content"][0]["text"]
        assert reply.status == 200 and reply.json()["model"] == "small" and json.loads(text) == {"age": 3}


async def test_a_messages_answer_is_judged_against_its_tools_input_schema(autojump_clock):
    config = BASE + \
        backend("a", "big", "{latency: 0s, call_tools: true, tool_arguments: '{\"town\": \"Oslo\"}'}") + \
        backend("b", "small", "{latency: 0s, call_tools: true, tool_arguments: '{\"city\": \"Oslo\"}'}")
    tool = {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}
    body = {"model": "big", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    async with gateway(config) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", body)
        use = [b for b in reply.json()["content"] if b["type"] == "tool_use"]
        assert reply.status == 200 and use[0]["input"] == {"city": "Oslo"}
        assert reply.headers[b"x-continuum-quality-check"] == b"passed"


async def test_an_answer_given_because_none_passed_is_not_cached(autojump_clock):
    config = "response_cache: {enabled: true}\n" + BASE.replace("  fallback_chains: {big: [small]}\n", "") + \
        backend("a", "big", "{latency: 0s, text: 'not json'}")
    async with gateway(config) as app:
        body = chat("big", response_format=PERSON, temperature=0)
        first = await request(app, "POST", CHAT, body)
        second = await request(app, "POST", CHAT, body)
        assert first.headers[b"x-continuum-quality-check"] == second.headers[b"x-continuum-quality-check"] == b"failed"
        assert len(asked(app, "a")) == 2 and app.runtime.cache.not_stored["quality_check_failed"] == 2


async def test_a_judgment_that_runs_away_sends_the_answer_unchecked_and_never_stalls_the_loop(autojump_clock,
                                                                                            monkeypatch):
    """A client's schema whose ``$ref``s fan out (each level all of the next, twice): the judgment runs in a
    thread and is abandoned at its deadline; the call goes on. The real judgment of this schema takes about a
    third of a second of CPU, which a loaded machine can stretch past the test clock's jumps to the deadline
    or not; so the judgment here also waits, once done, until the test has seen the answer: it is still
    running at its deadline on every machine."""
    seen = threading.Event()
    real_judge = quality_gate.judge

    def judge_until_seen(*args, **kwargs):
        verdict = real_judge(*args, **kwargs)
        seen.wait(timeout=30)   # bounded: a test that failed before setting it leaves no thread for long
        return verdict

    monkeypatch.setattr(quality_gate, "judge", judge_until_seen)
    levels = 12
    defs = {f"l{i}": {"allOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]}
            for i in range(levels)}
    defs[f"l{levels}"] = {"type": "integer"}
    runaway = {"type": "json_schema", "json_schema": {"name": "n", "schema": {
        "type": "object", "properties": {"age": {"$ref": "#/$defs/l0"}}, "$defs": defs}}}
    config = BASE + backend("a", "big", f"{{latency: 0s, text: {INVALID}}}") + \
        backend("b", "small", f"{{latency: 0s, text: {VALID}}}")
    async with gateway(config) as app:
        began = trio.current_time()
        try:
            reply = await request(app, "POST", CHAT, chat("big", response_format=runaway))
        finally:
            seen.set()
        assert reply.status == 200 and reply.headers[b"x-continuum-quality-check"] == b"unchecked", content(reply)
        assert trio.current_time() - began == pytest.approx(quality_gate.JUDGE_DEADLINE)
        assert reply.json()["model"] == "big" and len(asked(app, "b")) == 0
