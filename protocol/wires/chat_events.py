"""The reverse Responses bridge, stream side: chat chunks in, Responses stream events out.

``response.created`` and ``response.in_progress`` open the stream (the
relay holds them until output follows, so an early failure still fails
over). Then each output item is announced (``response.output_item.added``),
filled (``response.content_part.added`` and ``response.output_text.delta``,
``response.refusal.delta``, ``response.reasoning_text.delta``,
``response.function_call_arguments.delta``), and closed (its ``.done``
events, ``response.output_item.done``) before the next begins; tool calls
stay open until the answer ends, since chat may interleave their argument
deltas. Chat's ``[DONE]`` ends the stream with ``response.completed`` or
``response.incomplete`` (``chat_answers.status_of``), carrying the whole
Response and its usage. An in-band chat error becomes an ``error`` event.
Every event carries its ``sequence_number``, from 0.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping

from switchyard.protocol.wires.chat_answers import (
    JSONObject,
    call_item,
    message_item,
    new_id,
    reasoning_item,
    reasoning_of,
    response_object,
    responses_usage,
    status_of,
    text_part,
)
from switchyard.protocol.wires.tool_namespaces import names_of, restore


class ChatToEvents:
    """One chat stream's translation; ``feed`` a chunk object, ``end`` at ``[DONE]``; each returns SSE bytes."""

    def __init__(self, request: Mapping[str, Any]) -> None:
        self.request = request
        self.rid = new_id("resp")
        self.model: Any = request.get("model")
        self.created: Any = 0
        self.sequence = 0
        self.started = False
        self.done = False
        self.usage: Any = None
        self.finish: Any = None
        self.refused = False
        self.output: list[JSONObject] = []     # every item, in output order, as built so far
        self._reasoning: int | None = None     # output index of the open reasoning item
        self._message: int | None = None       # ... of the open message item
        self._part: str | None = None          # the kind of its open content part
        self._calls: dict[Any, int] = {}       # chat tool call index -> output index (open until the end)
        self._names = names_of(request)        # a namespace's functions, offered flattened

    # --- events -------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, **fields, "sequence_number": self.sequence}
        self.sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

    def _response(self, status: str, incomplete: JSONObject | None = None) -> JSONObject:
        usage = responses_usage(self.usage) if status != "in_progress" else None
        return response_object(self.rid, self.request, self.model, self.created, status,
                               copy.deepcopy(self.output), usage, incomplete)

    def _start(self) -> list[bytes]:
        if self.started:
            return []
        self.started = True
        return [self._event("response.created", response=self._response("in_progress")),
                self._event("response.in_progress", response=self._response("in_progress"))]

    # --- input --------------------------------------------------------------------------

    def feed(self, chunk: Any) -> bytes:
        if self.done or not isinstance(chunk, dict):
            return b""
        if isinstance(chunk.get("error"), dict):
            self.done = True
            err = chunk["error"]
            return self._event("error", code=err.get("code") or "upstream_stream_error",
                               message=err.get("message") or "The chat backend's stream failed",
                               param=err.get("param"))
        self.model = chunk.get("model") or self.model
        self.created = chunk.get("created") or self.created
        out = self._start()
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        reasoning = reasoning_of(delta)
        if reasoning is not None:
            out += self._text_delta("reasoning", reasoning)
        if isinstance(delta.get("content"), str) and delta["content"]:
            out += self._text_delta("output_text", delta["content"])
        if isinstance(delta.get("refusal"), str) and delta["refusal"]:
            self.refused = True
            out += self._text_delta("refusal", delta["refusal"])
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                out += self._call_delta(call)
        if choice.get("finish_reason") is not None:
            self.finish = choice["finish_reason"]
        return b"".join(out)

    def end(self) -> bytes:
        """At chat's ``[DONE]``: every open item closed, then the terminal event."""
        if self.done:
            return b""
        self.done = True
        out = [*self._start(), *self._close_text()]
        for index in sorted(self._calls.values()):
            item = self.output[index]
            item["status"] = "completed"
            out += [self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                arguments=item["arguments"]),
                    self._event("response.output_item.done", output_index=index, item=item)]
        self._calls = {}
        status, incomplete = status_of(self.finish, self.refused)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        out.append(self._event(kind, response=self._response(status, incomplete)))
        return b"".join(out)

    # --- items --------------------------------------------------------------------------

    def _added(self, item: JSONObject) -> bytes:
        self.output.append(item)
        shown = {**item, "content": []} if "content" in item else item
        return self._event("response.output_item.added", output_index=len(self.output) - 1, item=shown)

    def _text_delta(self, kind: str, text: str) -> list[bytes]:
        out: list[bytes] = []
        if kind == "reasoning":
            if self._reasoning is None:
                out += self._close_text()
                out.append(self._added(reasoning_item(new_id("rs"), "", "in_progress")))
                self._reasoning = len(self.output) - 1
                item = self.output[-1]
                out.append(self._event("response.content_part.added", item_id=item["id"],
                                       output_index=self._reasoning, content_index=0,
                                       part={"type": "reasoning_text", "text": ""}))
            index, content = self._reasoning, 0
            item = self.output[index]
            item["content"][0]["text"] += text
            return [*out, self._event("response.reasoning_text.delta", item_id=item["id"], output_index=index,
                                      content_index=content, delta=text)]
        if self._reasoning is not None:
            out += self._close_reasoning()
        if self._message is None:
            out.append(self._added(message_item(new_id("msg"), [], "in_progress")))
            self._message = len(self.output) - 1
        item = self.output[self._message]
        if self._part != kind:
            out += self._close_part()
            part = text_part("") if kind == "output_text" else {"type": "refusal", "refusal": ""}
            item["content"].append(part)
            self._part = kind
            out.append(self._event("response.content_part.added", item_id=item["id"], output_index=self._message,
                                   content_index=len(item["content"]) - 1, part=copy.deepcopy(part)))
        field = "text" if kind == "output_text" else "refusal"
        item["content"][-1][field] += text
        extra: dict[str, Any] = {"logprobs": []} if kind == "output_text" else {}
        return [*out, self._event(f"response.{kind}.delta", item_id=item["id"], output_index=self._message,
                                  content_index=len(item["content"]) - 1, delta=text, **extra)]

    def _call_delta(self, call: JSONObject) -> list[bytes]:
        out: list[bytes] = []
        key = call.get("index", 0)
        fn = call.get("function")
        if not isinstance(fn, dict):
            fn = {}
        if key not in self._calls:
            out += self._close_text()
            out.append(self._added(restore(call_item(new_id("fc"), call.get("id") or new_id("call"), fn.get("name"),
                                                     "", "in_progress"), self._names)))
            self._calls[key] = len(self.output) - 1
        index = self._calls[key]
        item = self.output[index]
        if isinstance(fn.get("name"), str) and not item["name"]:
            item["name"] = fn["name"]
            restore(item, self._names)
        arguments = fn.get("arguments")
        if isinstance(arguments, str) and arguments:
            item["arguments"] += arguments
            out.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                                   output_index=index, delta=arguments))
        return out

    def _close_text(self) -> list[bytes]:
        return [*self._close_reasoning(), *self._close_message()]

    def _close_reasoning(self) -> list[bytes]:
        if self._reasoning is None:
            return []
        index, self._reasoning = self._reasoning, None
        item = self.output[index]
        item["status"] = "completed"
        text = item["content"][0]["text"]
        return [self._event("response.reasoning_text.done", item_id=item["id"], output_index=index,
                            content_index=0, text=text),
                self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                            part={"type": "reasoning_text", "text": text}),
                self._event("response.output_item.done", output_index=index, item=copy.deepcopy(item))]

    def _close_part(self) -> list[bytes]:
        if self._part is None or self._message is None:
            return []
        kind, self._part = self._part, None
        item = self.output[self._message]
        index, part = len(item["content"]) - 1, item["content"][-1]
        common = {"item_id": item["id"], "output_index": self._message, "content_index": index}
        done = self._event("response.output_text.done", **common, text=part["text"], logprobs=[]) \
            if kind == "output_text" else self._event("response.refusal.done", **common, refusal=part["refusal"])
        return [done, self._event("response.content_part.done", **common, part=copy.deepcopy(part))]

    def _close_message(self) -> list[bytes]:
        if self._message is None:
            return []
        out = self._close_part()
        index, self._message = self._message, None
        item = self.output[index]
        item["status"] = "incomplete" if self.finish in ("length", "content_filter") and not self.refused \
            else "completed"
        return [*out, self._event("response.output_item.done", output_index=index, item=copy.deepcopy(item))]
