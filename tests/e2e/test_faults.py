"""End-to-end fault injection: every failure ends in the complete answer or a clean, bounded error.

A real Switchyard on a real socket, the official ``openai`` SDK as the
client (in a worker thread, bounded by ``in_thread``), simulated backends
scripted to misbehave. One test per rule, named after it. The rule each
test holds the gateway to: the client gets either the whole answer, or an
``openai`` exception of the asserted type within a bounded time; never a
truncated success, never a hang.

Real time is used throughout, so every limit is small: first_byte 500 ms,
chunk_interval 300 ms, total 5 s, retries from 50 ms. Model ``big`` falls
back to ``small`` where a test has a chain.
"""

from __future__ import annotations

import functools
import json
import socket
import struct
from collections.abc import Callable
from typing import Any

import attrs
import httpx
import openai
import pytest
import trio

from switchyard.config.schema import SimulatedFailure, Simulation
from tests.e2e.support import Gateway, backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TEXT = "one two three four five six seven eight"
OTHER = "alpha beta gamma delta epsilon zeta eta theta"
USER = [{"role": "user", "content": "hi"}]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False}}}


# --- config -------------------------------------------------------------------------

def sim(name: str, model: str, **simulation: Any) -> dict[str, Any]:
    """A simulated backend serving ``model`` (fast by default, see ``support.backend``)."""
    return {**backend(name, **simulation), "models": [model]}


def streamer(name: str, model: str, text: str = TEXT, **simulation: Any) -> dict[str, Any]:
    """A backend streaming ``text`` in 8 pieces, 10 ms apart."""
    return sim(name, model, text=text, chunks=8, tokens_per_second=100, **simulation)


def faults_config(*backends: dict[str, Any], chain: bool = True, min_tokens: int = 2,
                  **top: Any) -> dict[str, Any]:
    config = gateway_config(
        *backends,
        health_checks={"interval": "1h"},
        retry={"max_attempts": 3, "initial_delay": "50ms", "max_delay": "2s", "backoff_multiplier": 2,
               "jitter": False},
        timeouts={"connection": "1s", "request": {
            "standard": {"first_byte": "500ms", "total": "5s"},
            "streaming": {"first_byte": "500ms", "chunk_interval": "300ms", "total": "5s"}}},
        fallback={"enabled": True, "fallback_chains": {"big": ["small"]}} if chain else {"enabled": False},
        streaming={"mid_stream_fallback": {"min_accumulated_tokens": min_tokens}},
    )
    config.update(top)
    return config


# --- client side ----------------------------------------------------------------------

def sdk(gw: Gateway, timeout: float = 5) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=timeout)


