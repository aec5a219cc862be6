"""An in-process backend that answers like Anthropic's Messages API.

The native ``anthropic`` backend type is tested and demonstrated against it
without a network: a backend of type ``anthropic`` whose url host ends in
``.simulated`` is served by this transport. It shares the OpenAI simulator's
machinery (``protocol/simulated/openai.py``): the same ``Simulation`` settings,
per-request ``script``, pacing under the MockClock, failure modes and
``events``/``requests`` records; only the wire differs.

Like the real API it is strict, so a test sees what Anthropic would refuse:
requests need ``anthropic-version`` and, when the backend has an
``api_key``, a matching ``x-api-key`` (else 401); ``POST /v1/messages``
refuses what the real API refuses, and takes ``context_management`` and a
mid-conversation ``system`` message only under their betas
(``protocol/simulated/anthropic_checks.py``). Errors come in Anthropic's
shape, ``{"type": "error", "error": {"type", "message"}}``, with a
``request-id`` header.

Answers: a ``message`` object, or the SSE sequence ``message_start``,
``ping``, per block ``content_block_start``/``_delta``/``_stop``,
``message_delta`` (stop reason, usage), ``message_stop``, each with every
field Anthropic's schema requires (``container``, ``stop_details``, the
usage's cache, tier and region fields, a text block's ``citations``, a tool
call's ``caller``; ``context_management`` with no edit applied when the
request asked for edits). A request's ``cache_control`` marks read and write
a simulated prompt cache, reported in the usage (``anthropic_cache.py``). The request
steers it too: ``thinking`` enabled adds a thinking block, a stop sequence
found in the reply cuts it (``stop_sequence``), ``max_tokens`` below the
number of pieces cuts it (``max_tokens``). Failure modes map as follows:
an error status (Anthropic's error type for it), the stalls and the reset,
a malformed event, an ``event: error`` (overloaded) after chunk k, a clean
end after chunk k, ``omit_done`` (no ``message_stop``), an empty reply, a
``tool_use`` block. ``GET /v1/models`` is both its health route and its
model list (Anthropic's list shape).
"""

from __future__ import annotations

import json
from collections import deque
from contextlib import aclosing
from typing import Any, AsyncIterator

import httpx
import trio

from switchyard.config.schema import SimulatedFailure
from switchyard.config.simulation import Simulation
from switchyard.protocol.http.client_json import utf8
from switchyard.protocol.simulated.anthropic_cache import PromptCache
from switchyard.protocol.simulated.anthropic_cache import problem as cache_problem
from switchyard.protocol.simulated.anthropic_checks import betas_of, problem_in
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.simulated.parts import TOOL_ARGUMENTS, TOOL_NAME, SimulatedStream, split_words

TOOL_USE_ID = "toolu_sim"
THINKING_TEXT = "Let me think this through."

