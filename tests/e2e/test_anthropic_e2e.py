"""End-to-end: the official anthropic SDK against Switchyard's Messages ingress, over hypercorn.

The backends are simulated OpenAI-compatible servers (in-process); the SDK,
TCP, HTTP/1.1, hypercorn, the ingress, the actors and the translation are
real. One test per rule, named after it.
"""

from __future__ import annotations

import json

import anthropic
import pytest

from tests.e2e.support import Gateway, backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

PROMPT = [{"role": "user", "content": "hi"}]
WEATHER = {"name": "get_weather", "description": "Weather now",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def sdk(gw: Gateway) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url + "/anthropic", api_key="x", max_retries=0, timeout=10)


async def test_messages_create_returns_the_answer_as_a_message(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", text="Hello from the simulator")))
    with sdk(gw) as client:
        raw = await in_thread(client.messages.with_raw_response.create, model="demo", max_tokens=64,
                              messages=PROMPT)
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant" and message.model == "demo"
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Hello from the simulator"
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 4 and message.usage.input_tokens > 0
    assert raw.headers["request-id"] == raw.headers["x-continuum-request-id"]


async def test_messages_stream_accumulates_the_final_message(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", text="one two three four five")))

    def stream(client: anthropic.Anthropic):
        with client.messages.stream(model="demo", max_tokens=64, messages=PROMPT) as s:
            pieces = list(s.text_stream)
            return pieces, s.get_final_message()

    with sdk(gw) as client:
        pieces, final = await in_thread(stream, client)
    assert "".join(pieces) == "one two three four five"
    assert final.content[0].text == "one two three four five"
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 5 and final.usage.input_tokens > 0


async def test_a_tool_call_comes_back_as_tool_use_and_its_result_goes_on(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", failure={"tool_call": True})))
    with sdk(gw) as client:
        first = await in_thread(client.messages.create, model="demo", max_tokens=64, messages=PROMPT,
                                tools=[WEATHER], tool_choice={"type": "any"})
        assert first.stop_reason == "tool_use"
        [use] = first.content
        assert (use.type, use.name, use.input) == ("tool_use", "get_weather", {"city": "Paris"})

        def streamed():
            with client.messages.stream(model="demo", max_tokens=64, messages=PROMPT, tools=[WEATHER]) as s:
                return s.get_final_message()

        final = await in_thread(streamed)
        assert final.stop_reason == "tool_use"
        assert [(b.type, b.input) for b in final.content] == [("tool_use", {"city": "Paris"})]
        follow_up = PROMPT + [{"role": "assistant", "content": first.content},
                              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                            "content": "18C and sunny"}]}]
        await in_thread(client.messages.create, model="demo", max_tokens=64, messages=follow_up, tools=[WEATHER])
    sent = json.loads(gw.sim("sim-a").requests[-1].read())
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": "call_sim", "content": "18C and sunny"}


async def test_errors_raise_the_sdks_own_exceptions(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        try:
            await in_thread(client.messages.create, model="nope", max_tokens=64, messages=PROMPT)
        except anthropic.NotFoundError as exc:
            assert exc.body["error"]["type"] == "not_found_error"
            assert exc.request_id is not None and exc.request_id.startswith("req_")
        else:
            raise AssertionError("an unknown model must raise NotFoundError")
        try:
            await in_thread(client.messages.create, model="demo", max_tokens=64,
                            messages=[{"role": "robot", "content": "x"}])
        except anthropic.BadRequestError as exc:
            assert exc.body["error"]["message"].startswith("messages.0.role:")
        else:
            raise AssertionError("a bad role must raise BadRequestError")


async def test_count_tokens_and_the_model_list_through_the_sdk(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        counted = await in_thread(client.messages.count_tokens, model="demo", messages=PROMPT)
        models = await in_thread(lambda: [(m.id, m.lifecycle) for m in client.models.list()])
        one = await in_thread(client.models.retrieve, "demo")
        with pytest.raises(anthropic.NotFoundError):
            await in_thread(client.models.retrieve, "nope")
    assert counted.input_tokens > 0
    assert models == [("demo", "active")] and one.id == "demo"


def native(name: str, **simulation) -> dict:
    """A simulated Anthropic-native backend (``type: anthropic`` on a ``.simulated`` host) serving ``demo``."""
    sim = {"latency": "10ms", "tokens_per_second": 0, "chunks": 5, **simulation}
    return {"name": name, "type": "anthropic", "url": f"http://{name}.simulated", "models": ["demo"],
            "simulation": sim}


async def test_an_anthropic_native_backend_answers_the_sdk_through_the_ingress(start_gateway):
    gw = await start_gateway(gateway_config(native("claude", text="one two three")))

    def both(client: anthropic.Anthropic):
        created = client.messages.with_raw_response.create(model="demo", max_tokens=64, messages=PROMPT)
        with client.messages.stream(model="demo", max_tokens=64, messages=PROMPT) as s:
            return created, s.get_final_message()

    with sdk(gw) as client:
        raw, final = await in_thread(both, client)
        version = client.default_headers["anthropic-version"]
    message = raw.parse()
    assert message.content[0].text == "one two three" and final.content[0].text == "one two three"
    assert message.stop_reason == final.stop_reason == "end_turn"
    sent = gw.app.runtime.upstream.simulated["claude.simulated"].requests[-1]
    assert sent.headers["anthropic-version"] == version   # the SDK's own, carried through
    assert raw.headers["x-continuum-request-id"].startswith("req_")


async def test_a_tool_round_trip_through_an_anthropic_native_backend(start_gateway):
    gw = await start_gateway(gateway_config(native("claude", failure={"tool_call": True})))
    with sdk(gw) as client:
        first = await in_thread(client.messages.create, model="demo", max_tokens=64, messages=PROMPT,
                                tools=[WEATHER])
        [use] = first.content
        assert (first.stop_reason, use.type, use.name, use.input) == ("tool_use", "tool_use", "get_weather",
                                                                       {"city": "Paris"})
        follow_up = PROMPT + [{"role": "assistant", "content": first.content},
                              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                            "content": "18C"}]}]
        second = await in_thread(client.messages.create, model="demo", max_tokens=64, messages=follow_up,
                                 tools=[WEATHER])
    assert second.type == "message"
    sent = json.loads(gw.app.runtime.upstream.simulated["claude.simulated"].requests[-1].read())
    [result] = sent["messages"][-1]["content"]
    assert (result["type"], result["tool_use_id"]) == ("tool_result", use.id)
