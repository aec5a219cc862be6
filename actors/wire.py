"""How one attempt looks on a backend's wire.

The RequestActor, the relay, failover and the metrics think in the OpenAI
formats of the call's endpoint (Chat Completions for chat). A ``Wire`` turns
an attempt's body into what one kind of backend takes (path, headers, body)
and that backend's answer back into the endpoint's format, so everything
behind it sees one format whatever the backend speaks. A backend kind spoken
to in OpenAI's wire (``config/kinds``: ``Kind.api``) uses the plain wire of
the endpoint; every other wire API has its own (``Wires.native``).
"""

from __future__ import annotations

import json
from typing import Awaitable, Callable, Iterable, Mapping

import attrs
import httpx
from attrs import frozen

from switchyard.actors.addressing import auth_headers
from switchyard.actors.errors import InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.uploads import encode_form
from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds import kind_of, speaking, types_where
from switchyard.config.kinds.base import Api
from switchyard.config.schema import BackendConfig, BackendType

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
    # Run last before the request is sent (its body and every header final): adds what signs it (a bedrock
    # backend's SigV4, with credentials it may have to fetch). Its failure is that backend's.
    sign: Callable[[httpx.Request, BackendConfig], Awaitable[None]] | None = None


# endpoint -> its plain wire, the one a kind spoken to in OpenAI's wire is sent
ENDPOINTS: dict[Endpoint, Wire] = {Endpoint.CHAT: Wire("/v1/chat/completions")}
ENDPOINTS[Endpoint.COMPLETIONS] = Wire("/v1/completions")   # text completions (protocol/doors/endpoints.py)
ENDPOINTS[Endpoint.EMBEDDINGS] = Wire("/v1/embeddings")
ENDPOINTS[Endpoint.RESPONSES] = Wire("/v1/responses")   # the Responses API, relayed unchanged (doors/responses.py)
# The types whose kind has the Responses API (Kind.responses_api). Every type serves /v1/responses: the
# others through the reverse bridge, as chat (protocol/wires/responses_on_chat.py).
RESPONSES_API_TYPES = types_where(lambda kind: kind.responses_api)
RESPONSES_OVER_CHAT = "switchyard.responses_over_chat"   # marks such an answer (an httpx response extension)
# POST /v1/responses/compact (protocol/doors/responses.py): only the Responses API compacts (no chat form).
ENDPOINTS[Endpoint.COMPACT] = Wire("/v1/responses/compact")
# The images API (protocol/doors/images.py, config/endpoints.py: IMAGES): JSON generations; edits and
# variations as multipart forms, written anew for each attempt (actors/uploads.py). Spoken by OpenAI's API and
# the servers that copy it.


def form_headers(backend: BackendConfig, call: Call) -> list[tuple[str, str]]:
    """An upload attempt's headers: the form's content type (its boundary) and the backend's credentials."""
    assert call.uploads is not None
    return [("content-type", call.uploads.content_type), *auth_headers(backend)]


def form_body(body: bytes, backend: BackendConfig, call: Call) -> bytes:
    """An upload attempt's form: the attempt's fields (``body``, as JSON, when the attempt changed any:
    its model's wire id, a hop's trimming) or the client's own, and the call's files."""
    assert call.uploads is not None
    return encode_form(call.payload if body is call.body else json.loads(body), call.uploads)


