"""POST /v1/responses and the Responses API bridge, through the gateway under MockClock."""

from __future__ import annotations

import json
import logging

import pytest

from switchyard.config.schema import SimulatedFailure, Simulation
from switchyard.protocol.simulated.responses import ResponsesTurn, script_responses
from switchyard.protocol.wires.responses import BRIDGE
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

SIM = """
health_checks: {interval: 1h}
selection_strategy: RoundRobin
backends:
  - name: sim
    type: simulated
    models: [demo, pro, tooly]
    simulation: {latency: 1s, tokens_per_second: 2, chunks: 4}
    model_configs:
      - {id: pro, metadata: {responses_only: true}}
      - {id: tooly, metadata: {chat_completions_tools_require_none_reasoning: true}}
"""
TWO = """
health_checks: {interval: 1h}
selection_strategy: RoundRobin
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 1s, chunks: 4}}
  - {name: b, type: simulated, models: [demo], simulation: {latency: 1s, chunks: 4}}
"""
NOT_OPENAI = """
health_checks: {enabled: false}
backends:
  - {name: local, type: vllm, url: "http://vllm.example.invalid", models: [demo, pro], discovery: false,
     model_configs: [{id: pro, metadata: {responses_only: true}}]}
"""
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def sim_of(app, name="sim"):
    return app.runtime.upstream.simulated[f"{name}.simulated"]


def sse(reply):
    """(event name, data object) of every event of a Responses stream."""
    out = []
    for block in reply.body.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines.get("event"), json.loads(lines["data"])))
    return out


def sent(app, name="sim"):
    return [(r.url.path, json.loads(r.content)) for r in sim_of(app, name).requests]


# --- POST /v1/responses ----------------------------------------------------------------

async def test_a_buffered_response_is_relayed_unchanged(autojump_clock):
    async with gateway(SIM) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi"})
        assert reply.status == 200
        body = reply.json()
        assert body["object"] == "response" and body["status"] == "completed"
        assert body["output"][0]["content"][0]["text"] == "Hello from sim. The quick brown"
        assert sent(app) == [("/v1/responses", {"model": "demo", "input": "hi"})]


async def test_a_stream_is_relayed_event_for_event_without_a_done_marker(autojump_clock):
    async with gateway(SIM) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "stream": True})
        assert reply.status == 200 and reply.headers[b"content-type"] == b"text/event-stream"
        events = sse(reply)
        assert [name for name, _ in events] == [
            "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
            *["response.output_text.delta"] * 4, "response.output_text.done", "response.content_part.done",
            "response.output_item.done", "response.completed"]
        assert all(name == data["type"] for name, data in events)
        assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
        assert b"[DONE]" not in reply.body


@pytest.mark.parametrize("body, param", [
    ({"input": "hi"}, "model"),
    ({"model": "demo", "input": 3}, "input"),
    ({"model": "demo", "input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
    ({"model": "demo", "input": ["hi"]}, "input[0]"),
    ({"model": "demo", "input": "hi", "stream": "yes"}, "stream"),
    ({"model": "demo", "input": "hi", "metadata": {"n": 1}}, "metadata.n"),
])
async def test_invalid_bodies_are_refused_naming_the_field(autojump_clock, body, param):
    async with gateway(SIM) as app:
        reply = await request(app, "POST", "/v1/responses", body)
        assert reply.status == 400 and reply.json()["error"]["param"] == param
        assert sim_of(app).requests == []


async def test_an_error_status_fails_over_to_another_backend_before_the_first_byte(autojump_clock):
    async with gateway(TWO) as app:
        sim_of(app, "a").script.extend([Simulation(latency=1, chunks=4, failure=SimulatedFailure(status=503))] * 5)
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "stream": True},
                              headers=[(b"x-backend", b"a")])   # the first attempt goes to a
        assert reply.status == 200 and sse(reply)[-1][0] == "response.completed"
        assert sim_of(app, "a").count("status:503") >= 1 and len(sim_of(app, "b").requests) == 1