# What Anthropic calls the error behind each status.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 503: "overloaded_error", 529: "overloaded_error"}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def sse(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: ".encode() + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class SimulatedAnthropicTransport(SimulatedTransport):
    def __init__(self, name: str, simulation: Simulation | None = None, models: tuple[str, ...] = (),
                 api_key: str | None = None, history: int | None = None) -> None:
        super().__init__(name, simulation, models, history)
        self.api_key = api_key
        self.prompt_cache = PromptCache()   # what cache_control marks read and write (anthropic_cache.py)
        self._gets: deque[httpx.Request] = deque(maxlen=self.keep)

    @property
    def gets(self) -> list[httpx.Request]:
        """The last ``keep`` health checks and model listings, for their headers; needs a history."""
        return self.kept(self._gets)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
        # Not json=: httpx encodes strict UTF-8, and the message may quote a client's lone surrogate.
        head = {"request-id": f"req_sim_{self.served}", "content-type": "application/json", **(headers or {})}
        return httpx.Response(status, headers=head, content=utf8(error_body(status, message)))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and self.keep:
            self._gets.append(request)
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            self.record("unauthorized")
            return self._error(401, "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            self.record("no_version")
            return self._error(400, "anthropic-version: header is required")
        path = request.url.path
        if request.method == "GET" and path.endswith("/v1/models"):
            status = self.health_script.popleft() if self.health_script else self.simulation.health_status
            self.record(f"health:{status}")
            if status >= 300:
                return self._error(status, f"simulated {status} from {self.name}")
            data = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                    for m in self.models]
            return httpx.Response(200, json={"data": data, "has_more": False,
                                             "first_id": data[0]["id"] if data else None,
                                             "last_id": data[-1]["id"] if data else None})
        if request.method == "POST" and path.endswith("/v1/messages"):
            return await self._chat(request)   # the in-flight bookkeeping of the base, around _reply
        return self._error(404, f"no route {request.method} {path}")

    def _failure(self, fail: SimulatedFailure, status: int, headers: dict[str, str]) -> httpx.Response:
        return self._error(status, f"simulated failure from {self.name}", headers)

    async def _reply(self, request: httpx.Request) -> httpx.Response:
        sim, body, stream, failed = await self._arrive(request)   # the script, the latency, a scripted status
        if failed is not None:
            return failed
        problem = problem_in(body, request.headers["anthropic-version"],
                             betas_of(request.headers.get("anthropic-beta"))) or cache_problem(body)
        if problem is not None:
            self.record("invalid")
            return self._error(400, problem)
        if body["messages"][-1].get("role") == "assistant" and not sim.supports_prefill:
            self.record("prefill_unsupported")
            return self._error(400, "This model does not support assistant message prefill.")
        reply = _Reply(self, sim, body, f"msg_sim_{self.served}")
        headers = {**sim.response_headers, "request-id": f"req_sim_{self.served}"}
        if stream:
            return httpx.Response(200, headers={**headers, "content-type": "text/event-stream; charset=utf-8"},
                                  stream=SimulatedStream(self, reply.events()))
        return httpx.Response(200, headers={**headers, "content-type": "application/json"},
                              stream=SimulatedStream(self, reply.message()))


