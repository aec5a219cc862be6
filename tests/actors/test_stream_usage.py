"""Every OpenAI-style stream is priced on the usage its backend reported (backends[].stream_usage).

A ``generic`` or ``ollama`` backend here is a url on the internal simulated
backend ``engine``'s host, so it is served by that simulator; ``engine``'s
``supports_stream_options: false`` makes it refuse the option with a 400,
as some servers do.
"""

import json
import logging

import pytest

from switchyard.actors.ledger.record import UsageQuery
from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.config.load import load_text
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history

ADMIN = [(b"authorization", b"Bearer admin-token-0123456789abcdef")]
CONFIG = """
admin: {token: admin-token-0123456789abcdef}
health_checks: {interval: 1h}
usage: {ledger: memory}
backends:
  - {name: engine, type: simulated, internal: true, models: [demo], simulation: {latency: 10ms, chunks: 4}}
  - {name: gen, type: generic, url: "http://engine.simulated", models: [demo]}
"""
REFUSING = CONFIG.replace("chunks: 4}", "chunks: 4, supports_stream_options: false}")


def config(base: str = CONFIG, gen_type: str = "generic", stream_usage: str | None = None) -> str:
    setting = f", stream_usage: {stream_usage}" if stream_usage else ""
    return base.replace("type: generic,", f"type: {gen_type},") \
        .replace("models: [demo]}\n", f"models: [demo]{setting}}}\n")


async def records(app):
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose=None), 1000)


def sent(app) -> list[dict]:
    """The bodies the simulator got, oldest first."""
    return [json.loads(r.content) for r in app.runtime.upstream.simulated["engine.simulated"].requests]


def events(app, reply) -> list[str]:
    rid = reply.headers[b"x-continuum-request-id"].decode()
    return [e["event"] for e in app.runtime.traces.get(rid).events]


@pytest.mark.parametrize("gen_type", ["generic", "ollama"])
async def test_a_stream_to_a_generic_or_ollama_backend_asks_for_usage_and_records_the_reported_figures(
        autojump_clock, gen_type):
    async with gateway(config(gen_type=gen_type)) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        [body] = sent(app)
        [rec] = await records(app)
    assert body["stream_options"] == {"include_usage": True}
    reported = len(json.dumps(body["messages"])) // 4   # the simulator's prompt_tokens
    assert reported != estimate_tokens(chat(stream=True))   # so an estimate could not pass for it
    assert (rec.backend, rec.input_tokens, rec.output_tokens, rec.estimated) == ("gen", reported, 4, False)


async def test_no_usage_chunk_reaches_a_client_that_did_not_ask_even_one_the_gateway_did_not_ask_for(autojump_clock):
    # not asked (never), yet the backend sends its usage chunk (here because the operator's extension asks)
    unasked_by_us = config(stream_usage="never").replace(
        "stream_usage: never}", "stream_usage: never,\n     request_extensions: {body: {defaults: "
        "{stream_options: {include_usage: true}}}}}")
    async with gateway(unasked_by_us) as app:
        unasked = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        asked = await request(app, "POST", "/v1/chat/completions",
                              chat(stream=True, stream_options={"include_usage": True}))
        recs = await records(app)
    assert unasked.events()[-1] == b"[DONE]" and all(b'"usage"' not in e for e in unasked.events())
    assert [json.loads(e)["choices"] for e in asked.events()[:-1] if b'"usage"' in e] == [[]]
    assert [r.estimated for r in recs] == [False, False]   # the chunk kept from the client still prices the call


async def test_a_refusal_of_the_option_is_answered_at_once_without_it_and_remembered(autojump_clock, caplog):
    caplog.set_level(logging.WARNING, logger="switchyard.route")
    async with gateway(config(REFUSING)) as app:
        first = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        second = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        bodies = sent(app)
        view = (await request(app, "GET", "/admin/backends", headers=ADMIN)).json()
        circuits = dict(app.runtime.health.view.circuits)
        first_events = events(app, first)
        recs = await records(app)
    assert first.status == second.status == 200 and first.events()[-1] == second.events()[-1] == b"[DONE]"
    # refused, sent again without it in the same attempt; the next call is not asked at all
    assert ["stream_options" in b for b in bodies] == [True, False, False]
    assert first_events == ["accepted", "selected", "stream_usage_refused", "completed"]
    assert [r.attempts for r in recs] == [1, 1] and circuits == {}   # no retry spent, no circuit verdict
    [gen] = [b for b in view["backends"] if b["name"] == "gen"]
    assert gen["stream_usage"]["setting"] == "auto" and gen["stream_usage"]["refused_at"] is not None
    [line] = [r.getMessage() for r in caplog.records if "refused stream_options" in r.getMessage()]
    assert line.startswith("backend 'gen' refused stream_options")