async def test_a_response_that_fails_before_any_output_fails_over(autojump_clock):
    async with gateway(TWO) as app:
        script_responses(sim_of(app, "a"), *[ResponsesTurn(failed="server_error")] * 5)
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "stream": True},
                              headers=[(b"x-backend", b"a")])
        events = sse(reply)
        # the failed response's created event was held back: the client sees only b's response
        assert [data["response"]["id"] for name, data in events if name == "response.created"] == ["resp_b_1"]
        assert events[-1][0] == "response.completed"
        assert sim_of(app, "a").count("failed") >= 1 and sim_of(app, "b").count("completed") == 1


async def test_a_failure_after_the_first_byte_ends_with_an_error_event(autojump_clock):
    async with gateway(SIM) as app:
        sim_of(app).script.append(Simulation(latency=1, chunks=4, failure=SimulatedFailure(truncate_after_chunk=2)))
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "stream": True})
        events = sse(reply)
        name, error = events[-1]
        assert name == "error" and error["type"] == "error" and error["code"] == "upstream_stream_truncated"
        assert error["sequence_number"] == events[-2][1]["sequence_number"] + 1
        assert "response.completed" not in [n for n, _ in events]


async def test_backends_of_other_types_are_no_candidates_for_a_compaction(autojump_clock):
    config = SIM.replace("health_checks: {interval: 1h}", "health_checks: {enabled: false}") + \
        '  - {name: local, type: vllm, url: "http://vllm.example.invalid", models: [demo], discovery: false}\n'
    async with gateway(config) as app:
        for _ in range(3):   # round robin would reach `local` every other call
            reply = await request(app, "POST", "/v1/responses/compact", {"model": "demo", "input": "hi"})
            assert reply.status == 200
        assert len(sim_of(app).requests) == 3


async def test_a_compaction_of_a_model_only_other_types_serve_is_refused_before_any_io(autojump_clock):
    async with gateway(NOT_OPENAI) as app:
        reply = await request(app, "POST", "/v1/responses/compact", {"model": "demo", "input": "hi"})
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "unsupported_backend_type"
        assert "'demo'" in error["message"] and "vllm" in error["message"]


async def test_a_compactions_pin_to_a_backend_of_another_type_is_refused(autojump_clock):
    config = SIM.replace("health_checks: {interval: 1h}", "health_checks: {enabled: false}") + \
        '  - {name: local, type: vllm, url: "http://vllm.example.invalid", models: [demo], discovery: false}\n'
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/responses/compact", {"model": "demo", "input": "hi"},
                              headers=[(b"x-backend", b"local")])
        assert reply.status == 400 and reply.json()["error"]["param"] == "x-backend"
        assert "vllm" in reply.json()["error"]["message"]


# --- the bridge: /v1/chat/completions to a Responses-only model -------------------------------

async def test_a_responses_only_model_is_dispatched_to_v1_responses_and_answers_in_chat_shape(autojump_clock):
    async with gateway(SIM) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("pro", messages=[{"role": "system", "content": "Be brief."},
                                                    {"role": "user", "content": "hi"}],
                                   max_tokens=50, reasoning_effort="low"))
        assert reply.status == 200
        body = reply.json()
        assert body["object"] == "chat.completion" and body["model"] == "pro"
        assert body["choices"][0]["message"]["content"] == "Hello from sim. The quick brown"
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["usage"]["completion_tokens"] == 4
        assert sent(app) == [("/v1/responses", {
            "model": "pro", "instructions": "Be brief.",
            "input": [{"type": "message", "role": "user", "content": "hi"}], "store": False,
            "stream": False, "max_output_tokens": 50, "reasoning": {"effort": "low"}})]


