"""How one attempt looks on a backend's wire.

The RequestActor, the relay, failover and the metrics think in the OpenAI
formats of the call's endpoint (Chat Completions for chat). A ``Wire`` turns
an attempt's body into what one kind of backend takes (path, headers, body)
and that backend's answer back into the endpoint's format, so everything
behind it sees one format whatever the backend speaks. A backend type that
speaks the OpenAI format natively uses the plain wire of the endpoint.
"""

from __future__ import annotations

from typing import Callable

import httpx
from attrs import frozen

from actors.messages import Call
from config.schema import BackendConfig, BackendType
from protocol.upstream import auth_headers

JSON = ("content-type", "application/json")


@frozen
class Wire:
    path: str
    # What the backend is sent besides the body: content type and its credentials.
    headers: Callable[[BackendConfig, Call], list[tuple[str, str]]] = lambda b, call: [JSON, *auth_headers(b)]
    # The attempt's body (the endpoint's OpenAI format) as this backend takes it.
    body: Callable[[bytes, BackendConfig, Call], bytes] = lambda body, b, call: body
    # The backend's answer in the endpoint's OpenAI format (a new response, or the same one).
    answer: Callable[[httpx.Response, Call], httpx.Response] = lambda response, call: response


# endpoint -> its plain wire; (endpoint, backend type) -> a translating one
ENDPOINTS: dict[str, Wire] = {"chat": Wire("/v1/chat/completions")}
TRANSLATED: dict[tuple[str, BackendType], Wire] = {}
# Consulted first, for what depends on the model and not only on the backend's type (a model the
# backend serves only through another API); each returns None when it does not apply.
SPECIAL: list[Callable[[Call, BackendConfig, str], "Wire | None"]] = []


def wire_for(call: Call, backend: BackendConfig, model: str) -> Wire:
    for special in SPECIAL:
        found = special(call, backend, model)
        if found is not None:
            return found
    return TRANSLATED.get((call.endpoint, backend.type)) or ENDPOINTS[call.endpoint]
