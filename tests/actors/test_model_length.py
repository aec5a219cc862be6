"""The spec's limit on a request's ``model``: at most 256 characters on every door that takes one, a longer
name refused 400 naming ``model`` before any backend is asked; 256 itself still goes through."""

import pytest

from switchyard.protocol.doors.openai import MAX_MODEL_LENGTH
from tests.actors.test_realtime import connect
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

# A glob backend serves every name, so only the limit can refuse one.
CONFIG = """
health_checks: {interval: 1h}
backends:
  - {name: a, type: simulated, discovery: false, models: ["*"], simulation: {latency: 10ms, text: "hi there"}}
"""

LONGEST = "m" * MAX_MODEL_LENGTH
TOO_LONG = "m" * (MAX_MODEL_LENGTH + 1)
USER = [{"role": "user", "content": "hi"}]

# (path, body for a model) per door family that reads the model from the body.
OPENAI_DOORS = [
    ("/v1/chat/completions", lambda m: {"model": m, "messages": USER}),
    ("/v1/completions", lambda m: {"model": m, "prompt": "hi"}),
    ("/v1/embeddings", lambda m: {"model": m, "input": "hi"}),
    ("/v1/responses", lambda m: {"model": m, "input": "hi"}),
]
ANTHROPIC_DOORS = [
    ("/anthropic/v1/messages", lambda m: {"model": m, "max_tokens": 10, "messages": USER}),
    ("/anthropic/v1/messages/count_tokens", lambda m: {"model": m, "messages": USER}),
]


def asked(app):
    return len(app.runtime.upstream.simulated["a.simulated"].requests)


def test_the_limit_is_the_specs_256_characters():
    assert MAX_MODEL_LENGTH == 256


@pytest.mark.parametrize("path, body", OPENAI_DOORS, ids=[p for p, _ in OPENAI_DOORS])
async def test_openai_doors_refuse_a_model_over_256_characters_naming_model(autojump_clock, path, body):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", path, body(TOO_LONG))
        assert asked(app) == 0
    error = reply.json()["error"]
    assert reply.status == 400
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", "model", "invalid_value")
    assert error["message"] == f"'model' must be at most 256 characters, got {MAX_MODEL_LENGTH + 1}"


@pytest.mark.parametrize("path, body", OPENAI_DOORS + ANTHROPIC_DOORS,
                         ids=[p for p, _ in OPENAI_DOORS + ANTHROPIC_DOORS])
async def test_a_model_of_exactly_256_characters_is_served(autojump_clock, path, body):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", path, body(LONGEST))
    assert reply.status == 200, reply.body


@pytest.mark.parametrize("path, body", ANTHROPIC_DOORS, ids=[p for p, _ in ANTHROPIC_DOORS])
async def test_anthropic_doors_refuse_a_model_over_256_characters_in_their_shape(autojump_clock, path, body):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", path, body(TOO_LONG))
        assert asked(app) == 0
    assert reply.status == 400
    assert reply.json() == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": f"model: must be at most 256 characters, got {MAX_MODEL_LENGTH + 1}"},
        "request_id": reply.headers[b"request-id"].decode()}


async def test_the_realtime_door_refuses_a_model_query_over_256_characters(autojump_clock):
    async with gateway(CONFIG) as app, connect(app, b"model=" + TOO_LONG.encode()) as client:
        status, _, body = await client.refusal()
    assert status == 400
    assert (body["error"]["param"], body["error"]["code"]) == ("model", "invalid_value")
