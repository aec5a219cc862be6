"""The transport's exceptions mapped into the error taxonomy, at the I/O boundary."""

from __future__ import annotations

from typing import Literal

import httpx

from switchyard.actors.errors import UpstreamConnectError, UpstreamFailure, UpstreamProtocolError, UpstreamTimeout


class map_upstream_exceptions:
    """Translate httpx failures into the taxonomy, naming the backend.

    A class, not a ``contextlib.contextmanager``: it is entered on every
    attempt and stays entered for a whole stream, and a generator-based one
    would keep a suspended generator per open stream (about 0.3 KB).
    """

    __slots__ = ("backend",)

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> Literal[False]:
        if not isinstance(exc, (httpx.TransportError, httpx.DecodingError)):
            return False
        backend = self.backend
        # nothing was sent: the backend (or the way to it) failed whatever the request
        unreached = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
        err: UpstreamFailure
        if isinstance(exc, httpx.TimeoutException):
            timeout = type(exc).__name__.replace("Timeout", "").lower() or "request"
            err = UpstreamTimeout(f"Backend '{backend}' timed out ({timeout})", details={"timeout": timeout},
                                  backend=backend, unreached=unreached)
        elif isinstance(exc, (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.CloseError)):
            err = UpstreamConnectError(f"Backend '{backend}' connection failed: {exc or type(exc).__name__}",
                                       backend=backend, unreached=unreached)
        elif isinstance(exc, (httpx.RemoteProtocolError, httpx.LocalProtocolError, httpx.DecodingError)):
            err = UpstreamProtocolError(f"Backend '{backend}' protocol error: {exc or type(exc).__name__}",
                                        backend=backend, unreached=unreached)
        else:
            err = UpstreamConnectError(f"Backend '{backend}' transport error: {exc or type(exc).__name__}",
                                       backend=backend, unreached=unreached)
        raise err from exc
