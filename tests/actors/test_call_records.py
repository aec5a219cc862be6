"""One usage record per call, whatever its end, and the cost the client is shown (issue: usage ledger).

Every call here runs on ``usage.ledger: memory``; the records are read back
from the ledger's store after ``flush``. Costs are checked to the digit
against the usage the simulated backend reported.
"""

import json
import logging
from decimal import Decimal

import pytest

from switchyard.actors.ledger.entries import ENDPOINTS
from switchyard.actors.ledger.pricing import decimal_text
from switchyard.actors.ledger.record import UsageQuery
from tests.actors.test_midstream import config as midstream_config
from tests.actors.test_realtime import connect
from tests.harness import chat, gateway, request

PRICED = """
health_checks: {interval: 1h}
usage: {ledger: memory}
backends:
  - {name: a, type: simulated, models: [demo, free], simulation: {latency: 10ms, chunks: 4},
     model_configs: [{id: demo, metadata: {pricing: {input_tokens: 5.0, output_tokens: 30.0}}}]}
"""
KEYED = PRICED + """
api_keys:
  - {id: team, key: sk-team-0123456789abcdef, organization_id: acme}
"""
TEAM = [(b"authorization", b"Bearer sk-team-0123456789abcdef")]


async def records(app):
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose=None), 1000)


def cost(prompt: int, completion: int) -> Decimal:
    return (Decimal(prompt) * 5 + Decimal(completion) * 30) / 1_000_000


def request_id(reply) -> str:
    return reply.headers[b"x-continuum-request-id"].decode()


