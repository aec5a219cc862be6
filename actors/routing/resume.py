"""How a broken stream continues elsewhere: the mode, and the request that asks for it.

Three ways to continue an answer the client has partly received:

- ``prefill``: send the partial answer as a trailing assistant message; the
  target continues it token for token. Only engines that take a prefill
  (vLLM and SGLang with ``continue_final_message``; learned per backend and
  model when one refuses).
- ``prompt``: the partial answer plus ``continuation_prompt`` as a user turn
  (the specification's style; chosen by ``continuation_style: prompt``).
- ``restart``: the original request again; the relay suppresses what the
  client already has and streams only what comes after it.

Restart is forced when little was said (``min_accumulated_tokens``), when
the accumulator passed its cap, when tool calls were under way (a prefill
cannot carry half a tool call), or when continuation is off.

A stream never continues on a Unix-socket backend (``takes_resume``): the
specification keeps mid-stream hops to the OpenAI wire over the network;
such backends still serve a call's first attempt and pre-stream fallback.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from switchyard.actors.routing.stream_state import Aligner, StreamAccumulator
from switchyard.config.kinds import KINDS
from switchyard.config.kinds.base import Prefill
from switchyard.config.resilience import MidStreamFallback
from switchyard.config.schema import BackendConfig, BackendType
from switchyard.config.unix_socket import is_unix


def kind_takes_prefill(backend_type: BackendType) -> bool:
    """Whether a backend of this type continues a trailing assistant message (``Kind.prefill``), when its
    model's metadata does not say."""
    return KINDS[backend_type].prefill is not Prefill.NONE


def takes_resume(backend: BackendConfig) -> bool:
    """Whether a broken stream may continue on ``backend``: never on a Unix-socket one."""
    return not is_unix(backend.url)


class ResumeMode(str, Enum):
    PREFILL = "prefill"
    PROMPT = "prompt"
    RESTART = "restart"


def choose_mode(acc: StreamAccumulator, cfg: MidStreamFallback, target_takes_prefill: bool) -> ResumeMode:
    if not cfg.enabled or acc.capped or acc.tool_calls or acc.deltas < cfg.min_accumulated_tokens:
        return ResumeMode.RESTART
    if cfg.continuation_style == "prompt":
        return ResumeMode.PROMPT
    return ResumeMode.PREFILL if target_takes_prefill else ResumeMode.RESTART


def resume_payload(payload: dict[str, Any], model: str, acc: StreamAccumulator, mode: ResumeMode,
                   cfg: MidStreamFallback, target_type: BackendType) -> dict[str, Any]:
    out = {**payload, "model": model}
    if mode is ResumeMode.RESTART:
        return out
    messages = list(payload.get("messages", ()))
    messages.append({"role": "assistant", "content": acc.content})
    if mode is ResumeMode.PROMPT:
        messages.append({"role": "user", "content": cfg.continuation_prompt})
    elif KINDS[target_type].prefill is Prefill.CONTINUE_FINAL:
        # These engines need to be told the last message is to be continued,
        # not answered.
        out["continue_final_message"] = True
        out["add_generation_prompt"] = False
    out["messages"] = messages
    return out


class RestartFilter:
    """Relays a restarted stream without repeating what the client already has.

    Content and each tool call's arguments are aligned with what was sent;
    while the new stream repeats it, its events are held back. The first
    event that goes past it is cut to the new part. If the new text departs
    from what was sent (or ends before reaching it), the filter gives up on
    merging: it emits a ``route_change`` marker chunk telling the client to
    discard the output so far, then the new answer from its beginning.
    """

    def __init__(self, acc: StreamAccumulator, marker: dict[str, Any]) -> None:
        self.content = Aligner(acc.content)
        self.reasoning = Aligner(acc.reasoning)
        self.tools = {t["index"]: Aligner(t["function"]["arguments"]) for t in acc.tool_calls}
        self.marker = marker
        self.held: list[tuple[bytes, dict[str, Any]]] = []   # the new stream so far, for a replay
        # Past the accumulator's cap the sent text is not all known, so it
        # cannot be matched: say so up front instead of repeating silently.
        self.diverged = False
        self._unalignable = acc.capped

    def feed(self, obj: dict[str, Any], raw: bytes) -> list[tuple[bytes, dict[str, Any]]]:
        """The events to send for one new event, each with the payload the client gets."""
        if self._unalignable:
            self._unalignable = False
            self.diverged = True
            return [(encode_event(self.marker), self.marker), (raw, obj)]
        if self.diverged or self._caught_up():
            return [(raw, obj)]
        choices = obj.get("choices") or []
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        new_delta: dict[str, Any] = {}
        ok = True
        for key in ("reasoning_content", "reasoning"):
            text = delta.get(key)
            if isinstance(text, str) and text:
                emit, state = self.reasoning.feed(text)
                ok = state != "diverged"
                if emit:
                    new_delta[key] = emit
                break  # servers sending both carry the same text twice
        content = delta.get("content")
        if ok and isinstance(content, str) and content:
            emit, state = self.content.feed(content)
            ok = state != "diverged"
            if emit:
                new_delta["content"] = emit
        calls = []
        for call in delta.get("tool_calls") or ():
            if not ok or not isinstance(call, dict):
                continue
            aligner = self.tools.get(call.get("index", 0))
            if aligner is None:       # a tool call the client has not seen: all of it is new
                calls.append(call)
                continue
            args = (call.get("function") or {}).get("arguments") or ""
            emit, state = aligner.feed(args) if args else ("", aligner.state)
            if state == "diverged":
                ok = False
            elif emit:
                calls.append({"index": call.get("index", 0), "function": {"arguments": emit}})
        if calls:
            new_delta["tool_calls"] = calls
        finish = choice.get("finish_reason")
        if ok and finish is not None and not self._caught_up():
            ok = False  # the new answer ended short of what the client already has
        if not ok:
            self.diverged = True
            return [(encode_event(self.marker), self.marker), *self.held, (raw, obj)]
        self.held.append((raw, obj))
        if not new_delta and finish is None and obj.get("usage") is None:
            return []
        rebuilt = {**obj, "choices": [{**choice, "delta": new_delta}, *choices[1:]]}
        return [(encode_event(rebuilt), rebuilt)]

    def _caught_up(self) -> bool:
        return all(a.state != "repeating" for a in (self.content, self.reasoning, *self.tools.values()))


def encode_event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
