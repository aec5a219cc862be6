"""One error taxonomy for the whole gateway, and its wire envelopes.

Every failure a client can see is one of these classes; each knows its HTTP
status, OpenAI ``type``, ``code``, the ``param`` (dotted field path) it is
about, and optional ``details``. Handlers raise; the ASGI layer renders the
envelope that matches the ingress.

    GatewayError
     ├── ClientError                    the caller's request is at fault (4xx)
     │    ├── InvalidRequest            400  malformed JSON, wrong field types
     │    ├── AuthenticationError       401  missing or wrong credentials
     │    ├── PermissionDenied          403  the API key may not use this model or backend
     │    ├── UnsupportedRequestParameter 400 a policy-managed field the route cannot carry
     │    ├── BodyTooLarge              413
     │    ├── RequestBodyTimeout        408  the body did not arrive within its deadlines
     │    ├── HttpVersionNotSupported   505  HTTP/2 without TLS while server.http2_cleartext is off
     │    ├── RouteNotFound             404  no such path
     │    ├── MethodNotAllowed          405
     │    ├── ModelNotFound             404  model_not_found
     │    ├── UnsupportedModelVariant   404  unsupported_model_variant (:thinking, :online)
     │    ├── RateLimited               429  a built-in limit refused the call (Retry-After)
     │    │    └── LimitExceeded         429  rate_limiting refused it: type requests or tokens
     │    └── BudgetExceeded            429  insufficient_quota / budget_exceeded, x-should-retry: false
     ├── Unavailable                    503  not ready to serve (starting, stopping)
     │    ├── ShuttingDown              503  draining: no new calls; a call past the drain window
     │    ├── TooManyConcurrentRequests 503  server.max_concurrent_requests reached
     │    ├── NoHealthyBackend          503  known model, every backend down
     │    ├── StoredResponsesUnavailable 503 the shared map of stored responses is away (stored_owners.py)
     │    └── RouteCapabilityUnavailable 503 fallback left only routes lacking what the request needs
     ├── LoopDetected                   508  the request passed more gateways than server.max_hops
     ├── InternalError                  500  an exception in the gateway's own code: never a backend's fault
     └── UpstreamFailure                the backend failed us
          ├── UpstreamStatusError       backend answered 4xx/5xx: relayed verbatim
          ├── UpstreamConnectError      502  could not reach / connection broke
          ├── UpstreamTimeout           504  a connect or read limit passed
          │                                  (``unreached`` on both: the connection was never opened)
          └── UpstreamProtocolError     502  the backend spoke garbage

The upstream client maps its transport's exceptions into this tree at the
I/O boundary (``Upstream.errors``, ``protocol/wires/upstream_errors.py``), so
nothing here knows httpx and nothing above the wire ever catches an httpx
type. The protocol layer renders the envelope of each ingress (the Anthropic
one in ``protocol/doors/anthropic_errors.py``).

An error is a value: everything it says is given to its constructor, and
nothing is set on it afterwards. Whoever knows more about the call (its
backend, the headers its answer carries) makes a changed copy with
``evolve`` and raises or passes that one.
"""

from __future__ import annotations

import json
from typing import Any, Callable, ClassVar, Sequence, TypeVar

E = TypeVar("E", bound="GatewayError")
U = TypeVar("U", bound="UpstreamFailure")
Headers = Sequence[tuple[bytes, bytes]]


class GatewayError(Exception):
    status: int = 500
    type: str = "server_error"
    code: str | None = "internal_error"
    # The constructor's keyword arguments, each kept as the attribute of the same name: what ``evolve`` copies.
    fields: ClassVar[tuple[str, ...]] = ("message", "param", "code", "details", "extra_headers")

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        extra_headers: Headers = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.details = details
        self.extra_headers: tuple[tuple[bytes, bytes], ...] = tuple(extra_headers)   # what the call adds

    def evolve(self: E, **changes: Any) -> E:
        """A new error of the same class with ``changes``, built by its own constructor (this one stays)."""
        return type(self)(**{**{name: getattr(self, name) for name in self.fields}, **changes})

    def with_headers(self: E, headers: Headers) -> E:
        """This error with ``headers`` added to those its answer carries (itself when there are none)."""
        return self.evolve(extra_headers=(*self.extra_headers, *headers)) if headers else self

    def envelope(self) -> dict[str, Any]:
        """The OpenAI-shaped error object."""
        error: dict[str, Any] = {
            "message": self.message,
            "type": self.type,
            "param": self.param,
            "code": self.code,
        }
        if self.details:
            error["details"] = self.details
        return {"error": error}

    def body(self) -> bytes:
        return json.dumps(self.envelope()).encode()

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", b"application/json"), *self.extra_headers]