class _Reply:
    """One answer: its pieces (text or tool input JSON), how it stops, and its two renderings."""

    def __init__(self, owner: SimulatedAnthropicTransport, sim: Simulation, body: dict[str, Any], mid: str) -> None:
        self.owner, self.sim, self.body, self.id = owner, sim, body, mid
        self.model = body["model"]
        self.tool = sim.failure.tool_call
        self.arguments = sim.tool_arguments if sim.tool_arguments is not None else TOOL_ARGUMENTS
        self.pieces = owner.reply_pieces(sim, body)
        self.stop_reason = "tool_use" if self.tool else "end_turn"
        self.stop_sequence: str | None = None
        if not self.tool:
            self._cut_at_stop_sequence()
        if sum(1 for p in self.pieces if p) > body["max_tokens"]:
            self.pieces, self.stop_reason, self.stop_sequence = self.pieces[:body["max_tokens"]], "max_tokens", None
        self.thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        self.input_tokens = max(1, len(json.dumps(body["messages"])) // 4)
        self.cache_read = self.cache_write = 0
        cached = owner.prompt_cache.account(body)
        if cached is not None:
            self.input_tokens, self.cache_read, self.cache_write = cached

    def _cut_at_stop_sequence(self) -> None:
        text = "".join(self.pieces)
        found = [(text.find(s), s) for s in self.body.get("stop_sequences") or () if s and s in text]
        if found:
            at, seq = min(found)
            self.pieces = split_words(text[:at], len(self.pieces)) or [""]
            self.stop_reason, self.stop_sequence = "stop_sequence", seq

    def _usage(self, produced: int) -> dict[str, Any]:
        """The usage after ``produced`` answer tokens (the thinking text's words count as output too)."""
        thinking = len(THINKING_TEXT.split()) if self.thinking else 0
        return {"input_tokens": self.input_tokens, "output_tokens": produced + thinking,
                "cache_creation_input_tokens": self.cache_write, "cache_read_input_tokens": self.cache_read,
                "cache_creation": {"ephemeral_5m_input_tokens": self.cache_write, "ephemeral_1h_input_tokens": 0},
                "output_tokens_details": {"thinking_tokens": thinking},
                "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
                "service_tier": "standard", "inference_geo": self.body.get("inference_geo") or "global"}

    def _edits(self) -> dict[str, Any]:
        """The ``context_management`` the answer carries when the request asked for edits: none applied."""
        return {"context_management": {"applied_edits": []}} if self.body.get("context_management") else {}

    def _blocks(self, pieces: list[str]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self.thinking:
            blocks.append({"type": "thinking", "thinking": THINKING_TEXT, "signature": "sig_sim"})
        if self.tool:
            try:
                tool_input = json.loads("".join(pieces))
            except ValueError:
                tool_input = {}
            blocks.append({"type": "tool_use", "id": TOOL_USE_ID, "name": TOOL_NAME, "input": tool_input,
                           "caller": {"type": "direct"}})
        elif not self.sim.failure.empty_reply:
            blocks.append({"type": "text", "text": "".join(pieces), "citations": None})
        return blocks

    async def message(self) -> AsyncIterator[bytes]:
        fail, owner = self.sim.failure, self.owner
        taken: list[str] = []
        async with aclosing(owner.paced_pieces(self.sim, self.pieces)) as paced:
            async for k, piece in paced:
                if fail.malformed_chunk == k:
                    owner.record("completed")
                    yield b'{"id": "' + self.id.encode() + b'", "content": ['
                    return
                taken.append(piece)
                if fail.error_event_after_chunk == k:
                    owner.record(f"error_event_after:{k}")
                    yield json.dumps(error_body(529, "Overloaded")).encode()
                    return
                if fail.truncate_after_chunk == k:
                    owner.record(f"truncated_after:{k}")
                    yield json.dumps({"id": self.id, "type": "message"}).encode()[:-1]
                    return
        text = json.dumps({"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                           "content": self._blocks(taken), "stop_reason": self.stop_reason,
                           "stop_sequence": self.stop_sequence, "stop_details": None, "container": None,
                           "usage": self._usage(sum(1 for p in taken if p)), **self._edits()})
        owner.record("completed")
        yield text.encode()

    async def events(self) -> AsyncIterator[bytes]:
        fail, owner = self.sim.failure, self.owner
        if fail.stall_before_first_byte:
            await trio.sleep_forever()
        yield sse({"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "content": [], "model": self.model,
            "stop_reason": None, "stop_sequence": None, "stop_details": None, "container": None,
            "usage": {**self._usage(0), "output_tokens": 1, "output_tokens_details": {"thinking_tokens": 0}}}})
        yield sse({"type": "ping"})
        index = 0
        if self.thinking:
            yield sse({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            yield sse({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "thinking_delta", "thinking": THINKING_TEXT}})
            yield sse({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "signature_delta", "signature": "sig_sim"}})
            yield sse({"type": "content_block_stop", "index": 0})
            index = 1
        blocks = not fail.empty_reply or self.tool
        if blocks:
            start = {"type": "tool_use", "id": TOOL_USE_ID, "name": TOOL_NAME, "input": {},
                     "caller": {"type": "direct"}} if self.tool else {"type": "text", "text": "", "citations": None}
            yield sse({"type": "content_block_start", "index": index, "content_block": start})
        produced = 0
        pieces = self.pieces if blocks else []
        async with aclosing(owner.paced_pieces(self.sim, pieces)) as paced:
            async for k, piece in paced:
                if fail.malformed_chunk == k:
                    yield b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": \n\n'
                else:
                    produced += 1 if piece else 0
                    delta = {"type": "input_json_delta", "partial_json": piece} if self.tool \
                        else {"type": "text_delta", "text": piece}
                    yield sse({"type": "content_block_delta", "index": index, "delta": delta})
                if fail.error_event_after_chunk == k:
                    owner.record(f"error_event_after:{k}")
                    yield sse(error_body(529, "Overloaded"))
                    return
                if fail.truncate_after_chunk == k:
                    owner.record(f"truncated_after:{k}")
                    return
        if blocks:
            yield sse({"type": "content_block_stop", "index": index})
        usage = {key: value for key, value in self._usage(produced).items()   # cumulative, as the API sends it
                 if key not in ("cache_creation", "service_tier", "inference_geo")}
        yield sse({"type": "message_delta", "delta": {"stop_reason": self.stop_reason, "stop_sequence":
                                                      self.stop_sequence, "stop_details": None, "container": None},
                   "usage": usage, **self._edits()})
        owner.record("completed")
        if not fail.omit_done:
            yield sse({"type": "message_stop"})
