"""What the simulated backend answers on ``/v1/responses``: a Response object, or its event stream.

Kept apart from the chat simulator (``protocol/simulated/openai.py``), which hands
the path over after its common steps (the script, the latency, a scripted
error status). The reply reuses the chat reply's words, pacing and failure
modes (``reply_pieces``, ``paced_pieces``: stall, reset, malformed event, in-band
``error`` event, truncation, a ``get_weather`` function call, an empty
reply) in the Responses shapes: ``response.created``, ``response.in_progress``,
``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta`` ... ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done``,
``response.completed``, with ``sequence_number`` counting from 0.

Each Response object answered is stored (``protocol/simulated/responses_store.py``,
which also serves retrieve, cancel, delete, input items and compaction); its
fields echo the request as OpenAI's do (``actors/response_echo.py``).
With ``Simulation.call_tools`` a request offering function tools gets a call
to one (``offered_tool``), as a model given tools would.

What only the Responses API has is scripted per request with
``script_responses(transport, ResponsesTurn(...))``: a reasoning item with a
summary, a refusal instead of text, an incomplete or a failed response.
"""

from __future__ import annotations

import json
import time
from contextlib import aclosing
from typing import Any, AsyncIterator

import attrs
import httpx
import trio
from attrs import frozen

from switchyard.actors.response_echo import response_fields
from switchyard.config.simulation import Simulation
from switchyard.protocol.simulated import responses_store as stored
from switchyard.protocol.simulated.choices import token_logprob
from switchyard.protocol.simulated.parts import TOOL_CALL_ID, TOOL_NAME, SimulatedStream, Simulator, split_words

LOGPROBS_INCLUDE = "message.output_text.logprobs"


@frozen
class ResponsesTurn:
    """One scripted Responses answer's own features (the Simulation still gives text, pacing and failures)."""

    reasoning: str | None = None     # a reasoning item first, with this summary (streamed as summary deltas)
    refusal: bool = False            # the message is a refusal of the text instead of output_text
    incomplete: str | None = None    # status incomplete with this reason (max_output_tokens, content_filter)
    failed: str | None = None        # status failed with this error code, no output


def script_responses(owner: "Simulator", *turns: ResponsesTurn) -> None:
    """Queue answers for the next ``/v1/responses`` requests (one turn each; then plain answers)."""
    owner.responses_script.extend(turns)


def answer(owner: "Simulator", sim: Simulation, body: dict[str, Any]) -> httpx.Response:
    refused = stored.unknown_previous(owner, body) or stored.unmatched_call_output(owner, body)
    if refused is not None:
        owner.record("invalid")
        return refused
    queue = owner.responses_script
    turn = queue.popleft() if queue else ResponsesTurn()
    tool = offered_tool(body) if sim.call_tools else None
    if tool is not None:   # the demo's model uses a tool it is offered
        sim = attrs.evolve(sim, failure=attrs.evolve(sim.failure, tool_call=True))
    reply = _Reply(owner, sim, turn, body, stored.response_id(owner), tool or TOOL_NAME)
    if body.get("background") is True and body.get("stream") is not True:   # answered at once, left running
        owner.record("background")
        response = reply.response("in_progress")
        stored.keep(owner, response, body)
        return httpx.Response(200, headers={**sim.response_headers, "content-type": "application/json"},
                              json=response)
    if body.get("stream") is True:
        return httpx.Response(200, headers={**sim.response_headers, "content-type": "text/event-stream"},
                              stream=SimulatedStream(owner, reply.events()))
    return httpx.Response(200, headers={**sim.response_headers, "content-type": "application/json"},
                          stream=SimulatedStream(owner, reply.buffered()))


def offered_tool(body: dict[str, Any]) -> str | None:
    """The function tool a request offers to call: ``tool_choice``'s, else the first; None when it offers none,
    forbids calls (``tool_choice: none``) or ends with a tool's output (the answer reads that output)."""
    tools = [t for t in body.get("tools") or () if isinstance(t, dict) and t.get("type") == "function"
             and isinstance(t.get("name"), str)]
    items = body.get("input") if isinstance(body.get("input"), list) else []
    choice = body.get("tool_choice")
    if not tools or choice == "none" or (items and isinstance(items[-1], dict)
                                         and items[-1].get("type") == "function_call_output"):
        return None
    named = choice.get("name") if isinstance(choice, dict) and choice.get("type") == "function" else None
    return named if any(t["name"] == named for t in tools) else tools[0]["name"]