async def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``in_thread(fn, ...)`` and how long it took."""
    began = trio.current_time()
    result = await in_thread(fn, *args, **kwargs)
    return result, trio.current_time() - began


async def raises_within(seconds: float, exc: type[BaseException], fn: Callable[..., Any], *args: Any,
                        **kwargs: Any) -> Any:
    """The exception ``fn`` raised in the worker thread, asserting its type and that it came in time."""
    began = trio.current_time()
    with pytest.raises(exc) as info:
        await in_thread(fn, *args, **kwargs)
    assert trio.current_time() - began < seconds, f"{exc.__name__} took {trio.current_time() - began:.2f}s"
    return info.value


def stream_all(client: openai.OpenAI, model: str = "big", **kwargs: Any) -> list[Any]:
    return list(client.chat.completions.create(model=model, messages=USER, stream=True, **kwargs))


def stream_until_error(client: openai.OpenAI, model: str = "big") -> tuple[list[Any], BaseException | None]:
    seen: list[Any] = []
    try:
        for chunk in client.chat.completions.create(model=model, messages=USER, stream=True):
            seen.append(chunk)  # noqa: PERF402 - the chunks before the error are the point
    except openai.APIError as exc:
        return seen, exc
    return seen, None


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def finish_reasons(chunks: list[Any]) -> list[tuple[int, str]]:
    return [(i, c.choices[0].finish_reason) for i, c in enumerate(chunks)
            if c.choices and c.choices[0].finish_reason]


def assert_complete_stream(chunks: list[Any], text: str) -> None:
    """The whole text, one finish_reason, on the last chunk; no route change."""
    assert text_of(chunks) == text
    assert finish_reasons(chunks) == [(len(chunks) - 1, "stop")]
    assert not any(route_change(c) for c in chunks)


def route_change(chunk: Any) -> dict[str, Any] | None:
    return (chunk.model_extra or {}).get("route_change") or getattr(chunk, "route_change", None)


async def raw_sse(gw: Gateway, body: dict[str, Any]) -> list[str]:
    """The data fields of a streamed answer, read without the SDK (which swallows [DONE])."""
    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        with trio.fail_after(5):
            response = await http.post("/v1/chat/completions", json={**body, "stream": True})
    assert response.status_code == 200, response.text
    return [e.removeprefix("data: ") for e in response.text.split("\n\n") if e.startswith("data: ")]


async def wait_until(predicate: Callable[[], bool], *, within: float, step: float = 0.02) -> bool:
    with trio.move_on_after(within):
        while not predicate():
            await trio.sleep(step)
        return True
    return False


def request_times(transport: Any) -> list[float]:
    return [t for t, kind in transport.events if kind == "request"]


def idle(gw: Gateway) -> bool:
    return all(n == 0 for n in gw.app.runtime.pool.in_flight.values())


# --- 1-4: error statuses, retried or passed on ----------------------------------------

async def test_429_with_retry_after_is_retried_after_the_wait_then_succeeds(start_gateway):
    gw = await start_gateway(faults_config(sim("a", "demo"), chain=False))
    a = gw.sim("a")
    a.script.append(Simulation(latency=0.01, chunks=5, failure=SimulatedFailure(status=429, retry_after=1)))
    with sdk(gw) as client:
        completion, took = await timed(client.chat.completions.create, model="demo", messages=USER)
    assert completion.choices[0].message.content == "Hello from a. The quick brown fox"
    assert completion.choices[0].finish_reason == "stop"
    first, second = request_times(a)
    assert 0.95 <= second - first < 1.5, "Retry-After: 1 was not honoured"
    assert a.count("status:429") == 1 and a.count("completed") == 1
    assert took < 2.5


async def test_persistent_429_without_retry_after_moves_to_chain_model_with_fallback_headers(start_gateway):
    gw = await start_gateway(faults_config(sim("a", "big", failure={"status": 429}), sim("b", "small")))
    with sdk(gw) as client:
        raw, took = await timed(client.chat.completions.with_raw_response.create, model="big", messages=USER)
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from b. The quick brown fox"
    assert completion.model == "small"
    assert raw.headers["x-fallback-model"] == "small"
    assert raw.headers["x-fallback-used"] == "true"
    assert raw.headers["x-fallback-original-model"] == "big"
    assert gw.sim("a").count("status:429") == 2  # 429 gets two tries on one route, never a burst
    assert gw.sim("b").count("request") == 1
    assert took < 2


async def test_500_once_is_retried_on_the_same_backend(start_gateway):
    gw = await start_gateway(faults_config(sim("a", "demo"), chain=False))
    a = gw.sim("a")
    a.script.append(Simulation(latency=0.01, failure=SimulatedFailure(status=500)))
    with sdk(gw) as client:
        completion, took = await timed(client.chat.completions.create, model="demo", messages=USER)
    assert completion.choices[0].message.content == "Hello from a. The quick brown fox"
    assert a.count("request") == 2 and a.count("status:500") == 1
    first, second = request_times(a)
    assert second - first >= 0.05  # initial_delay, no jitter
    assert took < 2


async def test_persistent_503_without_alternative_is_internal_server_error_in_bounded_time(start_gateway):
    gw = await start_gateway(faults_config(sim("a", "demo", failure={"status": 503}), chain=False))
    with sdk(gw) as client:
        error = await raises_within(2, openai.InternalServerError, client.chat.completions.create,
                                    model="demo", messages=USER)
    assert error.status_code == 503
    assert error.code == "simulated_503"
    assert gw.sim("a").count("request") == 2


# --- 5: the connection itself fails ------------------------------------------------------

@pytest.mark.parametrize("how", ["reset", "refused"])
async def test_tcp_reset_or_refused_before_headers_falls_back_to_a_working_backend(start_gateway, how):
    accepted = 0

    async def slam(stream: trio.SocketStream) -> None:
        nonlocal accepted
        accepted += 1
        # linger 0: close() sends RST, not FIN
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        if how == "reset":
            listeners = await nursery.start(functools.partial(trio.serve_tcp, slam, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
        else:
            with socket.socket() as s:  # a port nobody listens on
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        dead = {"name": "dead", "type": "generic", "url": f"http://127.0.0.1:{port}", "models": ["big"],
                "discovery": False}
        gw = await start_gateway(faults_config(dead, sim("b", "small"), health_checks={"enabled": False}))
        with sdk(gw) as client:
            raw, took = await timed(client.chat.completions.with_raw_response.create, model="big", messages=USER)
        nursery.cancel_scope.cancel()
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from b. The quick brown fox"
    assert completion.model == "small" and raw.headers["x-fallback-model"] == "small"
    assert took < 2
    if how == "reset":
        assert accepted >= 1


# --- 6-7: nothing, or nothing in time, before the first byte ----------------------------

async def test_no_answer_at_all_moves_to_fallback_within_first_byte(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"stall_before_first_byte": True}), streamer("b", "small")))
    with sdk(gw) as client:
        chunks, took = await timed(stream_all, client)
    assert_complete_stream(chunks, TEXT)
    assert chunks[0].model == "small"
    [asked_a], [asked_b] = request_times(gw.sim("a")), request_times(gw.sim("b"))
    assert 0.45 <= asked_b - asked_a < 0.8  # first_byte is 500 ms
    assert gw.sim("a").count("cancelled") == 1
    assert took < 2


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "buffered"])
async def test_no_answer_at_all_without_fallback_is_504_with_timeout_first_byte(start_gateway, stream):
    gw = await start_gateway(faults_config(sim("a", "demo", failure={"stall_before_first_byte": True}),
                                           chain=False))
    with sdk(gw) as client:
        error = await raises_within(1.5, openai.APIStatusError, client.chat.completions.create,
                                    model="demo", messages=USER, stream=stream)
    assert error.status_code == 504
    assert error.body["type"] == "timeout"
    assert error.body["details"] == {"timeout": "first_byte", "timeout_ms": 500}
    assert gw.sim("a").count("request") == 1  # no answer: never the same route again
    assert await wait_until(lambda: idle(gw), within=1)


async def test_slow_first_token_beyond_first_byte_is_answered_by_the_chain(start_gateway):
    gw = await start_gateway(faults_config(streamer("a", "big", latency="1500ms"), streamer("b", "small")))
    with sdk(gw) as client:
        chunks, took = await timed(stream_all, client)
    assert_complete_stream(chunks, TEXT)
    assert {c.model for c in chunks} == {"small"}
    assert gw.sim("a").count("cancelled") == 1 and gw.sim("a").count("completed") == 0
    assert took < 1.5


# --- 8-12: a committed stream breaks ----------------------------------------------------

async def test_stream_stalled_after_chunk_k_is_completed_by_the_fallback(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"stall_after_chunk": 3}), streamer("b", "small")))
    with sdk(gw) as client:
        chunks, took = await timed(stream_all, client)
    assert_complete_stream(chunks, TEXT)
    assert gw.sim("a").count("stall_after:3") == 1 and gw.sim("a").count("cancelled") == 1
    assert gw.sim("b").count("prefill_continued") == 1  # continued, not repeated
    assert took < 2


async def test_stream_cut_mid_answer_is_completed_by_the_fallback(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"reset_after_chunk": 4}), streamer("b", "small")))
    with sdk(gw) as client:
        chunks, took = await timed(stream_all, client)
    assert_complete_stream(chunks, TEXT)
    assert gw.sim("a").count("reset_after:4") == 1 and gw.sim("b").count("completed") == 1
    assert took < 2


async def test_malformed_chunk_is_dropped_and_the_sdk_stream_ends_cleanly(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"malformed_chunk": 3}), streamer("b", "small")))
    with sdk(gw) as client:
        chunks, took = await timed(stream_all, client)  # raises if the SDK chokes on anything
    assert finish_reasons(chunks) == [(len(chunks) - 1, "stop")]
    events = await raw_sse(gw, {"model": "big", "messages": USER})
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    for data in events[:-1]:
        json.loads(data)  # every event relayed is valid JSON: the malformed one never reaches the client
    assert took < 2


async def test_malformed_chunk_still_yields_the_complete_text(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"malformed_chunk": 3}), streamer("b", "small")))
    with sdk(gw) as client:
        chunks = await in_thread(stream_all, client)
    assert text_of(chunks) == TEXT


async def test_stream_without_done_but_with_finish_reason_is_complete_and_ends_cleanly(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"omit_done": True}), streamer("b", "small")))
    with sdk(gw) as client:
        chunks, took = await timed(stream_all, client)
    assert_complete_stream(chunks, TEXT)
    assert gw.sim("b").count("request") == 0  # finished is finished: not failed over
    events = await raw_sse(gw, {"model": "big", "messages": USER})
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    assert took < 1


async def test_stream_cut_without_finish_reason_and_no_fallback_raises_api_error_mid_iteration(start_gateway):
    gw = await start_gateway(faults_config(streamer("a", "demo", failure={"truncate_after_chunk": 3}),
                                           chain=False))
    with sdk(gw) as client:
        (seen, error), took = await timed(stream_until_error, client, "demo")
    assert text_of(seen) == "one two three"
    assert isinstance(error, openai.APIError), "the stream ended quietly: a truncated answer passed as complete"
    assert not isinstance(error, openai.APIStatusError)  # the status line was already 200
    assert error.body["code"] == "upstream_stream_truncated"
    assert finish_reasons(seen) == []
    assert took < 1


# --- 13-14: rejections that say something about the request ----------------------------

async def test_context_length_400_is_answered_by_the_next_chain_model(start_gateway):
    gw = await start_gateway(faults_config(
        sim("a", "big", failure={"status": 400, "error_code": "context_length_exceeded"}), sim("b", "small")))
    with sdk(gw) as client:
        completion, took = await timed(client.chat.completions.create, model="big", messages=USER)
    assert completion.model == "small"
    assert completion.choices[0].message.content == "Hello from b. The quick brown fox"
    assert gw.sim("a").count("request") == 1  # never the same model again
    assert took < 1


async def test_content_filter_400_is_bad_request_with_provider_code_and_not_retried(start_gateway):
    gw = await start_gateway(faults_config(
        sim("a", "big", failure={"status": 400, "error_code": "content_filter"}), sim("b", "small")))
    with sdk(gw) as client:
        error = await raises_within(1, openai.BadRequestError, client.chat.completions.create,
                                    model="big", messages=USER)
    assert error.status_code == 400
    assert error.code == "content_filter"
    assert gw.sim("a").count("request") == 1
    assert gw.sim("b").count("request") == 0


# --- 15: the circuit -----------------------------------------------------------------------

def circuit_config(**breaker: Any) -> dict[str, Any]:
    # One SDK client (one address) takes the primary down: its failures alone open the circuit.
    return faults_config(sim("a", "big", failure={"status": 503}), sim("b", "small"),
                         health_checks={"interval": "1h", "unhealthy_threshold": 2},
                         circuit_breaker={"min_callers": 1, **breaker})


async def take_primary_down(gw: Gateway, client: openai.OpenAI) -> Any:
    """Two 503s open a's circuit; the call is answered by the chain. Returns the open circuit."""
    down = await in_thread(client.chat.completions.create, model="big", messages=USER)
    assert down.model == "small"
    assert gw.sim("a").count("status:503") == 2
    circuit = gw.app.runtime.health.view.circuit("a", "big")
    assert circuit.state.value == "open"
    return circuit


