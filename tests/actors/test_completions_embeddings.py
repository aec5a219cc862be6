"""POST /v1/completions and POST /v1/embeddings under MockClock: validation, routing and fallback as for
chat, streams relayed with [DONE], and the chat-only features that stay off."""

import json

import pytest
import trio

from switchyard.protocol.simulated.endpoints import embedding_vector
from tests.actors.test_smart_routing_flow import config as smart_config
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TOKEN = "test-admin-token-0123456789"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]

CONFIG = f"""
admin: {{token: {TOKEN}}}
health_checks: {{interval: 1h}}
timeouts:
  request:
    standard: {{first_byte: 4s, total: 20s}}
    streaming: {{first_byte: 7s, chunk_interval: 2s, total: 30s}}
fallback:
  enabled: true
  fallback_chains: {{big: [small]}}
backends:
"""


def backend(name, model, sim="", extra=""):
    return (f"  - {{name: {name}, type: simulated, models: [{model}], "
            f"simulation: {{latency: 100ms, chunks: 3, text: 'one two three'{sim}}}{extra}}}\n")


def sim(app, name):
    return app.runtime.upstream.simulated[f"{name}.simulated"]


def sent(app, name):
    """The bodies backend ``name`` was sent, parsed, with their paths."""
    return [(r.url.path, json.loads(r.content)) for r in sim(app, name).requests]


def error(reply):
    body = reply.json()["error"]
    return reply.status, body["param"], body["code"]


def streamed_text(reply):
    return "".join(c["text"] for e in reply.events() if e != b"[DONE]" for c in json.loads(e)["choices"])


async def completion(app, body, headers=None):
    return await request(app, "POST", "/v1/completions", body, headers)


async def embed(app, body, headers=None):
    return await request(app, "POST", "/v1/embeddings", body, headers)


ONE = CONFIG + backend("a", "demo")


# --- validation: each mistake names its field --------------------------------------------

@pytest.mark.parametrize("body, param, code", [
    ({"prompt": "x"}, "model", "missing_required_parameter"),
    ({"model": "", "prompt": "x"}, "model", "invalid_type"),
    ({"model": "demo"}, "prompt", "missing_required_parameter"),
    ({"model": "demo", "prompt": 5}, "prompt", "invalid_type"),
    ({"model": "demo", "prompt": []}, "prompt", "invalid_value"),
    ({"model": "demo", "prompt": ["a", 1]}, "prompt[1]", "invalid_type"),
    ({"model": "demo", "prompt": [1, -2]}, "prompt[1]", "invalid_value"),
    ({"model": "demo", "prompt": [[1], []]}, "prompt[1]", "invalid_value"),
    ({"model": "demo", "prompt": [[1], [2, "x"]]}, "prompt[1][1]", "invalid_type"),
    ({"model": "demo", "prompt": [True]}, "prompt[0]", "invalid_type"),
])
async def test_completions_need_a_model_and_a_prompt_of_text_or_token_ids(autojump_clock, body, param, code):
    async with gateway(ONE) as app:
        reply = await completion(app, body)
        assert error(reply) == (400, param, code)
        assert f"'{param}'" in reply.json()["error"]["message"]
        assert sim(app, "a").requests == []


@pytest.mark.parametrize("prompt", ["", "one", ["one", "two"], [1, 2, 3], [[1, 2], [3]]])
async def test_completions_take_every_prompt_shape(autojump_clock, prompt):
    async with gateway(ONE) as app:
        reply = await completion(app, {"model": "demo", "prompt": prompt})
        assert reply.status == 200 and reply.json()["object"] == "text_completion"


async def test_completions_stream_must_be_a_boolean(autojump_clock):
    async with gateway(ONE) as app:
        assert error(await completion(app, {"model": "demo", "prompt": "x", "stream": "yes"})) == \
            (400, "stream", "invalid_type")


@pytest.mark.parametrize("body, param, code", [
    ({"input": "x"}, "model", "missing_required_parameter"),
    ({"model": "demo"}, "input", "missing_required_parameter"),
    ({"model": "demo", "input": ""}, "input", "invalid_value"),
    ({"model": "demo", "input": {"text": "x"}}, "input", "invalid_type"),
    ({"model": "demo", "input": ["a", ""]}, "input[1]", "invalid_value"),
    ({"model": "demo", "input": ["a", 3]}, "input[1]", "invalid_type"),
    ({"model": "demo", "input": [[1, 2], 3]}, "input[1]", "invalid_type"),
])
async def test_embeddings_need_a_model_and_non_empty_input(autojump_clock, body, param, code):
    async with gateway(ONE) as app:
        reply = await embed(app, body)
        assert error(reply) == (400, param, code)
        assert f"'{param}'" in reply.json()["error"]["message"]


