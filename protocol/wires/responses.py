"""The Responses API bridge on the wire: a chat attempt spoken to a backend's ``/v1/responses``.

Registered at start as a ``Special`` wire (``protocol/serving/wiring.py``): for a chat call (including
the Anthropic Messages ingress, which speaks chat inside), when the routed
model's metadata on the chosen backend says ``responses_only: true``, or
says ``chat_completions_tools_require_none_reasoning: true`` and the
request has function tools with a reasoning effort other than none. The
body is translated (``protocol/wires/responses_bridge.py``) and the answer
translated back into a chat answer (``protocol/wires/responses_answers.py``) as
an httpx response the relay reads like any chat backend's: a buffered body
is read whole and rewritten; a stream is decoded and re-encoded event by
event as it arrives.

Such a model paired with a backend of a type that has no Responses API is
refused (400) before anything is sent. The first bridged dispatch of each
(backend, model) is logged at info; ``responses_bridge_total{reason}``
counts bridged calls (per worker process, like the log).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from typing import Any, Mapping

import httpx

from switchyard.actors.addressing import auth_headers
from switchyard.actors.errors import InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.wire import JSON, RESPONSES_API_TYPES, Special, Wire
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig, Snapshot
from switchyard.protocol.wires.responses_answers import StreamToChat, response_to_chat
from switchyard.protocol.wires.responses_bridge import chat_to_responses
from switchyard.protocol.wires.translated import JsonEvents, WholeBody, translated

log = logging.getLogger("switchyard.route")

RESPONSES_ONLY = "responses_only_model"
TOOLS_WITH_REASONING = "tools_with_reasoning"
REASONS = (RESPONSES_ONLY, TOOLS_WITH_REASONING)


class BridgeStats:
    """Bridged calls by reason, and the (backend, model) pairs already logged; per worker process."""

    RECENT = 4096   # call ids remembered, so the attempts of one call count once

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.logged: set[tuple[str, str]] = set()
        self._recent: deque[str] = deque()
        self._seen: set[str] = set()

    def dispatched(self, call: Call, backend: str, model: str, reason: str) -> None:
        if (backend, model) not in self.logged:
            self.logged.add((backend, model))
            log.info("model %r on backend %r is dispatched to its Responses API (/v1/responses), reason %s",
                     model, backend, reason, extra={"backend": backend, "model": model, "reason": reason})
        rid = call.request_id
        if rid:
            if rid in self._seen:
                return
            self._seen.add(rid)
            self._recent.append(rid)
            if len(self._recent) > self.RECENT:
                self._seen.discard(self._recent.popleft())
        self.counts[reason] = self.counts.get(reason, 0) + 1


BRIDGE = BridgeStats()


def flag(snapshot: Snapshot, model: str, backend: BackendConfig, name: str) -> bool:
    """A metadata flag of ``model`` on ``backend``, as ``Snapshot.metadata_for`` layers it, without merging
    whole entries (this runs on every chat attempt): the backend's model_configs over the files."""
    own, entry = backend.model_metadata.get(model), snapshot.models.get(model)
    if own is None and entry is None:
        canonical = snapshot.models.aliases.get(model)
        if canonical is None:
            return False
        own, entry = backend.model_metadata.get(canonical), snapshot.models.get(canonical)
    for layer in (own, entry.metadata if entry is not None else None):
        value = getattr(layer, name, None) if layer is not None else None
        if value is not None:
            return bool(value)
    return False


def wants_bridge_for_tools(payload: Mapping[str, Any]) -> bool:
    """Function tools AND a reasoning effort other than none: what some models' chat endpoint refuses."""
    tools = payload.get("tools")
    if not isinstance(tools, list) or not any(isinstance(t, dict) and t.get("type") == "function" for t in tools):
        return False
    effort = payload.get("reasoning_effort")
    reasoning = payload.get("reasoning")
    if effort is None and isinstance(reasoning, dict):
        effort = reasoning.get("effort")
    return isinstance(effort, str) and effort != "none"


def bridge_reason(call: Call, backend: BackendConfig, model: str) -> str | None:
    """Why this chat attempt goes to ``/v1/responses`` (a ``REASONS`` value), or None."""
    if call.endpoint != Endpoint.CHAT:
        return None
    if flag(call.snapshot, model, backend, "responses_only"):
        return RESPONSES_ONLY
    if flag(call.snapshot, model, backend, "chat_completions_tools_require_none_reasoning") \
            and wants_bridge_for_tools(call.payload):
        return TOOLS_WITH_REASONING
    return None


def bridge_wire(call: Call, backend: BackendConfig, model: str) -> Wire | None:
    """The ``Special`` wire: the bridge wire for this attempt, None when the model speaks chat here."""
    reason = bridge_reason(call, backend, model)
    if reason is None:
        return None
    if backend.type not in RESPONSES_API_TYPES:
        flag_name = "responses_only" if reason == RESPONSES_ONLY else "chat_completions_tools_require_none_reasoning"
        raise InvalidRequest(
            f"The model '{call.model}' is served only through the Responses API ({flag_name}), but backend "
            f"'{backend.name}' is of type {backend.type.value}, which has no /v1/responses; only backends of type "
            f"openai or azure serve it", param="model", code="responses_api_unsupported_backend")
    BRIDGE.dispatched(call, backend.name, model, reason)
    return _BridgeAttempt(call).wire()


class _BridgeAttempt:
    """One attempt's translation state: what the chat body asked of the stream (its usage chunk)."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.include_usage = False

    def wire(self) -> Wire:
        return Wire("/v1/responses", headers=lambda b, call: [JSON, *auth_headers(b)], body=self.body,
                    answer=self.answer)

    def body(self, raw: bytes, backend: BackendConfig, call: Call) -> bytes:
        translated = chat_to_responses(json.loads(raw), call.model)
        self.include_usage = translated.include_usage
        return json.dumps(translated.body).encode()

    def answer(self, response: httpx.Response, call: Call) -> httpx.Response:
        if response.status_code >= 300:
            return response   # an error answer is an OpenAI error envelope on both APIs; redirects are judged later
        if call.stream:
            return translated(response, _ChatEvents(StreamToChat(self.include_usage)), "text/event-stream")
        return translated(response, _ChatBody(), "application/json")


class _ChatBody(WholeBody):
    """A buffered Response object, read whole, as a chat.completion body (anything unreadable as it came)."""

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        if not isinstance(parsed, dict) or parsed.get("object") != "response":
            return [raw]   # not JSON, an error object with a success status, or something else: the relay judges it
        return [json.dumps(response_to_chat(parsed)).encode()]


class _ChatEvents(JsonEvents):
    """A Responses event stream as chat.completion.chunk events, translated as each event arrives; after
    the terminal event comes ``[DONE]``."""

    def json_event(self, parsed: Any) -> list[bytes]:
        translator = self.translator
        out = [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n"
               for c in translator.feed(parsed)] if isinstance(parsed, dict) else []
        if translator.done and not translator.failed:
            out.append(b"data: [DONE]\n\n")
        return out


# Registered at start (protocol/serving/wiring.py): chat calls to a Responses-only model go over /v1/responses.
BRIDGE_WIRE = Special(bridge_wire, lambda call, backend, model: bridge_reason(call, backend, model) is not None)
