"""Chat Completions spoken to Amazon Bedrock's runtime (``type: bedrock``), through its Converse API.

Everything behind the RequestActor thinks in chat; this wire sends an
attempt's chat body as a Converse request (``protocol/wires/bedrock_converse.py``)
to ``POST /model/{modelId}/converse`` (``/converse-stream`` for a stream; the
model id, its ``upstream_id`` if it has one, URL-encoded in the path) and
turns the answer back into chat (``bedrock_answer.py``). It is a ``Special``
wire because its path depends on the model and on streaming; registered as
the Converse API's wire (``protocol/wires/native.py``). Like every translated wire, a broken
stream never continues on it (``Wires.translates``).

Each request is signed last, over its final bytes, with AWS Signature V4
(service ``bedrock``, the backend's ``region``; ``aws_sigv4.py``) from
credentials ``aws_credentials.py`` finds and refreshes; a backend with an
``api_key`` (a Bedrock API key) sends it as a bearer token instead.

Bedrock's errors get our status and envelope: ``ThrottlingException`` and
quota errors 429 (its ``Retry-After`` kept), ``ValidationException`` 400,
``AccessDeniedException`` 403, ``ResourceNotFoundException`` 404,
``ServiceUnavailableException`` and ``ModelNotReadyException`` 503, with the
exception's name as the error's code and its message kept.
"""

from __future__ import annotations

import datetime
import json
import time
from typing import Any
from urllib.parse import quote

import httpx

from switchyard.actors.messages import Call
from switchyard.actors.wire import JSON, Special, Wire
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import BackendConfig
from switchyard.protocol.http.client_json import utf8
from switchyard.protocol.wires import aws_sigv4
from switchyard.protocol.wires.aws_credentials import CredentialProvider
from switchyard.protocol.wires.bedrock_answer import BufferedTranslator, StreamTranslator
from switchyard.protocol.wires.bedrock_converse import converse_request
from switchyard.protocol.wires.cache_breakpoints import Caching, converse_breakpoints, converse_caching
from switchyard.protocol.wires.translated import Translator, WholeBody, translated

SERVICE = "bedrock"
EVENT_STREAM = "application/vnd.amazon.eventstream"
# Bedrock's exception -> our status (one not listed keeps the status Bedrock sent)
STATUS = {"ThrottlingException": 429, "ServiceQuotaExceededException": 429, "ValidationException": 400,
          "AccessDeniedException": 403, "ResourceNotFoundException": 404, "ServiceUnavailableException": 503,
          "ModelNotReadyException": 503, "ModelTimeoutException": 504, "InternalServerException": 500}
