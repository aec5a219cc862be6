"""Chat clients served by a native anthropic backend (the in-process Messages simulator), under MockClock."""

import json

import attrs
import pytest
import trio

from switchyard.protocol.doors.openai import parse_json_object
from switchyard.protocol.http.asgi import AsgiSink, read_body
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
health_checks: {interval: 1h}
retry: {max_attempts: 1}
backends:
  - name: claude
    type: anthropic
    url: http://claude.simulated
    api_key: sk-ant-test
    models: [claude-x]
    simulation: {latency: 1s, tokens_per_second: 2, chunks: 3}
"""

TWO = CONFIG + """
  - name: spare
    type: simulated
    models: [claude-x]
    simulation: {latency: 0s, chunks: 2}
"""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}}}}}]


def sim(app, host="claude.simulated"):
    return app.runtime.upstream.simulated[host]


def sent(app) -> dict:
    return json.loads(sim(app).requests[-1].content)


def chunks(reply) -> list[dict]:
    return [json.loads(e) for e in reply.events() if e != b"[DONE]"]


async def test_a_buffered_chat_call_is_answered_as_a_chat_completion(autojump_clock):
    async with gateway(CONFIG) as app:
        start = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x"))
        assert reply.status == 200 and reply.ended_at - start == 2.0   # 1 s latency, then 2 gaps of 0.5 s
        body = reply.json()
        assert body["object"] == "chat.completion" and body["model"] == "claude-x"
        assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello from claude. The quick"}
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["usage"]["completion_tokens"] == 3
        assert sent(app) == {"model": "claude-x", "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}
        assert sim(app).requests[-1].url.path == "/v1/messages"


async def test_a_streaming_chat_call_gets_chat_chunks_at_the_backends_instants(autojump_clock):
    async with gateway(CONFIG) as app:
        start = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("claude-x", stream=True, stream_options={"include_usage": True}))
        assert reply.status == 200 and reply.headers[b"content-type"] == b"text/event-stream"
        assert [t - start for t, c in reply.chunks if b'"content"' in c] == [1.0, 1.5, 2.0]
        out = chunks(reply)
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in out if c["choices"]) == \
            "Hello from claude. The quick"
        assert out[0]["choices"][0]["delta"]["role"] == "assistant"
        assert out[-2]["choices"][0]["finish_reason"] == "stop"
        assert out[-1]["usage"]["completion_tokens"] == 3 and out[-1]["choices"] == []
        assert reply.events()[-1] == b"[DONE]"
        assert sent(app)["stream"] is True and "stream_options" not in sent(app)


async def test_a_stream_carries_no_usage_chunk_unless_asked(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", stream=True))
        assert reply.status == 200 and not any("usage" in c for c in chunks(reply))


async def test_tools_round_trip_through_tool_use_and_tool_result(autojump_clock):
    async with gateway(CONFIG) as app:
        sim(app).script.append(attrs.evolve(sim(app).simulation, failure=attrs.evolve(
            sim(app).simulation.failure, tool_call=True)))
        first = await request(app, "POST", "/v1/chat/completions",
                              chat("claude-x", tools=TOOLS, tool_choice="required"))
        assert first.status == 200
        choice = first.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
        [call] = choice["message"]["tool_calls"]
        assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
        assert sent(app)["tools"] == [{"name": "get_weather", "description": "Weather in a city.",
                                       "input_schema": TOOLS[0]["function"]["parameters"]}]
        assert sent(app)["tool_choice"] == {"type": "any"}
        # The client answers the call; the simulator, like Anthropic, refuses a tool_result with no tool_use.
        history = [{"role": "user", "content": "weather in Paris?"}, choice["message"],
                   {"role": "tool", "tool_call_id": call["id"], "content": "18C and sunny"}]
        second = await request(app, "POST", "/v1/chat/completions",
                               {"model": "claude-x", "messages": history, "tools": TOOLS})
        assert second.status == 200, second.body
        assert sent(app)["messages"][1:] == [
            {"role": "assistant", "content": [{"type": "tool_use", "id": call["id"], "name": "get_weather",
                                               "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"],
                                          "content": "18C and sunny"}]}]


async def test_a_streamed_tool_call_arrives_as_tool_call_deltas(autojump_clock):
    async with gateway(CONFIG) as app:
        sim(app).script.append(attrs.evolve(sim(app).simulation, failure=attrs.evolve(
            sim(app).simulation.failure, tool_call=True)))
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", stream=True, tools=TOOLS))
        out = chunks(reply)
        calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in out if c["choices"][0]["delta"].get("tool_calls")]
        assert calls[0]["id"] == "toolu_sim" and calls[0]["function"]["name"] == "get_weather"
        assert "".join(c["function"]["arguments"] for c in calls) == '{"city": "Paris"}'
        assert {c["index"] for c in calls} == {0}
        assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_thinking_max_tokens_and_stop_sequences_map_to_chat(autojump_clock):
    async with gateway(CONFIG) as app:
        thought = await request(app, "POST", "/v1/chat/completions",
                                chat("claude-x", thinking={"type": "enabled", "budget_tokens": 1024}))
        assert thought.json()["choices"][0]["message"]["reasoning_content"] == "Let me think this through."
        cut = await request(app, "POST", "/v1/chat/completions", chat("claude-x", max_tokens=2))
        assert cut.json()["choices"][0]["finish_reason"] == "length"
        assert cut.json()["choices"][0]["message"]["content"] == "Hello from claude. The"
        stopped = await request(app, "POST", "/v1/chat/completions", chat("claude-x", stop=" quick"))
        assert stopped.json()["choices"][0]["message"]["content"] == "Hello from claude. The"
        assert stopped.json()["choices"][0]["finish_reason"] == "stop"


async def test_the_backend_is_sent_x_api_key_and_its_anthropic_version_never_a_bearer_token(autojump_clock):
    config = CONFIG.replace("models: [claude-x]", "models: [claude-x]\n    anthropic_version: 2025-01-01")
    async with gateway(config) as app:
        await request(app, "POST", "/v1/chat/completions", chat("claude-x"),
                      headers=[(b"authorization", b"Bearer client-secret")])
        headers = sim(app).requests[-1].headers
        assert headers["x-api-key"] == "sk-ant-test" and headers["anthropic-version"] == "2025-01-01"
        assert "authorization" not in headers and "anthropic-beta" not in headers


async def test_the_default_anthropic_version_is_2023_06_01(autojump_clock):
    async with gateway(CONFIG) as app:
        await request(app, "POST", "/v1/chat/completions", chat("claude-x"))
        assert sim(app).requests[-1].headers["anthropic-version"] == "2023-06-01"


async def test_a_messages_clients_anthropic_version_and_beta_reach_the_backend(autojump_clock):
    config = CONFIG.replace("models: [claude-x]", "models: [claude-x]\n    anthropic_version: 2026-10-21")
    ingress = {"anthropic-version": "2023-06-01", "anthropic-beta": "prompt-caching-2024-07-31"}
    async with gateway(config) as app:
        async def shaped(who, scope, receive, send):
            # What the Messages ingress does: its client's headers ride in Call.ingress.
            server = app.runtime.snapshot.server
            body = await read_body(scope, receive, server.max_body_bytes, server)
            await app.serve_chat(app.runtime, who, scope, receive, parse_json_object(body), body,
                                 lambda call: AsgiSink(send, call.stream),
                                 shape=lambda call: attrs.evolve(call, ingress=ingress))
        app.routes["/test/shaped"] = {"POST": shaped}
        reply = await request(app, "POST", "/test/shaped", chat("claude-x", temperature=0.3))
        assert reply.status == 200
        headers = sim(app).requests[-1].headers
        assert headers["anthropic-version"] == "2023-06-01"
        assert headers["anthropic-beta"] == "prompt-caching-2024-07-31"
        assert sent(app)["temperature"] == 0.3   # the client's version still takes sampling


async def test_sampling_fields_are_left_out_for_anthropic_version_2026_10_21(autojump_clock):
    config = CONFIG.replace("models: [claude-x]", "models: [claude-x]\n    anthropic_version: 2026-10-21")
    async with gateway(config) as app:
        # The simulator refuses them at this version, as Anthropic does: a 200 proves they were left out.
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("claude-x", temperature=0.7, top_p=0.9, top_k=5))
        assert reply.status == 200
        assert not {"temperature", "top_p", "top_k"} & set(sent(app))


async def test_a_field_messages_cannot_carry_is_refused_before_any_upstream_io(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", seed=7))
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["code"] == "unsupported_request_parameter" and error["param"] == "seed"
        assert sim(app).count("request") == 0


async def test_a_4xx_passes_through_with_the_backends_body_and_no_failover(autojump_clock):
    async with gateway(TWO) as app:
        sim(app).script.append(attrs.evolve(sim(app).simulation, failure=attrs.evolve(
            sim(app).simulation.failure, status=400)))
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x"), headers=[(b"x-backend",
                                                                                                b"claude")])
        assert reply.status == 400
        assert reply.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                           "message": "simulated failure from claude"}}
        assert sim(app, "spare.simulated").count("request") == 0


async def test_a_5xx_fails_over_to_another_backend(autojump_clock):
    async with gateway(TWO) as app:
        sim(app).script.append(attrs.evolve(sim(app).simulation, failure=attrs.evolve(
            sim(app).simulation.failure, status=529)))
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x"), headers=[(b"x-backend",
                                                                                                b"claude")])
        assert reply.status == 200
        assert reply.json()["choices"][0]["message"]["content"].startswith("Hello from spare.")
        assert sim(app).count("status:529") == 1 and sim(app, "spare.simulated").count("request") == 1


async def test_an_error_event_mid_stream_ends_the_stream_with_an_in_band_error(autojump_clock):
    async with gateway(CONFIG) as app:
        sim(app).script.append(attrs.evolve(sim(app).simulation, failure=attrs.evolve(
            sim(app).simulation.failure, error_event_after_chunk=2)))
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", stream=True))
        assert reply.status == 200
        assert reply.events()[-1] != b"[DONE]"
        assert json.loads(reply.events()[-1])["error"]["code"] == "upstream_stream_error"
        assert "Overloaded" in json.loads(reply.events()[-1])["error"]["message"]


async def test_a_client_leaving_mid_stream_closes_the_anthropic_stream(autojump_clock):
    async with gateway(CONFIG) as app:
        start = trio.current_time()
        await request(app, "POST", "/v1/chat/completions", chat("claude-x", stream=True),
                      disconnect_at=start + 1.2)
        assert [t - start for t, kind in sim(app).events if kind == "cancelled"] == [1.2]
        assert sim(app).in_flight == 0


async def test_health_checks_send_x_api_key_and_anthropic_version(autojump_clock):
    async with gateway(CONFIG) as app:
        assert sim(app).gets, "the health check and discovery ran at start"
        for get in sim(app).gets:
            assert get.url.path == "/v1/models"
            assert get.headers["x-api-key"] == "sk-ant-test" and get.headers["anthropic-version"] == "2023-06-01"
            assert "authorization" not in get.headers
        assert sim(app).count("unauthorized") == 0
        assert app.runtime.health.view.backends["claude"].state.value == "healthy"


async def test_discovery_reads_anthropics_model_list(autojump_clock):
    config = CONFIG.replace("models: [claude-x]", "models: [claude-x, claude-y]")
    async with gateway(config) as app:
        assert app.runtime.discovery.view["claude"] == frozenset({"claude-x", "claude-y"})


async def test_a_messages_client_reaches_the_anthropic_backend_with_its_own_version(autojump_clock):
    config = CONFIG.replace("models: [claude-x]", "models: [claude-x]\n    anthropic_version: 2026-10-21")
    thinking = {"type": "enabled", "budget_tokens": 1024}
    body = {"model": "claude-x", "max_tokens": 50, "temperature": 0.2, "thinking": thinking,
            "messages": [{"role": "user", "content": "hi"}]}
    async with gateway(config) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", body,
                              headers=[(b"anthropic-version", b"2023-06-01"), (b"anthropic-beta", b"beta-1")])
        assert reply.status == 200, reply.body
        answer = reply.json()
        assert answer["type"] == "message" and answer["stop_reason"] == "end_turn"
        assert [b["type"] for b in answer["content"]] == ["thinking", "text"]
        assert answer["content"][1]["text"] == "Hello from claude. The quick"
        headers = sim(app).requests[-1].headers
        assert headers["anthropic-version"] == "2023-06-01" and headers["anthropic-beta"] == "beta-1"
        assert sent(app)["temperature"] == 0.2 and sent(app)["thinking"] == thinking
        assert sent(app)["max_tokens"] == 50 and "output_config" not in sent(app)


async def test_a_streaming_messages_client_through_the_anthropic_backend_gets_messages_events(autojump_clock):
    body = {"model": "claude-x", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", body,
                              headers=[(b"anthropic-version", b"2023-06-01")])
        assert reply.status == 200
        events = [json.loads(line[6:]) for line in reply.body.split(b"\n") if line.startswith(b"data: ")]
        assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
        text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
        assert text == "Hello from claude. The quick"
        assert [e for e in events if e["type"] == "message_delta"][0]["usage"]["output_tokens"] == 3


async def test_a_field_an_anthropic_backend_cannot_take_passes_it_over_not_the_call(autojump_clock):
    async with gateway(TWO.replace("health_checks: {interval: 1h}",
                                   "health_checks: {interval: 1h}\nselection_strategy: RoundRobin")) as app:
        statuses = [(await request(app, "POST", "/v1/chat/completions", chat("claude-x", seed=1))).status
                    for _ in range(4)]
        assert statuses == [200, 200, 200, 200]
        assert sim(app).count("request") == 0


async def test_the_translation_refusal_is_the_answer_only_when_no_other_backend_is_left(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", seed=1))
        assert reply.status == 400 and reply.json()["error"]["param"] == "seed"


async def test_a_malformed_json_schema_is_a_400_naming_it(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("claude-x", response_format={"type": "json_schema", "json_schema": "x"}))
        assert reply.status == 400 and reply.json()["error"]["param"] == "response_format.json_schema"


async def test_a_pin_to_an_anthropic_backend_on_v1_embeddings_is_refused_by_type(autojump_clock):
    async with gateway(TWO) as app:
        reply = await request(app, "POST", "/v1/embeddings", {"model": "claude-x", "input": "hi"},
                              headers=[(b"x-backend", b"claude")])
        assert reply.status == 400 and reply.json()["error"]["code"] == "unsupported_backend_type"
        assert sim(app).count("request") == 0


async def test_the_native_backends_request_id_reaches_the_messages_client(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages",
                              {"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
                              headers=[(b"anthropic-version", b"2023-06-01")])
        assert reply.status == 200 and reply.headers[b"request-id"].startswith(b"req_sim_")
        assert reply.headers[b"x-continuum-request-id"].startswith(b"req_")


async def test_a_top_level_field_the_translation_also_writes_is_refused_not_overwritten(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("claude-x", messages=[{"role": "system", "content": "Be brief."},
                                                         {"role": "user", "content": "hi"}], system="other"))
        assert reply.status == 400 and reply.json()["error"]["param"] == "system"
        assert sim(app).count("request") == 0


async def test_a_limited_client_sampling_value_is_left_out_on_a_2026_10_21_backend(autojump_clock):
    cfg = CONFIG.replace("    api_key: sk-ant-test\n",
                         "    api_key: sk-ant-test\n    anthropic_version: '2026-10-21'\n")
    cfg += "request_params: {limits: {temperature: {max: 0.5}}}\n"
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", temperature=0.9))
        assert reply.status == 200 and "temperature" not in sent(app)
    async with gateway(cfg.replace("limits: {temperature: {max: 0.5}}", "defaults: {temperature: 0.3}")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x"))
        assert reply.status == 400 and reply.json()["error"]["param"] == "temperature"


async def test_a_tool_choice_whose_function_is_not_an_object_is_a_400(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("claude-x", tools=TOOLS, tool_choice={"type": "function", "function": 5}))
        assert reply.status == 400 and reply.json()["error"]["param"] == "tool_choice"
