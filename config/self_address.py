"""Does a backend URL point at the gateway's own listen address?

Such a backend sends every call it gets back into the gateway: the hop
guard (``server.max_hops``) ends the loop, but the config is wrong and the
loader says so. Decided from the text alone (no name lookups while loading):
``localhost``, any 127.0.0.0/8 address and ``::1`` are this machine, and a
gateway listening on ``0.0.0.0`` or ``::`` is reached through any of them.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Sequence
from urllib.parse import urlsplit

from switchyard.config.rules import Problems, child

if TYPE_CHECKING:
    from switchyard.config.schema import BackendConfig

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _kind(host: str) -> str:
    """``loopback``, ``any`` (the wildcard address) or the host itself, lowercased."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return "loopback"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if ip.is_unspecified:
        return "any"
    return "loopback" if ip.is_loopback else str(ip)


def points_at(url: str, bind: str) -> bool:
    """Whether ``url`` (a backend's) reaches the listener on ``bind`` (``HOST:PORT``)."""
    parts = urlsplit(url)
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    host, _, bind_port = bind.rpartition(":")
    if not parts.hostname or str(port) != bind_port:
        return False
    listening, target = _kind(host), _kind(parts.hostname)
    if listening == "any":   # every local address; the ones a URL names without a lookup are these
        return target in ("loopback", "any")
    if listening == "loopback":
        return target in ("loopback", "any")   # connecting to 0.0.0.0 reaches this machine
    return target == listening


def check(backends: "Sequence[BackendConfig]", bind: str, problems: Problems, where: str = "server.bind_address"
          ) -> None:
    """A warning for each enabled backend whose URL is the gateway's own ``bind`` address."""
    for i, b in enumerate(backends):
        if b.enabled and points_at(b.url, bind):
            problems.warn(child(child("backends", i), "url"),
                          f"backend '{b.name}' points at this gateway's own listen address {bind} ({where}): "
                          f"its calls would come back here until server.max_hops refuses them (508)")
