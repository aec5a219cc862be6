"""The simulated backend's reply text, prefill and failure modes, driven through httpx directly."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from switchyard.actors.routing.stream_state import StreamAccumulator
from switchyard.actors.sse import SSEDecoder
from switchyard.config.load import ConfigError, load_text
from switchyard.config.schema import SimulatedFailure, Simulation
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.simulated.parts import split_even, split_words

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TEXT = "The capital of France is Paris, a city on the Seine."


def client(sim: Simulation, name: str = "a") -> tuple[httpx.AsyncClient, SimulatedTransport]:
    transport = SimulatedTransport(name, sim, ("demo",))
    return httpx.AsyncClient(transport=transport, base_url=f"http://{name}.simulated"), transport


def chat(stream: bool = False, prefill: str | None = None, **extra) -> dict:
    messages: list[dict] = [{"role": "user", "content": "What is the capital of France?"}]
    if prefill is not None:
        messages.append({"role": "assistant", "content": prefill})
    return {"model": "demo", "messages": messages, "stream": stream, **extra}


class Streamed:
    def __init__(self) -> None:
        self.status = 0
        self.events: list[tuple[float, bytes]] = []  # (instant, data)
        self.raw = b""
        self.tail = None

    @property
    def data(self) -> list[bytes]:
        return [d for _, d in self.events]

    @property
    def chunks(self) -> list[dict]:
        return [json.loads(d) for d in self.data if d != b"[DONE]"]

    def accumulated(self) -> StreamAccumulator:
        acc = StreamAccumulator()
        for c in self.chunks:
            acc.feed(c)
        return acc


async def stream(sim: Simulation, body: dict | None = None) -> Streamed:
    out = Streamed()
    http, _ = client(sim)
    decoder = SSEDecoder()
    async with http, http.stream("POST", "/v1/chat/completions", json=body or chat(stream=True)) as r:
        out.status = r.status_code
        async for piece in r.aiter_bytes():
            out.raw += piece
            for event in decoder.feed(piece):
                out.events.append((trio.current_time(), event.data))
    out.tail = decoder.close()
    return out


async def buffered(sim: Simulation, body: dict | None = None) -> httpx.Response:
    http, _ = client(sim)
    async with http:
        return await http.post("/v1/chat/completions", json=body or chat())


# --- reply text ------------------------------------------------------------------

async def test_default_text_unchanged(autojump_clock):
    reply = await stream(Simulation(chunks=3))
    acc = reply.accumulated()
    assert acc.content == "Hello from a. The quick"
    assert reply.data[-1] == b"[DONE]" and acc.finish_reason == "stop"


async def test_text_streamed_in_word_pieces(autojump_clock):
    reply = await stream(Simulation(text=TEXT, chunks=4))
    pieces = [c["choices"][0]["delta"].get("content") for c in reply.chunks[:-1]]
    assert pieces == ["The capital of", " France is Paris,", " a city on", " the Seine."]
    assert reply.accumulated().content == TEXT


async def test_text_buffered(autojump_clock):
    r = await buffered(Simulation(text=TEXT, chunks=5))
    body = r.json()
    assert body["choices"][0]["message"]["content"] == TEXT
    assert body["usage"]["completion_tokens"] == 5


def test_split_words_fewer_words_than_chunks():
    assert split_words("Hi there", 8) == ["Hi", " there"]
    assert split_words("", 3) == []
    assert split_words("  padded  ", 4) == ["  padded  "]
    assert split_even('{"city": "Paris"}', 4) == ['{"cit', 'y": ', '"Par', 'is"}']


@given(st.text(alphabet="ab \n\t.é", max_size=60), st.integers(1, 20))
def test_split_words_reassembles_and_never_splits_a_word(text, n):
    pieces = split_words(text, n)
    assert "".join(pieces) == text
    assert len(pieces) <= n
    assert all(pieces)
    for left, right in zip(pieces, pieces[1:], strict=False):
        assert left[-1].isspace() or right[0].isspace()  # a boundary is always next to whitespace
    if pieces:
        sizes = [len(split_words(p, 1)) for p in pieces]
        assert sizes == [1] * len(pieces)


# --- prefill -------------------------------------------------------------------------

async def test_prefill_that_is_a_prefix_gets_only_the_rest(autojump_clock):
    sim = Simulation(text=TEXT, chunks=3, tokens_per_second=2, latency=1)
    start = trio.current_time()
    reply = await stream(sim, chat(stream=True, prefill="The capital of France"))
    assert reply.accumulated().content == " is Paris, a city on the Seine."
    contents = [(t - start, c["choices"][0]["delta"]["content"])
                for t, c in zip([t for t, _ in reply.events], reply.chunks, strict=False)
                if c["choices"][0]["delta"].get("content")]
    # same pacing as a full answer: 1 s latency, then one piece every 0.5 s
    assert contents == [(1.0, " is Paris, a"), (1.5, " city on"), (2.0, " the Seine.")]


async def test_prefill_of_default_text(autojump_clock):
    reply = await stream(Simulation(chunks=4), chat(stream=True, prefill="Hello from a. The"))
    assert reply.accumulated().content == " quick brown"


async def test_prefill_not_a_prefix_gets_the_whole_text(autojump_clock):
    http, transport = client(Simulation(text=TEXT, chunks=3))
    async with http:
        r = await http.post("/v1/chat/completions", json=chat(prefill="Paris is"))
    assert r.json()["choices"][0]["message"]["content"] == TEXT
    assert transport.count("prefill_ignored") == 1


async def test_prefill_buffered_and_with_content_parts(autojump_clock):
    http, transport = client(Simulation(text=TEXT, chunks=3))
    body = chat()
    body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": "The capital "},
                                                               {"type": "text", "text": "of"}]})
    async with http:
        r = await http.post("/v1/chat/completions", json=body)
    assert r.json()["choices"][0]["message"]["content"] == " France is Paris, a city on the Seine."
    assert transport.count("prefill_continued") == 1


async def test_prefill_of_the_whole_text_streams_no_content(autojump_clock):
    reply = await stream(Simulation(text=TEXT), chat(stream=True, prefill=TEXT))
    acc = reply.accumulated()
    assert acc.content == "" and acc.finish_reason == "stop" and reply.data[-1] == b"[DONE]"


async def test_prefill_unsupported_is_400(autojump_clock):
    sim = Simulation(text=TEXT, supports_prefill=False)
    r = await buffered(sim, chat(prefill="The"))
    assert r.status_code == 400
    assert r.json() == {"error": {"message": "assistant prefill is not supported",
                                  "type": "invalid_request_error", "param": "messages",
                                  "code": "prefill_unsupported"}}
    s = await stream(sim, chat(stream=True, prefill="The"))
    assert s.status == 400
    # without a prefill it answers as usual
    assert (await buffered(sim)).status_code == 200


# --- failure modes ---------------------------------------------------------------------

async def test_status_with_retry_after_and_error_code(autojump_clock):
    sim = Simulation(failure=SimulatedFailure(status=429, retry_after=7))
    r = await buffered(sim)
    assert r.status_code == 429 and r.headers["retry-after"] == "7"
    assert r.json()["error"]["code"] == "simulated_429"
    sim = Simulation(failure=SimulatedFailure(status=400, error_code="context_length_exceeded",
                                              retry_after="Wed, 21 Oct 2015 07:28:00 GMT"))
    r = await buffered(sim)
    assert r.json()["error"]["code"] == "context_length_exceeded"
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert r.headers["retry-after"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    r = await buffered(Simulation(failure=SimulatedFailure(status=503)))
    assert "retry-after" not in r.headers


async def test_when_body_contains_fails_only_the_requests_that_hold_the_text(autojump_clock):
    sim = Simulation(chunks=2, failure=SimulatedFailure(status=500, when_body_contains="crash-me"))
    crashing = chat()
    crashing["messages"][0]["content"] = "please crash-me now"
    r = await buffered(sim, crashing)
    assert r.status_code == 500 and r.json()["error"]["code"] == "simulated_500"
    r = await buffered(sim)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Hello from a. The"
    reply = await stream(Simulation(chunks=5, failure=SimulatedFailure(error_event_after_chunk=2,
                                                                       when_body_contains="crash-me")))
    assert reply.status == 200 and reply.data[-1] == b"[DONE]"   # the failure narrowed away: a clean stream


def test_when_body_contains_needs_a_failure_mode_to_narrow():
    assert errors_of(sim_config("{failure: {when_body_contains: crash-me}}")) == [
        "backends[0].simulation.failure.when_body_contains: only applies together with a failure mode"]
    assert errors_of(sim_config("{failure: {status: 500, when_body_contains: ''}}")) == [
        "backends[0].simulation.failure.when_body_contains: must not be empty"]
    f = load_text(sim_config("{failure: {status: 500, when_body_contains: crash-me}}"),
                  env={}).snapshot.backends[0].simulation.failure
    assert (f.status, f.when_body_contains) == (500, "crash-me")


async def test_error_event_after_chunk(autojump_clock):
    reply = await stream(Simulation(chunks=5, failure=SimulatedFailure(error_event_after_chunk=2)))
    assert reply.status == 200
    assert len(reply.data) == 3
    assert json.loads(reply.data[-1]) == {"error": {"message": "simulated in-band error",
                                                    "type": "server_error", "code": "simulated_error"}}
    acc = reply.accumulated()
    assert acc.content == "Hello from a. The" and not acc.complete and acc.error is not None
    assert reply.raw.endswith(b'"code":"simulated_error"}}\n\n')
    assert reply.tail is None


async def test_error_event_in_a_buffered_reply(autojump_clock):
    r = await buffered(Simulation(chunks=5, failure=SimulatedFailure(error_event_after_chunk=2)))
    assert r.status_code == 200 and r.json()["error"]["code"] == "simulated_error"


async def test_omit_done(autojump_clock):
    reply = await stream(Simulation(chunks=3, failure=SimulatedFailure(omit_done=True)))
    assert b"[DONE]" not in reply.raw
    assert reply.accumulated().finish_reason == "stop"
    assert reply.tail is None


async def test_truncate_after_chunk(autojump_clock):
    http, transport = client(Simulation(chunks=6, failure=SimulatedFailure(truncate_after_chunk=3)))
    decoder = SSEDecoder()
    async with http, http.stream("POST", "/v1/chat/completions", json=chat(stream=True)) as r:
        events = [e for piece in [p async for p in r.aiter_bytes()] for e in decoder.feed(piece)]
    assert decoder.close() is None  # a clean end between events
    acc = StreamAccumulator()
    for e in events:
        acc.feed(json.loads(e.data))
    assert acc.content == "Hello from a. The quick"
    assert acc.deltas == 3 and not acc.complete
    assert all(not e.is_done for e in events)
    assert transport.count("truncated_after:3") == 1 and transport.count("cancelled") == 0


async def test_truncate_buffered_reply_is_cut_json(autojump_clock):
    r = await buffered(Simulation(chunks=6, failure=SimulatedFailure(truncate_after_chunk=3)))
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.content)
    assert b"finish_reason" not in r.content


async def test_empty_reply(autojump_clock):
    sim = Simulation(text=TEXT, failure=SimulatedFailure(empty_reply=True))
    reply = await stream(sim, chat(stream=True, stream_options={"include_usage": True}))
    assert reply.chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    acc = reply.accumulated()
    assert acc.content == "" and acc.finish_reason == "stop" and acc.deltas == 0
    assert acc.usage["completion_tokens"] == 0
    body = (await buffered(sim)).json()
    assert body["choices"][0]["message"]["content"] == ""
    assert body["choices"][0]["finish_reason"] == "stop"


async def test_tool_call_streamed_in_pieces(autojump_clock):
    sim = Simulation(chunks=4, tokens_per_second=10, latency=0.5, failure=SimulatedFailure(tool_call=True))
    start = trio.current_time()
    reply = await stream(sim)
    first = reply.chunks[0]["choices"][0]["delta"]
    assert first["tool_calls"][0]["id"] == "call_sim"
    assert first["tool_calls"][0]["function"]["name"] == "get_weather"
    acc = reply.accumulated()
    assert acc.tool_calls == [{"index": 0, "id": "call_sim", "type": "function",
                               "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert acc.finish_reason == "tool_calls" and acc.deltas == 4 and acc.content == ""
    assert [round(t - start, 6) for t, _ in reply.events[:4]] == [0.5, 0.6, 0.7, 0.8]
    assert reply.data[-1] == b"[DONE]"


async def test_tool_call_buffered(autojump_clock):
    body = (await buffered(Simulation(failure=SimulatedFailure(tool_call=True)))).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [{"id": "call_sim", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]


async def test_tool_call_with_error_event(autojump_clock):
    reply = await stream(Simulation(failure=SimulatedFailure(tool_call=True, error_event_after_chunk=1)))
    acc = reply.accumulated()
    assert acc.error is not None and acc.tool_calls[0]["function"]["arguments"] == '{"c'


# --- configuration -------------------------------------------------------------------

def sim_config(simulation: str) -> str:
    return f"backends:\n  - name: s\n    type: simulated\n    models: [demo]\n    simulation: {simulation}\n"


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, env={})
    return info.value.errors


def test_new_simulation_keys_load():
    snap = load_text(sim_config(
        "{text: 'Hi there', supports_prefill: false, failure: {status: 429, retry_after: 30, "
        "error_code: context_length_exceeded, error_event_after_chunk: 2, omit_done: true, "
        "truncate_after_chunk: 3, empty_reply: true}}"), env={}).snapshot
    sim = snap.backends[0].simulation
    assert sim.text == "Hi there" and sim.supports_prefill is False
    f = sim.failure
    assert (f.status, f.retry_after, f.error_code) == (429, 30, "context_length_exceeded")
    assert (f.error_event_after_chunk, f.omit_done, f.truncate_after_chunk, f.empty_reply, f.tool_call) == (
        2, True, 3, True, False)
    sim = load_text(sim_config("{failure: {status: 503, retry_after: 'Wed, 21 Oct 2015 07:28:00 GMT', "
                               "tool_call: true}}"), env={}).snapshot.backends[0].simulation
    assert sim.failure.retry_after == "Wed, 21 Oct 2015 07:28:00 GMT" and sim.failure.tool_call
    assert sim.text is None and sim.supports_prefill is True


def test_new_simulation_keys_validated():
    assert errors_of(sim_config(
        "{text: 5, supports_prefill: maybe, failure: {error_event_after_chunk: 0, truncate_after_chunk: x, "
        "omit_done: 1, empty_reply: 'yes', tool_call: null}}")) == [
        "backends[0].simulation.failure.error_event_after_chunk: must be at least 1, got 0",
        "backends[0].simulation.failure.omit_done: must be true or false, got integer",
        "backends[0].simulation.failure.truncate_after_chunk: must be an integer, got string",
        "backends[0].simulation.failure.empty_reply: must be true or false, got string",
        "backends[0].simulation.text: must be a string, got integer",
        "backends[0].simulation.supports_prefill: must be true or false, got string",
    ]


def test_retry_after_and_error_code_need_a_status():
    assert errors_of(sim_config("{failure: {retry_after: 5, error_code: content_filter}}")) == [
        "backends[0].simulation.failure.retry_after: only applies together with status",
        "backends[0].simulation.failure.error_code: only applies together with status",
    ]


def test_bad_retry_after_error_code_and_conflicts():
    assert errors_of(sim_config(
        "{text: '', failure: {status: 500, retry_after: -1, error_code: 'has space', "
        "empty_reply: true, tool_call: true}}")) == [
        "backends[0].simulation.failure.retry_after: must be at least 0, got -1",
        "backends[0].simulation.failure.error_code: must be 1-128 letters, digits, '_', '.', ':' or '-', "
        "got 'has space'",
        "backends[0].simulation.failure.tool_call: cannot be combined with empty_reply",
        "backends[0].simulation.text: must not be empty",
    ]
    assert errors_of(sim_config("{failure: {status: 500, retry_after: [1]}}")) == [
        "backends[0].simulation.failure.retry_after: must be a number of seconds or an HTTP date, got list"]


async def test_past_max_concurrency_requests_wait_their_turn_in_arrival_order(autojump_clock):
    http, sim = client(Simulation(latency=1.0, max_concurrency=2))
    ended: dict[int, float] = {}

    async def one(n: int) -> None:
        reply = await http.post("/v1/chat/completions", json=chat(user=str(n)))
        assert reply.status_code == 200
        ended[n] = trio.current_time()

    async with http, trio.open_nursery() as nursery:
        for n in range(5):   # arriving 0.1 s apart
            nursery.start_soon(one, n)
            await trio.sleep(0.1)
    # two at once, each a second: 0 and 1 end at 1.0 and 1.1, then 2 and 3 take their slots, then 4
    assert ended == {0: 1.0, 1: 1.1, 2: 2.0, 3: 2.1, 4: 3.0}
    assert sim.peak_in_flight == 2 and sim.in_flight == 0 and sim.slots.busy == 0
