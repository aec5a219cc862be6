"""The hop guard in the App: before the routes, in the door's error shape, and the count passed on upstream."""

import logging

import pytest

from switchyard.actors.hops import HEADER
from switchyard.config.load import load_text
from tests.actors.test_realtime import CONFIG as RT_CONFIG
from tests.actors.test_realtime import connect, upstreams  # noqa: F401 (a fixture)
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backend saw

CONFIG = """
server: {max_hops: 2}
health_checks: {interval: 1h}
backends:
  - name: a
    type: simulated
    models: [demo]
    simulation: {latency: 0s, chunks: 2}
"""

H = HEADER.encode()
ANTHROPIC = {"model": "demo", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def realtime_upstreams(request):
    """test_realtime's simulated realtime upstreams, by host (and ``dialed``: the URLs opened)."""
    return request.getfixturevalue("upstreams")


def sim(app):
    return app.runtime.upstream.simulated["a.simulated"]


async def test_past_max_hops_an_openai_route_answers_508_in_the_openai_shape_with_the_request_id(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(), [(H, b"3")])
        assert reply.status == 508
        error = reply.json()["error"]
        assert (error["code"], error["param"], error["details"]) == ("loop_detected", HEADER,
                                                                    {"hops": 3, "max_hops": 2})
        assert reply.headers[b"x-continuum-request-id"].startswith(b"req_")
        assert not sim(app).requests   # refused before anything went upstream


async def test_past_max_hops_an_anthropic_route_answers_508_in_the_anthropic_shape(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", ANTHROPIC, [(H, b"3")])
        assert reply.status == 508
        body = reply.json()
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
        assert HEADER in body["error"]["message"]
        assert body["request_id"] == reply.headers[b"x-continuum-request-id"].decode()


async def test_a_malformed_hop_header_is_400_naming_it_in_each_doors_shape(autojump_clock):
    async with gateway(CONFIG) as app:
        openai = await request(app, "POST", "/v1/chat/completions", chat(), [(H, b"two")])
        assert openai.status == 400 and openai.json()["error"]["param"] == HEADER
        anthropic = await request(app, "POST", "/anthropic/v1/messages", ANTHROPIC, [(H, b"two")])
        assert anthropic.status == 400 and anthropic.json()["error"]["type"] == "invalid_request_error"
        assert HEADER in anthropic.json()["error"]["message"]


async def test_the_guard_runs_before_the_routes(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "GET", "/v1/no-such-route", None, [(H, b"9")])
        assert reply.status == 508   # not 404: the loop is what the caller needs to hear of


async def test_a_refusal_is_logged_as_request_rejected(autojump_clock, caplog):
    caplog.set_level(logging.INFO, logger="switchyard.route")
    async with gateway(CONFIG) as app:
        await request(app, "POST", "/v1/chat/completions", chat(), [(H, b"5")])
    [line] = [r for r in caplog.records if getattr(r, "event", None) == "request_rejected"]
    assert "508 loop_detected" in line.getMessage()


async def test_an_upstream_request_carries_one_more_hop_than_the_call_arrived_with(autojump_clock):
    async with gateway(CONFIG) as app:
        assert (await request(app, "POST", "/v1/chat/completions", chat())).status == 200
        assert sim(app).requests[-1].headers[HEADER] == "1"   # straight from a client: this is the first hop
        assert (await request(app, "POST", "/v1/chat/completions", chat(), [(H, b"2")])).status == 200
        assert sim(app).requests[-1].headers[HEADER] == "3"


async def test_the_admin_api_is_not_guarded(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "GET", "/admin/health", None, [(H, b"9")])
        assert reply.status != 508


async def test_a_realtime_handshake_past_max_hops_is_refused_508(autojump_clock, realtime_upstreams):
    async with gateway(RT_CONFIG) as app, connect(app, headers=[(H, b"4")]) as client:
        status, headers, body = await client.refusal()
    assert status == 508 and body["error"]["code"] == "loop_detected"
    assert headers[b"x-continuum-request-id"].startswith(b"req_") and realtime_upstreams["dialed"] == []


async def test_a_realtime_upstream_handshake_carries_one_more_hop(autojump_clock, realtime_upstreams):
    async with gateway(RT_CONFIG) as app, connect(app, headers=[(H, b"1")]):
        pass
    assert realtime_upstreams["rt-a.test"].sessions[0].headers[H] == b"2"


async def test_max_hops_changes_live_on_reload(autojump_clock):
    async with gateway(CONFIG) as app:
        assert (await request(app, "POST", "/v1/chat/completions", chat(), [(H, b"2")])).status == 200
        applied = app.runtime.apply(load_text(CONFIG.replace("max_hops: 2", "max_hops: 1")).snapshot)
        assert "server.max_hops" not in applied.pending_restart
        assert (await request(app, "POST", "/v1/chat/completions", chat(), [(H, b"2")])).status == 508
