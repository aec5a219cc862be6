"""The Messages ingress against simulated OpenAI-compatible backends, under MockClock: answers, the exact
event sequence, tools, images, every error in Anthropic's shape, count_tokens and the model list."""

import json

import attrs
import pytest
import trio

from switchyard.actors.errors import UpstreamTimeout
from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.actors.wire import Wire
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendType, SimulatedFailure, Simulation
from switchyard.protocol.doors.anthropic_format import to_chat
from switchyard.protocol.doors.anthropic_sink import AnthropicSink
from tests.actors.test_midstream import config as midstream_config
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
health_checks: {interval: 1h}
backends:
  - name: a
    type: simulated
    models: [demo]
    simulation: {latency: 100ms, chunks: 3, text: "Hello there friend"}
"""

MESSAGES = "/anthropic/v1/messages"
WEATHER = {"name": "get_weather", "description": "Weather now",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def body(**extra):
    return {"model": "demo", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], **extra}


def events(reply):
    """(event name, data) per SSE event; each data's type must equal its event line."""
    out = []
    for block in reply.body.decode().split("\n\n"):
        if block:
            name, data = block.split("\n")
            payload = json.loads(data.removeprefix("data: "))
            assert payload["type"] == name.removeprefix("event: ")
            out.append(payload)
    return out


def sim(app, name="a"):
    return app.runtime.upstream.simulated[f"{name}.simulated"]


def sent(app, name="a", at=-1):
    return json.loads(sim(app, name).requests[at].content)


async def test_buffered_answer_is_a_message_with_request_id(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, body())
        assert reply.status == 200
        request_id = reply.headers[b"x-continuum-request-id"].decode()
        assert reply.headers[b"request-id"].decode() == request_id
        assert reply.headers[b"content-type"] == b"application/json"
        message = reply.json()
        usage = message.pop("usage")
        assert message == {"id": "msg_" + request_id.removeprefix("req_"), "type": "message",
                           "role": "assistant", "model": "demo",
                           "content": [{"type": "text", "text": "Hello there friend"}],
                           "stop_reason": "end_turn", "stop_sequence": None}
        assert usage["output_tokens"] == 3 and usage["input_tokens"] > 0


async def test_the_backend_gets_the_translated_chat_request(autojump_clock):
    async with gateway(CONFIG) as app:
        await request(app, "POST", MESSAGES, body(system="Be brief.", stop_sequences=["END"], top_k=5,
                                                  metadata={"user_id": "u-1"}))
        assert sent(app) == {"model": "demo", "max_tokens": 100,
                             "messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "hi"}],
                             "stop": ["END"], "top_k": 5, "user": "u-1"}


async def test_streaming_event_sequence_is_exact(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, body(stream=True))
        assert reply.status == 200
        assert reply.headers[b"content-type"] == b"text/event-stream; charset=utf-8"
        assert reply.headers[b"request-id"] == reply.headers[b"x-continuum-request-id"]
        got = events(reply)
        assert [e["type"] for e in got] == ["message_start", "ping", "content_block_start", "content_block_delta",
                                            "content_block_delta", "content_block_delta", "content_block_stop",
                                            "message_delta", "message_stop"]
        assert "".join(e["delta"]["text"] for e in got if e["type"] == "content_block_delta") == "Hello there friend"
        usage = got[-2]["usage"]
        assert usage["output_tokens"] == 3 and usage["input_tokens"] > 0
        assert got[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
        assert sent(app)["stream_options"] == {"include_usage": True}


async def test_tool_call_round_trip(autojump_clock):
    async with gateway(CONFIG) as app:
        sim(app).script.append(Simulation(latency=0.1, chunks=3, failure=SimulatedFailure(tool_call=True)))
        first = await request(app, "POST", MESSAGES, body(tools=[WEATHER], tool_choice={"type": "any"}))
        assert sent(app)["tools"] == [{"type": "function", "function": {
            "name": "get_weather", "parameters": WEATHER["input_schema"], "description": "Weather now"}}]
        assert sent(app)["tool_choice"] == "required"
        message = first.json()
        assert message["stop_reason"] == "tool_use"
        [use] = message["content"]
        assert use == {"type": "tool_use", "id": "call_sim", "name": "get_weather", "input": {"city": "Paris"}}
        follow_up = body(tools=[WEATHER], messages=[
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": message["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "18C"}]}])
        second = await request(app, "POST", MESSAGES, follow_up)
        assert second.status == 200
        assert sent(app)["messages"][1:] == [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_sim", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_sim", "content": "18C"}]


