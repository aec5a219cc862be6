"""Input that once ended in a gateway 500: each is now a 4xx naming the field, in the door's own error
shape; and an exception inside our own code (a wire, the transport, a simulator, the relay) is our 500,
logged once, never a backend's failure (MockClock)."""

import json
import logging

import httpx
import pytest

from switchyard.protocol.http.client_json import MAX_DEPTH
from switchyard.protocol.simulated.parts import SimulatedStream
from tests.actors.test_realtime import connect
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TOKEN = "admin-token-0123456789"
ADMIN = [(b"authorization", f"Bearer {TOKEN}".encode())]
CONFIG = f"""
admin: {{token: {TOKEN}}}
usage: {{ledger: memory}}
health_checks: {{interval: 1h}}
retry: {{max_attempts: 1}}
global_prompts: {{prompts_dir: ./prompts}}
backends:
  - name: a
    type: simulated
    models: [demo]
    simulation: {{latency: 10ms, chunks: 3}}
  - name: b
    type: simulated
    models: [demo]
    simulation: {{latency: 10ms, chunks: 3}}
smart_routing:
  enabled: true
  model_profiles: [{{model: demo, tier: 1}}]
  routing_policies: [{{name: all, when: {{}}, route_to: {{tier: 1}}}}]
"""
DOORS = {
    "/v1/chat/completions": chat(),
    "/v1/completions": {"model": "demo", "prompt": "hi"},
    "/v1/embeddings": {"model": "demo", "input": "hi"},
    "/v1/responses": {"model": "demo", "input": "hi"},
    "/anthropic/v1/messages": {"model": "demo", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
    "/anthropic/v1/messages/count_tokens": {"model": "demo", "messages": [{"role": "user", "content": "hi"}]},
}
ADMIN_BODIES = {
    ("PUT", "/admin/config/prompts/prompts/x.md"): "content",
    ("POST", "/admin/smart-routing/simulate"): "payload",
    ("PUT", "/admin/smart-routing/model-profiles"): "model_profiles",
    ("PUT", "/admin/smart-routing/policies"): "routing_policies",
}


def deep(body: dict, field: str, depth: int) -> bytes:
    """``body`` with ``field`` an array nested ``depth`` levels deep."""
    return json.dumps({**body, field: "HERE"}).encode().replace(b'"HERE"', b"[" * depth + b"]" * depth)


def tracebacks(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]


def openai_error(reply) -> tuple[int, str, str | None]:
    error = reply.json()["error"]
    return reply.status, error["code"], error["param"]


async def test_json_nested_past_the_limit_is_a_400_on_every_door_and_admin_endpoint(tmp_path, caplog,
                                                                                       autojump_clock):
    (tmp_path / "prompts").mkdir()
    async with gateway(CONFIG, base_dir=tmp_path) as app:
        for path, body in DOORS.items():
            reply = await request(app, "POST", path, deep(body, "metadata", 1000))
            if path.startswith("/anthropic/"):
                assert reply.status == 400 and reply.json()["type"] == "error"
                assert reply.json()["error"]["type"] == "invalid_request_error"
                assert "deeper than 128 levels at 'metadata[0][0]" in reply.json()["error"]["message"]
            else:
                status, code, param = openai_error(reply)
                assert (status, code, param) == (400, "json_too_deep", "metadata" + "[0]" * (MAX_DEPTH - 1)), path
        for (method, path), field in ADMIN_BODIES.items():
            reply = await request(app, method, path, deep({}, field, 1000), headers=ADMIN)
            assert openai_error(reply)[:2] == (400, "json_too_deep") and openai_error(reply)[2].startswith(field)
    assert tracebacks(caplog) == []


async def test_a_websocket_response_create_nested_past_the_limit_is_an_error_event_and_the_socket_stays_open(
        tmp_path, caplog, autojump_clock):
    (tmp_path / "prompts").mkdir()
    async with gateway(CONFIG, base_dir=tmp_path) as app:
        async with connect(app, query=b"", path="/v1/responses") as client:
            assert client.first["type"] == "websocket.accept"
            event = {"type": "response.create", "model": "demo", "input": "hi"}
            text = deep(event, "metadata", 5000).decode()   # past the parser's own recursion limit too
            await client.inbox_send.send({"type": "websocket.receive", "bytes": None, "text": text})
            refused = await client.event()
            await client.send(event)
            answered = [await client.event() for _ in range(2)]
    assert (refused["type"], refused["status"], refused["error"]["code"]) == ("error", 400, "json_too_deep")
    assert refused["error"]["param"] == "metadata" + "[0]" * (MAX_DEPTH - 1)
    assert [e["type"] for e in answered] == ["response.created", "response.in_progress"]
    assert tracebacks(caplog) == []


async def test_an_error_quoting_a_lone_surrogate_renders_in_the_anthropic_shape(caplog, autojump_clock):
    async with gateway(CONFIG) as app:
        body = json.dumps({**DOORS["/anthropic/v1/messages"],
                           "messages": [{"role": "user", "content": [{"type": "\ud800"}]}]}).encode()
        reply = await request(app, "POST", "/anthropic/v1/messages", body)
    assert reply.status == 400 and reply.json()["error"]["type"] == "invalid_request_error"
    assert "\ud800" in reply.json()["error"]["message"]
    assert tracebacks(caplog) == []


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize("model, what", [("demo\ud800", "a lone surrogate (\\ud800) at character 4"),
                                         ("de\x00mo", "a NUL character at character 2")])
async def test_a_model_that_is_not_valid_text_is_a_400_naming_it_at_every_door(door, model, what, autojump_clock):
    """A name no backend serves and no store or metric label can encode is refused at the door."""
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", door, json.dumps({**DOORS[door], "model": model}).encode())
    error = reply.json()["error"]
    assert reply.status == 400 and error["message"].endswith(f"must be valid text; it holds {what}")
    assert error.get("param", "model") == "model"


async def test_a_prompt_file_name_longer_than_the_file_system_takes_is_a_400(tmp_path, autojump_clock):
    (tmp_path / "prompts").mkdir()
    async with gateway(CONFIG, base_dir=tmp_path) as app:
        reply = await request(app, "PUT", "/admin/config/prompts/prompts/" + "a" * 5000 + ".md",
                              {"content": "x"}, headers=ADMIN)
    assert openai_error(reply) == (400, "invalid_prompt_path", "path")
    assert "at most 255 bytes" in reply.json()["error"]["message"]


async def test_stream_options_must_be_an_object(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True, stream_options=0))
    assert openai_error(reply) == (400, "invalid_type", "stream_options")


