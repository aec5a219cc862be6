"""What the simulated backend answers on ``/v1/completions`` and ``/v1/embeddings``.

Kept apart from the chat simulator (``protocol/simulated/openai.py``), which hands
these two paths over after its common steps (the script, the latency, a
scripted error status). Text completions reuse the chat reply's words,
pacing and failure modes (the simulator's ``reply_pieces``, ``paced_pieces`` and
``buffered_body``) in the ``text_completion`` shape, one choice per prompt,
buffered or as SSE with ``choices[].text`` and ``[DONE]``. Embeddings are one small vector per input,
derived from the model and the input alone, so a test can compute the
expected answer whichever backend gave it; ``encoding_format: base64`` gets
the float32 little-endian bytes OpenAI sends.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import time
from contextlib import aclosing
from typing import Any, AsyncIterator

import httpx
import trio

from switchyard.config.simulation import Simulation
from switchyard.protocol.simulated.parts import IN_BAND_ERROR, SimulatedStream, Simulator

DIMENSIONS = 8   # an embedding's length when the request names no ``dimensions``


def answer(owner: "Simulator", sim: Simulation, path: str, body: dict[str, Any]) -> httpx.Response:
    """The 200 answer (its body paced and failing as scripted) for a completions or embeddings request."""
    model = body.get("model", "")
    if path.endswith("/embeddings"):
        chunks, kind = _embeddings(owner, sim, model, body), "application/json"
    elif body.get("stream") is True:
        chunks, kind = _completion_sse(owner, sim, f"cmpl-sim-{owner.served}", model, body), \
            "text/event-stream"
    else:
        chunks, kind = _completion(owner, sim, f"cmpl-sim-{owner.served}", model, body), "application/json"
    return httpx.Response(200, headers={**sim.response_headers, "content-type": kind},
                          stream=SimulatedStream(owner, chunks))


def inputs_of(value: Any) -> list[Any]:
    """A prompt or input as its list of items: a string or one token array is a single item."""
    if isinstance(value, list) and value and not isinstance(value[0], (str, list)):
        return [value]
    return value if isinstance(value, list) else [value]


def embedding_vector(model: str, item: Any, dimensions: int = DIMENSIONS) -> list[float]:
    """The simulated embedding of one input item: values in [-1, 1), exact in float32."""
    seed = json.dumps([model, item]).encode()
    raw = hashlib.shake_256(seed).digest(2 * dimensions)
    return [(k - 32768) / 32768 for k in struct.unpack(f"<{dimensions}H", raw)]


def word_vector(item: Any, dimensions: int) -> list[float]:
    """``embedding: words``: one count per lower-cased word, at the dimension its hash names. Two texts whose
    words land on distinct dimensions have the cosine of their word-count vectors (tests compute it)."""
    vector = [0.0] * dimensions
    for word in str(item).lower().split():
        vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % dimensions] += 1
    return vector


def _tokens(item: Any) -> int:
    return len(item) if isinstance(item, list) else max(1, len(str(item)) // 4)


async def _embeddings(owner: "Simulator", sim: Simulation, model: str, body: dict[str, Any]) -> AsyncIterator[bytes]:
    fail = sim.failure
    if fail.malformed_chunk is not None:
        owner.record("completed")
        yield b'{"object": "list", "data": ['
        return
    if fail.error_event_after_chunk is not None:
        owner.record(f"error_event_after:{fail.error_event_after_chunk}")
        yield json.dumps(IN_BAND_ERROR).encode()
        return
    items = inputs_of(body.get("input"))
    dimensions = sim.embedding_size or body.get("dimensions") or DIMENSIONS   # at most checks.MAX_DIMENSIONS
    # One piece per vector, with a checkpoint between: a large answer never holds the event loop.
    yield b'{"object": "list", "data": ['
    for i, item in enumerate(items):
        vector: Any = word_vector(item, dimensions) if sim.embedding == "words" else \
            embedding_vector(model, item, dimensions)
        if body.get("encoding_format") == "base64":
            vector = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode("ascii")
        yield (b", " if i else b"") + json.dumps({"object": "embedding", "index": i, "embedding": vector}).encode()
        await trio.lowlevel.checkpoint()
    tokens = sum(_tokens(item) for item in items)
    owner.record("completed")
    yield b"], " + json.dumps({"model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode()[1:]


def _choices(n: int, text: str, finish_reason: str | None) -> list[dict[str, Any]]:
    return [{"text": text, "index": i, "logprobs": None, "finish_reason": finish_reason} for i in range(n)]


def _usage(body: dict[str, Any], produced: int) -> dict[str, int]:
    prompt = sum(_tokens(item) for item in inputs_of(body.get("prompt", "")))
    return {"prompt_tokens": prompt, "completion_tokens": produced, "total_tokens": prompt + produced}


def _completion(owner: "Simulator", sim: Simulation, cid: str, model: str,
                body: dict[str, Any]) -> AsyncIterator[bytes]:
    n = len(inputs_of(body.get("prompt", "")))

    def render(tokens: list[str]) -> str:
        produced = n * sum(1 for t in tokens if t)
        return json.dumps({"id": cid, "object": "text_completion", "created": int(time.time()), "model": model,
                           "choices": _choices(n, "".join(tokens), "stop"), "usage": _usage(body, produced)})
    return owner.buffered_body(sim, cid, body, render)


async def _completion_sse(owner: "Simulator", sim: Simulation, cid: str, model: str,
                          body: dict[str, Any]) -> AsyncIterator[bytes]:
    fail = sim.failure
    if fail.stall_before_first_byte:
        await trio.sleep_forever()
    created = int(time.time())
    n = len(inputs_of(body.get("prompt", "")))

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        obj = {"id": cid, "object": "text_completion", "created": created, "model": model, "choices": choices}
        return b"data: " + json.dumps({**obj, **extra}, separators=(",", ":")).encode() + b"\n\n"

    produced = 0
    async with aclosing(owner.paced_pieces(sim, owner.reply_pieces(sim, body, chat=False), body)) as paced:
        async for k, token in paced:
            if fail.malformed_chunk == k:
                yield b'data: {"id": "' + cid.encode() + b'", "choices": [ {"text": \n\n'
            else:
                produced += n if token else 0
                yield chunk(_choices(n, token, None))
            if fail.error_event_after_chunk == k:
                owner.record(f"error_event_after:{k}")
                yield b"data: " + json.dumps(IN_BAND_ERROR).encode() + b"\n\n"
                return
            if fail.truncate_after_chunk == k:
                owner.record(f"truncated_after:{k}")
                return
    yield chunk(_choices(n, "", "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        yield chunk([], usage=_usage(body, produced))
    owner.record("completed")
    if not fail.omit_done:
        yield b"data: [DONE]\n\n"
