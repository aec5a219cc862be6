"""One call end to end under MockClock: exact instants, cancellation, relay."""

import json

import pytest
import trio
import trio.testing

from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

ONE_BACKEND = """
health_checks: {interval: 1h}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation: {latency: 1s, tokens_per_second: 2, chunks: 4}
"""


async def test_buffered_reply_arrives_after_latency_plus_pacing(autojump_clock):
    async with gateway(ONE_BACKEND) as app:
        start = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 200
        body = reply.json()
        assert body["choices"][0]["message"]["content"].startswith("Hello from sim.")
        assert body["usage"]["completion_tokens"] == 4
        # 1 s latency, then 3 gaps of 0.5 s between 4 tokens
        assert reply.ended_at - start == 2.5


async def test_stream_chunks_relayed_at_their_upstream_instants(autojump_clock):
    async with gateway(ONE_BACKEND) as app:
        start = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.status == 200
        assert reply.headers[b"content-type"] == b"text/event-stream"
        times = [t - start for t, c in reply.chunks if b'"content"' in c]
        assert times == [1.0, 1.5, 2.0, 2.5]
        assert reply.events()[-1] == b"[DONE]"


async def test_client_disconnect_cancels_upstream_at_once(autojump_clock):
    async with gateway(ONE_BACKEND) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]
        start = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True),
                              disconnect_at=start + 1.2)
        assert [t - start for t, _ in reply.chunks] == [1.0]
        cancelled = [t - start for t, kind in sim.events if kind == "cancelled"]
        assert cancelled == [1.2]
        assert app.runtime.pool.in_flight["sim"] == 0


async def test_a_buffered_calls_client_watcher_ends_with_the_servers_disconnect_after_the_answer(autojump_clock):
    """The watcher runs in the Runtime's nursery with no scope of its own: the disconnect the server
    reports once the answer is out ends it, so no task of the call is left behind."""
    async with gateway(ONE_BACKEND) as app:
        await trio.testing.wait_all_tasks_blocked()
        before = len(app.runtime.nursery.child_tasks)
        statuses = []

        async def client() -> None:
            statuses.append((await request(app, "POST", "/v1/chat/completions", chat())).status)

        async with trio.open_nursery() as clients:
            for _ in range(5):
                clients.start_soon(client)
        assert statuses == [200] * 5
        await trio.testing.wait_all_tasks_blocked()
        assert len(app.runtime.nursery.child_tasks) == before


async def test_a_streams_client_watcher_runs_in_the_runtime_and_ends_with_the_servers_disconnect(autojump_clock):
    """With no thinking metadata configured a stream has no nursery of its own: while it runs, its
    watcher is one more task of the Runtime's nursery, and the disconnect reported after the answer
    ends it. A client that leaves still cancels the stream's upstream at once (the test above)."""
    async with gateway(ONE_BACKEND) as app:
        assert app.runtime.snapshot.may_think is False
        await trio.testing.wait_all_tasks_blocked()
        before = len(app.runtime.nursery.child_tasks)
        during = []

        async def look() -> None:
            await trio.sleep(1.2)   # between the first and the second chunk
            during.append(len(app.runtime.nursery.child_tasks))

        async with trio.open_nursery() as clients:
            clients.start_soon(look)
            reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.events()[-1] == b"[DONE]"
        assert during == [before + 1]
        await trio.testing.wait_all_tasks_blocked()
        assert len(app.runtime.nursery.child_tasks) == before


async def test_client_disconnect_cancels_buffered_upstream(autojump_clock):
    async with gateway(ONE_BACKEND) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]
        start = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat(), disconnect_at=start + 0.3)
        assert reply.status == 0  # nothing was sent: nobody is listening
        assert [t - start for t, kind in sim.events if kind == "cancelled"] == [0.3]


async def test_stream_with_finish_reason_but_no_done_gets_done(autojump_clock):
    from switchyard.protocol.simulated.openai import SimulatedTransport

    async def no_done(self, sim, cid, model, body, name=None):
        yield b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
        yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'

    async with gateway(ONE_BACKEND) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]
        sim._sse = no_done.__get__(sim, SimulatedTransport)
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.events()[-1] == b"[DONE]" and len(reply.events()) == 3


async def test_stream_cut_without_finish_reason_is_an_error_not_success(autojump_clock):
    from switchyard.protocol.simulated.openai import SimulatedTransport

    async def cut(self, sim, cid, model, body, name=None):
        yield b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'

    async with gateway(ONE_BACKEND) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]
        sim._sse = cut.__get__(sim, SimulatedTransport)
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        events = reply.events()
        assert b"[DONE]" not in events
        assert json.loads(events[-1])["error"]["code"] == "upstream_stream_truncated"