async def test_responses_reasoning_must_be_an_object(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi", "reasoning": True})
    assert openai_error(reply) == (400, "invalid_type", "reasoning")


async def test_a_text_part_that_is_not_a_string_is_the_backends_400_naming_it(caplog, autojump_clock):
    prefill = {"role": "assistant", "content": [{"type": "text", "text": 5}]}
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat(messages=[{"role": "user", "content": "hi"}, prefill]))
    assert openai_error(reply) == (400, "invalid_type", "messages[1].content[0].text")
    assert tracebacks(caplog) == []


def break_adapter(app, name: str, where: str) -> None:
    """Make backend ``name``'s simulator raise a TypeError on send, while its answer body is read, or after
    its stream's first event."""
    sim = app.runtime.upstream.simulated[f"{name}.simulated"]

    async def raises(request: httpx.Request) -> httpx.Response:
        raise TypeError("simulated adapter bug")

    async def broken_body():
        yield b'{"id": '
        raise TypeError("simulated adapter bug")

    async def broken_stream():
        yield b'data: {"id": "c", "object": "chat.completion.chunk", "model": "demo", "choices": [{"index": 0, ' \
              b'"delta": {"role": "assistant", "content": "Hel"}, "finish_reason": null}]}\n\n'
        raise TypeError("simulated adapter bug")

    async def broken_answer(request: httpx.Request) -> httpx.Response:
        sim.in_flight += 1   # released by the stream, as a real answer's would be
        if where == "mid_stream":
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  stream=SimulatedStream(sim, broken_stream()))
        return httpx.Response(200, headers={"content-type": "application/json"},
                              stream=SimulatedStream(sim, broken_body()))

    sim.handle_async_request = raises if where == "on_send" else broken_answer


def circuit_failures(app, backend: str) -> int:
    circuit = app.runtime.health.view.circuits.get((backend, "demo"))
    return 0 if circuit is None else circuit.failures


@pytest.mark.parametrize("where", ["on_send", "while_reading"])
async def test_an_exception_inside_our_own_code_is_our_500_and_never_the_backends_failure(caplog, autojump_clock,
                                                                                           where):
    """No failover and no circuit: the backend did nothing wrong, and another backend of the same kind would
    trip the same bug. Three such calls take nothing away from anyone."""
    async with gateway(CONFIG.replace("health_checks: {interval: 1h}", "health_checks: {enabled: false}")) as app:
        break_adapter(app, "a", where)
        app.runtime.pool.rng.seed(0)
        replies = [await request(app, "POST", "/v1/chat/completions", chat()) for _ in range(6)]
        assert circuit_failures(app, "a") == 0
        await app.runtime.ledger.flush()
        records = [app.runtime.ledger.store.for_request(r.headers[b"x-continuum-request-id"].decode())
                   for r in replies]
    assert [r.status for r in replies] == [500, 200] * 3   # round robin: a, b, a, b ...
    assert openai_error(replies[0]) == (500, "internal_error", None)
    assert replies[0].json()["error"]["message"] == "Internal error in the gateway; see its log"
    assert [(rs[0].status, rs[0].error_code) for rs in records[:2]] == [(500, "internal_error"), (200, None)]
    logged = tracebacks(caplog)
    assert len(logged) == 3 and all("internal error while serving the call (attempt on backend 'a')"
                                    in r.getMessage() for r in logged)