def bring_primary_back(gw: Gateway) -> None:
    a = gw.sim("a")
    a.simulation = attrs.evolve(a.simulation, failure=SimulatedFailure())


async def test_primary_down_then_back_is_served_again_after_circuit_cooldown(start_gateway):
    gw = await start_gateway(circuit_config())
    a, b = gw.sim("a"), gw.sim("b")
    with sdk(gw) as client:
        circuit = await take_primary_down(gw, client)
        while_open = await in_thread(client.chat.completions.create, model="big", messages=USER)
        assert while_open.model == "small"
        assert a.count("request") == 2  # an open circuit takes a out of rotation at once

        bring_primary_back(gw)
        await trio.sleep_until(circuit.opened_at + circuit.cooldown + 0.05)  # 2 s base cooldown
        raw = await in_thread(client.chat.completions.with_raw_response.create, model="big", messages=USER)
    back = raw.parse()
    assert back.model == "big"
    assert back.choices[0].message.content == "Hello from a. The quick brown fox"
    assert "x-fallback-model" not in raw.headers
    assert a.count("completed") == 1 and b.count("request") == 2


async def test_successful_probe_closes_the_circuit_for_later_calls(start_gateway):
    gw = await start_gateway(circuit_config(timeout="300ms"))  # this test is about the close, not the wait
    a = gw.sim("a")
    with sdk(gw) as client:
        circuit = await take_primary_down(gw, client)
        bring_primary_back(gw)
        await trio.sleep_until(circuit.opened_at + circuit.cooldown + 0.05)
        probe = await in_thread(client.chat.completions.create, model="big", messages=USER)
        assert probe.model == "big"
        assert await wait_until(lambda: gw.app.runtime.health.view.circuit("a", "big").state.value == "closed",
                                within=0.5), gw.app.runtime.health.view.circuits
        after = await in_thread(client.chat.completions.create, model="big", messages=USER)
    assert after.model == "big"
    assert a.count("completed") == 2