@pytest.mark.parametrize("value, code", [("hex", "invalid_value"), (1, "invalid_type")])
async def test_embeddings_encoding_format_is_float_or_base64(autojump_clock, value, code):
    async with gateway(ONE) as app:
        assert error(await embed(app, {"model": "demo", "input": "x", "encoding_format": value})) == \
            (400, "encoding_format", code)


@pytest.mark.parametrize("value, code", [(0, "invalid_value"), (-3, "invalid_value"), (1.5, "invalid_type"),
                                         ("8", "invalid_type"), (True, "invalid_type")])
async def test_embeddings_dimensions_must_be_a_positive_integer(autojump_clock, value, code):
    async with gateway(ONE) as app:
        assert error(await embed(app, {"model": "demo", "input": "x", "dimensions": value})) == \
            (400, "dimensions", code)


async def test_embeddings_are_never_streamed(autojump_clock):
    async with gateway(ONE) as app:
        reply = await embed(app, {"model": "demo", "input": "x", "stream": True})
        assert error(reply) == (400, "stream", "invalid_value")


# --- answers -------------------------------------------------------------------------------

async def test_buffered_completion_is_relayed(autojump_clock):
    async with gateway(ONE) as app:
        reply = await completion(app, {"model": "demo", "prompt": "Say", "max_tokens": 5})
        assert reply.status == 200
        answer = reply.json()
        assert answer["choices"][0]["text"] == "one two three"
        assert answer["choices"][0]["finish_reason"] == "stop" and answer["usage"]["completion_tokens"] == 3
        assert sent(app, "a") == [("/v1/completions", {"model": "demo", "prompt": "Say", "max_tokens": 5})]


async def test_streaming_completion_is_relayed_with_done(autojump_clock):
    async with gateway(ONE) as app:
        reply = await completion(app, {"model": "demo", "prompt": "Say", "stream": True})
        assert reply.status == 200 and reply.headers[b"content-type"] == b"text/event-stream"
        events = reply.events()
        assert events[-1] == b"[DONE]"
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "stop"
        assert streamed_text(reply) == "one two three"


async def test_embeddings_answer_is_passed_through(autojump_clock):
    async with gateway(ONE) as app:
        reply = await embed(app, {"model": "demo", "input": [[5, 6], [1, 2, 3]], "dimensions": 4})
        assert reply.status == 200
        expected = {"object": "list", "data": [
            {"object": "embedding", "index": 0, "embedding": embedding_vector("demo", [5, 6], 4)},
            {"object": "embedding", "index": 1, "embedding": embedding_vector("demo", [1, 2, 3], 4)}],
            "model": "demo", "usage": {"prompt_tokens": 5, "total_tokens": 5}}
        assert reply.body == json.dumps(expected).encode()   # the backend's bytes, untouched
        assert sent(app, "a")[0][0] == "/v1/embeddings"


# --- routing, budgets and fallback -----------------------------------------------------------

FAILING_BIG = CONFIG.replace("fallback_chains:", "fallback_policy: {preserve_parameters: false}\n  fallback_chains:") \
    + backend("a", "big", ", failure: {status: 503}") + backend("b", "small")


async def test_completions_fall_back_to_a_second_backend_on_5xx(autojump_clock):
    async with gateway(FAILING_BIG) as app:
        reply = await completion(app, {"model": "big", "prompt": "Say", "echo": True, "seed": 7})
        assert reply.status == 200 and reply.json()["choices"][0]["text"] == "one two three"
        assert reply.headers[b"x-fallback-used"] == b"true" and reply.headers[b"x-fallback-model"] == b"small"
        assert sim(app, "a").count("status:503") >= 1
        # the hop keeps the prompt and what shapes the answer; the rest is trimmed as for chat
        assert sent(app, "b") == [("/v1/completions", {"model": "small", "prompt": "Say", "echo": True})]