async def test_an_exception_inside_our_own_code_mid_stream_ends_it_with_the_error_event(caplog, autojump_clock):
    async with gateway(CONFIG.replace("  - name: b\n", "  - name: b\n    enabled: false\n")) as app:
        break_adapter(app, "a", "mid_stream")
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        await app.runtime.ledger.flush()
        [record] = app.runtime.ledger.store.for_request(reply.headers[b"x-continuum-request-id"].decode())
    events = reply.events()
    assert reply.status == 200 and b"Hel" in events[0] and b"[DONE]" not in events
    assert json.loads(events[-1])["error"]["code"] == "internal_error"
    assert (record.status, record.error_code) == (200, "internal_error")   # the stream had begun: 200
    assert len(tracebacks(caplog)) == 1


async def test_chat_messages_sent_to_text_completions_are_a_400_naming_them(caplog, autojump_clock):
    """The body a probe sent: chat messages (a text part that is an object) beside a prompt. Refused at the
    door; it once crashed the simulated backend's adapter and opened both backends' circuits."""
    body = {"model": "demo", "prompt": "hi",
            "messages": [{"role": "assistant", "content": [{"type": "text", "text": {"x": 1}}]}]}
    async with gateway(CONFIG) as app:
        replies = [await request(app, "POST", "/v1/completions", body) for _ in range(4)]
        chat_reply = await request(app, "POST", "/v1/chat/completions", chat())
    assert {openai_error(r) for r in replies} == {(400, "invalid_value", "messages")}
    assert "'messages' is not a parameter of text completions" in replies[0].json()["error"]["message"]
    assert chat_reply.status == 200 and tracebacks(caplog) == []


async def test_a_lone_surrogate_in_a_smart_routing_header_is_served_or_refused_never_a_500(caplog, autojump_clock):
    async with gateway(CONFIG) as app:
        simulated = await request(app, "POST", "/admin/smart-routing/simulate", headers=ADMIN, body={
            "payload": {"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
            "headers": {"x-route-hint": "\ud800"}})
        policies = await request(app, "PUT", "/admin/smart-routing/policies", headers=ADMIN, body={
            "routing_policies": [{"name": "p", "when": {"header": {"x-h": ["\ud800"]}}, "route_to": {"tier": 1}}]})
    assert simulated.status == 200
    assert openai_error(policies) == (400, "invalid_smart_routing_config", "routing_policies")
    assert "not UTF-8 text" in policies.json()["error"]["message"]
    assert tracebacks(caplog) == []


PROMPTED = """
health_checks: {interval: 1h}
retry: {max_attempts: 1}
global_prompts: {default: Be kind.}
backends:
  - {name: a, type: simulated, models: [demo]}
  - {name: claude, type: anthropic, url: "http://claude.simulated", api_key: sk-ant-test, models: [claude-x]}
"""


async def test_a_backends_error_about_a_message_names_the_clients_index_under_a_global_prompt(autojump_clock):
    """The prompt went first as a message of its own: the backend saw the client's one message as
    messages[1], and says so; the client reads messages[0]."""
    part = {"role": "user", "content": [{"type": "text", "text": 5}]}
    async with gateway(PROMPTED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(messages=[part]))
    assert openai_error(reply) == (400, "invalid_type", "messages[0].content[0].text")
    assert "'messages[0].content[0].text'" in reply.json()["error"]["message"]


async def test_a_translating_wires_error_about_a_message_names_the_clients_index_under_a_global_prompt(
        autojump_clock):
    call = {"role": "assistant", "tool_calls": [{"id": "t", "type": "function",
                                                 "function": {"name": "f", "arguments": "[1]"}}]}
    async with gateway(PROMPTED) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat("claude-x", messages=[{"role": "user", "content": "hi"}, call]))
    status, _, param = openai_error(reply)
    assert (status, param) == (400, "messages[1].tool_calls[0].function.arguments")
    assert "messages[2]" not in reply.json()["error"]["message"]
