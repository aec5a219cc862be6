"""The route table, limits and selection through the whole app (MockClock)."""

import re

import trio

from tests.harness import chat, gateway, request

TWO = """
selection_strategy: STRATEGY
server: {max_body_bytes: 2KiB}
health_checks: {interval: 1h}
backends:
  - {name: a, type: simulated, models: [demo], weight: 3, simulation: {latency: 10ms, chunks: 2}}
  - {name: b, type: simulated, models: [demo, other], weight: 1, simulation: {latency: 10ms, chunks: 2}}
  - {name: hidden, type: simulated, models: [secret], internal: true}
"""


def served_by(reply) -> str:
    return re.search(r"Hello from (\w+)", reply.json()["choices"][0]["message"]["content"]).group(1)


async def test_models_lists_public_models_with_backends(autojump_clock):
    async with gateway(TWO.replace("STRATEGY", "RoundRobin")) as app:
        reply = await request(app, "GET", "/v1/models")
        assert reply.status == 200
        data = reply.json()["data"]
        assert [(m["id"], m["backends"]) for m in data] == [("demo", ["a", "b"]), ("other", ["b"])]
        assert all(m["object"] == "model" for m in data)


async def test_internal_backend_model_is_not_found(autojump_clock):
    async with gateway(TWO.replace("STRATEGY", "RoundRobin")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("secret"))
        assert reply.status == 404 and reply.json()["error"]["code"] == "model_not_found"


async def test_body_over_limit_is_413(autojump_clock):
    async with gateway(TWO.replace("STRATEGY", "RoundRobin")) as app:
        big = chat(messages=[{"role": "user", "content": "x" * 3000}])
        reply = await request(app, "POST", "/v1/chat/completions", big)
        assert reply.status == 413 and reply.json()["error"]["code"] == "request_too_large"
        reply = await request(app, "POST", "/v1/chat/completions", big,
                              headers=[(b"content-length", b"999999")])
        assert reply.status == 413


async def test_unknown_route_404_and_wrong_method_405(autojump_clock):
    async with gateway(TWO.replace("STRATEGY", "RoundRobin")) as app:
        assert (await request(app, "GET", "/v2/nothing")).status == 404
        reply = await request(app, "GET", "/v1/chat/completions")
        assert reply.status == 405 and reply.headers[b"allow"] == b"POST"


async def test_weighted_round_robin_through_the_app(autojump_clock):
    async with gateway(TWO.replace("STRATEGY", "WeightedRoundRobin")) as app:
        picks = [served_by(await request(app, "POST", "/v1/chat/completions", chat())) for _ in range(8)]
        assert picks == ["a", "a", "b", "a", "a", "a", "b", "a"]


async def test_consistent_hash_uses_session_header(autojump_clock):
    async with gateway(TWO.replace("STRATEGY", "ConsistentHash")) as app:
        for session in ("alice", "bob", "carol"):
            picks = {served_by(await request(app, "POST", "/v1/chat/completions", chat(),
                                             headers=[(b"x-session-id", session.encode())]))
                     for _ in range(4)}
            assert len(picks) == 1


async def test_least_latency_prefers_faster_backend(autojump_clock):
    config = TWO.replace("STRATEGY", "LeastLatency").replace(
        "weight: 1, simulation: {latency: 10ms", "weight: 1, simulation: {latency: 500ms")
    async with gateway(config) as app:
        picks = [served_by(await request(app, "POST", "/v1/chat/completions", chat())) for _ in range(6)]
        assert picks[:2] == ["a", "b"]  # each measured once
        assert picks[2:] == ["a"] * 4


async def test_ready_reports_backend_states(autojump_clock):
    async with gateway(TWO.replace("STRATEGY", "RoundRobin")) as app:
        await trio.sleep(0.1)
        reply = await request(app, "GET", "/ready")
        assert reply.status == 200
        assert reply.json() == {"status": "ready", "healthy_backends": 2, "routable_backends": 2,
                                "backends": {"a": "healthy", "b": "healthy"}}
        assert (await request(app, "GET", "/health")).json() == {"status": "ok"}


async def test_ready_is_503_when_no_backend_healthy(autojump_clock):
    config = """
health_checks: {unhealthy_threshold: 1, warmup_check_interval: 100ms}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {health_status: 500}}
"""
    async with gateway(config) as app:
        await trio.sleep(0.1)
        reply = await request(app, "GET", "/ready")
        assert reply.status == 503 and reply.json()["backends"] == {"a": "unhealthy"}
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 503 and reply.json()["error"]["type"] == "service_unavailable"


async def test_app_without_runtime_answers_503():
    from switchyard.protocol.serving.app import App

    reply = await request(App(lambda: None), "POST", "/v1/chat/completions", chat())
    assert reply.status == 503 and reply.json()["error"]["code"] == "service_unavailable"
