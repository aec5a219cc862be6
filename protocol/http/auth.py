"""Client authentication on the data plane: which API key a request carries, from the config or the database.

Keys are looked up by digest (``config/access.py``), so the presented secret
is never compared byte by byte and never reaches a log line or an error: a
refusal names the rule, a success is known by the key's id. The OpenAI SDKs
send ``Authorization: Bearer``; the Anthropic SDKs send ``x-api-key``; both
are accepted. A secret the config does not know is judged by the control
plane's view of the database keys (``actors/control``): only a secret of
their shape, checksum included, gets that far.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Iterable

import attrs
from attrs import frozen

from switchyard.actors.control.records import KeyRecord
from switchyard.actors.control.view import invalid
from switchyard.actors.errors import AuthenticationError
from switchyard.config.access import Access, ApiKey

if TYPE_CHECKING:
    from switchyard.actors.control.plane import ControlPlane

# Paths that carry client traffic (/mcp: the MCP servers behind the gateway); /health, /ready and /metrics stay
# open for probes and scrapers.
DATA_PLANE_PREFIXES = ("/v1/", "/anthropic/", "/mcp", "/rerank")   # /rerank: vLLM's and Jina's path too


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


@frozen
class Judged:
    """A request's key as judged at the edge. ``digest``: a database key's (the view judges it again later);
    ``lookup``: a secret of a database key's shape the view does not know, for the store to be asked;
    ``record``: the database key's record it was judged by (the store's, when the view did not hold it yet)."""

    key: ApiKey | None = None
    digest: bytes | None = attrs.field(default=None, repr=False)
    lookup: bool = False
    record: KeyRecord | None = attrs.field(default=None, repr=False, eq=False)


OPEN = Judged()


def judge(headers: Iterable[tuple[bytes, bytes]], access: Access, control: "ControlPlane | None") -> Judged:
    """The request's key, without waiting on anything: the config's keys (by digest), then the database keys'
    view. ``OPEN`` when there are no keys at all (the data plane is open). Raises the 401 otherwise."""
    if not access.enabled and (control is None or not control.enabled):
        return OPEN
    secret = credential(headers)
    if secret is None:
        raise AuthenticationError("Missing API key: send 'Authorization: Bearer <API key>'", code="missing_api_key")
    key = access.find(secret)
    if key is not None:
        return Judged(key)
    digest = control.digest(secret) if control is not None else None
    if digest is None:   # no database key has this shape: no lookup anywhere
        raise invalid()
    record = control.judge(digest) if control is not None else None
    return Judged(record.key, digest, record=record) if record is not None else Judged(None, digest, lookup=True)


async def settled(judged: Judged, control: "ControlPlane") -> Judged:
    """A database key's judgement made whole: a secret the view does not know asked of the control store
    (bounded: a key created a moment ago on another instance), and its use noted for ``last_used_at``. The
    edge awaits it only for a database key: a config key's call makes no coroutine here."""
    assert judged.digest is not None
    if judged.lookup:
        record = await control.find(judged.digest)
        if record is None:
            raise invalid()
        judged = Judged(record.key, judged.digest, record=record)
    assert judged.key is not None
    control.used(judged.key.id)
    return judged


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