async def test_embeddings_fall_back_to_a_second_backend_on_5xx(autojump_clock):
    async with gateway(FAILING_BIG) as app:
        body = {"model": "big", "input": "x", "encoding_format": "base64", "dimensions": 4, "seed": 7}
        reply = await embed(app, body)
        assert reply.status == 200 and reply.json()["model"] == "small"
        assert isinstance(reply.json()["data"][0]["embedding"], str)   # still the base64 the client asked for
        assert sim(app, "a").count("status:503") >= 1
        assert sent(app, "b") == [("/v1/embeddings", {"model": "small", "input": "x", "encoding_format": "base64",
                                                      "dimensions": 4})]


async def test_streaming_completion_fails_over_before_its_first_byte(autojump_clock):
    config = CONFIG + backend("a", "big", ", failure: {stall_before_first_byte: true}") + backend("b", "small")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await completion(app, {"model": "big", "prompt": "Say", "stream": True})
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        assert streamed_text(reply) == "one two three"
        assert [round(t - t0, 6) for t, k in sim(app, "b").events if k == "request"] == [7]   # streaming first_byte


async def test_broken_completion_stream_is_not_continued_mid_stream(autojump_clock):
    config = CONFIG + backend("a", "big", ", failure: {error_event_after_chunk: 2}") + backend("b", "small")
    async with gateway(config) as app:
        reply = await completion(app, {"model": "big", "prompt": "Say", "stream": True})
        assert reply.status == 200
        events = reply.events()
        assert b"[DONE]" not in events and "error" in json.loads(events[-1])
        assert "".join(c["text"] for e in events[:-1] for c in json.loads(e)["choices"]) == "one two"
        assert sim(app, "b").requests == []   # no continuation elsewhere: chat messages only


async def test_embeddings_use_the_standard_timeouts(autojump_clock):
    config = CONFIG + backend("a", "demo", ", failure: {stall_before_first_byte: true}")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await embed(app, {"model": "demo", "input": "x"})
        assert reply.status == 504 and reply.ended_at - t0 == 4
        assert reply.json()["error"]["details"] == {"timeout": "first_byte", "timeout_ms": 4000}


async def test_key_allowlist_applies_to_both_endpoints(autojump_clock):
    keys = "api_keys:\n  - {id: team, key: sk-team-0123456789abcdef, allowed_models: [demo]}\n"
    config = keys + CONFIG + "  - {name: a, type: simulated, models: [demo, other], simulation: {latency: 10ms}}\n"
    team = [(b"authorization", b"Bearer sk-team-0123456789abcdef")]
    async with gateway(config) as app:
        assert (await embed(app, {"model": "demo", "input": "x"})).status == 401
        assert error(await embed(app, {"model": "other", "input": "x"}, team)) == (403, "model", "model_not_allowed")
        assert error(await completion(app, {"model": "other", "prompt": "x"}, team)) == \
            (403, "model", "model_not_allowed")
        assert (await embed(app, {"model": "demo", "input": "x"}, team)).status == 200
        assert (await completion(app, {"model": "demo", "prompt": "x"}, team)).status == 200


async def test_request_params_policy_applies_to_completions(autojump_clock):
    config = ONE + "request_params: {defaults: {max_tokens: 100}, limits: {temperature: {max: 1}}}\n"
    async with gateway(config) as app:
        reply = await completion(app, {"model": "demo", "prompt": "x", "temperature": 1.8})
        assert reply.status == 200
        assert reply.headers[b"x-continuum-request-params"] == b"default:max_tokens,limit:temperature"
        assert sent(app, "a")[0][1] == {"model": "demo", "prompt": "x", "temperature": 1, "max_tokens": 100}


async def test_calls_show_their_endpoint_in_route_events_and_metrics(autojump_clock):
    async with gateway(ONE) as app:
        reply = await embed(app, {"model": "demo", "input": "x"})
        rid = reply.headers[b"x-continuum-request-id"].decode()
        trace = (await request(app, "GET", f"/admin/requests/{rid}/events", headers=AUTH)).json()
        assert trace["events"][0]["event"] == "accepted"
        assert trace["events"][0]["detail"] == {"stream": False, "endpoint": "embeddings"}
        await completion(app, {"model": "demo", "prompt": "x"})
        registry = app.runtime.metrics.registry
        for route in ("/v1/embeddings", "/v1/completions"):
            assert registry.get_sample_value("switchyard_requests_total", {
                "route": route, "model": "demo", "backend": "a", "status": "200"}) == 1


