"""A Gemini ``GenerateContentResponse``, buffered or streamed (``alt=sse``), as Chat Completions.

The answer side of the gemini wire (``protocol/wires/gemini.py``); the
body is translated as it is read (``TranslatedStream``, shared with the
anthropic wire), so a stream stays a stream under the same relay and budgets.

Text parts become ``content``, parts marked ``thought: true``
``reasoning_content``, ``functionCall`` parts tool calls (whole: Gemini
sends a call's arguments in one piece), ``usageMetadata`` the usage
(thought tokens are completion tokens, as OpenAI counts reasoning), and
``finishReason`` the finish reason. A prompt Gemini blocked
(``promptFeedback.blockReason``), or a candidate stopped for safety before
any output, is a content-policy refusal: the body becomes an error object
with code ``content_policy_violation``, which the relay turns into a 400
before anything reached the client (failover treats it as a content-policy
rejection). Output already sent and then stopped for safety ends with
``finish_reason: content_filter``. A stream that ends without a finish
reason gets no ``[DONE]``: the relay judges it truncated.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Callable

import httpx

from switchyard.actors.messages import Call
from switchyard.actors.sse import Event
from switchyard.protocol.wires.gemini_contents import signed_id
from switchyard.protocol.wires.gemini_errors import openai_error
from switchyard.protocol.wires.translated import DONE, EventTranslator, Translator, WholeBody, translated
from switchyard.protocol.wires.translated import data as _data
from switchyard.protocol.wires.translated import obj as _obj

SAFETY = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                    "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"})
FINISH = {"STOP": "stop", "MAX_TOKENS": "length", **{r: "content_filter" for r in SAFETY}}


def finish_reason(reason: Any, called: bool) -> str:
    """Chat's finish reason for Gemini's; a turn that ends in function calls is ``tool_calls``."""
    mapped = FINISH.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "tool_calls" if called and mapped == "stop" else mapped


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def chat_usage(meta: dict[str, Any]) -> dict[str, Any]:
    """usageMetadata as chat usage: tool-use prompt tokens are prompt tokens, thoughts completion tokens."""
    prompt = _count(meta.get("promptTokenCount")) + _count(meta.get("toolUsePromptTokenCount"))
    thoughts = _count(meta.get("thoughtsTokenCount"))
    completion = _count(meta.get("candidatesTokenCount")) + thoughts
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": _count(meta.get("totalTokenCount")) or prompt + completion}
    cached = _count(meta.get("cachedContentTokenCount"))
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    if thoughts:
        out["completion_tokens_details"] = {"reasoning_tokens": thoughts}
    return out


def refusal(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The content-policy error object for a blocked prompt or a candidate stopped for safety with no
    output at all; None when the answer is not a refusal."""
    feedback = _obj(obj.get("promptFeedback"))
    reason = feedback.get("blockReason")
    where = "prompt"
    if not reason:
        candidates = obj.get("candidates")
        first = _obj(candidates[0]) if isinstance(candidates, list) and candidates else {}
        if first.get("finishReason") not in SAFETY or _parts(first):
            return None
        reason, where = first["finishReason"], "answer"
    return {"error": {"message": f"Gemini blocked the {where} ({reason}): the request was refused by the "
                                 f"backend's content policy", "type": "invalid_request_error", "param": None,
                      "code": "content_policy_violation", "details": {"block_reason": reason}}}


def _parts(candidate: dict[str, Any]) -> list[dict[str, Any]]:
    parts = _obj(candidate.get("content")).get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


