"""Chat and embeddings spoken to a native Gemini backend (``type: gemini``).

Gemini names the model in the URL, not the body, so this is a ``Special``
wire (``actors/wire.py``): each attempt's wire is made for its model, the
wire id (the backend's ``upstream_id`` for it, else the routed id, so an
alias dispatched as its canonical id or a fallback hop rewrites the
``models/{id}`` segment too). Chat goes to
``POST /v1beta/models/{id}:generateContent`` (buffered) or
``:streamGenerateContent?alt=sse`` (streamed), with the key in
``x-goog-api-key``; the body is translated by ``gemini_request.py`` and the
answer by ``gemini_answer.py`` (errors by ``gemini_errors.py``).
Embeddings go to ``:embedContent`` or ``:batchEmbedContents``
(``gemini_embeddings.py``).

The translation happens once, when the attempt is dispatched, from the
attempt's chat body: a pre-stream fallback hop onto or off a gemini
backend re-enters here with its own body. After output has started the
call never continues on a gemini backend (``actors/call/recovery.py``
skips every backend a wire translates for).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from switchyard.actors.messages import Call
from switchyard.actors.wire import JSON, Special, Wire
from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds.gemini import VERSION
from switchyard.config.schema import BackendConfig
from switchyard.protocol.wires import gemini_embeddings
from switchyard.protocol.wires.gemini_answer import chat_answer
from switchyard.protocol.wires.gemini_request import NATIVE, NEUTRAL, NOT_SENT, UNCARRIED, generate_request

log = logging.getLogger("switchyard.gemini")

ENDPOINTS = frozenset({Endpoint.CHAT, Endpoint.EMBEDDINGS})
# The chat fields the translation reads; any other is left out (the spec's strict cloud path).
READ = frozenset({"messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed",
                  "presence_penalty", "frequency_penalty", "stop", "response_format", "reasoning_effort", "tools",
                  "tool_choice", "generationConfig", *NEUTRAL, *UNCARRIED, *NOT_SENT, *NATIVE})


def wire_id(backend: BackendConfig, model: str) -> str:
    """The id in the URL: the backend's upstream_id for ``model``, without a ``models/`` prefix."""
    found = backend.upstream_ids.get(model, model)
    return found[len("models/"):] if found.startswith("models/") else found


def headers(backend: BackendConfig, call: Call) -> list[tuple[str, str]]:
    return [JSON, ("x-goog-api-key", backend.api_key)] if backend.api_key else [JSON]


def chat_body(raw: bytes, backend: BackendConfig, call: Call) -> bytes:
    payload = json.loads(raw)
    left_out = sorted(payload.keys() - READ)
    if left_out:
        log.debug("gemini backend %s: chat field(s) %s have no Gemini counterpart and are not sent",
                  backend.name, ", ".join(left_out))
    return json.dumps(generate_request(payload)).encode()


def _stream_usage(raw: bytes) -> bool:
    options = json.loads(raw).get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def gemini_wire(call: Call, backend: BackendConfig, model: str) -> Wire | None:
    """This attempt's wire on a gemini backend (its kind's wire API's: ``protocol/wires/native.py``), None
    for an endpoint it is not spoken to in."""
    if not applies(call, backend, model):
        return None
    target = wire_id(backend, model)
    if call.endpoint == Endpoint.EMBEDDINGS:
        path = f"{VERSION}/models/{target}:{gemini_embeddings.method(call.payload)}"
        return Wire(path, headers=headers,
                    body=lambda raw, b, c: json.dumps(
                        gemini_embeddings.embed_request(json.loads(raw), target)).encode(),
                    answer=gemini_embeddings.embeddings_answer(target))
    if not call.stream:
        return Wire(f"{VERSION}/models/{target}:generateContent", headers=headers, body=chat_body,
                    answer=chat_answer(target, False))
    attempt = _StreamAttempt(target)
    return Wire(f"{VERSION}/models/{target}:streamGenerateContent?alt=sse", headers=headers, body=attempt.body,
                answer=attempt.answer)


class _StreamAttempt:
    """One streamed attempt: whether its chat body asked for the usage chunk (the client, or the gateway
    for the ledger, through ``stream_options.include_usage``) decides whether the answer ends with one."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.include_usage = False

    def body(self, raw: bytes, backend: BackendConfig, call: Call) -> bytes:
        self.include_usage = _stream_usage(raw)
        return chat_body(raw, backend, call)

    def answer(self, response: Any, call: Call) -> Any:
        return chat_answer(self.target, self.include_usage)(response, call)


def applies(call: Call, backend: BackendConfig, model: str) -> bool:
    return call.endpoint in ENDPOINTS


# Gemini's API's wire (protocol/wires/native.py), consulted after the specials that refuse a call for any
# non-native backend (a Messages call's uncarried content, a Responses-only model).
WIRE = Special(gemini_wire, applies)
