"""Client authentication on the data plane: which configured API key a request carries.

Keys are looked up by digest (``config/access.py``), so the presented secret
is never compared byte by byte and never reaches a log line or an error: a
refusal names the rule, a success is known by the key's id. The OpenAI SDKs
send ``Authorization: Bearer``; the Anthropic SDKs send ``x-api-key``; both
are accepted.
"""

from __future__ import annotations

import ipaddress
from typing import Iterable

from switchyard.actors.errors import AuthenticationError
from switchyard.config.access import Access, ApiKey

# Paths that carry client traffic; /health, /ready and /metrics stay open for probes and scrapers.
DATA_PLANE_PREFIXES = ("/v1/", "/anthropic/")


def credential(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The presented secret: ``Authorization: Bearer <key>``, else ``x-api-key``; None when neither."""
    api_key = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, secret = value.partition(b" ")
            secret = secret.strip()
            if scheme.lower() == b"bearer" and secret:
                return secret
            raise AuthenticationError("The Authorization header must be 'Bearer <API key>'", param="authorization",
                                      code="invalid_api_key")
        if name == b"x-api-key" and value.strip():
            api_key = value.strip()
    return api_key


def authenticate(headers: Iterable[tuple[bytes, bytes]], access: Access) -> ApiKey | None:
    """The request's key; None when keys are off (the data plane is open). Raises 401 otherwise."""
    if not access.enabled:
        return None
    secret = credential(headers)
    if secret is None:
        raise AuthenticationError("Missing API key: send 'Authorization: Bearer <API key>'", code="missing_api_key")
    key = access.find(secret)
    if key is None:
        raise AuthenticationError("Invalid API key", code="invalid_api_key")
    return key


def loopback(bind: str) -> bool:
    """``bind`` (``HOST:PORT``) is reachable from this machine only: 127.0.0.0/8, ::1 or ``localhost``. A host
    name (it may resolve anywhere) or a wildcard (``0.0.0.0``, ``[::]``) is not."""
    host = bind.rsplit(":", 1)[0].strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_beyond_loopback(bind: str, access: Access) -> bool:
    """Whether ``serve`` is about to accept unauthenticated calls from other machines."""
    return not access.enabled and not loopback(bind)