ENDPOINTS[Endpoint.IMAGES_GENERATIONS] = Wire("/v1/images/generations")
ENDPOINTS[Endpoint.IMAGES_EDITS] = Wire("/v1/images/edits", headers=form_headers, body=form_body)
ENDPOINTS[Endpoint.IMAGES_VARIATIONS] = Wire("/v1/images/variations", headers=form_headers, body=form_body)
# Rerank (the Cohere / Jina shape vLLM serves too) and moderations: JSON in, JSON out, relayed whole
# (actors/scores_relay.py).
ENDPOINTS[Endpoint.RERANK] = Wire("/v1/rerank")
ENDPOINTS[Endpoint.MODERATIONS] = Wire("/v1/moderations")
# The audio API (protocol/doors/audio.py): transcriptions and translations as multipart forms like images' edits;
# speech as JSON, its answer audio bytes. Azure's v1 API root takes the same paths, the deployment as the model.
ENDPOINTS[Endpoint.AUDIO_TRANSCRIPTIONS] = Wire("/v1/audio/transcriptions", headers=form_headers, body=form_body)
ENDPOINTS[Endpoint.AUDIO_TRANSLATIONS] = Wire("/v1/audio/translations", headers=form_headers, body=form_body)
ENDPOINTS[Endpoint.AUDIO_SPEECH] = Wire("/v1/audio/speech")
# endpoint -> the backend types whose kind speaks it (Kind.endpoints). Another type serving the model is no
# candidate for such a call (actors/call/route_choice.py).
ENDPOINT_TYPES: Mapping[Endpoint, frozenset[BackendType]] = {endpoint: speaking(endpoint) for endpoint in ENDPOINTS}


@frozen
class Special:
    """A wire made for one attempt, consulted before the endpoint's: what depends on the call and its model
    whatever the backend's kind (a model the backend serves only through another API), or a wire API's own
    (the model in its URL)."""

    wire: Callable[[Call, BackendConfig, str], "Wire | None"]   # None: does not apply
    applies: Callable[[Call, BackendConfig, str], bool]        # the same test, with no log, count or refusal


# OpenAI's wire API: no wire of its own, the endpoint's plain one.
PLAIN = Special(lambda call, backend, model: None, lambda call, backend, model: False)


@frozen
class Wires:
    """The wires a Runtime speaks through, registered at start (``protocol/serving/wiring.py``).

    For an attempt: the first ``special`` that applies (what depends on the call and its model, whatever
    the backend's kind), else a ``translated`` wire registered for the endpoint and type, else the wire of
    the kind's wire API (``native``, by ``Kind.api``), else the endpoint's plain wire.
    """

    native: Mapping[Api, Special] = attrs.field(factory=dict)   # every wire API's own (protocol/wires/native.py)
    special: tuple[Special, ...] = ()
    translated: Mapping[tuple[Endpoint, BackendType], Wire] = attrs.field(factory=dict)  # (endpoint, type) -> wire

    def translates(self, call: Call, backend: BackendConfig, model: str) -> bool:
        """Whether ``backend`` is spoken to through a translation for this call (asked, not dispatched)."""
        return (call.endpoint, backend.type) in self.translated or any(
            s.applies(call, backend, model) for s in self.special) \
            or self.native[kind_of(backend).api].applies(call, backend, model)

    def wire_for(self, call: Call, backend: BackendConfig, model: str) -> Wire:
        for special in self.special:
            found = special.wire(call, backend, model)
            if found is not None:
                return found
        return self.translated.get((call.endpoint, backend.type)) \
            or self.native[kind_of(backend).api].wire(call, backend, model) or ENDPOINTS[call.endpoint]


def unfit(call: Call, backends: Iterable[BackendConfig]) -> list[BackendConfig]:
    """The backends among ``backends`` whose kind does not speak ``call``'s endpoint."""
    types = ENDPOINT_TYPES.get(call.endpoint)
    return [] if types is None else [b for b in backends if b.type not in types]


def unfit_refusal(call: Call, model: str, backends: list[BackendConfig]) -> InvalidRequest:
    """The 400 when every backend serving ``model`` is of a type that does not speak the call's endpoint."""
    kinds = ", ".join(sorted({b.type.value for b in backends}))
    takes = ", ".join(sorted(t.value for t in ENDPOINT_TYPES[call.endpoint]))
    return InvalidRequest(
        f"The model '{call.model}' is served here only by backends of type {kinds} "
        f"({', '.join(b.name for b in backends)}); {ENDPOINTS[call.endpoint].path} is spoken only by "
        f"backends of type {takes}", param="model", code="unsupported_backend_type")