ERROR_TYPES = {400: "invalid_request_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}
# What the signature covers besides its own x-amz-* headers: the address and the body's framing (the call's
# trace and hop headers stay unsigned: a proxy between may rewrite them, as botocore leaves traceparent out).
SIGNED = frozenset({"host", "content-type", "content-length"})
_KEPT = frozenset({"retry-after", "x-amzn-requestid"})

# One credential provider per profile (None: the default chain), shared by every backend naming it.
PROVIDERS: dict[str | None, CredentialProvider] = {}


def provider(profile: str | None) -> CredentialProvider:
    found = PROVIDERS.get(profile)
    if found is None:
        found = PROVIDERS[profile] = CredentialProvider(profile)
    return found


def model_path(model_id: str, stream: bool) -> str:
    return f"/model/{quote(model_id, safe='')}/{'converse-stream' if stream else 'converse'}"


def headers(backend: BackendConfig, call: Call) -> list[tuple[str, str]]:
    out = [JSON, ("accept", EVENT_STREAM if call.stream else "application/json")]
    if backend.api_key:   # a Bedrock API key: a bearer token, no signature
        out.append(("authorization", f"Bearer {backend.api_key}"))
    return out


async def sign(request: httpx.Request, backend: BackendConfig) -> None:
    """SigV4 over ``request`` as it will be sent (unless the backend sends an API key)."""
    if backend.api_key:
        return
    assert backend.region is not None   # required for the kind (config/kinds/bedrock.py)
    credentials = await provider(backend.aws_profile).get()
    url = request.url
    path, _, query = url.raw_path.decode("ascii").partition("?")
    sent = [(k, v) for k, v in request.headers.multi_items() if k in SIGNED or k.startswith("x-amz-")]
    for name, value in aws_sigv4.sign(request.method, path, query, sent, request.content, credentials,
                                      backend.region, SERVICE, datetime.datetime.now(datetime.timezone.utc)):
        request.headers[name] = value


class BedrockAttempt:
    """One attempt's wire: the model's path, and whether the attempt's body asked for usage."""

    def __init__(self, backend: BackendConfig, model: str, stream: bool) -> None:
        self.model = model
        self.model_id = backend.upstream_ids.get(model) or model
        self.stream = stream
        self.include_usage = False

    def wire(self) -> Wire:
        return Wire(model_path(self.model_id, self.stream), headers=headers, body=self.body, answer=self.answer,
                    sign=sign)

    def body(self, raw: bytes, backend: BackendConfig, call: Call) -> bytes:
        payload = json.loads(raw)
        options = payload.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True
        return utf8(self._cached(converse_request(payload), backend, call))

    def _cached(self, out: dict[str, Any], backend: BackendConfig, call: Call) -> dict[str, Any]:
        """``out`` with cache points when the call's snapshot turns them on for this backend and model and
        the model takes them (``cache_breakpoints.converse_caching``, or the operator names it in ``models``)."""
        injection = call.snapshot.prefix_routing.anthropic_cache_control_injection
        names = (self.model, self.model_id)
        if not injection.applies(backend.name, names):
            return out
        caching = converse_caching(self.model_id) or (Caching.FULL if injection.names(names) else None)
        return converse_breakpoints(out, caching) if caching is not None else out

    def answer(self, response: httpx.Response, call: Call) -> httpx.Response:
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() in _KEPT]
        if response.status_code >= 300:
            kind = error_kind(response)
            status = STATUS.get(kind, response.status_code) if response.status_code >= 400 else response.status_code
            return translated(response, ErrorTranslator(kind, status), "application/json", status, kept)
        created = int(time.time())
        request_id = response.headers.get("x-amzn-requestid")
        translator: Translator
        if response.headers.get("content-type", "").startswith(EVENT_STREAM):
            translator = StreamTranslator(self.model_id, request_id, self.include_usage, created)
            content_type = "text/event-stream"
        else:
            translator, content_type = BufferedTranslator(self.model_id, request_id, created), "application/json"
        return translated(response, translator, content_type, headers=kept)


def error_kind(response: httpx.Response) -> str:
    """The exception's name: ``x-amzn-errortype`` (``ThrottlingException:http://...``), else none."""
    named: str = response.headers.get("x-amzn-errortype", "")
    return named.split(":", 1)[0]


class ErrorTranslator(WholeBody):
    """A Bedrock error body (``{"message": ...}``) as our error envelope, its exception as the code."""

    def __init__(self, kind: str, status: int) -> None:
        super().__init__()
        self.kind, self.status = kind, status

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        if isinstance(parsed, dict):
            message = parsed.get("message") or parsed.get("Message")
            kind = self.kind or str(parsed.get("__type") or "").rsplit("#", 1)[-1]
        else:
            message, kind = raw.decode("utf-8", "replace").strip()[:2000], self.kind
        kind = kind or "BedrockError"
        error_type = ERROR_TYPES.get(self.status) or ("api_error" if self.status >= 500 else "invalid_request_error")
        return [utf8({"error": {"message": f"bedrock {kind}: {message or 'no message'}", "type": error_type,
                                "code": kind}})]


def bedrock_wire(call: Call, backend: BackendConfig, model: str) -> Wire | None:
    """A chat call's wire on a bedrock backend (its kind's wire API's: ``protocol/wires/native.py``)."""
    if not _applies(call, backend, model):
        return None
    return BedrockAttempt(backend, model, call.stream).wire()


def _applies(call: Call, backend: BackendConfig, model: str) -> bool:
    return call.endpoint == Endpoint.CHAT


# Converse's wire (protocol/wires/native.py): a bedrock backend speaks chat only.
WIRE = Special(bedrock_wire, _applies)
