"""The reverse Responses bridge on the wire: a ``/v1/responses`` attempt spoken to a chat-only backend.

Registered at start as a ``Special`` wire (``protocol/serving/wiring.py``),
built over the chat wires: for a call on the ``responses`` endpoint whose
chosen backend's type has no Responses API (``actors/wire.py``:
``RESPONSES_API_TYPES``), the attempt's body is translated into a chat body
(``chat_bridge.py``) and handed to that backend's own chat wire (the plain
``/v1/chat/completions``, or the anthropic, gemini and bedrock translations),
and the chat answer it gives back is translated into a Response object
(``chat_answers.py``) or the Responses event stream (``chat_events.py``),
which the Responses relay then judges like any backend's. The bridge is
decided per attempt, for the backend chosen: a failover may cross from a
Responses backend to a chat one before the first byte, and back.

A bridged answer is marked (``BRIDGED``): its Response id is not remembered
as a stored response, since the chat backend keeps nothing to retrieve.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import httpx

from switchyard.actors.messages import Call
from switchyard.actors.wire import RESPONSES_API_TYPES, RESPONSES_OVER_CHAT, Special, Wire, Wires
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig
from switchyard.protocol.wires.chat_answers import chat_to_response
from switchyard.protocol.wires.chat_bridge import responses_to_chat
from switchyard.protocol.wires.chat_events import ChatToEvents
from switchyard.protocol.wires.translated import JsonEvents, WholeBody, translated

log = logging.getLogger("switchyard.route")

BRIDGED = RESPONSES_OVER_CHAT   # httpx response extension: the answer came from a chat backend
_logged: set[tuple[str, str]] = set()        # (backend, model) pairs logged, per worker process


def applies(call: Call, backend: BackendConfig, model: str) -> bool:
    return call.endpoint == Endpoint.RESPONSES and backend.type not in RESPONSES_API_TYPES


def special(chat_wires: Wires) -> Special:
    """The reverse bridge, over ``chat_wires`` (the wires a chat attempt to the same backend would take)."""
    def wire(call: Call, backend: BackendConfig, model: str) -> Wire | None:
        if not applies(call, backend, model):
            return None
        if (backend.name, model) not in _logged:
            _logged.add((backend.name, model))
            log.info("/v1/responses for model %r on backend %r (type %s) is sent as Chat Completions", model,
                     backend.name, backend.type.value, extra={"backend": backend.name, "model": model})
        return _ChatAttempt(chat_wires, call, backend, model).wire()
    return Special(wire, applies)


class _ChatAttempt:
    """One attempt: the chat call it becomes, the backend's chat wire, and the Responses body it answers."""

    def __init__(self, chat_wires: Wires, call: Call, backend: BackendConfig, model: str) -> None:
        self.request: dict[str, Any] = call.payload
        chat = responses_to_chat(call.payload, backend.name, backend.type.value)   # its 400s before any I/O
        self.chat_call = attrs.evolve(call, endpoint=Endpoint.CHAT, payload=chat, body=json.dumps(chat).encode())
        self.inner = chat_wires.wire_for(self.chat_call, backend, model)

    def wire(self) -> Wire:
        return Wire(self.inner.path, headers=lambda backend, call: self.inner.headers(backend, self.chat_call),
                    body=self.body, answer=self.answer, sign=self.inner.sign)

    def body(self, raw: bytes, backend: BackendConfig, call: Call) -> bytes:
        """The attempt's Responses body (its wire model id, presets applied) as this backend's chat body."""
        self.request = json.loads(raw)
        ext = backend.request_extensions   # merged into the attempt's body already: chat fields of this backend
        chat = responses_to_chat(self.request, backend.name, backend.type.value,
                                 frozenset(ext.defaults) | frozenset(ext.overrides))
        content = json.dumps(chat).encode()
        self.chat_call = attrs.evolve(self.chat_call, payload=chat, body=content)
        return self.inner.body(content, backend, self.chat_call)

    def answer(self, response: httpx.Response, call: Call) -> httpx.Response:
        response = self.inner.answer(response, self.chat_call)
        if response.status_code >= 300:
            return response   # an error answer is an OpenAI error envelope on both APIs; redirects are judged later
        if call.stream:
            out = translated(response, _Events(ChatToEvents(self.request)), "text/event-stream")
        else:
            out = translated(response, _ResponseBody(self.request), "application/json")
        out.extensions[BRIDGED] = True
        return out


def bridged(response: httpx.Response) -> bool:
    """Whether ``response`` is a chat backend's answer, translated (its Response id is stored nowhere)."""
    return bool(response.extensions.get(BRIDGED))


class _ResponseBody(WholeBody):
    """A buffered chat.completion, read whole, as a Response object (anything unreadable as it came)."""

    def __init__(self, request: dict[str, Any]) -> None:
        super().__init__()
        self.request = request

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        if parsed is None:
            return [raw]   # the relay calls it what it is: not JSON
        return [json.dumps(chat_to_response(parsed, self.request)).encode()]


class _Events(JsonEvents):
    """A chat SSE stream as Responses events, translated as each chunk arrives; ``[DONE]`` is the terminal
    event."""

    def done_event(self) -> list[bytes]:
        return [self.translator.end()]

    def json_event(self, parsed: Any) -> list[bytes]:
        return [self.translator.feed(parsed)]
