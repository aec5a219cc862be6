"""The simulated backends refuse what a real server refuses (a 400 naming the param), and keep history
only when asked, bounded."""

import json

import httpx
import pytest

from switchyard.config.schema import Simulation
from switchyard.protocol.simulated.anthropic import SimulatedAnthropicTransport
from switchyard.protocol.simulated.checks import MAX_DIMENSIONS, MAX_INPUTS
from switchyard.protocol.simulated.openai import SimulatedTransport

USER = {"role": "user", "content": "hi"}


async def post(path: str, body, transport: SimulatedTransport | None = None) -> httpx.Response:
    transport = transport or SimulatedTransport("a", Simulation(latency=0.0), ("demo",))
    async with httpx.AsyncClient(transport=transport, base_url="http://a.simulated") as http:
        kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}
        return await http.post(path, **kwargs)


def refused(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["param"], error["code"]


async def test_a_text_part_that_is_not_a_string_is_a_400_naming_it(autojump_clock):
    prefill = {"role": "assistant", "content": [{"type": "text", "text": 5}]}
    reply = await post("/v1/chat/completions", {"model": "demo", "messages": [USER, prefill]})
    assert refused(reply) == (400, "messages[1].content[0].text", "invalid_type")


async def test_stream_options_that_is_not_an_object_is_a_400_naming_it(autojump_clock):
    reply = await post("/v1/chat/completions", {"model": "demo", "stream": True, "stream_options": 1,
                                                "messages": [USER]})
    assert refused(reply) == (400, "stream_options", "invalid_type")


async def test_responses_reasoning_that_is_not_an_object_is_a_400_naming_it(autojump_clock):
    reply = await post("/v1/responses", {"model": "demo", "input": "hi", "reasoning": True})
    assert refused(reply) == (400, "reasoning", "invalid_type")


@pytest.mark.parametrize("dimensions", [MAX_DIMENSIONS + 1, 1_000_000, 2 ** 63, 0])
async def test_embeddings_dimensions_outside_1_to_the_maximum_are_a_400_naming_it(autojump_clock, dimensions):
    reply = await post("/v1/embeddings", {"model": "demo", "input": "hi", "dimensions": dimensions})
    assert refused(reply) == (400, "dimensions", "invalid_value")


async def test_embeddings_at_the_maximum_dimensions_are_answered(autojump_clock):
    reply = await post("/v1/embeddings", {"model": "demo", "input": ["a", "b"], "dimensions": MAX_DIMENSIONS})
    assert reply.status_code == 200
    assert [len(d["embedding"]) for d in reply.json()["data"]] == [MAX_DIMENSIONS, MAX_DIMENSIONS]


async def test_more_inputs_than_the_maximum_are_a_400_naming_the_input(autojump_clock):
    reply = await post("/v1/embeddings", {"model": "demo", "input": ["x"] * (MAX_INPUTS + 1)})
    assert refused(reply) == (400, "input", "invalid_value")


async def test_a_body_that_is_not_a_json_object_is_a_400(autojump_clock):
    reply = await post("/v1/chat/completions", b"[1, 2")
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "invalid_type"


@pytest.mark.parametrize(("field", "value", "where"), [
    ("messages", [{"role": "user", "content": [{"type": "text", "text": 5}]}], "messages.0.content.0.text"),
    ("thinking", 5, "thinking"),
    ("stop_sequences", [5], "stop_sequences.0"),
])
async def test_the_anthropic_simulator_refuses_a_wrong_type_naming_the_field(autojump_clock, field, value, where):
    transport = SimulatedAnthropicTransport("c", Simulation(latency=0.0), ("claude",))
    body = {"model": "claude", "max_tokens": 10, "messages": [USER], field: value}
    async with httpx.AsyncClient(transport=transport, base_url="http://c.simulated") as http:
        reply = await http.post("/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert reply.status_code == 400 and reply.json()["error"]["message"].startswith(f"{where}: ")


async def test_a_simulator_keeps_no_history_unless_asked(autojump_clock):
    transport = SimulatedTransport("a", Simulation(latency=0.0), ("demo",))
    for _ in range(3):
        assert (await post("/v1/chat/completions", {"model": "demo", "messages": [USER]}, transport)).is_success
    assert (len(transport._requests), len(transport._events), transport.served) == (0, 0, 3)
    with pytest.raises(RuntimeError, match="keeps no history"):
        transport.count("request")


async def test_a_simulators_history_is_bounded(autojump_clock):
    transport = SimulatedTransport("a", Simulation(latency=0.0), ("demo",), history=4)
    for _ in range(10):
        await post("/v1/chat/completions", {"model": "demo", "messages": [USER]}, transport)
    assert len(transport.requests) == 4 and len(transport.events) == 4
    assert transport.events[-1][1] == "completed"


async def test_the_anthropic_simulators_error_quoting_a_lone_surrogate_is_rendered(autojump_clock):
    transport = SimulatedAnthropicTransport("c", Simulation(latency=0.0), ("claude",))
    orphan = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "\ud800", "content": "ok"}]}
    async with httpx.AsyncClient(transport=transport, base_url="http://c.simulated") as http:
        body = json.dumps({"model": "claude", "max_tokens": 10, "messages": [orphan]}).encode()   # "\ud800" escaped
        reply = await http.post("/v1/messages", content=body, headers={"anthropic-version": "2023-06-01"})
    assert reply.status_code == 400 and "\ud800" in reply.json()["error"]["message"]
