"""An in-process backend that answers like an OpenAI-compatible server.

It is an httpx transport, so it runs under Trio's MockClock with no sockets:
every chunk is paced with ``trio.sleep`` and arrives at an exact virtual
instant. The demo config uses it; tests script it per request through
``script`` (chat behaviours) and ``health_script`` (health statuses), and read
back what it saw in ``events``.

Failure modes (``Simulation.failure``): answer an error status; stall before
the first byte; stall after chunk k; reset the connection after chunk k;
send chunk k malformed.
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import AsyncIterator

import httpx
import trio

from config.schema import Simulation

_WORDS = ("The quick brown fox jumps over the lazy dog while the router keeps every "
          "stream flowing and every budget honest").split()


class SimulatedStream(httpx.AsyncByteStream):
    def __init__(self, owner: "SimulatedTransport", chunks: AsyncIterator[bytes]) -> None:
        self.owner = owner
        self.chunks = chunks
        self.finished = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            yield chunk
        self.finished = True

    async def aclose(self) -> None:
        if not self.finished:
            self.owner.record("cancelled")
            self.finished = True


class SimulatedTransport(httpx.AsyncBaseTransport):
    def __init__(self, name: str, simulation: Simulation | None = None, models: tuple[str, ...] = ()) -> None:
        self.name = name
        self.simulation = simulation or Simulation()
        self.models = tuple(m for m in models if not any(c in m for c in "*?["))
        self.script: deque[Simulation] = deque()
        self.health_script: deque[int] = deque()
        self.events: list[tuple[float, str]] = []
        self.requests: list[httpx.Request] = []

    def record(self, kind: str) -> None:
        self.events.append((trio.current_time(), kind))

    def count(self, kind: str) -> int:
        return sum(1 for _, k in self.events if k == kind)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.endswith("/models"):
            self.record("models")
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": self.name} for m in self.models]})
        if request.method == "GET":  # any other GET is the health route, whatever health_checks.path says
            status = self.health_script.popleft() if self.health_script else self.simulation.health_status
            self.record(f"health:{status}")
            return httpx.Response(status, json={"status": "ok" if status < 400 else "unavailable"})
        if request.method == "POST" and path.endswith("/chat/completions"):
            return await self._chat(request)
        return httpx.Response(404, json={"error": {"message": f"no route {path}", "type": "not_found_error",
                                                   "param": None, "code": None}})

    async def _chat(self, request: httpx.Request) -> httpx.Response:
        sim = self.script.popleft() if self.script else self.simulation
        self.requests.append(request)
        self.record("request")
        body = json.loads(await request.aread())
        stream = body.get("stream") is True
        model = body.get("model", "")
        fail = sim.failure
        try:
            if fail.stall_before_first_byte and not stream:
                await trio.sleep_forever()
            await trio.sleep(sim.latency)
        except trio.Cancelled:
            self.record("cancelled")
            raise
        if fail.status is not None:
            self.record(f"status:{fail.status}")
            return httpx.Response(fail.status, json={"error": {
                "message": f"simulated failure from {self.name}", "type": "server_error" if fail.status >= 500
                else "invalid_request_error", "param": None, "code": f"simulated_{fail.status}"}})
        completion_id = f"chatcmpl-sim-{len(self.requests)}"
        if stream:
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  stream=SimulatedStream(self, self._sse(sim, completion_id, model, body)))
        return httpx.Response(200, headers={"content-type": "application/json"},
                              stream=SimulatedStream(self, self._buffered(sim, completion_id, model, body)))

    def _tokens(self, sim: Simulation) -> list[str]:
        first = f"Hello from {self.name}."
        return [first] + [" " + _WORDS[i % len(_WORDS)] for i in range(sim.chunks - 1)]

    async def _paced(self, sim: Simulation) -> AsyncIterator[tuple[int, str]]:
        """Tokens with their 1-based number, paced and failing as scripted."""
        fail = sim.failure
        gap = 1.0 / sim.tokens_per_second if sim.tokens_per_second > 0 else 0.0
        for k, token in enumerate(self._tokens(sim), start=1):
            if k > 1 and gap:
                await trio.sleep(gap)
            yield k, token
            if fail.stall_after_chunk == k:
                self.record(f"stall_after:{k}")
                await trio.sleep_forever()
            if fail.reset_after_chunk == k:
                self.record(f"reset_after:{k}")
                raise httpx.ReadError("simulated connection reset by peer")

    async def _sse(self, sim: Simulation, cid: str, model: str, body: dict) -> AsyncIterator[bytes]:
        if sim.failure.stall_before_first_byte:
            await trio.sleep_forever()
        created = int(time.time())
        count = 0
        async for k, token in self._paced(sim):
            count = k
            if sim.failure.malformed_chunk == k:
                yield b'data: {"id": "' + cid.encode() + b'", "choices": [ {"delta": \n\n'
                continue
            delta = {"role": "assistant", "content": token} if k == 1 else {"content": token}
            yield _event({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                          "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        usage = {"prompt_tokens": _prompt_tokens(body), "completion_tokens": count,
                 "total_tokens": _prompt_tokens(body) + count}
        final = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        if (body.get("stream_options") or {}).get("include_usage"):
            final["usage"] = usage
        yield _event(final)
        yield b"data: [DONE]\n\n"
        self.record("completed")

    async def _buffered(self, sim: Simulation, cid: str, model: str, body: dict) -> AsyncIterator[bytes]:
        tokens: list[str] = []
        async for k, token in self._paced(sim):
            if sim.failure.malformed_chunk == k:
                yield b'{"id": "' + cid.encode() + b'", "choices": ['
                self.record("completed")
                return
            tokens.append(token)
        prompt = _prompt_tokens(body)
        yield json.dumps({
            "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(tokens)},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": len(tokens),
                      "total_tokens": prompt + len(tokens)},
        }).encode()
        self.record("completed")


def _event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _prompt_tokens(body: dict) -> int:
    text = json.dumps(body.get("messages", []))
    return max(1, len(text) // 4)
