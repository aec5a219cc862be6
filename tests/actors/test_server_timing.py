"""Server-Timing on every answer, and switchyard_gateway_overhead_seconds, at exact virtual instants.

The gateway's own work takes no virtual time, so what the gateway is seen to
spend here is what it waits on for itself: an input guardrail's moderation
model (``GUARDED``: 20 ms before the call's backend, which answers in 10 ms).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
import trio

from tests.harness import Reply, chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CHAT = "/v1/chat/completions"
KEY = [(b"authorization", b"Bearer sk-team-a-0123456789")]
GUARDED = """
health_checks: {interval: 1h}
api_keys:
  - {id: team-a, key: sk-team-a-0123456789}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation: {latency: 10ms, tokens_per_second: 100, chunks: 4}
  - name: mod
    type: simulated
    models: [omni-moderation-latest]
    simulation: {latency: 20ms}
guardrails:
  - name: safety
    mode: enforce
    stage: input
    moderation: {model: omni-moderation-latest, timeout: 2s, on_failure: fail_closed}
"""

# The W3C Server Timing grammar: metrics, comma-separated; each a token, then ;-parameters token = token or
# quoted-string, optional whitespace around the separators.
TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
QUOTED = r'"(?:[^"\\]|\\.)*"'
PARAM = rf"{TOKEN}[ \t]*=[ \t]*(?:{TOKEN}|{QUOTED})"
METRIC = re.compile(rf"({TOKEN})((?:[ \t]*;[ \t]*{PARAM})*)")


def server_timing(reply: Reply) -> dict[str, dict[str, str]]:
    """The answer's Server-Timing as {metric: {param: value}}, parsed by the grammar (any deviation fails)."""
    value = reply.headers[b"server-timing"].decode("ascii")
    metrics: dict[str, dict[str, str]] = {}
    for item in value.split(","):
        found = METRIC.fullmatch(item.strip(" \t"))
        assert found is not None, value
        params = {}
        for param in filter(None, (p.strip(" \t") for p in found.group(2).split(";"))):
            name, _, raw = param.partition("=")
            params[name.strip(" \t")] = raw.strip(" \t").strip('"')
        metrics[found.group(1)] = params
    return metrics


def durations(reply: Reply) -> dict[str, float]:
    """Each metric's ``dur`` in milliseconds (a metric without one is left out)."""
    return {name: float(p["dur"]) for name, p in server_timing(reply).items() if "dur" in p}


def hist(app: Any, route: str) -> tuple[float, float]:
    registry = app.runtime.metrics.registry
    labels = {"route": route}
    return (registry.get_sample_value("switchyard_gateway_overhead_seconds_count", labels) or 0.0,
            registry.get_sample_value("switchyard_gateway_overhead_seconds_sum", labels) or 0.0)


async def post(app: Any, body: dict[str, Any], path: str = CHAT, headers: Any = KEY) -> Reply:
    return await request(app, "POST", path, body, headers)


async def test_a_buffered_answer_says_the_gateways_time_and_the_upstreams_and_they_add_up_to_the_total(
        autojump_clock):
    async with gateway(GUARDED) as app:
        t0 = trio.current_time()
        reply = await post(app, chat())
        assert reply.status == 200
        took = round((reply.ended_at - t0) * 1000, 3)
    assert durations(reply) == {"gateway": 20.0, "upstream": took - 20.0, "total": took}
    assert took > 20.0   # the backend's answer took time too


async def test_a_whole_answers_wait_on_the_upstream_ends_once_the_answer_is_in_hand(autojump_clock):
    async with gateway(GUARDED.replace("stage: input", "stage: output")) as app:
        t0 = trio.current_time()
        reply = await post(app, chat())
        assert reply.status == 200
        took = round((reply.ended_at - t0) * 1000, 3)
        # the output guardrail judged the answer after the backend's part was over: the gateway's time
        assert durations(reply) == {"gateway": 20.0, "upstream": took - 20.0, "total": took}
        assert hist(app, CHAT) == (1, pytest.approx(0.02))