class ClientError(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class InvalidRequest(ClientError):
    pass


class AuthenticationError(ClientError):
    """OpenAI's API answers a bad key with ``invalid_request_error`` / ``invalid_api_key``, and clients that
    read the body expect that; the Anthropic envelope maps 401 to ``authentication_error`` by status."""

    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"

    def headers(self) -> list[tuple[bytes, bytes]]:
        return super().headers() + [(b"www-authenticate", b'Bearer realm="switchyard"')]


class KeyConflict(ClientError):
    """A key's id is taken, or the key changed since it was read (two administrators at once)."""

    status = 409
    code = "key_conflict"


class PermissionDenied(ClientError):
    status = 403
    type = "permission_error"
    code = "permission_denied"


class UnsupportedRequestParameter(ClientError):
    """Refused before any upstream I/O: never a silently dropped field."""

    code = "unsupported_request_parameter"


class BodyTooLarge(ClientError):
    status = 413
    code = "request_too_large"


class RequestBodyTimeout(ClientError):
    """The body came too slowly (``server.request_body_timeout`` / ``request_body_idle_timeout``).

    The rest of the body is never read, so the connection closes after the answer.
    """

    status = 408
    code = "request_timeout"

    def headers(self) -> list[tuple[bytes, bytes]]:
        return super().headers() + [(b"connection", b"close")]


class HttpVersionNotSupported(ClientError):
    """HTTP/2 over cleartext while ``server.http2_cleartext`` is off."""

    status = 505
    code = "http_version_not_supported"


class RouteNotFound(ClientError):
    status = 404
    type = "not_found_error"
    code = "not_found"


class MethodNotAllowed(ClientError):
    status = 405
    code = "method_not_allowed"
    fields = (*GatewayError.fields, "allowed")

    def __init__(self, message: str, *, allowed: tuple[str, ...], **kw: Any) -> None:
        super().__init__(message, **kw)
        self.allowed = allowed

    def headers(self) -> list[tuple[bytes, bytes]]:
        return super().headers() + [(b"allow", ", ".join(self.allowed).encode())]


class ModelNotFound(ClientError):
    status = 404
    code = "model_not_found"


class UnsupportedModelVariant(ClientError):
    """A ``model:variant`` suffix this model (or this deployment) cannot honour; never a silent base answer."""

    status = 404
    code = "unsupported_model_variant"


class RateLimited(ClientError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"
    fields = (*GatewayError.fields, "retry_after")

    def __init__(self, message: str, *, retry_after: int, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after

    def headers(self) -> list[tuple[bytes, bytes]]:
        return super().headers() + [(b"retry-after", str(self.retry_after).encode())]


class LimitExceeded(RateLimited):
    """A ``rate_limiting`` scope refused the call; ``type`` says which window, as OpenAI's 429s do."""

    fields = (*RateLimited.fields, "kind")

    def __init__(self, message: str, *, kind: str, retry_after: int, **kw: Any) -> None:
        super().__init__(message, retry_after=retry_after, **kw)
        self.kind = self.type = kind   # "requests" or "tokens"


class BudgetExceeded(ClientError):
    """A key's or organization's budget has no room for the call: waiting for the window will not do,
    so the official SDKs are told not to retry."""

    status = 429
    type = "insufficient_quota"
    code = "budget_exceeded"
    fields = (*GatewayError.fields, "retry_after")

    def __init__(self, message: str, *, retry_after: int, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after   # seconds until the budget's period ends

    def headers(self) -> list[tuple[bytes, bytes]]:
        return super().headers() + [(b"x-should-retry", b"false"), (b"retry-after", str(self.retry_after).encode())]


class InternalError(GatewayError):
    """A bug of ours (an exception in a wire, the transport, a simulator, the relay): the call ends with
    our 500, and no backend's circuit hears of it."""

    status = 500
    type = "server_error"
    code = "internal_error"

    def __init__(self, message: str = "Internal error in the gateway; see its log", **kw: Any) -> None:
        super().__init__(message, **kw)


class Unavailable(GatewayError):
    status = 503
    type = "service_unavailable"
    code = "service_unavailable"


class ShuttingDown(Unavailable):
    code = "server_shutting_down"

    def headers(self) -> list[tuple[bytes, bytes]]:
        return super().headers() + [(b"connection", b"close")]


class TooManyConcurrentRequests(Unavailable):
    code = "too_many_concurrent_requests"


class StoredResponsesUnavailable(Unavailable):
    code = "stored_responses_unavailable"


class ControlPlaneUnavailable(Unavailable):
    """A change to keys (organizations, admins) while the control plane's store is away or unusable: what is
    known keeps working, changes wait for the store."""

    code = "control_plane_unavailable"


class NoHealthyBackend(Unavailable):
    code = "no_healthy_backends"


class RouteCapabilityUnavailable(Unavailable):
    """Fail closed: better a visible error than a degraded answer from a lesser route."""

    code = "route_capability_unavailable"


class LoopDetected(GatewayError):
    """The hop guard's refusal (``actors/hops.py``): gateways that route to each other would pass the
    request round until every timeout ran out; it ends at the first gateway that counts too many hops."""

    status = 508
    type = "server_error"
    code = "loop_detected"


class UpstreamFailure(GatewayError):
    status = 502
    type = "upstream_error"
    code = "upstream_error"
    fields = (*GatewayError.fields, "backend", "unreached")

    def __init__(self, message: str, *, backend: str | None = None, unreached: bool = False, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.backend = backend
        # The connection could not be opened (refused, DNS, connect timeout): nothing of the request reached
        # the backend, so no caller's request can be the cause (a circuit counts it as every caller's).
        self.unreached = unreached

    def of_backend(self: U, backend: str) -> U:
        """This error said of ``backend``: itself when it already names one."""
        return self if self.backend is not None else self.evolve(backend=backend)


class UpstreamStatusError(UpstreamFailure):
    """The backend answered with an error status; its body goes back as-is."""

    fields = ("backend", "status", "raw_body", "content_type", "retry_after", "details", "extra_headers")
    backend: str

    def __init__(self, backend: str, status: int, raw_body: bytes, content_type: bytes | None,
                 retry_after: str | None = None, *, details: dict[str, Any] | None = None,
                 extra_headers: Headers = ()) -> None:
        super().__init__(f"Backend '{backend}' answered HTTP {status}", backend=backend, details=details,
                         extra_headers=extra_headers)
        self.status = status
        self.raw_body = raw_body
        self.content_type = content_type
        self.retry_after = retry_after

    def headers(self) -> list[tuple[bytes, bytes]]:
        extra = [(b"retry-after", self.retry_after.encode("latin-1"))] if self.retry_after else []
        return super().headers() + extra

    def rewrite_text(self, rewrite: Callable[[str], str]) -> "UpstreamStatusError":
        """This error with ``rewrite`` applied to the JSON error's ``param`` and ``message`` (nothing else of
        the backend's body): a path into the body it was sent, said as the client sent it. Itself when
        nothing changes."""
        try:
            data = json.loads(self.raw_body)
        except ValueError:
            return self
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):
            return self
        changed = False
        for name in ("param", "message"):
            value = error.get(name)
            if isinstance(value, str) and (new := rewrite(value)) != value:
                error[name], changed = new, True
        if not changed:
            return self
        return self.evolve(raw_body=json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace"))

    def body(self) -> bytes:
        if self.content_type and b"json" in self.content_type and _is_json(self.raw_body):
            return self.raw_body
        # A non-JSON error page is wrapped so clients still get an envelope,
        # with the backend's own text kept verbatim in the message.
        text = self.raw_body.decode("utf-8", "replace").strip()[:2000]
        envelope = self.envelope()
        envelope["error"]["message"] = f"Backend '{self.backend}' answered HTTP {self.status}: {text}"
        return json.dumps(envelope).encode()


class UpstreamConnectError(UpstreamFailure):
    code = "upstream_connection_error"


class UpstreamTimeout(UpstreamFailure):
    status = 504
    type = "timeout"
    code = "timeout"


class UpstreamProtocolError(UpstreamFailure):
    code = "upstream_protocol_error"


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True
