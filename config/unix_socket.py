"""A backend on a Unix socket: ``url: unix:///run/vllm.sock``, optionally ``unix:///run/x.sock:/prefix``.

The socket path is what follows ``unix://`` up to the first ``:`` (so it must
be absolute, and cannot itself hold a ``:``); what follows that ``:`` is the
HTTP path prefix the server's routes sit under (the ``/api`` of
``http://host/api``). Without one, requests go to ``/v1/...`` as on a TCP
``http://host`` URL, and a prefix of ``/v1`` behaves as a TCP URL ending in
``/v1`` does (``actors/addressing.py``: ``join_url``).

The rest of the gateway speaks httpx URLs, which have no place for a socket
path, so a Unix-socket backend's requests go to ``http+unix://HEX/prefix...``:
the host is the socket path hex-encoded (httpx lower-cases hosts; hex is the
one plain encoding that survives it). The pooled transport
(``protocol/wires/transport.py``) turns that host back into the path,
connects with ``trio.open_unix_socket`` and pools connections per socket.
"""

from __future__ import annotations

from typing import Any

from switchyard.config import rules
from switchyard.config.rules import Invalid
from switchyard.config.values import http_url

PREFIX = "unix://"
SCHEME = "http+unix"   # the scheme of a Unix-socket backend's request URLs
MAX_PATH_BYTES = 107   # Linux's sun_path holds 108 bytes, the last one NUL
LOCAL_HOST = b"localhost"   # the Host header a socket's requests carry (curl --unix-socket sends the same)
_PATH_CHARS = frozenset("?#") | {chr(c) for c in range(33)}


def is_unix(url: str) -> bool:
    return url.startswith(PREFIX)


def split(url: str) -> tuple[str, str]:
    """A validated ``unix://`` URL's socket path and HTTP path prefix (``""`` for none)."""
    rest = url[len(PREFIX):]
    path, colon, prefix = rest.partition(":")
    return path, prefix.rstrip("/") if colon else ""


def unix_url(text: str) -> str:
    """A ``unix:///abs/path.sock[:/prefix]`` URL, checked; its trailing ``/`` dropped."""
    rest = text[len(PREFIX):]
    path, colon, prefix = rest.partition(":")
    if not path.startswith("/"):
        raise Invalid(f"must name an absolute socket path, as in unix:///run/engine.sock (three slashes), "
                      f"got {text!r}")
    if any(c in _PATH_CHARS for c in path) or path.endswith("/"):
        raise Invalid(f"must name a socket file: no spaces, control characters, '?' or '#', and no trailing '/', "
                      f"got {text!r}")
    if len(path.encode()) > MAX_PATH_BYTES:
        raise Invalid(f"names a socket path of {len(path.encode())} bytes; a Unix socket path holds at most "
                      f"{MAX_PATH_BYTES}")
    if colon and (not prefix.startswith("/") or any(c in _PATH_CHARS for c in prefix)):
        raise Invalid(f"must follow the socket path with ':' and an HTTP path prefix starting with '/' "
                      f"(unix:///run/engine.sock:/api), got {text!r}; a socket path cannot hold ':'")
    return f"{PREFIX}{path}:{prefix.rstrip('/')}" if colon and prefix.rstrip("/") else PREFIX + path


def backend_url(value: Any) -> str:
    """A backend's ``url``: ``http(s)://`` with a host, or ``unix://`` with an absolute socket path."""
    text = rules.string()(value)
    if is_unix(text):
        return unix_url(text)
    try:
        return http_url(text)
    except Invalid as err:
        if str(err).startswith("must be an http"):
            raise Invalid(str(err).replace("must be an http:// or https:// URL with a host",
                                           "must be an http:// or https:// URL with a host, or "
                                           "unix:///path/to.sock")) from None
        raise


def request_base(url: str) -> str:
    """The httpx base URL requests to a validated ``unix://`` URL go to: ``http+unix://HEX`` + prefix."""
    path, prefix = split(url)
    return f"{SCHEME}://{path.encode().hex()}{prefix}"


def socket_path(host: bytes) -> str:
    """The socket path a ``request_base`` host names."""
    return bytes.fromhex(host.decode("ascii")).decode()