async def test_a_streams_headers_carry_what_is_known_at_its_first_byte(autojump_clock):
    async with gateway(GUARDED) as app:
        t0 = trio.current_time()
        reply = await post(app, chat(stream=True))
        assert reply.status == 200 and reply.events()[-1] == b"[DONE]"
        first = round((reply.chunks[0][0] - t0) * 1000, 3)
        assert reply.ended_at > reply.chunks[0][0]   # the stream went on after its headers
        # no total on a stream: its headers went out at its first byte, the gateway's time and the upstream's
        # so far; the whole stream is the upstream's, so the call's overhead stays the moderation call's
        assert durations(reply) == {"gateway": 20.0, "upstream": first - 20.0}
        assert hist(app, CHAT) == (1, pytest.approx(0.02))


async def test_a_refusal_carries_the_gateways_time_alone(autojump_clock):
    async with gateway(GUARDED) as app:
        unknown = await post(app, chat("nope"))
        blocked = await post(app, {"model": "demo", "messages": [{"role": "user", "content": "we will kill it"}]})
        no_key = await post(app, chat(), headers=[])
    assert unknown.status == 404 and blocked.status == 400 and no_key.status == 401
    assert server_timing(unknown) == {"gateway": {"dur": "20.000"}}   # the input stage ran first
    assert server_timing(blocked) == {"gateway": {"dur": "20.000"}}
    assert server_timing(no_key) == {"gateway": {"dur": "0.000"}}     # refused at the edge, before any call


async def test_a_cache_hit_carries_the_gateways_time_and_says_it_was_a_hit(autojump_clock):
    config = GUARDED.replace("guardrails:", "response_cache: {enabled: true}\nguardrails:")
    async with gateway(config) as app:
        miss = await post(app, chat(temperature=0))
        hit = await post(app, chat(temperature=0))
    assert miss.headers[b"x-continuum-cache"] == b"miss" and hit.headers[b"x-continuum-cache"] == b"hit"
    assert set(durations(miss)) == {"gateway", "upstream", "total"}
    assert server_timing(hit) == {"gateway": {"dur": "20.000"}, "cache": {"desc": "hit"}}


async def test_a_retry_backoff_and_every_attempt_count_as_the_upstreams(autojump_clock):
    config = """
health_checks: {interval: 1h}
retry: {max_attempts: 2, initial_delay: 1s, jitter: false}
fallback: {enabled: true, fallback_chains: {big: [small]}}
backends:
  - {name: a, type: simulated, models: [big], simulation: {latency: 100ms, failure: {status: 503}}}
  - {name: b, type: simulated, models: [small], simulation: {latency: 100ms, chunks: 1}}
"""
    async with gateway(config) as app:
        reply = await post(app, chat("big"), headers=[])
    # a fails at 0.1, is retried at 1.1 and fails at 1.2; b answers at 1.3
    assert reply.status == 200 and reply.json()["model"] == "small"
    assert durations(reply) == {"gateway": 0.0, "upstream": 1300.0, "total": 1300.0}


async def test_a_dedup_follower_waits_on_the_flight_as_on_an_upstream(autojump_clock):
    config = """
health_checks: {interval: 1h}
dedup: {enabled: true, max_entries: 4}
backends:
  - {name: sim, type: simulated, models: [demo], simulation: {latency: 1s, chunks: 1}}
"""
    replies: dict[str, Reply] = {}

    async def one(name: str, at: float) -> None:
        await trio.sleep_until(at)
        replies[name] = await post(app, chat(), headers=[])

    async with gateway(config) as app:
        t0 = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "leader", t0)
            nursery.start_soon(one, "follower", t0 + 0.3)
        assert app.runtime.upstream.simulated["sim.simulated"].count("request") == 1
        leader, follower = replies["leader"], replies["follower"]
        took = round((leader.ended_at - t0) * 1000, 3)
    assert follower.ended_at == leader.ended_at
    assert durations(leader) == {"gateway": 0.0, "upstream": took, "total": took}
    assert durations(follower) == {"gateway": 0.0, "upstream": took - 300.0, "total": took - 300.0}


