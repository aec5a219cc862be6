"""Thinking patterns on live streams, under MockClock: the split, the buffered decision instant, and
models without a pattern left byte for byte alone."""

import json

import pytest
import trio

from switchyard.protocol.simulated import openai as simulated
from switchyard.protocol.simulated.parts import sse_event
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

THINKING = ("{pattern: unterminated_start, end_marker: '</think>', assume_reasoning_first: true"
            "EXTRA}")

CONFIG = """
health_checks: {interval: 1h}
timeouts:
  request:
    streaming: {first_byte: 5s, chunk_interval: 30s, total: 120s}
backends:
  - name: a
    type: simulated
    models: [nemo, plain]
    simulation: {latency: 1s, tokens_per_second: TPS, chunks: 20, text: "TEXT"}
    model_configs:
      - {id: nemo, metadata: {thinking: THINKING}}
"""


def config(text, tps=2, extra=""):
    return CONFIG.replace("THINKING", THINKING.replace("EXTRA", extra)).replace("TPS", str(tps)) \
        .replace("TEXT", text)


def split_of(reply):
    reasoning = content = ""
    for e in reply.events():
        if e == b"[DONE]":
            continue
        for c in json.loads(e)["choices"]:
            reasoning += c["delta"].get("reasoning_content") or ""
            content += c["delta"].get("content") or ""
    return reasoning, content


def written(reply, t0):
    """(instant, reasoning, content) per body write that carried text."""
    out = []
    for t, body in reply.chunks:
        r = c = ""
        for e in body.split(b"\n\n"):
            if e.startswith(b"data: {"):
                d = json.loads(e[6:])["choices"][0]["delta"]
                r += d.get("reasoning_content") or ""
                c += d.get("content") or ""
        if r or c:
            out.append((round(t - t0, 6), r, c))
    return out


async def test_reasoning_before_the_marker_content_after(autojump_clock):
    text = "Let me think. Six times seven.</think> The answer is 42."
    async with gateway(config(text)) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("nemo", stream=True))
        assert reply.status == 200
        assert split_of(reply) == ("Let me think. Six times seven.", " The answer is 42.")
        assert reply.events()[-1] == b"[DONE]"
        # not buffered: every piece goes out the instant it arrives (1 s latency, then every 0.5 s)
        assert [t for t, _, _ in written(reply, t0)] == [1.0 + 0.5 * i for i in range(10)]
        assert b"</think>" not in reply.body


async def test_buffered_decides_at_first_token_plus_timeout_while_the_backend_is_silent(autojump_clock):
    # pieces at 1 s, 6 s, 11 s: silent from 1 s to 6 s; the decision is due at 1 + 3 = 4 s
    async with gateway(config("Sure the answer", tps=0.2, extra=", buffered: true, reasoning_timeout: 3s")) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("nemo", stream=True))
        assert written(reply, t0) == [(4.0, "", "Sure"), (6.0, "", " the"), (11.0, "", " answer")]
        assert split_of(reply) == ("", "Sure the answer")


async def test_buffered_decides_on_the_marker_when_it_comes_first(autojump_clock):
    text = "hmm hmm</think> yes"
    async with gateway(config(text, extra=", buffered: true, reasoning_timeout: 10s")) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("nemo", stream=True))
        # held from 1 s until the marker's piece at 1.5 s, then released at once; the rest as it comes
        assert written(reply, t0) == [(1.5, "hmm hmm", ""), (2.0, "", " yes")]
        assert split_of(reply) == ("hmm hmm", " yes")


async def test_buffered_decides_on_size_and_on_the_end(autojump_clock):
    async with gateway(config("one two three four", extra=", buffered: true, max_buffer_size: 6")) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("nemo", stream=True))
        # "one two" is 7 bytes > 6 at the second piece (1.5 s): content
        assert written(reply, t0) == [(1.5, "", "one two"), (2.0, "", " three"), (2.5, "", " four")]
    async with gateway(config("just content", extra=", buffered: true")) as app:
        t0 = trio.current_time()
        reply = await request(app, "POST", "/v1/chat/completions", chat("nemo", stream=True))
        # no marker, under the size, before the timeout: the end decides, with the finish chunk
        assert written(reply, t0) == [(1.5, "", "just content")]
        assert reply.events()[-1] == b"[DONE]"


async def test_models_without_a_thinking_pattern_are_byte_for_byte_unchanged(autojump_clock, monkeypatch):
    monkeypatch.setattr(simulated.time, "time", lambda: 1_700_000_000)
    text = "Let me think.</think> The answer."
    plain_cfg = config(text)
    other_cfg = config(text).replace("assume_reasoning_first: true", "assume_reasoning_first: false")
    for cfg, model in ((plain_cfg, "plain"), (other_cfg, "nemo")):
        async with gateway(cfg) as app:
            reply = await request(app, "POST", "/v1/chat/completions", chat(model, stream=True))
            cid = "chatcmpl-sim-1"
            pieces = simulated.split_words(text, 20)
            expected = b"".join(
                sse_event({"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000,
                                  "model": model, "choices": [{"index": 0, "delta": (
                                      {"role": "assistant", "content": p, "refusal": None} if i == 0
                                      else {"content": p}), "logprobs": None, "finish_reason": None}]})
                for i, p in enumerate(pieces))
            expected += sse_event({"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000,
                                          "model": model, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                                                       "finish_reason": "stop"}]})
            assert reply.body == expected + b"data: [DONE]\n\n"