FAILING = """
health_checks: {interval: 1h, unhealthy_threshold: 2}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation:
      latency: 100ms
      chunks: 4
      failure: {FAILURE}
"""


async def test_upstream_error_status_passed_through(autojump_clock):
    async with gateway(FAILING.replace("FAILURE", "status: 429")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 429
        assert reply.json()["error"]["code"] == "simulated_429"


async def test_mid_stream_reset_sends_error_event_without_done(autojump_clock):
    async with gateway(FAILING.replace("FAILURE", "reset_after_chunk: 2")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.status == 200
        events = reply.events()
        assert b"[DONE]" not in events
        error = json.loads(events[-1])["error"]
        assert error["code"] == "upstream_connection_error"
        assert len([e for e in events if b'"content"' in e]) == 2


async def test_malformed_event_dropped_never_forwarded_and_never_a_complete_answer(autojump_clock):
    async with gateway(FAILING.replace("FAILURE", "malformed_chunk: 2")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert b'"choices": [ {"delta": ' not in reply.body
        assert len([e for e in reply.events() if b'"content"' in e]) == 1
        assert json.loads(reply.events()[-1])["error"]["code"] == "upstream_malformed_event"
        assert b"[DONE]" not in reply.body


async def test_stall_before_first_byte_holds_until_client_leaves(autojump_clock):
    async with gateway(FAILING.replace("FAILURE", "stall_before_first_byte: true")) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]
        start = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True), disconnect_at=start + 30)
        assert [c for _, c in reply.chunks] == []
        assert [t - start for t, k in sim.events if k == "cancelled"] == [30.0]


async def test_passive_failures_take_backend_out(autojump_clock):
    # one anonymous client's failures open the circuit alone
    async with gateway("circuit_breaker: {min_callers: 1}\n" + FAILING.replace("FAILURE", "status: 503")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 503  # two tries (503 is retried once), both failed
        assert app.runtime.health.view.circuit("sim", "demo").state.value == "open"
        assert app.runtime.health.view.backends["sim"].state.value == "healthy"  # /health still says OK
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 503
        assert reply.json()["error"]["code"] == "no_healthy_backends"


async def test_client_error_status_does_not_count_against_health(autojump_clock):
    async with gateway(FAILING.replace("FAILURE", "status: 400")) as app:
        for _ in range(3):
            assert (await request(app, "POST", "/v1/chat/completions", chat())).status == 400
        assert app.runtime.health.view.circuits == {}


async def test_buffered_body_that_breaks_is_an_error_not_a_200(autojump_clock):
    async with gateway(FAILING.replace("FAILURE", "reset_after_chunk: 2")) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 502
        assert reply.json()["error"]["code"] == "upstream_connection_error"


async def test_upstream_redirect_is_a_protocol_error(autojump_clock):
    import httpx

    async with gateway(ONE_BACKEND) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]

        async def redirect(request):
            return httpx.Response(302, headers={"location": "http://elsewhere/"})
        sim.handle_async_request = redirect
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 502
        assert reply.json()["error"]["code"] == "upstream_protocol_error"
        assert b"location" not in reply.headers


async def test_compressed_upstream_stream_is_decoded_for_the_client(autojump_clock):
    import gzip

    import httpx

    events = b'data: {"choices":[{"index":0,"delta":{"content":"zip"}}]}\n\ndata: [DONE]\n\n'
    async with gateway(ONE_BACKEND) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]

        async def gzipped(request):
            return httpx.Response(200, headers={"content-type": "text/event-stream",
                                                "content-encoding": "gzip"}, content=gzip.compress(events))
        sim.handle_async_request = gzipped
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.body == events
        assert b"content-encoding" not in reply.headers


async def test_oversized_event_fails_the_attempt_cleanly(autojump_clock):
    from switchyard.protocol.simulated.openai import SimulatedTransport

    async def huge(self, sim, cid, model, body, name=None):
        yield b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
        yield b"data: " + b"x" * (2 * 1024 * 1024)

    async with gateway(ONE_BACKEND) as app:
        sim = app.runtime.upstream.simulated["sim.simulated"]
        sim._sse = huge.__get__(sim, SimulatedTransport)
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert json.loads(reply.events()[-1])["error"]["code"] == "upstream_event_too_large"
        assert app.runtime.health.view.circuit("sim", "demo").failures == 1