class Pieces:
    """What one candidate's parts say, in chat terms (tool call ids made here, signatures inside them)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[dict[str, Any]] = []

    def read(self, parts: list[dict[str, Any]]) -> "Pieces":
        for part in parts:
            if isinstance(part.get("text"), str):
                (self.reasoning if part.get("thought") is True else self.text).append(part["text"])
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                given = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
                base = given or f"call_{secrets.token_hex(12)}"
                self.calls.append({"id": signed_id(base, part.get("thoughtSignature")), "type": "function",
                                   "function": {"name": call.get("name"),
                                                "arguments": json.dumps(call.get("args") or {}, ensure_ascii=False)}})
        return self


def chat_completion(obj: dict[str, Any], model: str, created: int) -> dict[str, Any]:
    """A GenerateContentResponse as a ``chat.completion`` (one choice per candidate)."""
    choices = []
    candidates = obj.get("candidates")
    for i, candidate in enumerate(candidates if isinstance(candidates, list) else ()):
        candidate = _obj(candidate)
        pieces = Pieces().read(_parts(candidate))
        reply: dict[str, Any] = {"role": "assistant",
                                 "content": "".join(pieces.text) if pieces.text or not pieces.calls else None}
        if pieces.reasoning:
            reply["reasoning_content"] = "".join(pieces.reasoning)
        if pieces.calls:
            reply["tool_calls"] = pieces.calls
        index = candidate.get("index") if isinstance(candidate.get("index"), int) else i
        choices.append({"index": index, "message": reply, "logprobs": None,
                        "finish_reason": finish_reason(candidate.get("finishReason"), bool(pieces.calls))})
    return {"id": _id(obj), "object": "chat.completion", "created": created, "model": model, "choices": choices,
            "usage": chat_usage(_obj(obj.get("usageMetadata")))}


def _id(obj: dict[str, Any]) -> str:
    given = obj.get("responseId")
    return f"chatcmpl-{given}" if isinstance(given, str) and given else f"chatcmpl-{secrets.token_hex(12)}"


class BufferedTranslator(WholeBody):
    """The whole body, then one chat.completion (or the refusal); anything else goes as it came."""

    def __init__(self, model: str, created: int) -> None:
        super().__init__()
        self.model, self.created = model, created

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        if not isinstance(parsed, dict) or "error" in parsed:
            return [raw]       # not JSON (the relay says so), or an error object on a 200: judged as it came
        refused = refusal(parsed)
        if refused is not None:
            return [json.dumps(refused).encode()]
        return [json.dumps(chat_completion(parsed, self.model, self.created)).encode()]


class StreamTranslator(EventTranslator):
    """Gemini SSE events (each a partial GenerateContentResponse) in, chat chunks out (pure: no I/O)."""

    backend = "gemini"

    def __init__(self, model: str, include_usage: bool, created: int) -> None:
        super().__init__(model, created)   # the id comes with the first event
        self.include_usage = include_usage
        self.calls = 0                # tool calls sent so far (their indexes)
        self.output = False           # any content, thought or call went out
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}

    def close(self) -> list[bytes]:
        out = self.tail()
        if self.over or self.finish is None:
            return out        # no finish reason: the relay calls the stream truncated
        if self.include_usage:
            out.append(self.usage_chunk(chat_usage(self.usage)))
        return [*out, DONE]

    def object_event(self, obj: dict[str, Any], event: Event) -> list[bytes]:
        if isinstance(obj.get("error"), dict):
            error = obj["error"]
            self.over = True
            return [_data({"error": {"message": error.get("message") or "error", "type": "upstream_error",
                                     "code": str(error.get("status") or "upstream_error").lower()}})]
        self.id = self.id or _id(obj)
        if isinstance(obj.get("usageMetadata"), dict):
            self.usage = obj["usageMetadata"]   # cumulative: the last one counts
        refused = refusal(obj)
        if refused is not None and not self.output:
            self.over = True
            return [_data(refused)]
        candidates = obj.get("candidates")
        first = _obj(candidates[0]) if isinstance(candidates, list) and candidates else {}
        pieces = Pieces().read(_parts(first))
        out: list[bytes] = []
        if pieces.reasoning:
            out.append(self.chunk({"reasoning_content": "".join(pieces.reasoning)}))
        if pieces.text:
            out.append(self.chunk({"content": "".join(pieces.text)}))
        if pieces.calls:
            deltas = [{"index": self.calls + k, **c} for k, c in enumerate(pieces.calls)]
            self.calls += len(pieces.calls)
            out.append(self.chunk({"tool_calls": deltas}))
        self.output = self.output or bool(out)
        reason = first.get("finishReason")
        if isinstance(reason, str) and reason and reason != "FINISH_REASON_UNSPECIFIED" and self.finish is None:
            self.finish = finish_reason(reason, self.calls > 0)
            out.append(self.chunk({}, self.finish))
        return out


def chat_answer(model: str, include_usage: bool) -> Callable[[httpx.Response, Call], httpx.Response]:
    """The answer side for one attempt on ``model`` (its wire id): a success translated as it is read;
    an error status goes to ``gemini_errors.openai_error``."""
    def answer(response: httpx.Response, call: Call) -> httpx.Response:
        if response.status_code >= 300:
            return openai_error(response)
        created = int(time.time())
        translator: Translator
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            translator, content_type = StreamTranslator(model, include_usage, created), "text/event-stream"
        else:
            translator, content_type = BufferedTranslator(model, created), "application/json"
        return translated(response, translator, content_type)
    return answer