# --- semantic failover ------------------------------------------------------------------------

async def test_tool_call_shape_survives_a_fallback_mid_tool_call(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"tool_call": True, "reset_after_chunk": 3}),
        streamer("b", "small", failure={"tool_call": True})))

    def assemble(client: openai.OpenAI) -> Any:
        with client.chat.completions.stream(model="big", messages=USER, tools=[WEATHER_TOOL]) as s:
            for _ in s:
                pass
            return s.get_final_completion()

    with sdk(gw) as client:
        final, took = await timed(assemble, client)
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    [call] = message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert call.id == "call_sim"
    assert gw.sim("a").count("reset_after:3") == 1 and gw.sim("b").count("completed") == 1
    assert took < 2


CANARY = 'CANARY-7f3a: "exact" — ünïcödé ✓ {"k": [1, 2, 3]}\nsecond line ends here. END-CANARY'


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
async def test_context_boundary_rejection_is_answered_intact_by_the_chain_model(start_gateway, stream):
    gw = await start_gateway(faults_config(
        sim("a", "big", failure={"status": 400, "error_code": "context_length_exceeded"}),
        sim("b", "small", text=CANARY, chunks=8)))
    with sdk(gw) as client:
        if stream:
            chunks = await in_thread(stream_all, client)
            text, finishes = text_of(chunks), [f for _, f in finish_reasons(chunks)]
        else:
            completion = await in_thread(client.chat.completions.create, model="big", messages=USER)
            text, finishes = completion.choices[0].message.content, [completion.choices[0].finish_reason]
    assert text == CANARY  # not silently truncated
    assert finishes == ["stop"]
    assert gw.sim("a").count("request") == 1 and gw.sim("b").count("completed") == 1