async def test_a_buffered_answer_carries_its_cost_in_x_continuum_cost(autojump_clock):
    async with gateway(KEYED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(), TEAM)
        usage = reply.json()["usage"]
        expected = cost(usage["prompt_tokens"], usage["completion_tokens"])
        assert reply.headers[b"x-continuum-cost"] == decimal_text(expected).encode()
        assert b"x-continuum-cost-estimated" not in reply.headers
        [rec] = await records(app)
    assert rec.request_id == request_id(reply)
    assert (rec.key_id, rec.organization_id, rec.endpoint, rec.model, rec.served_model, rec.backend) == \
        ("team", "acme", "chat", "demo", "demo", "a")
    assert (rec.status, rec.error_code, rec.attempts, rec.stream, rec.purpose) == (200, None, 1, False, "client")
    assert (rec.input_tokens, rec.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert rec.cost == float(expected) and rec.estimated is False
    assert rec.latency_ms > 0 and rec.ttfb_ms is not None


async def test_a_model_without_pricing_costs_null_not_zero(autojump_clock):
    async with gateway(PRICED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("free"))
        assert reply.status == 200 and b"x-continuum-cost" not in reply.headers
        [rec] = await records(app)
    assert rec.cost is None and rec.input_tokens > 0


@pytest.mark.simulator_history
async def test_a_stream_asks_for_usage_the_client_never_sees_and_is_priced_on_it(autojump_clock):
    async with gateway(PRICED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.events()[-1] == b"[DONE]"
        assert all(b'"usage"' not in e for e in reply.events())
        sent = json.loads(app.runtime.upstream.simulated["a.simulated"].requests[0].content)
        assert sent["stream_options"] == {"include_usage": True}
        [rec] = await records(app)
    assert rec.stream is True and rec.output_tokens == 4 and rec.estimated is False
    assert rec.cost == float(cost(rec.input_tokens, 4))


async def test_a_stream_that_asked_for_usage_gets_usage_cost_in_its_last_usage_chunk(autojump_clock):
    async with gateway(PRICED) as app:
        body = chat(stream=True, stream_options={"include_usage": True})
        reply = await request(app, "POST", "/v1/chat/completions", body)
        [usage] = [json.loads(e)["usage"] for e in reply.events() if b'"usage"' in e]
        assert usage["cost"] == float(cost(usage["prompt_tokens"], usage["completion_tokens"]))
        [rec] = await records(app)
    assert rec.cost == usage["cost"]


async def test_a_failed_call_is_recorded_with_the_status_the_client_got_and_the_gateway_code(autojump_clock):
    config = PRICED.replace("chunks: 4}", "chunks: 4, failure: {status: 400, error_code: bad_thing}}")
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.json()["error"]["code"] == "bad_thing"   # the backend's own error, passed through
        [rec] = await records(app)
    assert rec.status == reply.status == 400
    assert rec.error_code == "upstream_error"   # the gateway's taxonomy: the same code for every backend
    assert (rec.attempts, rec.backend, rec.input_tokens, rec.cost) == (1, "a", 0, None)


async def test_a_refused_key_is_recorded_under_its_request_id_and_logged_as_request_rejected(autojump_clock, caplog):
    caplog.set_level(logging.INFO, logger="switchyard.route")
    async with gateway(KEYED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(),
                              [(b"authorization", b"Bearer sk-wrong-0000000000000000")])
        assert reply.status == 401
        [rec] = await records(app)
    assert rec.request_id == request_id(reply)
    assert (rec.status, rec.key_id, rec.attempts, rec.backend, rec.cost) == (401, None, 0, None, None)
    assert rec.error_code == reply.json()["error"]["code"]
    [line] = [r for r in caplog.records if getattr(r, "event", None) == "request_rejected"]
    assert line.request_id == rec.request_id if hasattr(line, "request_id") else True


async def test_a_validation_refusal_is_recorded_with_the_model_it_named(autojump_clock):
    async with gateway(PRICED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", {"model": "demo", "messages": "hi"})
        assert reply.status == 400
        [rec] = await records(app)
    assert (rec.status, rec.model, rec.endpoint, rec.attempts) == (400, "demo", "chat", 0)


async def test_an_unknown_model_is_recorded_as_its_404(autojump_clock):
    async with gateway(PRICED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("nope"))
        [rec] = await records(app)
    assert (rec.status, rec.model, rec.error_code) == (404, "nope", reply.json()["error"]["code"])


async def test_a_client_that_leaves_is_recorded_as_499(autojump_clock):
    config = PRICED.replace("latency: 10ms", "latency: 5s")
    async with gateway(config) as app:
        await request(app, "POST", "/v1/chat/completions", chat(stream=True), disconnect_at=1.0)
        [rec] = await records(app)
    assert (rec.status, rec.error_code) == (499, "client_disconnected")


async def test_a_stream_cut_half_way_and_continued_elsewhere_is_two_priced_attempts(autojump_clock):
    priced = midstream_config() + """
usage: {ledger: memory}
"""
    priced = priced.replace("models: [big]", "models: [big]\n    model_configs: [{id: big, metadata: {pricing: "
                            "{input_tokens: 1.0, output_tokens: 1.0}}}]")
    priced = priced.replace("models: [small]", "models: [small]\n    model_configs: [{id: small, metadata: {pricing: "
                            "{input_tokens: 2.0, output_tokens: 2.0}}}]")
    async with gateway(priced) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.events()[-1] == b"[DONE]"
        [rec] = await records(app)
    assert rec.attempts == 2 and rec.backend == "b" and rec.served_model == "small"
    # the cut attempt had no usage chunk: its tokens are estimated (3 chunks out), the call says so
    assert rec.estimated is True
    assert rec.cost is not None and rec.cost > 0
    assert rec.output_tokens > 3


async def test_the_anthropic_door_shows_the_cost_in_its_usage(autojump_clock):
    async with gateway(PRICED) as app:
        body = {"model": "demo", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        reply = await request(app, "POST", "/anthropic/v1/messages", body, [(b"anthropic-version", b"2023-06-01")])
        deltas = [json.loads(block.split(b"data: ", 1)[1]) for block in reply.body.split(b"\n\n")
                  if b'"message_delta"' in block]
        [rec] = await records(app)
    assert deltas[-1]["usage"]["cost"] == rec.cost and rec.endpoint == "messages"


async def test_every_call_and_every_refusal_gets_exactly_one_record(autojump_clock):
    async with gateway(KEYED) as app:
        replies = [await request(app, "POST", "/v1/chat/completions", chat(), TEAM),
                   await request(app, "POST", "/v1/chat/completions", chat(stream=True), TEAM),
                   await request(app, "POST", "/v1/chat/completions", chat()),
                   await request(app, "POST", "/v1/embeddings", {"model": "demo", "input": "x"}, TEAM),
                   await request(app, "POST", "/v1/chat/completions", b"{not json", TEAM)]
        got = await records(app)
    assert sorted(r.request_id for r in got) == sorted(request_id(r) for r in replies)
    assert [r.status for r in sorted(got, key=lambda r: r.time)] == [r.status for r in replies]


async def test_classifier_calls_are_metered_as_purpose_classifier_under_the_clients_request_id(autojump_clock):
    from tests.actors.test_smart_routing_flow import auto
    from tests.actors.test_smart_routing_flow import config as smart_config
    async with gateway(smart_config(method="llm") + "usage: {ledger: memory}\n") as app:
        reply = await request(app, "POST", "/v1/chat/completions", auto("hi"))
        assert reply.status == 200
        got = await records(app)
    by_purpose = {r.purpose: r for r in got}
    assert set(by_purpose) == {"client", "classifier"}
    assert by_purpose["classifier"].request_id == by_purpose["client"].request_id == request_id(reply)
    assert by_purpose["classifier"].backend == "judge" and by_purpose["classifier"].status == 200


async def test_the_responses_door_shows_the_cost_in_its_completed_usage(autojump_clock):
    async with gateway(PRICED) as app:
        body = {"model": "demo", "input": "hi", "stream": True}
        reply = await request(app, "POST", "/v1/responses", body)
        done = [json.loads(block.split(b"data: ", 1)[1]) for block in reply.body.split(b"\n\n")
                if b'"response.completed"' in block]
        buffered = await request(app, "POST", "/v1/responses", {"model": "demo", "input": "hi"})
        got = await records(app)
    assert done[-1]["response"]["usage"]["cost"] == got[0].cost is not None
    assert buffered.headers[b"x-continuum-cost"] == decimal_text(Decimal(repr(got[1].cost))).encode()
    assert {r.endpoint for r in got} == {"responses"}


async def test_the_ledger_url_shows_no_password_in_admin_config(autojump_clock):
    from switchyard.config.load import load_text
    from switchyard.protocol.admin.api import public
    snapshot = load_text(PRICED.replace("ledger: memory", "ledger: 'postgresql://sy:s3cret@db:5432/l?password=s3cret'")
                         ).snapshot
    shown = public(snapshot)["usage"]["ledger"]
    assert "s3cret" not in shown and shown.startswith("postgresql://sy:***@db:5432/l")


def test_a_refused_ledger_url_is_quoted_without_its_credentials():
    from switchyard.config.load import ConfigError, load_text
    with pytest.raises(ConfigError) as caught:
        load_text(PRICED.replace("ledger: memory", "ledger: 'mysql://u:pw@h/db'"))
    assert "usage.ledger" in str(caught.value) and "pw" not in str(caught.value).replace("postgresql", "")


CALL_ROUTES = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/responses/compact",
               "/anthropic/v1/messages", "/v1/images/generations", "/v1/images/edits", "/v1/images/variations",
               "/v1/audio/transcriptions", "/v1/audio/translations", "/v1/audio/speech"]


def rejected(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "request_rejected"]


@pytest.mark.parametrize("route", CALL_ROUTES)
async def test_a_body_that_is_not_json_is_recorded_and_logged_at_every_door(route, autojump_clock, caplog):
    """Every call route's refusal gets its record and its request_rejected line (the Messages door once got
    neither)."""
    caplog.set_level(logging.INFO, logger="switchyard.route")
    async with gateway(PRICED) as app:
        reply = await request(app, "POST", route, b"{not json", [(b"content-type", b"application/json")])
        got = await records(app)
    assert reply.status == 400
    [rec] = got
    assert (rec.request_id, rec.status, rec.endpoint, rec.attempts) == \
        (request_id(reply), 400, ENDPOINTS[route], 0)
    assert len(rejected(caplog)) == 1


async def test_a_responses_websocket_turn_refused_before_it_became_a_call_is_recorded(autojump_clock, caplog):
    caplog.set_level(logging.INFO, logger="switchyard.route")
    async with gateway(PRICED) as app:
        async with connect(app, query=b"", path="/v1/responses") as client:
            await client.send(b"{not json")
            error = await client.event()
            await client.send({"type": "response.create", "model": "demo", "input": "hi", "stream": False})
            refused = await client.event()
        got = await records(app)
    assert error["error"]["code"] == "invalid_json" and refused["error"]["code"] == "unsupported_parameter"
    assert sorted((r.endpoint, r.status, r.error_code, r.model) for r in got) == [
        ("responses", 400, "invalid_json", None), ("responses", 400, "unsupported_parameter", "demo")]
    assert len(rejected(caplog)) == 2


async def test_a_bug_of_ours_before_the_pipeline_is_a_recorded_500(autojump_clock, caplog, monkeypatch):
    from switchyard.protocol.serving import app as app_module

    def broken(*args, **kwargs):
        raise KeyError("a bug")
    monkeypatch.setattr(app_module, "parse_json_object", broken)
    async with gateway(PRICED) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        [rec] = await records(app)
    assert (reply.status, reply.json()["error"]["code"]) == (500, "internal_error")
    assert (rec.request_id, rec.status, rec.error_code) == (request_id(reply), 500, "internal_error")