async def test_a_slow_upload_is_the_clients_time_not_the_gateways(autojump_clock):
    async with gateway(GUARDED) as app:
        reply = Reply()
        body = json.dumps(chat()).encode()
        parts = [body[:10], body[10:]]

        async def receive() -> dict[str, Any]:
            if parts:
                await trio.sleep(0.5)   # each piece half a second after the last
                chunk = parts.pop(0)
                return {"type": "http.request", "body": chunk, "more_body": bool(parts)}
            await trio.sleep(math.inf)
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                reply.status, reply.headers = message["status"], dict(message["headers"])
            elif not message.get("more_body", False):
                reply.ended_at = trio.current_time()
                nursery.cancel_scope.cancel()   # the answer is whole: the client leaves

        t0 = trio.current_time()
        scope = {"type": "http", "method": "POST", "path": CHAT, "query_string": b"", "headers": KEY}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app, scope, receive, send)
    assert reply.status == 200
    took = round((reply.ended_at - t0) * 1000, 3)
    assert durations(reply) == {"gateway": 20.0, "upstream": took - 1020.0, "total": took - 1000.0}


async def test_the_overhead_histogram_observes_each_client_call_by_route(autojump_clock):
    async with gateway(GUARDED) as app:
        assert (await post(app, chat())).status == 200
        assert (await post(app, chat(stream=True))).status == 200
        assert (await post(app, chat("nope"))).status == 404
        # a guardrail that cannot read embeddings refuses them (fail_closed), without asking the model
        assert (await post(app, {"model": "demo", "input": "hi"}, "/v1/embeddings")).status == 400
        assert (await post(app, chat(), headers=[])).status == 401   # no call: an HTTP refusal only
        assert hist(app, CHAT) == (3, pytest.approx(0.06))   # the moderation call, 20 ms each
        assert hist(app, "/v1/embeddings") == (1, 0.0)
        # the moderation calls the gateway made for itself are calls (counted), not client calls (timed)
        registry = app.runtime.metrics.registry
        assert registry.get_sample_value("switchyard_requests_total", {
            "route": "/v1/moderations", "model": "omni-moderation-latest", "backend": "mod", "status": "200"}) == 3
        assert hist(app, "/v1/moderations") == (0, 0)


DOORS = """
health_checks: {interval: 1h}
backends:
  - name: sim
    type: simulated
    models: [demo, emb, img, tts, rr, omni-moderation-latest]
    simulation: {latency: 10ms, chunks: 2}
"""


async def test_every_doors_answer_carries_a_server_timing_the_grammar_reads(autojump_clock):
    messages = {"model": "demo", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    calls = [(CHAT, chat()), (CHAT, chat(stream=True)), ("/v1/completions", {"model": "demo", "prompt": "hi"}),
             ("/v1/embeddings", {"model": "emb", "input": "hi"}), ("/v1/responses", {"model": "demo", "input": "hi"}),
             ("/v1/responses", {"model": "demo", "input": "hi", "stream": True}),
             ("/anthropic/v1/messages", messages), ("/anthropic/v1/messages", {**messages, "stream": True}),
             ("/v1/images/generations", {"model": "img", "prompt": "a fox"}),
             ("/v1/audio/speech", {"model": "tts", "input": "hi", "voice": "alloy"}),
             ("/v1/rerank", {"model": "rr", "query": "fox", "documents": ["a fox", "a cat"]}),
             ("/v1/moderations", {"model": "omni-moderation-latest", "input": "hi"})]
    stored = None
    async with gateway(DOORS) as app:
        for path, body in calls:
            reply = await post(app, body, path, headers=[])
            assert reply.status == 200, (path, reply.body)
            timed = durations(reply)
            assert timed["upstream"] > 0 and timed["gateway"] == 0.0, (path, timed)
            assert ("total" in timed) == (b"content-length" in reply.headers), (path, timed)
            if path == "/v1/responses" and not body.get("stream"):
                stored = reply.json()["id"]
        # a stored response, asked of the backend that holds it: its answer's headers came from the upstream
        retrieved = await request(app, "GET", f"/v1/responses/{stored}")
        assert retrieved.status == 200 and set(durations(retrieved)) == {"gateway", "upstream"}
        for path in ("/v1/models", "/health", "/v1/nope"):   # and what is no call
            reply = await request(app, "GET", path)
            assert server_timing(reply) == {"gateway": {"dur": "0.000"}}, path