async def test_a_bridged_stream_is_a_strict_chat_chunk_stream(autojump_clock):
    async with gateway(SIM) as app:
        script_responses(sim_of(app), ResponsesTurn(reasoning="Think first"))
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("pro", stream=True, stream_options={"include_usage": True}))
        chunks = [json.loads(e) for e in reply.events()[:-1]]
        assert reply.events()[-1] == b"[DONE]"
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c["choices"])
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert reasoning == "Think first" and content == "Hello from sim. The quick brown"
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens_details"] == {
            "reasoning_tokens": 2}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_bridged_refusal_finishes_with_content_filter(autojump_clock, stream):
    async with gateway(SIM) as app:
        script_responses(sim_of(app), ResponsesTurn(refusal=True))
        reply = await request(app, "POST", "/v1/chat/completions", chat("pro", stream=stream))
        if stream:
            chunks = [json.loads(e) for e in reply.events()[:-1]]
            assert "".join(c["choices"][0]["delta"].get("refusal", "") for c in chunks) == \
                "Hello from sim. The quick brown"
            assert chunks[-1]["choices"][0]["finish_reason"] == "content_filter"
        else:
            choice = reply.json()["choices"][0]
            assert choice["message"]["refusal"] == "Hello from sim. The quick brown"
            assert choice["finish_reason"] == "content_filter"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_bridged_incomplete_response_finishes_with_length(autojump_clock, stream):
    async with gateway(SIM) as app:
        script_responses(sim_of(app), ResponsesTurn(incomplete="max_output_tokens"))
        reply = await request(app, "POST", "/v1/chat/completions", chat("pro", stream=stream))
        last = json.loads(reply.events()[-2]) if stream else reply.json()
        assert last["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("stream", [False, True])
async def test_bridged_function_calls_become_tool_calls(autojump_clock, stream):
    async with gateway(SIM) as app:
        sim_of(app).script.append(Simulation(latency=1, chunks=4, failure=SimulatedFailure(tool_call=True)))
        reply = await request(app, "POST", "/v1/chat/completions", chat("pro", stream=stream, tools=TOOLS))
        if stream:
            chunks = [json.loads(e) for e in reply.events()[:-1]]
            deltas = [c["choices"][0]["delta"] for c in chunks]
            calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
            assert calls[0]["id"] == "call_sim" and calls[0]["function"]["name"] == "get_weather"
            assert "".join(c["function"]["arguments"] for c in calls) == '{"city": "Paris"}'
            assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
        else:
            choice = reply.json()["choices"][0]
            assert choice["message"]["tool_calls"] == [{"id": "call_sim", "type": "function", "function": {
                "name": "get_weather", "arguments": '{"city": "Paris"}'}}]
            assert choice["finish_reason"] == "tool_calls"
        assert sent(app)[0][1]["tools"] == [{"type": "function", "name": "get_weather",
                                             "parameters": {"type": "object"}, "strict": False}]


async def test_a_bridged_failed_response_is_an_error_for_the_chat_client(autojump_clock):
    async with gateway(SIM) as app:
        script_responses(sim_of(app), *[ResponsesTurn(failed="server_error")] * 5)
        reply = await request(app, "POST", "/v1/chat/completions", chat("pro"))
        assert reply.status == 502
        assert reply.json()["error"] == {"message": "simulated failure (server_error)", "type": "server_error",
                                         "param": None, "code": "server_error"}


async def test_values_the_bridge_cannot_carry_are_refused_before_dispatch(autojump_clock):
    async with gateway(SIM) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("pro", stop=["END"]))
        assert reply.status == 400 and reply.json()["error"]["param"] == "stop"
        assert reply.json()["error"]["code"] == "unsupported_request_parameter"
        reply = await request(app, "POST", "/v1/chat/completions", chat("pro", reasoning_effort="extreme"))
        assert reply.status == 400 and reply.json()["error"]["param"] == "reasoning_effort"
        assert sim_of(app).requests == []


async def test_a_responses_only_model_on_another_backend_type_is_refused_before_dispatch(autojump_clock):
    async with gateway(NOT_OPENAI) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("pro"))
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "responses_api_unsupported_backend"
        assert "'pro'" in error["message"] and "vllm" in error["message"] and "'local'" in error["message"]


