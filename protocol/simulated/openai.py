"""An in-process backend that answers like an OpenAI-compatible server.

It is an httpx transport, so it runs under Trio's MockClock with no sockets:
every chunk is paced with ``trio.sleep`` and arrives at an exact virtual
instant. The demo config uses it; tests script it per request through
``script`` (chat behaviours), ``health_script`` (health statuses) and
``metrics_script`` (engine pages), and read back what it saw in ``events``
and ``requests``. That history is kept only when asked for (``history``:
a test's, never the demo's, which would grow with every call) and bounded.
A body the simulator cannot serve is refused as a real server would
(``protocol/simulated/checks.py``). Its answers carry every field OpenAI's
schema requires, with ``n`` choices and ``logprobs`` when asked
(``protocol/simulated/choices.py``).

The reply is ``Simulation.text`` in at most ``chunks`` word-ish pieces, or
``Hello from NAME.`` and words of a fixed sentence. A trailing assistant
message (a prefill) is continued when it is a prefix of the reply, else the
whole reply is sent; ``supports_prefill`` false answers 400 instead, and
``supports_stream_options`` false answers a body carrying ``stream_options`` 400.

Failure modes (``Simulation.failure``): answer an error status (with a
Retry-After header and an error code of choice); stall before the first
byte; stall after chunk k; reset the connection after chunk k; send chunk k
malformed; send an in-band error event after chunk k; end the stream cleanly
after chunk k (no finish_reason, no [DONE]); leave out [DONE]; reply with
empty content; reply with a tool call (its arguments ``tool_arguments`` when set; ``tool_calls`` of them,
side by side). With ``call_tools`` a chat request offering a function tool gets a call to it, and an answer
to tool output listing numbered sources cites them (``protocol/simulated/tools.py``). With
``when_body_contains`` the failure hits only requests whose body holds that text (a request-specific
crash); the others are served as if no failure were set.

With ``Simulation.max_concurrency`` set, that many requests are served at
once and the rest wait their turn in arrival order (``slots.py``).

With ``Simulation.engine`` set, ``GET`` on a path ending in ``/metrics``
answers the Prometheus page a vLLM or SGLang engine would serve (its own
metric names, rendered by prometheus-client): the configured queue depth and
KV usage, running requests plus the streams open now, and a generation
counter that grows with every token streamed plus the engine's background
rate. Every other ``GET`` is the health route.

With ``Simulation.engine_kv`` it serves as an engine with a prefix-cached KV
cache would (``kv_engine.py``: queue, prefill of the uncached prompt, decode,
KV events), and its engine page (with ``engine``) reports that engine's
queue, KV usage and prefix-cache counters.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict, deque
from contextlib import aclosing
from typing import Any, AsyncGenerator, AsyncIterator, Callable, ClassVar

import attrs
import httpx
import trio

from switchyard.config.schema import SimulatedEngine, SimulatedFailure
from switchyard.config.simulation import Simulation
from switchyard.protocol.simulated import responses_store
from switchyard.protocol.simulated.audio import AUDIO_PATHS
from switchyard.protocol.simulated.audio import answer as audio_answer
from switchyard.protocol.simulated.checks import refusal
from switchyard.protocol.simulated.choices import buffered_choices, call_id, chat_delta, choice_count, chunk_choice
from switchyard.protocol.simulated.endpoints import answer as endpoints_answer
from switchyard.protocol.simulated.engine import KvStats, MetricsReply, render_page
from switchyard.protocol.simulated.images import IMAGE_PATHS, form_of
from switchyard.protocol.simulated.images import answer as images_answer
from switchyard.protocol.simulated.kv_engine import KvEngine
from switchyard.protocol.simulated.parts import (
    _WORDS,
    IN_BAND_ERROR,
    PREFILL_UNSUPPORTED,
    STREAM_OPTIONS_UNSUPPORTED,
    TOOL_ARGUMENTS,
    TOOL_NAME,
    SimulatedStream,
    paced,
    prefill_of,
    prompt_token_count,
    split_even,
    split_words,
    sse_event,
)
from switchyard.protocol.simulated.responses import answer as responses_answer
from switchyard.protocol.simulated.scoring import PATHS as SCORING_PATHS
from switchyard.protocol.simulated.scoring import answer as scoring_answer
from switchyard.protocol.simulated.slots import Slots
from switchyard.protocol.simulated.tools import arguments_for, cite, ends_with_tool_output, offered


class SimulatedTransport(httpx.AsyncBaseTransport):
    # How many recent requests and events a simulator keeps (0: none) when its constructor is not
    # told; tests that read them raise it for their run (tests/conftest.py, ``simulator_history``).
    history: ClassVar[int] = 0

    def __init__(self, name: str, simulation: Simulation | None = None, models: tuple[str, ...] = (),
                 history: int | None = None) -> None:
        self.name = name
        self.simulation = simulation or Simulation()
        self.models = tuple(m for m in models if not any(c in m for c in "*?["))
        self.script: deque[Simulation] = deque()
        self.health_script: deque[int] = deque()
        self.metrics_script: deque[SimulatedEngine | MetricsReply] = deque()
        self.keep = type(self).history if history is None else history
        self._events: deque[tuple[float, str]] = deque(maxlen=self.keep)
        self._requests: deque[httpx.Request] = deque(maxlen=self.keep)
        self.served = 0                # chat requests taken in (their ids count them)
        self.in_flight = 0             # chat requests not yet answered in full
        self.peak_in_flight = 0        # the most at once, since start (tests read it)
        self.slots = Slots()           # simulation.max_concurrency: past it, requests wait their turn
        self.responses_script: deque[Any] = deque()   # Responses turns queued by script_responses
        self.stored_responses: OrderedDict[str, dict[str, Any]] = OrderedDict()   # what /v1/responses keeps
        self.response_ids = 0          # Response ids handed out (not ``served``: those answered at once share it)
        self.generated = 0             # tokens streamed so far, for the engine's generation counter
        self.background = 0.0          # tokens generated "for other clients" up to the last engine page
        self.engine_at: float | None = None      # when the last engine page was rendered
        self.kv = KvEngine(name)       # simulation.engine_kv: its KV cache, prefill queue and event listeners

    @property
    def events(self) -> list[tuple[float, str]]:
        """The last ``keep`` (instant, kind) events, oldest first; reading them needs a history."""
        return self.kept(self._events)

    @property
    def requests(self) -> list[httpx.Request]:
        """The last ``keep`` chat requests, oldest first; reading them needs a history."""
        return self.kept(self._requests)

    def kept(self, store: deque[Any]) -> list[Any]:
        """A copy of ``store``; loud without a history, so a test that forgot to ask never passes on an empty one."""
        if not self.keep:
            raise RuntimeError(f"simulator {self.name!r} keeps no history: construct it with history=N "
                               "(a test: mark it simulator_history)")
        return list(store)

    def record(self, kind: str) -> None:
        if self.keep:
            self._events.append((trio.current_time(), kind))

    def count(self, kind: str) -> int:
        return sum(1 for _, k in self.events if k == kind)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if "/responses/" in path:   # stored responses and compaction (protocol/simulated/responses_store.py)
            return await responses_store.serve(self, request)
        if request.method == "GET" and path.endswith("/models"):
            self.record("models")
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": self.name} for m in self.models]})
        if request.method == "GET" and path.endswith("/metrics") and (self.simulation.engine or self.metrics_script):
            return await self._metrics()
        if request.method == "GET":  # any other GET is the health route, whatever health_checks.path says
            status = self.health_script.popleft() if self.health_script else self.simulation.health_status
            self.record(f"health:{status}")
            return httpx.Response(status, json={"status": "ok" if status < 400 else "unavailable"})
        if request.method == "POST" and path.endswith(("/completions", "/embeddings", "/responses", *IMAGE_PATHS,
                                                       *SCORING_PATHS, *AUDIO_PATHS)):
            return await self._chat(request)
        return httpx.Response(404, json={"error": {"message": f"no route {path}", "type": "not_found_error",
                                                   "param": None, "code": None}})

    async def _metrics(self) -> httpx.Response:
        entry = self.metrics_script.popleft() if self.metrics_script else MetricsReply()
        reply = entry if isinstance(entry, MetricsReply) else MetricsReply()
        engine = entry if isinstance(entry, SimulatedEngine) else self.simulation.engine
        self.record(f"metrics:{reply.status}")   # on arrival, so a stalled poll shows when it came
        if reply.delay:
            await trio.sleep(reply.delay)
        body = reply.body
        if body is None:
            body = self.engine_page(engine) if reply.status < 300 and engine is not None else ""
        return httpx.Response(reply.status, headers={"content-type": "text/plain; version=0.0.4; charset=utf-8"},
                              content=body.encode())

    def engine_page(self, engine: SimulatedEngine) -> str:
        """The Prometheus text page of ``engine`` now, its counters brought up to this instant."""
        now = trio.current_time()
        if self.engine_at is not None:   # accumulated, so a reloaded rate never makes the counter go back
            self.background += engine.background_tokens_per_second * (now - self.engine_at)
        self.engine_at = now
        tokens = self.generated + self.background
        kv = None
        if self.simulation.engine_kv is not None:   # queued for a slot or for the prefill: vLLM's waiting queue
            kv = KvStats(waiting=self.slots.waiting + self.kv.queued, usage=self.kv.usage(), queries=self.kv.queries,
                         hits=self.kv.hits)
        running = engine.running + self.in_flight - (self.kv.queued if kv else 0)
        return render_page(engine, self.models[0] if self.models else self.name, running, tokens, kv)

    async def _chat(self, request: httpx.Request) -> httpx.Response:
        await self.slots.take(self.simulation.max_concurrency)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            response = await self._reply(request)
        except BaseException:
            self.ended()
            raise
        if not isinstance(response.stream, SimulatedStream):
            self.ended()       # an error answer: nothing left running
        return response

    def ended(self) -> None:
        """A request answered in full (or given up): it stops running, and its slot goes to the next."""
        self.in_flight -= 1
        self.slots.give()

    async def _arrive(self, request: httpx.Request) -> tuple[Simulation, Any, bool, httpx.Response | None]:
        """A chat request taken in, held for its latency: its Simulation, body, stream flag, scripted error answer."""
        sim = self.script.popleft() if self.script else self.simulation
        self.served += 1
        if self.keep:
            self._requests.append(request)
        self.record("request")
        raw = b""
        try:
            raw = await request.aread()
            form = form_of(request)   # an images edit or variation (protocol/simulated/images.py)
            body = json.loads(raw) if form is None else form[0]
        except (ValueError, RecursionError):
            body = None   # refused once it has "arrived" (simulated_checks)
        stream = isinstance(body, dict) and body.get("stream") is True
        if sim.failure.when_body_contains is not None and sim.failure.when_body_contains.encode() not in raw:
            sim = attrs.evolve(sim, failure=SimulatedFailure())   # not the request the failure is for
        fail = sim.failure
        try:
            if fail.stall_before_first_byte and not stream:
                await trio.sleep_forever()
            await trio.sleep(sim.latency)
        except trio.Cancelled:
            self.record("cancelled")
            raise
        if fail.status is None:
            return sim, body, stream, None
        self.record(f"status:{fail.status}")
        headers = dict(sim.response_headers)
        if fail.retry_after is not None:
            headers["retry-after"] = str(fail.retry_after)
        return sim, body, stream, self._failure(fail, fail.status, headers)

    def _failure(self, fail: SimulatedFailure, status: int, headers: dict[str, str]) -> httpx.Response:
        return httpx.Response(status, headers=headers, json={"error": {   # OpenAI's error shape
            "message": f"simulated failure from {self.name}", "type": "server_error" if status >= 500
            else "invalid_request_error", "param": None, "code": fail.error_code or f"simulated_{status}"}})

    async def _reply(self, request: httpx.Request) -> httpx.Response:
        sim, body, stream, failed = await self._arrive(request)
        if failed is not None:
            return failed
        if request.url.path.endswith(IMAGE_PATHS) and isinstance(body, dict):
            return images_answer(self, sim, request.url.path, body, (form_of(request) or ({}, ()))[1])
        if request.url.path.endswith(AUDIO_PATHS) and isinstance(body, dict):
            return audio_answer(self, sim, request.url.path, body, (form_of(request) or ({}, ()))[1])
        refused = refusal(request.url.path, body)
        if refused is not None:
            self.record("invalid")
            return refused
        if "stream_options" in body and not sim.supports_stream_options:   # a server that knows no such field
            self.record("stream_options_refused")
            return httpx.Response(400, json=STREAM_OPTIONS_UNSUPPORTED)
        model = body.get("model", "")
        if request.url.path.endswith("/responses"):   # the Responses API (protocol/simulated/responses.py)
            return responses_answer(self, sim, body)
        if request.url.path.endswith(SCORING_PATHS):   # rerank, moderations (protocol/simulated/scoring.py)
            return scoring_answer(self, sim, request.url.path, body)
        if not request.url.path.endswith("/chat/completions"):   # text completions, embeddings: no messages
            return endpoints_answer(self, sim, request.url.path, body)
        if prefill_of(body) is not None and not sim.supports_prefill:
            self.record("prefill_unsupported")
            return httpx.Response(400, json=PREFILL_UNSUPPORTED)
        completion_id = f"chatcmpl-sim-{self.served}"
        tool = offered(body) if sim.call_tools else None
        if tool is not None and (sim.failure.tool_call or not ends_with_tool_output(body)):   # it uses the tool
            sim = attrs.evolve(sim, failure=attrs.evolve(sim.failure, tool_call=True),
                               tool_arguments=sim.tool_arguments or arguments_for(tool, body))
        name = (sim.tool_name or tool["name"]) if tool is not None else TOOL_NAME
        if stream:
            return httpx.Response(200, headers={**sim.response_headers, "content-type": "text/event-stream"},
                                  stream=SimulatedStream(self, self._sse(sim, completion_id, model, body, name)))
        return httpx.Response(200, headers={**sim.response_headers, "content-type": "application/json"},
                              stream=SimulatedStream(self, self._buffered(sim, completion_id, model, body, name)))

    def _tokens(self, sim: Simulation, body: dict[str, Any]) -> list[str]:
        """The full reply text as pieces, before any prefill is taken off (``call_tools``: sources cited)."""
        if sim.text is not None:
            return split_words(sim.text, sim.chunks)
        first = f"Hello from {self.name}."
        tokens = [first] + [" " + _WORDS[i % len(_WORDS)] for i in range(sim.chunks - 1)]
        return cite(tokens, body) if sim.call_tools else tokens

    def reply_pieces(self, sim: Simulation, body: dict[str, Any], chat: bool = True) -> list[str]:
        """What this request gets, piece by piece: text, tool arguments, or one empty piece. Only a chat
        body (``chat``) has messages whose trailing assistant turn is a prefill to continue."""
        if sim.failure.tool_call:
            return split_even(sim.tool_arguments if sim.tool_arguments is not None else TOOL_ARGUMENTS, sim.chunks)
        if sim.failure.empty_reply:
            return [""]
        tokens = self._tokens(sim, body)
        prefill = prefill_of(body) if chat else None
        if prefill is None:
            return tokens
        full = "".join(tokens)
        if full.startswith(prefill):
            self.record("prefill_continued")
            return split_words(full[len(prefill):], sim.chunks)
        self.record("prefill_ignored")
        return tokens

    async def paced_pieces(self, sim: Simulation, pieces: list[str],
                           body: Any = None) -> AsyncGenerator[tuple[int, str], None]:
        """Pieces with their 1-based number, paced and failing as scripted (``engine_kv``: after the prefill of
        ``body``'s prompt, at the engine's decode rate)."""
        fail = sim.failure
        timed = self.kv.serve(sim.engine_kv, pieces, body) if sim.engine_kv else paced(pieces, sim.tokens_per_second)
        async with aclosing(timed):
            async for k, token in timed:
                self.generated += 1 if token else 0
                yield k, token
                if fail.stall_after_chunk == k:
                    self.record(f"stall_after:{k}")
                    await trio.sleep_forever()
                if fail.reset_after_chunk == k:
                    self.record(f"reset_after:{k}")
                    raise httpx.ReadError("simulated connection reset by peer")

    async def _sse(self, sim: Simulation, cid: str, model: str, body: dict[str, Any],
                   name: str = TOOL_NAME) -> AsyncIterator[bytes]:
        fail = sim.failure
        if fail.stall_before_first_byte:
            await trio.sleep_forever()
        created = int(time.time())
        pieces = self.reply_pieces(sim, body)
        produced, n = 0, choice_count(body)

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            return sse_event({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                              "choices": choices, **extra})

        async with aclosing(self.paced_pieces(sim, pieces, body)) as timed:
            async for k, token in timed:
                if fail.malformed_chunk == k:
                    yield b'data: {"id": "' + cid.encode() + b'", "choices": [ {"delta": \n\n'
                else:
                    produced += n if token else 0
                    for i in range(n):   # one choice a chunk, as OpenAI streams n > 1
                        yield chunk([chunk_choice(body, i, chat_delta(sim, k, token, name), token, k - 1,
                                                  fail.tool_call)])
                if fail.error_event_after_chunk == k:
                    self.record(f"error_event_after:{k}")
                    yield sse_event(IN_BAND_ERROR)
                    return
                if fail.truncate_after_chunk == k:
                    self.record(f"truncated_after:{k}")
                    return
        prompt = prompt_token_count(body)
        usage = {"prompt_tokens": prompt, "completion_tokens": produced, "total_tokens": prompt + produced}
        finish = "tool_calls" if fail.tool_call else "stop"
        for j in range(1, sim.tool_calls if fail.tool_call else 1):   # the other calls, each whole in one delta
            call = {"index": j, "id": call_id(j), "type": "function",
                    "function": {"name": name, "arguments": "".join(pieces)}}
            for i in range(n):
                yield chunk([chunk_choice(body, i, {"tool_calls": [call]}, "", 0, True)])
        for i in range(n):
            yield chunk([chunk_choice(body, i, {}, "", 0, fail.tool_call, finish)])
        if (body.get("stream_options") or {}).get("include_usage"):
            yield chunk([], usage=usage)   # as OpenAI-compatible servers do: a chunk of its own, with no choices
        self.record("completed")  # the reply is whole once its final chunk is out
        if not fail.omit_done:
            yield b"data: [DONE]\n\n"

    def _buffered(self, sim: Simulation, cid: str, model: str, body: dict[str, Any],
                  name: str = TOOL_NAME) -> AsyncIterator[bytes]:
        fail = sim.failure

        def render(tokens: list[str]) -> str:
            prompt, produced = prompt_token_count(body), choice_count(body) * sum(1 for t in tokens if t)
            return json.dumps({
                "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": buffered_choices(body, tokens, fail.tool_call, name, sim.tool_calls),
                "usage": {"prompt_tokens": prompt, "completion_tokens": produced, "total_tokens": prompt + produced},
            })
        return self.buffered_body(sim, cid, body, render)

    async def buffered_body(self, sim: Simulation, cid: str, body: dict[str, Any],
                            render: Callable[[list[str]], str]) -> AsyncGenerator[bytes, None]:
        """A buffered body: the pieces paced, then ``render(pieces)``, unless a scripted failure breaks or cuts it."""
        fail = sim.failure
        tokens: list[str] = []
        cut = None
        async with aclosing(self.paced_pieces(sim, self.reply_pieces(sim, body), body)) as timed:
            async for k, token in timed:
                if fail.malformed_chunk == k:
                    self.record("completed")
                    yield b'{"id": "' + cid.encode() + b'", "choices": ['
                    return
                tokens.append(token)
                if fail.error_event_after_chunk == k:   # headers are out already: the error comes in the 200 body
                    self.record(f"error_event_after:{k}")
                    yield json.dumps(IN_BAND_ERROR).encode()
                    return
                if fail.truncate_after_chunk == k:
                    cut = k
                    break
        text = render(tokens)
        if cut is not None:   # the body ends cleanly but short: invalid JSON, no finish_reason
            self.record(f"truncated_after:{cut}")
            yield text[:text.index('"finish_reason"')].encode()
            return
        self.record("completed")
        yield text.encode()
