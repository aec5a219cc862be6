"""Graceful drain: in-flight calls finish within the window, new ones are refused cleanly."""

import json

import pytest
import trio

from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
server: {shutdown_drain_timeout: 3s}
health_checks: {interval: 1h}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 0s, tokens_per_second: 2, chunks: CHUNKS}}
"""


async def test_call_in_flight_completes_within_the_drain_window(autojump_clock):
    async with gateway(CONFIG.replace("CHUNKS", "4")) as app:
        replies = {}

        async def stream():
            replies["s"] = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        async with trio.open_nursery() as n:
            n.start_soon(stream)
            await trio.sleep(0.1)
            n.start_soon(app.runtime.drain, 3.0)
            await trio.sleep(0.1)
            ready = await request(app, "GET", "/ready")
            assert ready.status == 503 and ready.json()["status"] == "draining"
            refused = await request(app, "POST", "/v1/chat/completions", chat())
            assert refused.status == 503 and refused.json()["error"]["code"] == "server_shutting_down"
        assert replies["s"].events()[-1] == b"[DONE]"


async def test_call_past_the_window_ends_with_a_clean_error_at_its_end(autojump_clock):
    async with gateway(CONFIG.replace("CHUNKS", "20")) as app:
        sim = app.runtime.upstream.simulated["a.simulated"]
        replies = {}
        t0 = trio.current_time()

        async def stream():
            replies["s"] = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        async with trio.open_nursery() as n:
            n.start_soon(stream)
            await trio.sleep(1)
            n.start_soon(app.runtime.drain, 3.0)
        reply = replies["s"]
        assert reply.ended_at - t0 == 4.0  # drain began at 1, window 3 s
        assert json.loads(reply.events()[-1])["error"]["code"] == "server_shutting_down"
        assert b"[DONE]" not in reply.body
        assert sim.count("cancelled") == 1 and not app.runtime.calls


async def test_a_stop_asked_for_while_starting_is_a_drain_from_the_first_request(autojump_clock):
    from switchyard.config.load import load_text
    from switchyard.protocol.serving.app import App

    snapshot = load_text(CONFIG.replace("CHUNKS", "2")).snapshot
    app = App(lambda: snapshot)
    app.begin_drain()                      # the signal came before the lifespan started the Runtime
    to_app, from_test = trio.open_memory_channel(2)
    from_app, to_test = trio.open_memory_channel(2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, from_test.receive, from_app.send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await to_test.receive())["type"] == "lifespan.startup.complete"
        ready = await request(app, "GET", "/ready")
        assert ready.status == 503 and ready.json()["status"] == "draining"
        refused = await request(app, "POST", "/v1/chat/completions", chat())
        assert refused.status == 503 and refused.json()["error"]["code"] == "server_shutting_down"
        await to_app.send({"type": "lifespan.shutdown"})
        assert (await to_test.receive())["type"] == "lifespan.shutdown.complete"