async def test_the_narrower_flag_bridges_only_function_tools_with_a_reasoning_effort(autojump_clock):
    async with gateway(SIM) as app:
        for extra in ({"tools": TOOLS, "reasoning_effort": "medium"}, {"tools": TOOLS, "reasoning_effort": "none"},
                      {"tools": TOOLS}, {"reasoning_effort": "high"}):
            reply = await request(app, "POST", "/v1/chat/completions", chat("tooly", **extra))
            assert reply.status == 200 and reply.json()["object"] == "chat.completion"
        assert [path for path, _ in sent(app)] == ["/v1/responses", *["/v1/chat/completions"] * 3]


async def test_bridged_calls_are_counted_by_reason_and_the_first_dispatch_is_logged(autojump_clock, caplog):
    before = dict(BRIDGE.counts)
    config = SIM.replace("name: sim", "name: sim-metric")
    async with gateway(config) as app:
        with caplog.at_level(logging.INFO, logger="switchyard.route"):
            for _ in range(2):
                await request(app, "POST", "/v1/chat/completions", chat("pro"))
            await request(app, "POST", "/v1/chat/completions", chat("tooly", tools=TOOLS, reasoning_effort="low"))
        lines = [r.getMessage() for r in caplog.records if "Responses API" in r.getMessage()]
        assert len(lines) == 2 and "'sim-metric'" in lines[0] and "responses_only_model" in lines[0]
        assert "tools_with_reasoning" in lines[1]
        scrape = (await request(app, "GET", "/metrics")).body.decode()
    count = {r: BRIDGE.counts.get(r, 0) - before.get(r, 0) for r in ("responses_only_model", "tools_with_reasoning")}
    assert count == {"responses_only_model": 2, "tools_with_reasoning": 1}
    assert 'responses_bridge_total{reason="responses_only_model"}' in scrape


async def test_the_hosted_tools_policy_refuses_before_any_io(autojump_clock):
    async with gateway(SIM) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "tools": [
            {"type": "mcp", "server_label": "x", "server_url": "https://mcp.example.invalid"}]})
        assert reply.status == 400 and reply.json()["error"]["code"] == "unsupported_request_parameter"
        assert sim_of(app).requests == []


async def test_an_anthropic_messages_client_reaches_a_responses_only_model_through_the_bridge(autojump_clock):
    async with gateway(SIM) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", {
            "model": "pro", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status == 200
        body = reply.json()
        assert body["type"] == "message" and body["content"][0]["text"] == "Hello from sim. The quick brown"
        assert [path for path, _ in sent(app)] == ["/v1/responses"]


async def test_a_responses_stream_never_gets_a_chat_usage_option_added(autojump_clock):
    cfg = SIM + "routing: {usage_weight: {enabled: true}}\n"
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "stream": True})
        assert reply.status == 200
        [(path, body)] = sent(app)
        assert path.endswith("/v1/responses") and "stream_options" not in body


async def test_request_params_apply_to_v1_responses_under_the_responses_names(autojump_clock):
    cfg = SIM + "request_params: {defaults: {max_tokens: 100, temperature: 0.5}, limits: {max_tokens: {max: 200}}}\n"
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi"})
        assert reply.status == 200
        body = sent(app)[0][1]
        assert (body["max_output_tokens"], body["temperature"]) == (100, 0.5) and "max_tokens" not in body
        await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "max_output_tokens": 900})
        assert sent(app)[1][1]["max_output_tokens"] == 200   # the client's own value, limited


async def test_a_policy_field_v1_responses_does_not_take_is_refused(autojump_clock):
    async with gateway(SIM + "request_params: {defaults: {top_k: 5}}\n") as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi"})
        assert reply.status == 400 and reply.json()["error"]["param"] == "top_k"
        assert sent(app) == []