async def test_streamed_tool_call_is_a_tool_use_block_with_json_deltas(autojump_clock):
    async with gateway(CONFIG) as app:
        sim(app).script.append(Simulation(latency=0.1, chunks=3, failure=SimulatedFailure(tool_call=True)))
        got = events(await request(app, "POST", MESSAGES, body(stream=True, tools=[WEATHER])))
        [start] = [e for e in got if e["type"] == "content_block_start"]
        assert start["content_block"] == {"type": "tool_use", "id": "call_sim", "name": "get_weather", "input": {}}
        parts = [e["delta"] for e in got if e["type"] == "content_block_delta"]
        assert {p["type"] for p in parts} == {"input_json_delta"}
        assert json.loads("".join(p["partial_json"] for p in parts)) == {"city": "Paris"}
        assert got[-2]["delta"]["stop_reason"] == "tool_use"


async def test_images_reach_the_backend_as_image_url_parts(autojump_clock):
    async with gateway(CONFIG) as app:
        content = [{"type": "text", "text": "what is it?"},
                   {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0="}},
                   {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}]
        reply = await request(app, "POST", MESSAGES, body(messages=[{"role": "user", "content": content}]))
        assert reply.status == 200
        assert sent(app)["messages"][0]["content"][1:] == [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0="}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]


async def test_reasoning_becomes_a_thinking_block(autojump_clock):
    thinking = "{pattern: unterminated_start, end_marker: '</think>', assume_reasoning_first: true}"
    cfg = CONFIG.replace('text: "Hello there friend"', 'text: "Six times seven.</think> 42."') + \
        f"    model_configs:\n      - {{id: demo, metadata: {{thinking: {thinking}}}}}\n"
    async with gateway(cfg) as app:
        got = events(await request(app, "POST", MESSAGES, body(stream=True)))
        starts = [e["content_block"]["type"] for e in got if e["type"] == "content_block_start"]
        assert starts == ["thinking", "text"]
        deltas = [e["delta"] for e in got if e["type"] == "content_block_delta"]
        assert "".join(d.get("thinking", "") for d in deltas) == "Six times seven."
        assert "".join(d.get("text", "") for d in deltas).strip() == "42."


async def test_invalid_body_is_a_400_in_anthropic_shape_naming_the_path(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, body(messages=[{"role": "robot", "content": "x"}]))
        assert reply.status == 400
        assert reply.json() == {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "messages.0.role: must be 'user', 'assistant' or 'system', got 'robot'"},
            "request_id": reply.headers[b"x-continuum-request-id"].decode()}
        assert reply.headers[b"request-id"] == reply.headers[b"x-continuum-request-id"]
        assert sim(app).count("request") == 0


async def test_malformed_json_is_a_400_in_anthropic_shape(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, b"{not json")
        assert reply.status == 400 and reply.json()["error"]["type"] == "invalid_request_error"


async def test_unknown_model_is_404_not_found_error(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, body(model="nope"))
        assert reply.status == 404 and reply.json()["error"]["type"] == "not_found_error"
        assert reply.headers[b"request-id"] == reply.headers[b"x-continuum-request-id"]


@pytest.mark.parametrize("status, kind", [(429, "rate_limit_error"), (400, "invalid_request_error"),
                                          (500, "api_error"), (503, "overloaded_error")])
async def test_backend_error_statuses_keep_their_status_in_anthropic_shape(autojump_clock, status, kind):
    cfg = CONFIG.replace("chunks: 3,", f"chunks: 3, failure: {{status: {status}, retry_after: 7}},")
    cfg = cfg.replace("health_checks: {interval: 1h}", "health_checks: {interval: 1h}\nretry: {max_attempts: 1}")
    async with gateway(cfg) as app:
        reply = await request(app, "POST", MESSAGES, body())
        assert reply.status == status
        assert reply.json()["error"] == {"type": kind, "message": "simulated failure from a"}
        assert reply.headers[b"retry-after"] == b"7"


async def test_mid_stream_failure_ends_with_an_error_event_and_no_message_stop(autojump_clock):
    cfg = CONFIG.replace("chunks: 3,", "chunks: 3, failure: {reset_after_chunk: 2},")
    async with gateway(cfg) as app:
        got = events(await request(app, "POST", MESSAGES, body(stream=True)))
        assert [e["type"] for e in got][-2:] == ["content_block_delta", "error"]
        assert got[-1]["error"]["type"] == "api_error"
        assert "message_stop" not in [e["type"] for e in got]


async def test_a_broken_stream_continued_elsewhere_reads_as_one_message(autojump_clock):
    async with gateway(midstream_config()) as app:
        got = events(await request(app, "POST", MESSAGES, body(model="big", stream=True)))
        assert "".join(e["delta"]["text"] for e in got if e["type"] == "content_block_delta") == \
            "one two three four five six seven eight"
        assert [e["type"] for e in got][-2:] == ["message_delta", "message_stop"]


async def test_a_continuation_that_would_discard_output_ends_the_stream_with_an_error(autojump_clock):
    other = "alpha beta gamma delta epsilon zeta eta theta"
    async with gateway(midstream_config(min_tokens=50, b_text=other)) as app:
        reply = await request(app, "POST", MESSAGES, body(model="big", stream=True))
        got = events(reply)
        assert got[-1]["type"] == "error" and "diverged" in got[-1]["error"]["message"]
        assert b"alpha" not in reply.body and b"route_change" not in reply.body


PREFS_ON = CONFIG + "proxy: {client_provider_preferences: true}\n"


async def test_provider_is_refused_while_client_provider_preferences_is_on(autojump_clock):
    async with gateway(PREFS_ON) as app:
        reply = await request(app, "POST", MESSAGES, body(provider={"order": ["a"]}))
        assert reply.status == 400
        assert reply.json()["error"]["message"].startswith("provider: the Messages ingress applies no client routing")
        assert sim(app).count("request") == 0


async def test_provider_is_an_unknown_field_while_client_provider_preferences_is_off(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES, body(provider={"order": ["a"]}))
        assert reply.status == 400
        assert reply.json()["error"]["message"] == "provider: Extra inputs are not permitted"


async def test_anthropic_headers_reach_the_call_for_native_backends(autojump_clock):
    seen = []
    plain = Wire("/v1/chat/completions")

    def headers(backend, call):
        seen.append(dict(call.ingress))
        return plain.headers(backend, call)

    async with gateway(CONFIG) as app:
        wires = app.runtime.wires
        app.runtime.wires = attrs.evolve(wires, translated={
            **wires.translated, (Endpoint.CHAT, BackendType.SIMULATED): Wire("/v1/chat/completions", headers=headers)})
        await request(app, "POST", MESSAGES, body(thinking={"type": "enabled", "budget_tokens": 2048}), headers=[
            (b"anthropic-version", b"2023-06-01"), (b"anthropic-beta", b"a-1"), (b"anthropic-beta", b"b-2")])
        assert len(seen) == 1
        ingress = seen[0]
        assert {k: ingress[k] for k in ("api", "anthropic-version", "anthropic-beta", "thinking", "derived")} == \
            {"api": "anthropic", "anthropic-version": "2023-06-01", "anthropic-beta": "a-1,b-2",
             "thinking": {"type": "enabled", "budget_tokens": 2048}, "derived": ("reasoning_effort",)}
        assert ingress["messages_body"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert ingress["chat_payload"]["reasoning_effort"] == "low" and "uncarried" not in ingress
        assert sent(app)["reasoning_effort"] == "low"


async def test_count_tokens_is_the_shared_estimate_of_the_translated_request(autojump_clock):
    payload = {"model": "demo", "system": "Be brief.", "tools": [WEATHER],
               "messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", MESSAGES + "/count_tokens", payload)
        assert reply.status == 200 and reply.headers[b"request-id"]
        assert reply.json() == {"input_tokens": estimate_tokens(to_chat(payload, count_only=True).payload)}
        assert sim(app).count("request") == 0


KEYS = CONFIG.replace("backends:", """api_keys:
  - {id: narrow, key: sk-narrow-0123456789abcdef, allowed_models: ["other*"]}
  - {id: wide, key: sk-wide-0123456789abcdef}
backends:""").replace("models: [demo]", "models: [demo, other-1]")
NARROW = [(b"x-api-key", b"sk-narrow-0123456789abcdef")]


async def test_api_key_is_taken_from_x_api_key_and_a_missing_one_is_401(autojump_clock):
    async with gateway(KEYS) as app:
        missing = await request(app, "POST", MESSAGES + "/count_tokens", {"model": "other-1", "messages": []})
        assert missing.status == 401
        ok = await request(app, "POST", MESSAGES, body(model="other-1"), headers=NARROW)
        assert ok.status == 200 and ok.json()["type"] == "message"


async def test_a_key_may_not_use_a_model_outside_its_allowlist(autojump_clock):
    async with gateway(KEYS) as app:
        reply = await request(app, "POST", MESSAGES, body(), headers=NARROW)
        assert reply.status == 403 and reply.json()["error"]["type"] == "permission_error"
        counted = await request(app, "POST", MESSAGES + "/count_tokens",
                                {"model": "demo", "messages": [{"role": "user", "content": "x"}]}, headers=NARROW)
        assert counted.status == 403 and counted.json()["error"]["type"] == "permission_error"


async def test_model_list_honours_the_keys_allowlist(autojump_clock):
    async with gateway(KEYS) as app:
        narrow = await request(app, "GET", "/anthropic/v1/models", headers=NARROW)
        assert narrow.json() == {"data": [{"type": "model", "id": "other-1", "display_name": "other-1",
                                           "created_at": "1970-01-01T00:00:00Z", "lifecycle": "active"}],
                                 "has_more": False, "first_id": "other-1", "last_id": "other-1"}
        wide = await request(app, "GET", "/anthropic/v1/models", headers=[(b"x-api-key", b"sk-wide-0123456789abcdef")])
        assert [m["id"] for m in wide.json()["data"]] == ["demo", "other-1"]


async def test_model_list_pages_with_limit_and_after_id(autojump_clock):
    cfg = CONFIG.replace("models: [demo]", "models: [m1, m2, m3]")
    async with gateway(cfg) as app:
        first = await request(app, "GET", "/anthropic/v1/models")
        assert [m["id"] for m in first.json()["data"]] == ["m1", "m2", "m3"]

        async def page(query):
            return await _get(app, "/anthropic/v1/models", query)

        one = await page(b"limit=2")
        assert (one["first_id"], one["last_id"], one["has_more"]) == ("m1", "m2", True)
        two = await page(b"limit=2&after_id=m2")
        assert ([m["id"] for m in two["data"]], two["has_more"]) == (["m3"], False)
        back = await page(b"limit=1&before_id=m3")
        assert ([m["id"] for m in back["data"]], back["has_more"]) == (["m2"], True)


async def test_model_list_refuses_a_bad_limit_in_anthropic_shape(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await _get(app, "/anthropic/v1/models", b"limit=0")
        assert reply["type"] == "error" and reply["error"]["message"].startswith("limit:")


async def _get(app, path, query):
    """GET with a query string (the harness sends none); the JSON answer."""
    chunks = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message.get("body"):
            chunks.append(message["body"])

    await app({"type": "http", "method": "GET", "path": path, "headers": [], "query_string": query}, receive, send)
    return json.loads(b"".join(chunks))


# --- the sink on its own -------------------------------------------------------------------

class Wrote:
    def __init__(self):
        self.messages = []

    async def __call__(self, message):
        self.messages.append(message)

    @property
    def body(self):
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")

    @property
    def headers(self):
        return dict(self.messages[0]["headers"])


def chat_event(obj):
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def test_keep_alive_comments_become_pings():
    out = Wrote()
    sink = AnthropicSink(out, True, model="demo", request_id="req_1")
    await sink.start(200, [(b"content-type", b"text/event-stream")])
    await sink.send(b": keep-alive\n\n")
    assert out.body.count(b"event: ping\n") == 2   # the one after message_start, and this one


async def test_a_native_backends_request_id_is_kept():
    out = Wrote()
    sink = AnthropicSink(out, False, model="demo", request_id="req_ours")
    await sink.start(200, [(b"content-type", b"application/json"), (b"request-id", b"req_native")])
    await sink.send(json.dumps({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}).encode())
    await sink.finish()
    assert out.headers[b"request-id"] == b"req_native"


async def test_an_untranslatable_buffered_answer_is_a_502_api_error():
    out = Wrote()
    sink = AnthropicSink(out, False, model="demo", request_id="req_1")
    await sink.start(200, [(b"content-type", b"application/json")])
    await sink.send(b'{"object": "chat.completion"}')
    await sink.finish()
    assert out.messages[0]["status"] == 502
    assert json.loads(out.body)["error"]["type"] == "api_error" and sink.finished


async def test_a_timeout_before_the_start_keeps_its_status_as_api_error():
    out = Wrote()
    sink = AnthropicSink(out, True, model="demo", request_id="req_1")
    await sink.fail(UpstreamTimeout("Backend 'a' timed out (read)"))
    assert out.messages[0]["status"] == 504
    assert json.loads(out.body) == {"type": "error", "error": {"type": "api_error",
                                                                "message": "Backend 'a' timed out (read)"},
                                    "request_id": "req_1"}


async def test_identical_calls_share_one_upstream_call_with_dedup(autojump_clock):
    async with gateway(CONFIG + "dedup: {enabled: true}\n") as app:
        replies = []

        async def one():
            replies.append(await request(app, "POST", MESSAGES, body(stream=True)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one)
            nursery.start_soon(one)
        assert sim(app).count("request") == 1
        ids = set()
        for reply in replies:
            got = events(reply)
            assert [e["type"] for e in got][-1] == "message_stop"
            ids.add(got[0]["message"]["id"])
        assert len(ids) == 2   # each client its own message id