# --- chat-only features stay off ------------------------------------------------------------

async def test_global_prompt_is_not_added_to_completions_or_embeddings(autojump_clock):
    async with gateway(ONE + "global_prompts: {default: Be kind.}\n") as app:
        raw = b'{"model":"demo","prompt":"x"}'
        assert (await completion(app, raw)).status == 200
        assert (await embed(app, b'{"model":"demo","input":"x"}')).status == 200
        assert [r.content for r in sim(app, "a").requests] == [raw, b'{"model":"demo","input":"x"}']


async def test_usage_is_requested_for_a_completions_stream_and_not_shown(autojump_clock):
    """The ledger prices every stream on its usage; the client that did not ask for it never sees it."""
    async with gateway(ONE) as app:
        raw = b'{"model":"demo","prompt":"x","stream":true}'
        reply = await completion(app, raw)
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        sent = json.loads(sim(app, "a").requests[0].content)
        assert sent["stream_options"] == {"include_usage": True}
        assert all(b'"usage"' not in e for e in reply.events())


async def test_thinking_pattern_does_not_split_completion_text(autojump_clock):
    thinking = ("\n    model_configs:\n      - {id: demo, metadata: {thinking: {pattern: unterminated_start, "
                "end_marker: '</think>', assume_reasoning_first: true}}}")
    config = CONFIG + "  - name: a\n    type: simulated\n    models: [demo]\n" \
        "    simulation: {latency: 100ms, chunks: 3, text: 'plan </think> answer'}" + thinking + "\n"
    async with gateway(config) as app:
        reply = await completion(app, {"model": "demo", "prompt": "x", "stream": True})
        assert streamed_text(reply) == "plan </think> answer"
        assert b"reasoning_content" not in reply.body


async def test_empty_completion_text_is_an_empty_reply(autojump_clock):
    config = CONFIG.replace("fallback_chains:", "empty_reply_retry: {enabled: true}\n  fallback_chains:") + \
        backend("a", "big", ", failure: {empty_reply: true}") + backend("b", "small")
    async with gateway(config) as app:
        reply = await completion(app, {"model": "big", "prompt": "x"})
        assert reply.status == 200 and reply.json()["choices"][0]["text"] == "one two three"
        assert len(sim(app, "b").requests) == 1


async def test_embeddings_are_never_judged_empty(autojump_clock):
    config = CONFIG.replace("fallback_chains:", "empty_reply_retry: {enabled: true}\n  fallback_chains:") + \
        backend("a", "big") + backend("b", "small")
    async with gateway(config) as app:
        reply = await embed(app, {"model": "big", "input": "x"})
        assert reply.status == 200 and reply.json()["model"] == "big"
        assert sim(app, "b").requests == []


async def test_smart_routing_does_not_apply(autojump_clock):
    async with gateway(smart_config(method="llm")) as app:
        reply = await completion(app, {"model": "auto", "prompt": "write a sorting function"})
        assert reply.status == 404 and reply.json()["error"]["param"] == "model"
        assert sim(app, "judge").requests == []   # no classifier call: "auto" is only a name here


async def test_a_native_anthropic_backend_is_no_candidate(autojump_clock):
    claude = "  - {name: c, type: anthropic, url: 'http://c.simulated', models: [claude-x, big], " \
        "simulation: {latency: 10ms}}\n"
    async with gateway(CONFIG + claude + backend("a", "big")) as app:
        assert error(await embed(app, {"model": "claude-x", "input": "x"})) == \
            (400, "model", "unsupported_backend_type")
        for _ in range(3):   # a model it shares goes only to the OpenAI-compatible backend
            assert (await completion(app, {"model": "big", "prompt": "x"})).status == 200
        assert sim(app, "c").requests == [] and len(sim(app, "a").requests) == 3


async def test_request_params_never_reach_an_embeddings_body(autojump_clock):
    cfg = ("request_params: {defaults: {max_tokens: 100, temperature: 0.2}}\n" + CONFIG
           + backend("e", "emb"))
    async with gateway(cfg) as app:
        reply = await embed(app, {"model": "emb", "input": "hi"})
        assert reply.status == 200
        [(path, body)] = sent(app, "e")
        assert path.endswith("/v1/embeddings") and "max_tokens" not in body and "temperature" not in body