async def test_a_reload_that_changes_the_backend_asks_it_again_and_one_that_does_not_keeps_the_memory(
        autojump_clock):
    async with gateway(config(REFUSING)) as app:
        await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        app.runtime.apply(load_text(config(REFUSING) + "retry: {max_attempts: 2}\n").snapshot)   # gen unchanged
        await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        app.runtime.apply(load_text(config(REFUSING).replace("models: [demo]}\n", "models: [demo], weight: 2}\n"))
                          .snapshot)
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        bodies = sent(app)
    assert reply.status == 200
    assert ["stream_options" in b for b in bodies] == [True, False, False, True, False]


async def test_always_keeps_asking_and_the_refusal_is_the_calls_answer(autojump_clock):
    async with gateway(config(REFUSING, stream_usage="always")) as app:
        replies = [await request(app, "POST", "/v1/chat/completions", chat(stream=True)) for _ in range(2)]
        bodies = sent(app)
        refused_at = app.runtime.stream_usage.refused_at(app.runtime.snapshot.backends[1])
    assert [r.status for r in replies] == [400, 400]
    assert replies[0].json()["error"]["param"] == "stream_options"   # the backend's own error, passed through
    assert ["stream_options" in b for b in bodies] == [True, True] and refused_at is None


async def test_never_does_not_ask_and_the_stream_is_estimated(autojump_clock):
    async with gateway(config(stream_usage="never")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        [body] = sent(app)
        [rec] = await records(app)
    assert reply.status == 200 and "stream_options" not in body
    assert rec.estimated is True


async def test_a_clients_own_include_usage_refused_by_the_backend_is_passed_through(autojump_clock):
    async with gateway(config(REFUSING)) as app:
        reply = await request(app, "POST", "/v1/chat/completions",
                              chat(stream=True, stream_options={"include_usage": True}))
        bodies = sent(app)
        refused_at = app.runtime.stream_usage.refused_at(app.runtime.snapshot.backends[1])
    assert reply.status == 400 and reply.json()["error"]["param"] == "stream_options"
    assert len(bodies) == 1 and refused_at is None   # not sent again, nothing remembered


def last_event(reply) -> str:
    """The type of the last event of an SSE answer whose events carry ``event:`` lines too."""
    data = [line for line in reply.body.split(b"\n") if line.startswith(b"data: ")]
    return json.loads(data[-1][len(b"data: "):])["type"]


MESSAGES = {"model": "demo", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "demo", "stream": True, "input": "hi"}


@pytest.mark.parametrize(("path", "body", "last"), [
    ("/anthropic/v1/messages", MESSAGES, "message_stop"),
    ("/v1/responses", RESPONSES, "response.completed"),
])
async def test_the_option_a_door_adds_for_its_own_answer_is_dropped_and_remembered_as_ours(
        autojump_clock, path, body, last):
    # A Messages or Responses client cannot write stream_options; its door (the bridge) asks for the usage its
    # answer ends with. A backend refusing it answers the call on the resend, and is not asked again.
    async with gateway(config(REFUSING)) as app:
        first = await request(app, "POST", path, body)
        second = await request(app, "POST", path, body)
        bodies = sent(app)
        first_events = events(app, first)
    assert first.status == second.status == 200
    assert last_event(first) == last_event(second) == last
    assert ["stream_options" in b for b in bodies] == [True, False, False]
    assert first_events == ["accepted", "selected", "stream_usage_refused", "completed"]


@pytest.mark.parametrize(("path", "body"), [("/anthropic/v1/messages", MESSAGES), ("/v1/responses", RESPONSES)])
async def test_never_leaves_out_the_option_a_door_adds(autojump_clock, path, body):
    async with gateway(config(stream_usage="never")) as app:
        reply = await request(app, "POST", path, body)
        [sent_body] = sent(app)
        [rec] = await records(app)
    assert reply.status == 200 and "stream_options" not in sent_body and rec.estimated


async def test_a_responses_clients_own_stream_options_to_a_responses_backend_are_its_own(autojump_clock):
    # the Responses API is spoken natively here: the body is the client's, and so is a refusal of it
    native = REFUSING.replace("internal: true, ", "").replace(
        '  - {name: gen, type: generic, url: "http://engine.simulated", models: [demo]}\n', "")
    async with gateway(native) as app:
        reply = await request(app, "POST", "/v1/responses", {**RESPONSES, "stream_options": {"include_usage": True}})
        bodies = sent(app)
        refused_at = app.runtime.stream_usage.refused_at(app.runtime.snapshot.backends[0])
    assert reply.status == 400 and len(bodies) == 1 and bodies[0]["stream_options"] == {"include_usage": True}
    assert refused_at is None


def test_stream_usage_is_one_of_three_words_on_an_openai_wire_type_only():
    from switchyard.config.load import ConfigError
    with pytest.raises(ConfigError) as err:
        load_text("backends:\n  - {name: g, type: generic, url: 'http://g', models: [m], stream_usage: sometimes}\n"
                  "  - {name: c, type: anthropic, models: [m], stream_usage: never}\n")
    assert err.value.errors == [
        "backends[0].stream_usage: must be one of auto, always, never, got 'sometimes'",
        "backends[1].stream_usage: only applies to backends spoken to in OpenAI's wire (openai, vllm, sglang, "
        "ollama, generic, simulated, azure), not anthropic: its own stream reports usage"]
