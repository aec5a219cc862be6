"""Failover survives the JSON Schemas real clients send (autojump_clock, simulated backends).

Whatever a client's tool parameters and output formats hold (type lists,
properties named ``type``, ``anyOf``, ``$ref``: ``tests/json_schemas.py``),
on the chat, Responses and Messages doors alike, a first attempt that fails
moves the call to the next backend: a buffered call or a stream that had not
started gets the other backend's 200; a stream broken mid-way continues
there (chat and Messages, with mid-stream recovery on) or ends with its
door's documented in-band error event (docs/errors.md, docs/responses.md,
docs/anthropic.md). The ledger records what the client got, never 499, and
no traceback is logged. Each example runs on a gateway of its own.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switchyard.actors.ledger.record import UsageQuery
from tests.actors.test_fuzz_bodies import ErrorTracebacks
from tests.harness import Reply, gateway, request
from tests.json_schemas import chat_body, client_schemas, fixture_body, messages_body, responses_body

TEXT = "one two three four five six seven eight"   # both backends say it, so a restart lines up
CONFIG = """
health_checks: {enabled: false}
usage: {ledger: memory}
retry: {max_attempts: 1}
fallback: {enabled: true, mid_stream_enabled: MID}
streaming: {mid_stream_fallback: {same_model_first: true}}
backends:
  - {name: a, type: simulated, models: [m], simulation: {latency: 1s, chunks: 4, text: TEXT, failure: {FAILURE}}}
  - {name: b, type: simulated, models: [m], simulation: {latency: 1s, chunks: 4, text: TEXT}}
"""


@attrs.frozen
class Door:
    path: str
    body: Any          # (model, tool schema, output schema, stream) -> the body


CHAT = Door("/v1/chat/completions", chat_body)
RESPONSES = Door("/v1/responses", responses_body)
MESSAGES = Door("/anthropic/v1/messages", messages_body)
DOORS = st.sampled_from([CHAT, RESPONSES, MESSAGES])
PROPERTY = settings(max_examples=30, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture
def tracebacks():
    handler = ErrorTracebacks()
    logging.getLogger().addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger().removeHandler(handler)


async def serve(door: Door, body: dict[str, Any], failure: str, mid_stream: bool = True,
                tracebacks: ErrorTracebacks | None = None) -> tuple[Reply, Any]:
    """``body`` on ``door`` of a fresh gateway whose first backend fails as ``failure`` says; the reply and
    the call's ledger record."""
    config = CONFIG.replace("FAILURE", failure).replace("MID", "true" if mid_stream else "false") \
        .replace("TEXT", json.dumps(TEXT))
    before = len(tracebacks.records) if tracebacks is not None else 0
    async with gateway(config) as app:
        reply = await request(app, "POST", door.path, body)
        await app.runtime.ledger.flush()
        [record] = app.runtime.ledger.store.records(UsageQuery(purpose=None), 10)
    if tracebacks is not None:
        assert tracebacks.records[before:] == [], tracebacks.records[before].getMessage()
    return reply, record


def last_event(reply: Reply) -> tuple[str | None, Any]:
    """(the SSE event name, its data parsed) of the stream's last event."""
    blocks = [b for b in reply.body.split(b"\n\n") if b.strip()]
    name, data = None, b""
    for line in blocks[-1].split(b"\n"):
        if line.startswith(b"event: "):
            name = line[len(b"event: "):].decode()
        elif line.startswith(b"data: "):
            data = line[len(b"data: "):]
    return name, data.decode() if data == b"[DONE]" else json.loads(data)


def completed(door: Door, reply: Reply) -> bool:
    """Whether a stream ended as its door ends a whole answer."""
    name, data = last_event(reply)
    if door is CHAT:
        return data == "[DONE]"
    if door is RESPONSES:
        return name == "response.completed"
    return name == "message_stop"


def in_band_error(door: Door, reply: Reply) -> str | None:
    """The code (Messages: the type) of the door's documented error event ending the stream, else None."""
    name, data = last_event(reply)
    if door is CHAT and isinstance(data, dict) and name is None:
        return (data.get("error") or {}).get("code")
    if door is RESPONSES and name == "error":
        return data["code"]
    if door is MESSAGES and name == "error":
        return data["error"]["type"]
    return None


@PROPERTY
@given(door=DOORS, stream=st.booleans(), tool=client_schemas(), output=client_schemas())
async def test_a_failed_first_attempt_moves_to_the_next_backend_whatever_the_schemas(
        autojump_clock, tracebacks, door, stream, tool, output):
    reply, record = await serve(door, door.body("m", tool, output, stream), "status: 500", tracebacks=tracebacks)
    assert reply.status == 200, reply.body[:300]
    assert completed(door, reply) if stream else reply.json()["model"] == "m"
    assert (record.status, record.error_code, record.attempts, record.backend) == (200, None, 2, "b")


@PROPERTY
@given(door=DOORS, mid_stream=st.booleans(), tool=client_schemas(), output=client_schemas())
async def test_a_stream_broken_midway_continues_or_ends_with_its_error_event_whatever_the_schemas(
        autojump_clock, tracebacks, door, mid_stream, tool, output):
    reply, record = await serve(door, door.body("m", tool, output, True), "truncate_after_chunk: 2", mid_stream,
                                tracebacks)
    assert reply.status == 200
    if mid_stream and door is not RESPONSES:   # a broken Responses stream is never continued (docs/responses.md)
        assert completed(door, reply), reply.body[-300:]
        assert (record.status, record.error_code, record.attempts, record.backend) == (200, None, 2, "b")
    else:
        code = in_band_error(door, reply)
        assert code == ("api_error" if door is MESSAGES else "upstream_stream_truncated"), reply.body[-300:]
        assert (record.status, record.error_code, record.backend) == (200, "upstream_stream_truncated", "a")


@pytest.mark.parametrize("name, door", [("openai-agents-0.24.0-chat-stream", CHAT),
                                        ("codex-0.171.0-exec-first", RESPONSES),
                                        ("llamaindex-0.14-responses-tools", RESPONSES),
                                        ("vercel-ai-6.0.333-generateobject", RESPONSES),
                                        ("claude-code-2.1.197-tool-result-turn", MESSAGES),
                                        ("langchain-anthropic-1.7.10-tool-choice", MESSAGES)])
async def test_a_recorded_clients_call_fails_over_from_a_500(autojump_clock, tracebacks, name, door):
    body = {**fixture_body(name), "model": "m"}
    body.pop("previous_response_id", None)   # nothing stored to continue from on a fresh gateway
    reply, record = await serve(door, body, "status: 500", tracebacks=tracebacks)
    assert reply.status == 200, reply.body[:300]
    assert (record.status, record.attempts, record.backend) == (200, 2, "b")
