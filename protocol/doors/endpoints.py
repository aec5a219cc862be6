"""``POST /v1/completions`` and ``POST /v1/embeddings``: two more OpenAI doors onto the same route loop.

Each is a call like a chat call (``App.serve_chat``): API keys, presets,
provider preferences, the request_params policy, selection, budgets,
retries and fallback chains apply unchanged, and the backend's answer is
relayed as it came (a completions stream like a chat stream, ``[DONE]``
included). Only the body's shape differs (``protocol/doors/openai.py`` checks
it) and the path on the backend (``actors/wire.py``).

What reads or edits chat messages does not apply, and is switched off where
it lives, by ``call.endpoint``: global prompts, thinking splitting,
mid-stream continuation (a broken completions stream ends with an in-band
error; before its first byte it fails over like any call), smart routing
(``model: auto``), and the empty-reply check for embeddings (a completion is
empty when its ``choices[].text`` is). docs/endpoints.md says it for users.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from switchyard.actors.messages import Call
from switchyard.config.endpoints import Endpoint
from switchyard.protocol.doors.openai import parse_completions_payload, parse_embeddings_payload, parse_json_object
from switchyard.protocol.http.asgi import AsgiSink, Receive, Scope, Send

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity


async def completions(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                      send: Send, body: bytes) -> None:
    await _serve(app, runtime, who, scope, receive, send, body, Endpoint.COMPLETIONS, parse_completions_payload)


async def embeddings(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                     send: Send, body: bytes) -> None:
    await _serve(app, runtime, who, scope, receive, send, body, Endpoint.EMBEDDINGS, parse_embeddings_payload)


async def _serve(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive, send: Send,
                 body: bytes, endpoint: Endpoint, parse: Callable[..., Call]) -> None:
    payload = parse_json_object(body)
    await app.serve_chat(runtime, who, scope, receive, payload, body, lambda call: AsgiSink(send, call.stream),
                         endpoint=endpoint, parse=parse)