async def test_restart_with_different_text_has_one_terminal_state_and_an_explicit_route_change(start_gateway):
    gw = await start_gateway(faults_config(
        streamer("a", "big", failure={"reset_after_chunk": 3}), streamer("b", "small", text=OTHER),
        min_tokens=50))
    with sdk(gw) as client:
        chunks, took = await timed(stream_all, client)
    markers = [i for i, c in enumerate(chunks) if route_change(c)]
    assert len(markers) == 1, "the switch to a different answer must be explicit"
    [at] = markers
    change = route_change(chunks[at])
    assert change["discard_previous_output"] is True and change["model"] == "small"
    assert text_of(chunks[:at]) == "one two three"
    assert text_of(chunks[at + 1:]) == OTHER  # the new answer, from its beginning
    assert finish_reasons(chunks) == [(len(chunks) - 1, "stop")]  # once, after the marker
    assert took < 2

    events = await raw_sse(gw, {"model": "big", "messages": USER})
    assert events.count("[DONE]") == 1 and events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events[:-1]]
    assert sum(1 for e in parsed if "route_change" in e) == 1
    assert sum(1 for e in parsed for c in e.get("choices", []) if c.get("finish_reason")) == 1


# --- client disconnect -------------------------------------------------------------------------

async def test_client_closing_the_stream_during_a_fallback_hop_cancels_every_upstream(start_gateway):
    gw = await start_gateway(faults_config(
        sim("a", "big", failure={"stall_before_first_byte": True}),
        sim("b", "small", tokens_per_second=5, chunks=50)))
    a, b = gw.sim("a"), gw.sim("b")

    def read_one_then_close(client: openai.OpenAI) -> str:
        stream = client.chat.completions.create(model="big", messages=USER, stream=True)
        first = next(iter(stream))
        stream.close()
        return first.choices[0].delta.content

    with sdk(gw) as client:
        first = await in_thread(read_one_then_close, client)
    assert first == "Hello from b."
    assert await wait_until(lambda: b.count("cancelled") == 1 and idle(gw), within=1.0), (b.events, dict(
        gw.app.runtime.pool.in_flight))
    assert a.count("cancelled") == 1  # the stalled primary was let go at first_byte
    assert a.count("completed") == b.count("completed") == 0


async def test_client_leaving_before_the_fallbacks_headers_cancels_every_upstream(start_gateway):
    config = faults_config(sim("a", "big", failure={"stall_before_first_byte": True}),
                           sim("b", "small", latency="3s"))
    # b may take its time: only the client's leaving can end its attempt within this test
    config["timeouts"]["request"]["model_overrides"] = {"small": {"streaming": {"first_byte": "5s"}}}
    gw = await start_gateway(config)
    a, b = gw.sim("a"), gw.sim("b")
    with sdk(gw, timeout=0.8) as client:  # a's first_byte ends at 0.5 s: the client leaves during the hop
        await raises_within(2, openai.APITimeoutError, stream_all, client)
    left = trio.current_time()
    assert b.count("request") == 1  # the client left during the hop to b
    assert await wait_until(lambda: b.count("cancelled") == 1 and idle(gw), within=1.0), (b.events, dict(
        gw.app.runtime.pool.in_flight))
    assert next(t for t, k in b.events if k == "cancelled") - left < 1.0
    assert a.count("cancelled") == 1
    assert a.count("completed") == b.count("completed") == 0