class _Reply:
    def __init__(self, owner: "Simulator", sim: Simulation, turn: ResponsesTurn, body: dict[str, Any], rid: str,
                 tool_name: str = TOOL_NAME):
        self.owner, self.sim, self.turn, self.body, self.id = owner, sim, turn, body, rid
        self.tool_name = tool_name
        self.created = int(time.time())
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        include, top = body.get("include"), body.get("top_logprobs")
        # Text log probabilities only when `include` asks for them, as on OpenAI.
        self.top = (top if isinstance(top, int) and not isinstance(top, bool) else 0) \
            if isinstance(include, list) and LOGPROBS_INCLUDE in include else None

    def logprobs(self, pieces: list[str], first: int = 0) -> list[dict[str, Any]]:
        if self.top is None:
            return []
        return [token_logprob(p, first + i, self.top) for i, p in enumerate(pieces) if p]

    def response(self, status: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        turn = self.turn
        return {
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": {"code": turn.failed, "message": f"simulated failure ({turn.failed})"}
            if status == "failed" else None,
            "incomplete_details": {"reason": turn.incomplete} if status == "incomplete" else None,
            "output": list(self.output), "usage": usage, **response_fields(self.body),
        }

    def usage(self, produced: int) -> dict[str, Any]:
        prompt = max(1, len(json.dumps([self.body.get("input"), self.body.get("instructions")])) // 4)
        reasoning = len(split_words(self.turn.reasoning, 1000)) if self.turn.reasoning else 0
        return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": produced + reasoning, "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": prompt + produced + reasoning}

    def event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\n".encode() + b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

    def _status(self) -> str:
        return "incomplete" if self.turn.incomplete else "completed"

    def _main_item(self, pieces: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The answer's item (a message or a function call) as it ends, and its content part if any."""
        text = "".join(pieces)
        if self.sim.failure.tool_call:
            return {"id": "fc_sim", "type": "function_call", "status": "completed", "arguments": text,
                    "call_id": TOOL_CALL_ID, "name": self.tool_name}, None
        part = {"type": "refusal", "refusal": text} if self.turn.refusal else \
            {"type": "output_text", "text": text, "annotations": [], "logprobs": self.logprobs(pieces)}
        item = {"id": "msg_sim", "type": "message", "status": self._status(), "role": "assistant", "content": [part]}
        return item, part

    def _reasoning_item(self) -> dict[str, Any] | None:
        if self.turn.reasoning is None:
            return None
        return {"id": "rs_sim", "type": "reasoning", "summary": [{"type": "summary_text", "text": self.turn.reasoning}]}

    async def buffered(self) -> AsyncIterator[bytes]:
        owner, fail = self.owner, self.sim.failure
        pieces: list[str] = []
        async with aclosing(owner.paced_pieces(self.sim, owner.reply_pieces(self.sim, self.body))) as paced:
            async for k, token in paced:
                if fail.malformed_chunk == k:
                    yield b'{"id": "' + self.id.encode() + b'", "output": ['
                    owner.record("completed")
                    return
                pieces.append(token)
                if fail.truncate_after_chunk == k:
                    owner.record(f"truncated_after:{k}")
                    yield json.dumps(self.response("completed"))[:40].encode()
                    return
        if self.turn.failed:
            owner.record("failed")
            yield json.dumps(self.response("failed")).encode()
            return
        reasoning = self._reasoning_item()
        self.output = ([reasoning] if reasoning else []) + [self._main_item(pieces)[0]]
        owner.record("completed")
        final = self.response(self._status(), self.usage(sum(1 for p in pieces if p)))
        stored.keep(owner, final, self.body)
        yield json.dumps(final).encode()

    async def events(self) -> AsyncIterator[bytes]:
        owner, fail = self.owner, self.sim.failure
        if fail.stall_before_first_byte:
            await trio.sleep_forever()
        yield self.event("response.created", response=self.response("in_progress"))
        yield self.event("response.in_progress", response=self.response("in_progress"))
        if self.turn.failed:
            owner.record("failed")
            yield self.event("response.failed", response=self.response("failed"))
            return
        reasoning = self._reasoning_item()
        if reasoning is not None:
            for event in self._reasoning_events(reasoning):
                yield event
        at = len(self.output)
        pieces = owner.reply_pieces(self.sim, self.body)
        item, part = self._main_item([])
        yield self.event("response.output_item.added", output_index=at,
                         item={**item, "status": "in_progress", **({"content": []} if part else {})})
        ids = {"item_id": item["id"], "output_index": at}
        if part is not None:
            yield self.event("response.content_part.added", **ids, content_index=0, part=part)
        sent: list[str] = []
        async with aclosing(owner.paced_pieces(self.sim, pieces)) as paced:
            async for k, token in paced:
                if fail.malformed_chunk == k:
                    yield b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", \n\n'
                    continue
                sent.append(token)
                yield self._delta(ids, part, token, k - 1)
                if fail.error_event_after_chunk == k:
                    owner.record(f"error_event_after:{k}")
                    yield self.event("error", code="simulated_error", message="simulated in-band error", param=None)
                    return
                if fail.truncate_after_chunk == k:
                    owner.record(f"truncated_after:{k}")
                    return
        for event in self._item_end(ids, item, part, sent):
            yield event
        owner.record("completed")
        kind = "response.incomplete" if self.turn.incomplete else "response.completed"
        final = self.response(self._status(), self.usage(sum(1 for p in sent if p)))
        stored.keep(owner, final, self.body)
        yield self.event(kind, response=final)

    def _delta(self, ids: dict[str, Any], part: dict[str, Any] | None, token: str, position: int) -> bytes:
        if part is None:
            return self.event("response.function_call_arguments.delta", **ids, delta=token)
        if part["type"] == "refusal":
            return self.event("response.refusal.delta", **ids, content_index=0, delta=token)
        return self.event("response.output_text.delta", **ids, content_index=0, delta=token,
                          logprobs=self.logprobs([token], position))

    def _item_end(self, ids: dict[str, Any], item: dict[str, Any], part: dict[str, Any] | None,
                  pieces: list[str]) -> list[bytes]:
        out, text = [], "".join(pieces)
        if part is None:
            item = {**item, "arguments": text}
            out.append(self.event("response.function_call_arguments.done", **ids, name=item["name"], arguments=text))
        elif part["type"] == "refusal":
            part = {**part, "refusal": text}
            out.append(self.event("response.refusal.done", **ids, content_index=0, refusal=text))
        else:
            part = {**part, "text": text, "logprobs": self.logprobs(pieces)}
            out.append(self.event("response.output_text.done", **ids, content_index=0, text=text,
                                  logprobs=part["logprobs"]))
        if part is not None:
            out.append(self.event("response.content_part.done", **ids, content_index=0, part=part))
            item = {**item, "content": [part]}
        out.append(self.event("response.output_item.done", output_index=ids["output_index"], item=item))
        self.output.append(item)
        return out

    def _reasoning_events(self, item: dict[str, Any]) -> list[bytes]:
        text = item["summary"][0]["text"]
        ids = {"item_id": item["id"], "output_index": 0}
        out = [self.event("response.output_item.added", output_index=0, item={**item, "summary": []}),
               self.event("response.reasoning_summary_part.added", **ids, summary_index=0,
                          part={"type": "summary_text", "text": ""})]
        out += [self.event("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=piece)
                for piece in split_words(text, 3)]
        out += [self.event("response.reasoning_summary_text.done", **ids, summary_index=0, text=text),
                self.event("response.reasoning_summary_part.done", **ids, summary_index=0,
                           part={"type": "summary_text", "text": text}),
                self.event("response.output_item.done", output_index=0, item=item)]
        self.output.append(item)
        return out
